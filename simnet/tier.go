package simnet

import (
	"math/rand/v2"
	"time"

	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/objstore/memstore"
)

// Tiered storage in the simulator (issue 27; node/tier.go): one
// objstore/memstore bucket per run, shared by every node and kept across
// their restarts and wipes, as a real bucket outlives its brokers. Its
// faults, drawn per operation from the seed's tier stream: a request that
// fails and does nothing, and one that happens but whose answer is lost (a
// Put or Delete that succeeded while the node sees an error). The bucket
// is synchronous inside the node's storage job, so a seed replays bit for
// bit. Choose draws Options.Tiered into a third of the seeds (its own
// stream: no other draw moves); those create the scenario's topics with
// remote.storage.enable=true and a local retention (a third of
// retention.ms and retention.bytes, or two segments when the total is
// unbounded: wire_client.go's retentionConfigs), and their small segments
// (SegmentBytesMax, segment.ms) seal, upload, leave the local disk and age
// out within the run; the readers' random offsets from 0 are then mostly
// remote reads, which their checks judge as any read.
//
// Checked every tierCheckEvery of virtual time and at the end of each seed
// (checkTier): for each scenario partition, the live replicas whose
// applied index is the newest any replica ever applied (an older manifest
// may still name a segment a later TRIM dropped and its leader deleted)
// must find every listed
// segment's object in the bucket, of its size and CRC, decoding to batches
// that cover the segment and equal, field for field and byte for byte, the
// batches their own log holds at those offsets (node.Core.VerifyTier), and
// must hold every record from the log start on in one tier or the other:
// nothing below the first batch of their raft log the remote log does not
// hold (node.Core.VerifyTierLocal).
// Replicas' manifests at equal applied index are compared by the digest
// checks (engine's digest folds the manifest in).

// tierFaultsPermille are the bucket's fault rates: per thousand operations
// failed, and per thousand answered an error after they happened.
const (
	tierFailPermille = 40
	tierLosePermille = 20
)

// drawTiered is the seed's draw of Options.Tiered.
func drawTiered(seed uint64) bool { return newStream(seed, streamTier).IntN(3) == 0 }

// bucketFaults is the bucket's Decider; onPut sees every Put's key
// before it happens (the upload check, tier_replicated.go).
type bucketFaults struct {
	r     *rand.Rand
	onPut func(key string)
}

// Decide draws op's fault from the seed's stream.
func (f *bucketFaults) Decide(op, key string) memstore.Fault {
	if op == "put" && f.onPut != nil {
		f.onPut(key)
	}
	switch n := f.r.IntN(1000); {
	case n < tierFailPermille:
		return memstore.Fail
	case n < tierFailPermille+tierLosePermille:
		return memstore.LoseAnswer
	}
	return memstore.None
}

// newBucket is the run's bucket, its faults from the tier stream (after
// the draw of Tiered).
func newBucket(o Options, onPut func(key string)) *memstore.Store {
	r := newStream(o.Seed, streamTier)
	r.IntN(3) // drawTiered's draw
	return memstore.New(&bucketFaults{r: r, onPut: onPut})
}

// tierCheckEvery is the virtual time between two checks in a run.
const tierCheckEvery = 500 * time.Millisecond

// tierIncarnation is a scenario partition under one topic id.
type tierIncarnation struct {
	tp      node.TopicPartition
	topicID uint64
}

// tierApplied notes that a replica of tp (topic id topicID) applied index.
// It is kept per topic id: a lagging replica of a deleted incarnation
// applying its entries must not stand for the newest of the live one (seed
// 30 once checked a replica 5 entries behind the TRIM whose dropped object
// the leader had deleted).
func (w *world) tierApplied(n *simNode, tp node.TopicPartition, topicID, index uint64) {
	if !w.opts.Tiered {
		return
	}
	w.noteTierCommitted(n, tp, topicID, index) // tier_replicated.go
	if w.tierNewest == nil {
		w.tierNewest = make(map[tierIncarnation]uint64)
	}
	k := tierIncarnation{tp: tp, topicID: topicID}
	w.tierNewest[k] = max(w.tierNewest[k], index)
}

// tierTick runs checkTier every tierCheckEvery of virtual time.
func (w *world) tierTick() {
	if !w.opts.Tiered || w.now() < w.tierCheckAt {
		return
	}
	w.tierCheckAt = w.now() + tierCheckEvery
	w.checkTier(false)
}

// checkTier checks every scenario partition's newest manifests against
// the bucket (see the file comment); the final one also counts the
// bucket's figures.
func (w *world) checkTier(final bool) {
	if !w.opts.Tiered {
		return
	}
	for _, tp := range groupTopics(w.opts.Partitions) {
		for _, n := range w.nodes {
			if !n.up || n.core == nil {
				continue
			}
			m, applied, topicID, ok := n.core.TierManifest(tp)
			if !ok || applied != w.tierNewest[tierIncarnation{tp: tp, topicID: topicID}] || !m.Active() {
				continue
			}
			if final {
				w.coverage.Add("tier/segments-listed", int64(len(m.Segments())))
			}
			compared, err := n.core.VerifyTier(tp, w.bucket.Bytes)
			w.coverage.Add("tier/batches-compared", int64(compared))
			if err != nil {
				w.fail("tier: node %d: %v", n.id, err)
			}
			if err := n.core.VerifyTierLocal(tp); err != nil {
				w.fail("tier: node %d: %v", n.id, err)
			}
		}
	}
	if !final {
		return
	}
	st := w.bucket.Stats()
	w.coverage.Add("tier/puts", int64(st.Puts))
	w.coverage.Add("tier/deletes", int64(st.Deletes))
	w.coverage.Add("tier/faults", int64(st.Failed+st.LostAnswers))
}
