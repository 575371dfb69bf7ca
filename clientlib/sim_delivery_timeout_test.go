package clientlib

import (
	"context"
	"testing"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// TestDeliveryTimeoutCountsFromProduce: a record's delivery timeout counts
// from Produce, as Kafka's delivery.timeout.ms does, not from the sealing
// of its batch. With one batch in flight at a time and every produce
// answer lost, record b waits unsealed behind record a's batch until that
// one times out; b's promise must still run by its own deadline (plus the
// one request in flight when it passes), not a whole timeout after its
// batch was sealed. (The simulator's seed 149: a partition without a
// leader held records 15 s past their 8 s timeout.)
func TestDeliveryTimeoutCountsFromProduce(t *testing.T) {
	const timeout = 10 * time.Second
	w := &scriptedWorld{}
	w.answer = func(addr string, req *strandpb.Request) *strandpb.Response {
		switch {
		case req.GetMetadata() != nil:
			return twoNodeMetadata()
		case req.GetInitProducerId() != nil:
			return &strandpb.Response{Body: &strandpb.Response_InitProducerId{InitProducerId: &strandpb.InitProducerIdResponse{ProducerId: 7}}}
		}
		return nil // lost: the call fails after a second
	}
	c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(1), Linger(0), MaxInFlightBatches(1),
		DeliveryTimeout(timeout), MaxRetries(1000), RetryBackoff(10*time.Millisecond, 100*time.Millisecond),
		MetadataMaxAge(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		produced, done time.Duration
		err            error
	}
	var got []outcome
	produce := func() {
		produced := w.Now()
		c.Produce(context.Background(), &Record{Topic: "t", Value: []byte("v")}, func(_ *Record, err error) {
			got = append(got, outcome{produced: produced, done: w.Now(), err: err})
		})
	}
	produce()
	w.After(5*time.Second, produce)
	w.run(t, 100000)
	if len(got) != 2 {
		t.Fatalf("%d promises ran, want 2", len(got))
	}
	const inFlight = time.Second // the scripted world's lost-answer timeout
	for i, o := range got {
		if o.err == nil {
			t.Fatalf("record %d: written, but every answer was lost", i)
		}
		if late := o.done - o.produced; late > timeout+inFlight {
			t.Errorf("record %d produced at %v failed at %v (%v): past its %v delivery timeout plus one request (%v)",
				i, o.produced, o.done, late, timeout, o.err)
		}
	}
}
