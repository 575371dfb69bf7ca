package clientlib

import (
	"context"
	"testing"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// TestProducerMetadataRefreshBacksOff: while a partition has no leader
// the producer asks for metadata with a wait that grows from the retry
// base to its cap (KIP-580, as Kafka's clients back off metadata
// refreshes), not once per base for the whole outage; once the answers
// name a leader the record goes at once, and the next refresh a
// NOT_LEADER answer wants starts again from the base.
func TestProducerMetadataRefreshBacksOff(t *testing.T) {
	const outage = 10 * time.Second
	w := &scriptedWorld{}
	var asks []time.Duration // when each metadata request was made
	notLeaderOnce := false
	w.answer = func(addr string, req *strandpb.Request) *strandpb.Response {
		switch {
		case req.GetMetadata() != nil:
			asks = append(asks, w.now)
			m := twoNodeMetadata()
			if w.now < outage {
				m.GetMetadata().Topics[0].Partitions[0].LeaderId = 0
			}
			return m
		case req.GetInitProducerId() != nil:
			return &strandpb.Response{Body: &strandpb.Response_InitProducerId{InitProducerId: &strandpb.InitProducerIdResponse{ProducerId: 7}}}
		}
		if notLeaderOnce {
			notLeaderOnce = false
			return &strandpb.Response{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_LEADER}}
		}
		out := &strandpb.ProduceResponse{}
		for _, p := range req.GetProduce().GetPartitions() {
			out.Partitions = append(out.Partitions, &strandpb.ProduceResponse_Partition{Topic: p.GetTopic(),
				Partition: p.GetPartition(), BaseOffset: 0})
		}
		return &strandpb.Response{Body: &strandpb.Response_Produce{Produce: out}}
	}
	c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(1), Linger(0),
		RetryBackoff(100*time.Millisecond, time.Second), DeliveryTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var doneAt time.Duration
	c.Produce(context.Background(), &Record{Topic: "t", Value: []byte("a")}, func(_ *Record, err error) {
		if err != nil {
			t.Errorf("record: %v", err)
		}
		doneAt = w.now
	})
	w.run(t, 100000)
	during := 0 // asks before the outage ended
	for _, at := range asks {
		if at < outage {
			during++
		}
	}
	// Growing 100 ms, 200, 400, 800, then 1 s (each jittered down to
	// half): about 14 asks in 10 s; a fixed 100 ms step asks about 100.
	if during > 30 {
		t.Fatalf("%d metadata requests in a %v outage; want the wait to grow to 1 s (at most 30)", during, outage)
	}
	t.Logf("%d metadata requests during the %v outage; record delivered at %v", during, outage, doneAt)
	if doneAt == 0 || doneAt > outage+time.Second+100*time.Millisecond {
		t.Fatalf("record delivered at %v; want within the 1 s cap after the outage ended at %v", doneAt, outage)
	}

	// A NOT_LEADER answer later wants a refresh: it starts from the base
	// again, not from the grown wait.
	notLeaderOnce = true
	w.now += time.Minute
	start, before := w.now, len(asks)
	c.Produce(context.Background(), &Record{Topic: "t", Value: []byte("b")}, func(_ *Record, err error) {
		if err != nil {
			t.Errorf("second record: %v", err)
		}
	})
	w.run(t, 100000)
	if len(asks) == before {
		t.Fatal("no refresh after NOT_LEADER")
	}
	if d := asks[before] - start; d > 150*time.Millisecond {
		t.Fatalf("refresh %v after NOT_LEADER; want within the 100 ms base (the wait starts over once metadata answered)", d)
	}
}
