package node

import (
	"testing"
	"time"

	"github.com/strandlog/strand/objstore/memstore"
)

// TestTierUploadBudget shows Config.TierUploadBytesPerSec: at 2 KiB a
// second on the node's monotonic clock (10 ms a tick here), the leader's
// uploads, after its first, never put more than the budget allows since
// that first one ended (its bytes minus one object, the one the debt was
// paid after); the budget does hold uploads back (ticks with a sealed
// range waiting and the budget in debt), a produce sent while it holds is
// acknowledged, and the sealed segments are all uploaded in the end.
// Without it, the same segments are uploaded within a few retention
// checks (TestTierUploadsAndDeletes).
func TestTierUploadBudget(t *testing.T) {
	const budget = 2048
	var now time.Duration
	store := memstore.New(nil)
	c := newMetaCluster(t, 27, 3, func(cfg *Config) {
		retentionConfig(cfg)
		cfg.Clock = monoClock{now: &now}
		cfg.ObjectStore, cfg.TieredStorageUnfinished, cfg.TierUploadBytesPerSec = store, true, budget
	})
	c.createTopicWith(c.metaLeaderOf(), "tiered", 1, 3, map[string]string{"segment.bytes": "4096", "remote.storage.enable": "true", "retention.ms": "-1"})
	tp := TopicPartition{Topic: "tiered"}
	c.fillPartition(tp, 200)
	lead := c.leader(tp)
	core := c.cores[lead]
	g := core.byTP[tp]
	var firstAt time.Duration
	var firstBytes, largest uint64
	held, producedWhileHeld := 0, 0
	for i := 0; i < 5000; i++ {
		now += 10 * time.Millisecond
		c.tick(1)
		if c.leader(tp) != lead {
			t.Fatalf("leadership moved to %d: the test needs one uploader", c.leader(tp))
		}
		n := g.tier.counts
		if n.uploads == 0 {
			continue
		}
		if firstAt == 0 {
			firstAt, firstBytes = now, n.upBytes
		}
		for _, s := range g.part.Tier().Segments() {
			largest = max(largest, uint64(s.Bytes))
		}
		allowed := uint64(budget * (now - firstAt).Seconds())
		if n.upBytes-firstBytes > allowed+largest {
			t.Fatalf("at %v: %d bytes uploaded since the first upload ended %v earlier, the budget allows %d (+ one object of %d)",
				now, n.upBytes-firstBytes, now-firstAt, allowed, largest)
		}
		m := g.part.Tier()
		_, pending := m.NextUpload(g.part.LogStartOffset(), core.sealedRanges(g), g.part.LastStableOffset())
		if pending && core.tierUploadHeld() {
			held++
			if held%50 == 1 {
				res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "r", 8)})
				if res.Err != nil {
					t.Fatalf("produce while uploads hold for their budget: %v", res.Err)
				}
				producedWhileHeld++
			}
		}
		if !pending && g.tier.job == 0 && g.tier.adding == nil && i > 200 {
			break
		}
	}
	n := g.tier.counts
	m := g.part.Tier()
	t.Logf("%d uploads, %d bytes, in %v after the first; %d ticks held with a range waiting; %d produces acknowledged meanwhile",
		n.uploads, n.upBytes, now-firstAt, held, producedWhileHeld)
	if n.uploads < 4 || held == 0 || producedWhileHeld == 0 {
		t.Fatalf("%d uploads, %d ticks held, %d produces while held: want the budget to hold uploads back, not produce", n.uploads, held, producedWhileHeld)
	}
	if _, pending := m.NextUpload(g.part.LogStartOffset(), core.sealedRanges(g), g.part.LastStableOffset()); pending {
		t.Fatalf("a sealed range still waits after %v: the budget never freed", now)
	}
}
