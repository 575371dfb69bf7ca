package clientlib_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
	"github.com/strandlog/strand/proto/strandpb"
)

// Under a seeded storm of faults on produce requests (answers lost after
// applying, requests dropped, duplicated, refused with TIMEOUT, up to two
// leaders moved; one seed with -short), 600 keyed records over 3 partitions all succeed, and each
// partition's log is exactly its records in produce order, once each, at
// the offsets their promises reported.
func TestProducerUnderRandomFaults(t *testing.T) {
	seeds := uint64(3)
	if testing.Short() {
		seeds = 1
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runRandomFaults(t, seed) })
	}
}

func runRandomFaults(t *testing.T, seed uint64) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 3)},
		clientlib.BatchBytes(60), clientlib.Linger(0), clientlib.MaxRetries(1000))
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 0))
	faults, moves := 0, 0
	const movesMax = 2
	cluster.Control(func(node uint64, req *strandpb.Request) (fake.Action, bool) {
		parts := req.GetProduce().GetPartitions()
		if len(parts) == 0 {
			return fake.Action{}, false
		}
		mu.Lock()
		defer mu.Unlock()
		x := rng.IntN(100)
		if x < 22 {
			faults++
		}
		switch {
		case x < 5:
			return fake.Action{DropAfter: true}, true
		case x < 10:
			return fake.Action{DropBefore: true}, true
		case x < 14:
			return fake.Action{Duplicate: true}, true
		case x < 18:
			return fake.Action{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_TIMEOUT}}, true
		case x < 22 && moves < movesMax:
			// A move isolates a node for an election timeout: a few per run.
			moves++
			p := parts[rng.IntN(len(parts))]
			if _, err := cluster.MoveLeader(p.GetTopic(), p.GetPartition()); err != nil {
				t.Error(err)
			}
		}
		return fake.Action{}, false
	})
	const n = 600
	want := map[int32][]string{}
	acked := map[string]int64{}
	var ackMu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		r := &clientlib.Record{Topic: "t", Key: []byte(fmt.Sprintf("key-%d", i%17)), Value: []byte(fmt.Sprint(i))}
		p := clientlib.KeyPartition(r.Key, 3)
		want[p] = append(want[p], string(r.Value))
		client.Produce(ctx, r, func(r *clientlib.Record, err error) {
			defer wg.Done()
			if err != nil {
				t.Errorf("record %s: %v", r.Value, err)
				return
			}
			ackMu.Lock()
			acked[string(r.Value)] = r.Offset
			ackMu.Unlock()
		})
	}
	wg.Wait()
	mu.Lock()
	t.Logf("%d faults injected", faults)
	if faults < 10 {
		t.Fatalf("only %d faults injected", faults)
	}
	mu.Unlock()
	for p := int32(0); p < 3; p++ {
		log := cluster.Log("t", p)
		if len(log) != len(want[p]) {
			t.Fatalf("partition %d holds %d records, produced %d", p, len(log), len(want[p]))
		}
		for i, r := range log {
			if string(r.Value) != want[p][i] || acked[want[p][i]] != r.Offset {
				t.Fatalf("partition %d offset %d holds %q (acked at %d), want %q", p, r.Offset, r.Value, acked[want[p][i]], want[p][i])
			}
		}
	}
}
