package clientlib

import (
	"context"
	"errors"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// scriptedWorld is a clientcore.Transport over a one-partition cluster of
// two nodes played by a function: a virtual clock, a timer queue, and a
// one-millisecond trip each way.
type scriptedWorld struct {
	now    time.Duration
	seq    int
	events []scriptedEvent
	// answer plays the node at addr; nil: the answer is lost and the call
	// ends with a timeout error after a second.
	answer func(addr string, req *strandpb.Request) *strandpb.Response
	// silent, when set and true for a call, leaves it unanswered for good
	// (a node whose process is gone without closing the connection): only
	// the client's own deadline ends it.
	silent func(addr string, req *strandpb.Request) bool
	// refused, when set and true for a call, fails it at once as a
	// connection refused (nothing sent).
	refused func(addr string, req *strandpb.Request) bool
	// latency, when set, is how long a call's answer takes (else 2 ms).
	latency func(req *strandpb.Request) time.Duration
}

type scriptedEvent struct {
	at  time.Duration
	seq int
	fn  func()
}

func (w *scriptedWorld) Now() time.Duration { return w.now }

func (w *scriptedWorld) After(d time.Duration, fn func()) {
	w.seq++
	w.events = append(w.events, scriptedEvent{at: w.now + d, seq: w.seq, fn: fn})
}

func (w *scriptedWorld) Call(addr string, req *strandpb.Request, done func(*strandpb.Response, error)) {
	if w.silent != nil && w.silent(addr, req) {
		return
	}
	if w.refused != nil && w.refused(addr, req) {
		w.After(time.Millisecond, func() { done(nil, &ConnError{Addr: addr, Err: errors.New("connection refused")}) })
		return
	}
	resp := w.answer(addr, req)
	if resp == nil {
		w.After(time.Second, func() { done(nil, &ConnError{Addr: addr, Sent: true, Err: errors.New("timeout")}) })
		return
	}
	d := 2 * time.Millisecond
	if w.latency != nil {
		d = w.latency(req)
	}
	w.After(d, func() { done(resp, nil) })
}

// run fires events in time order until none is left or limit passed.
func (w *scriptedWorld) run(t *testing.T, limit int) {
	if left := w.fire(limit); left > 0 {
		t.Fatalf("still %d events after %d", left, limit)
	}
}

// fire fires up to limit events in time order and returns how many are
// left.
func (w *scriptedWorld) fire(limit int) int {
	for i := 0; len(w.events) > 0; i++ {
		if i == limit {
			return len(w.events)
		}
		sort.Slice(w.events, func(a, b int) bool {
			if w.events[a].at != w.events[b].at {
				return w.events[a].at < w.events[b].at
			}
			return w.events[a].seq < w.events[b].seq
		})
		e := w.events[0]
		w.events = w.events[1:]
		w.now = e.at
		e.fn()
	}
	return 0
}

// fireDue fires the events due by now (none later), bounded.
func (w *scriptedWorld) fireDue() {
	for i := 0; i < 1000; i++ {
		due := -1
		for j, e := range w.events {
			if e.at <= w.now && (due < 0 || e.seq < w.events[due].seq) {
				due = j
			}
		}
		if due < 0 {
			return
		}
		e := w.events[due]
		w.events = append(w.events[:due], w.events[due+1:]...)
		e.fn()
	}
}

// twoNodeMetadata names n1 the leader of t/0 (stale once n2 leads).
func twoNodeMetadata() *strandpb.Response {
	return &strandpb.Response{Body: &strandpb.Response_Metadata{Metadata: &strandpb.MetadataResponse{
		Nodes: []*strandpb.MetadataResponse_Node{{Id: 1, Address: "n1"}, {Id: 2, Address: "n2"}},
		Topics: []*strandpb.MetadataResponse_Topic{{Name: "t",
			Partitions: []*strandpb.MetadataResponse_Partition{{Partition: 0, LeaderId: 1}}}},
	}}}
}

// TestSimulatedProducerRunsOnTransport: a simulated Client's producer
// sends every request through the Transport and runs without goroutines
// in virtual time: it takes a NOT_LEADER hint to the other node, resends
// a batch whose answer was lost with the same sequence (the node
// deduplicates), and completes every record in order with its offset.
func TestSimulatedProducerRunsOnTransport(t *testing.T) {
	w := &scriptedWorld{}
	next := int64(0)          // the log's end
	seen := map[int32]int64{} // base sequence -> base offset written
	lost := false
	var sentTo []string
	w.answer = func(addr string, req *strandpb.Request) *strandpb.Response {
		switch {
		case req.GetMetadata() != nil:
			return twoNodeMetadata()
		case req.GetInitProducerId() != nil:
			return &strandpb.Response{Body: &strandpb.Response_InitProducerId{InitProducerId: &strandpb.InitProducerIdResponse{ProducerId: 7}}}
		}
		sentTo = append(sentTo, addr)
		if addr == "n1" {
			return &strandpb.Response{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_LEADER, LeaderId: 2, LeaderAddress: "n2"}}
		}
		out := &strandpb.ProduceResponse{}
		for _, p := range req.GetProduce().GetPartitions() {
			if p.GetProducerId() != 7 {
				t.Errorf("produce with producer id %d, want 7", p.GetProducerId())
			}
			base, dup := seen[p.GetBaseSequence()]
			if !dup {
				info, err := recordbatch.Validate(p.GetBatch())
				if err != nil {
					t.Fatalf("batch: %v", err)
				}
				base = next
				seen[p.GetBaseSequence()] = base
				next += int64(info.RecordCount)
			}
			out.Partitions = append(out.Partitions, &strandpb.ProduceResponse_Partition{Topic: p.GetTopic(),
				Partition: p.GetPartition(), BaseOffset: base, Duplicate: dup})
		}
		if !lost {
			lost = true
			return nil // written, answer lost: the resend must be a duplicate
		}
		return &strandpb.Response{Body: &strandpb.Response_Produce{Produce: out}}
	}
	c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(1), Linger(0))
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for i := 0; i < 5; i++ {
		c.Produce(context.Background(), &Record{Topic: "t", Value: []byte{byte(i)}}, func(r *Record, err error) {
			if err != nil {
				t.Errorf("record %d: %v", i, err)
			}
			got = append(got, r.Offset)
		})
	}
	w.run(t, 10000)
	if len(got) != 5 || next != 5 {
		t.Fatalf("offsets %v, log end %d; want 0..4 written once", got, next)
	}
	for i, o := range got {
		if o != int64(i) {
			t.Fatalf("offsets %v, want 0..4 in order", got)
		}
	}
	if len(sentTo) < 3 || sentTo[0] != "n1" || sentTo[1] != "n2" {
		t.Fatalf("produce requests went to %v; want n1, then n2 (the hint), then the resend", sentTo)
	}
}

// TestSimulatedProducerIsDeterministic: the same records on the same
// simulated world make the same requests in the same order, run after
// run (requests to several nodes are begun in node order, waiting topics
// placed in name order: no map order leaks out of the producer loop).
func TestSimulatedProducerIsDeterministic(t *testing.T) {
	run := func() []string {
		w := &scriptedWorld{}
		var calls []string
		next := map[string]int64{}
		w.answer = func(addr string, req *strandpb.Request) *strandpb.Response {
			switch {
			case req.GetMetadata() != nil:
				return spreadMetadata()
			case req.GetInitProducerId() != nil:
				return &strandpb.Response{Body: &strandpb.Response_InitProducerId{InitProducerId: &strandpb.InitProducerIdResponse{ProducerId: 3}}}
			}
			out := &strandpb.ProduceResponse{}
			for _, p := range req.GetProduce().GetPartitions() {
				calls = append(calls, addr+"/"+p.GetTopic())
				out.Partitions = append(out.Partitions, &strandpb.ProduceResponse_Partition{Topic: p.GetTopic(),
					Partition: p.GetPartition(), BaseOffset: next[p.GetTopic()]})
				next[p.GetTopic()]++
			}
			return &strandpb.Response{Body: &strandpb.Response_Produce{Produce: out}}
		}
		c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(1), Linger(0))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			for _, topic := range []string{"a", "b", "c", "d", "e", "f"} {
				c.Produce(context.Background(), &Record{Topic: topic, Value: []byte{byte(i)}}, nil)
			}
		}
		w.run(t, 10000)
		return calls
	}
	first := run()
	if len(first) != 6 {
		t.Fatalf("%d batches sent, want 6 (one per topic): %v", len(first), first)
	}
	for i := 0; i < 20; i++ {
		if again := run(); !slices.Equal(again, first) {
			t.Fatalf("run %d sent\n%v\nfirst run sent\n%v", i, again, first)
		}
	}
}

// spreadMetadata: six one-partition topics led by three nodes.
func spreadMetadata() *strandpb.Response {
	m := &strandpb.MetadataResponse{Nodes: []*strandpb.MetadataResponse_Node{{Id: 1, Address: "n1"},
		{Id: 2, Address: "n2"}, {Id: 3, Address: "n3"}}}
	for i, topic := range []string{"a", "b", "c", "d", "e", "f"} {
		m.Topics = append(m.Topics, &strandpb.MetadataResponse_Topic{Name: topic,
			Partitions: []*strandpb.MetadataResponse_Partition{{Partition: 0, LeaderId: uint64(1 + i%3)}}})
	}
	return &strandpb.Response{Body: &strandpb.Response_Metadata{Metadata: &strandpb.MetadataResponse{Nodes: m.Nodes, Topics: m.Topics}}}
}

// TestSimulatedNoRetriesSendsOnce: a producer without idempotence and with
// MaxRetries(0) (Kafka's retries=0) sends each batch exactly once, with no
// producer id: a NOT_LEADER answer and a lost answer (the batch written)
// each fail their record at once, the lost one as maybe written, and the
// next record goes to the hinted leader and is acknowledged. The simulator's
// non-idempotent producer relies on this: a record it sent once and that
// the log holds twice is a duplicate.
func TestSimulatedNoRetriesSendsOnce(t *testing.T) {
	w := &scriptedWorld{}
	sends := map[string]int{} // value -> produce requests carrying it
	var next int64
	w.answer = func(addr string, req *strandpb.Request) *strandpb.Response {
		switch {
		case req.GetMetadata() != nil && len(sends) > 0:
			m := twoNodeMetadata()
			m.GetMetadata().Topics[0].Partitions[0].LeaderId = 2 // n2 leads since the first send
			return m
		case req.GetMetadata() != nil:
			return twoNodeMetadata()
		case req.GetInitProducerId() != nil:
			t.Errorf("a non-idempotent producer asked for a producer id")
			return &strandpb.Response{Body: &strandpb.Response_InitProducerId{InitProducerId: &strandpb.InitProducerIdResponse{ProducerId: 7}}}
		}
		out := &strandpb.ProduceResponse{}
		for _, p := range req.GetProduce().GetPartitions() {
			if p.GetProducerId() != -1 {
				t.Errorf("produce with producer id %d, want -1", p.GetProducerId())
			}
			n := 0
			if err := recordbatch.Decode(p.GetBatch(), func(_ int, r recordbatch.Record) error {
				sends[string(r.Value)]++
				n++
				return nil
			}); err != nil {
				t.Fatalf("batch: %v", err)
			}
			out.Partitions = append(out.Partitions, &strandpb.ProduceResponse_Partition{Topic: p.GetTopic(),
				Partition: p.GetPartition(), BaseOffset: next})
			next += int64(n)
		}
		switch total := len(sends); {
		case addr == "n1":
			return &strandpb.Response{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_LEADER, LeaderId: 2, LeaderAddress: "n2"}}
		case total == 2:
			return nil // written, answer lost
		}
		return &strandpb.Response{Body: &strandpb.Response_Produce{Produce: out}}
	}
	c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(1), Linger(0), DisableIdempotence(),
		MaxRetries(0), MaxInFlightBatches(1))
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 3)
	for i := range errs {
		done := false
		c.Produce(context.Background(), &Record{Topic: "t", Value: []byte{'v', byte('0' + i)}}, func(r *Record, err error) {
			errs[i], done = err, true
		})
		w.run(t, 10000)
		if !done {
			t.Fatalf("record %d: no outcome", i)
		}
	}
	for v, n := range sends {
		if n != 1 {
			t.Errorf("%q sent %d times, want once: %v", v, n, sends)
		}
	}
	if len(sends) != 3 {
		t.Errorf("sent %v, want v0, v1, v2 once each", sends)
	}
	if errs[0] == nil || !errors.Is(errs[0], ErrNotLeader) {
		t.Errorf("record 0 (NOT_LEADER): %v, want a NOT_LEADER failure", errs[0])
	}
	if errs[1] == nil || !MaybeWritten(errs[1]) {
		t.Errorf("record 1 (answer lost): %v, want a maybe-written failure", errs[1])
	}
	if errs[2] != nil {
		t.Errorf("record 2: %v, want acknowledged", errs[2])
	}
}

// twoLeaderMetadata names n1 the leader of t/0 and n2 of t/1.
func twoLeaderMetadata() *strandpb.Response {
	return &strandpb.Response{Body: &strandpb.Response_Metadata{Metadata: &strandpb.MetadataResponse{
		Nodes: []*strandpb.MetadataResponse_Node{{Id: 1, Address: "n1"}, {Id: 2, Address: "n2"}},
		Topics: []*strandpb.MetadataResponse_Topic{{Name: "t", Partitions: []*strandpb.MetadataResponse_Partition{
			{Partition: 0, LeaderId: 1}, {Partition: 1, LeaderId: 2}}}},
	}}}
}

// TestStickyPartitionLeavesSuspectOrLeaderless: keyless records stay on
// their sticky partition while it is available, and the next record after
// its leader is marked suspect, or after the metadata names it no leader,
// goes to the other partition at once, if that one is available (assign's memo of the sticky choice
// must not outlive either).
func TestStickyPartitionLeavesSuspectOrLeaderless(t *testing.T) {
	w, c, produce := stickyWorld(t)
	first := produce()
	for range 3 {
		if p := produce(); p != first {
			t.Fatalf("keyless record went to partition %d, the sticky one is %d", p, first)
		}
	}
	leader := uint64(first + 1) // t/0 is led by node 1, t/1 by node 2
	c.mu.Lock()
	c.suspects.Mark(leader, w.now, time.Millisecond)
	c.mu.Unlock()
	second := produce()
	if second == first {
		t.Fatalf("record went to partition %d, whose leader %d is suspect", second, leader)
	}
	w.now += 2 * time.Millisecond // the suspicion lapses: both are available again
	if p := produce(); p != second {
		t.Fatalf("keyless record went to partition %d, the sticky one is %d", p, second)
	}
	c.mu.Lock()
	c.meta.ForgetLeader("t", second)
	c.mu.Unlock()
	if p := produce(); p == second {
		t.Fatalf("record went to partition %d, which has no leader known", p)
	}
}

// TestStickyPartitionStaysWhileNoneAvailable: with both partitions'
// leaders suspect, keyless records stay on the sticky partition; once the
// other partition's suspicion lapses, the next record goes there (the
// memo of "none available" lapses with the first suspicion).
func TestStickyPartitionStaysWhileNoneAvailable(t *testing.T) {
	w, c, produce := stickyWorld(t)
	first := produce()
	other := 1 - first
	c.mu.Lock()
	c.suspects.Mark(uint64(first+1), w.now, time.Hour)
	c.suspects.Mark(uint64(other+1), w.now, time.Millisecond)
	c.mu.Unlock()
	for range 3 {
		if p := produce(); p != first {
			t.Fatalf("record went to partition %d with none available, the sticky one is %d", p, first)
		}
	}
	w.now += 2 * time.Millisecond
	if p := produce(); p != other {
		t.Fatalf("record went to partition %d, want %d, whose leader's suspicion lapsed", p, other)
	}
}

// TestStickyPartitionLeavesWhenAnotherWindowEmpties: with every
// partition's window full (one batch in flight each), keyless records
// stay on the sticky partition; once the other partition's batch is
// answered (its window empties) while the sticky one's stays in flight,
// the next record goes to the other (the memo of "none available" lapses
// when a window shrinks).
func TestStickyPartitionLeavesWhenAnotherWindowEmpties(t *testing.T) {
	w, c, produce := stickyWorld(t, Linger(0), MaxInFlightBatches(1))
	var parts []int32
	for range 4 { // both windows fill; the last two records wait in the open batch
		parts = append(parts, produce())
	}
	cur := parts[3]
	if parts[2] != cur {
		t.Fatalf("records went to %v: the last two should share the sticky partition", parts)
	}
	other := 1 - cur
	leader := "n" + string(rune('1'+cur))
	w.silent = func(addr string, req *strandpb.Request) bool { return addr == leader && req.GetProduce() != nil }
	answered := false
	for i := 0; i < 10 && !answered; i++ {
		w.fire(1)
		c.mu.Lock()
		answered = c.producer.sinks[topicPartition{"t", other}].w.Len() == 0
		c.mu.Unlock()
	}
	if !answered {
		t.Fatalf("partition %d's batch was not answered", other)
	}
	if p := produce(); p != other {
		t.Fatalf("record went to partition %d, want %d, whose window emptied", p, other)
	}
}

// stickyWorld is a simulated keyless producer (linger an hour unless opts
// say otherwise, so no batch is sealed) of topic t, whose partitions 0 and 1 are led by nodes
// 1 and 2; produce places one record and returns its partition.
func stickyWorld(t *testing.T, opts ...Opt) (*scriptedWorld, *Client, func() int32) {
	w := &scriptedWorld{}
	w.answer = func(addr string, req *strandpb.Request) *strandpb.Response {
		switch {
		case req.GetMetadata() != nil:
			return twoLeaderMetadata()
		case req.GetInitProducerId() != nil:
			return &strandpb.Response{Body: &strandpb.Response_InitProducerId{InitProducerId: &strandpb.InitProducerIdResponse{ProducerId: 7}}}
		case req.GetProduce() != nil:
			out := &strandpb.ProduceResponse{}
			for _, p := range req.GetProduce().GetPartitions() {
				out.Partitions = append(out.Partitions, &strandpb.ProduceResponse_Partition{Topic: p.GetTopic(),
					Partition: p.GetPartition(), BaseOffset: int64(p.GetBaseSequence())})
			}
			return &strandpb.Response{Body: &strandpb.Response_Produce{Produce: out}}
		}
		return nil
	}
	c, err := NewClient(append([]Opt{Simulated(w), SeedAddresses("n1"), RandSeed(1), Linger(time.Hour)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return w, c, func() int32 {
		r := &Record{Topic: "t", Value: []byte("v"), Partition: -1}
		c.Produce(context.Background(), r, nil)
		for i := 0; i < 100 && r.Partition < 0; i++ {
			w.fire(1) // the first waits for metadata; then no time passes
		}
		if r.Partition < 0 {
			t.Fatal("record not placed")
		}
		w.fireDue() // the producer's step at this instant: seals, sends
		return r.Partition
	}
}
