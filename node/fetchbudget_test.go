package node

import "testing"

// TestFetchReadBudgetDefersToNextProcess queues three fetches that become
// servable in one Process call of the leader, with a read budget smaller
// than one batch: each Process call serves one and leaves the rest to the
// next call (before the budget, one call read them all, however many
// bytes, while produces waited), and every fetch is answered in full.
func TestFetchReadBudgetDefersToNextProcess(t *testing.T) {
	c := newCluster(t, 7, 3, replicated(3, "t", 1), func(cfg *Config) {
		cfg.FetchReadBytesPerProcess = 1
		cfg.LogTailCacheBytesMax = -1
	})
	tp := TopicPartition{Topic: "t", Partition: 0}
	lead := c.leader(tp)
	for i := range 3 {
		if res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "b", 4)}); res.Err != nil {
			t.Fatalf("produce %d: %v", i, res.Err)
		}
	}
	var got []FetchResult
	for range 3 {
		c.cores[lead].Fetch(FetchRequest{TopicPartition: tp, Offset: 0, MaxBytes: 1 << 20}, func(r FetchResult) { got = append(got, r) })
	}
	perCall := map[int]int{} // answers per Process call of the leader
	for call := 0; len(got) < 3 && call < 200; call++ {
		before := len(got)
		if err := c.cores[lead].Process(); err != nil {
			t.Fatal(err)
		}
		if n := len(got) - before; n > 0 {
			perCall[call] = n
		}
		for _, id := range c.ids {
			if id != lead {
				if err := c.cores[id].Process(); err != nil {
					t.Fatal(err)
				}
			}
		}
		queue := c.queue
		c.queue = nil
		for _, e := range queue {
			c.cores[e.to].Receive(e.frame)
		}
		if len(queue) == 0 && len(got) == before {
			c.cores[lead].Tick()
		}
	}
	if len(got) != 3 {
		t.Fatalf("%d of 3 fetches answered", len(got))
	}
	for call, n := range perCall {
		if n > 1 {
			t.Fatalf("Process call %d answered %d fetches of a batch each; the budget allows one", call, n)
		}
	}
	for i, r := range got {
		if r.Err != nil || len(r.Batches) != 3 {
			t.Fatalf("fetch %d: %d batches, err %v; want all 3", i, len(r.Batches), r.Err)
		}
	}
}

// TestFetchesShareReadIndex issues three fetches on the leader with no
// apply between them: they share one ReadIndex (one heartbeat round, where
// each fetch cost its own) and each sees every acknowledged batch. A fetch
// after a produce was applied asks for its own read index, so it sees that
// produce.
func TestFetchesShareReadIndex(t *testing.T) {
	c := newCluster(t, 11, 3, replicated(3, "t", 1), nil)
	tp := TopicPartition{Topic: "t", Partition: 0}
	lead := c.leader(tp)
	if res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "a", 2)}); res.Err != nil {
		t.Fatal(res.Err)
	}
	core := c.cores[lead]
	g := core.byTP[tp]
	var got []FetchResult
	for range 3 {
		core.Fetch(FetchRequest{TopicPartition: tp, Offset: 0, MaxBytes: 1 << 20}, func(r FetchResult) { got = append(got, r) })
	}
	if n := len(g.readBy); n != 1 {
		t.Fatalf("three fetches with no apply between them asked for %d read indexes; want 1", n)
	}
	if res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "b", 2)}); res.Err != nil {
		t.Fatal(res.Err)
	}
	for i := 0; len(got) < 3 && i < 100; i++ {
		c.tick(1)
	}
	if len(got) != 3 {
		t.Fatalf("%d of 3 shared fetches answered", len(got))
	}
	for i, r := range got {
		if r.Err != nil || len(r.Batches) == 0 {
			t.Fatalf("shared fetch %d: %d batches, err %v", i, len(r.Batches), r.Err)
		}
	}
	// The produce above was applied: a new fetch must not share an older
	// read index, and sees both batches.
	res := c.fetch(lead, FetchRequest{TopicPartition: tp, Offset: 0, MaxBytes: 1 << 20})
	if res.Err != nil || len(res.Batches) != 2 {
		t.Fatalf("fetch after the produce: %d batches, err %v; want 2", len(res.Batches), res.Err)
	}
}
