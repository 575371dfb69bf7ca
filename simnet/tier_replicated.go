package simnet

import (
	"strings"

	"github.com/strandlog/strand/engine/tier"
	"github.com/strandlog/strand/node"
)

// The replication checks of tiered storage (issue 27: the list of uploaded
// segments is the partition's replicated state, not its uploader's
// memory). Two checks, at the moment things happen rather than every
// tierCheckEvery:
//
//   - Local deletion: whenever a node finishes a raft log compaction
//     (node.Core.Compactions moves), every live replica of a scenario
//     partition on it must still hold locally every record from its log
//     start on that the committed manifest did not cover when the node
//     decided the compaction: the first offset its raft log holds is at
//     most the committed remote log's end then, or at most its log start.
//     The committed manifest is the one of the replica that applied the
//     newest index of the incarnation (tierCommitted, noted at each
//     apply), so a replica that trimmed by an upload whose TIER_ADD had
//     not committed — even one that commits before the trim ends — fails.
//     Only a replica whose own compaction finished is judged: one whose
//     raft log was replaced by a raft snapshot is VerifyTierLocal's (seeds
//     20, 180 and 183 of make sim had a restored replica whose raft log
//     starts above what the committed manifest covers: the snapshot's
//     state keeps the uncovered batches' index entries, engine's
//     CompactedTopicTrim, so this is most likely no loss, not diagnosed
//     further). A decision and its end seen in one look are
//     judged by the end as of the look (the same, or later).
//   - Upload: every Put of a segment key (seen as the bucket decides its
//     fault, before it happens) must neither start past the committed
//     remote log's end (a gap no later ADD can fill: Manifest.Add answers
//     Stale to it forever) nor overlap a committed segment of an older
//     term (a new leader uploading again, as another object, a range its
//     predecessor's ADD covers). A Put of an older term than a committed
//     segment it overlaps is a deposed leader's late upload, swept later:
//     allowed.
//
// The bucket's content is checked by checkTier (VerifyTier: every listed
// object holds byte for byte the batches the replica's log holds there).

// tierCommittedState is an incarnation's newest applied manifest.
type tierCommittedState struct {
	index    uint64
	manifest tier.Manifest
}

// noteTierCommitted keeps n's manifest of tp when index is the newest any
// replica of the incarnation applied (replicas at one index hold one
// manifest: the digest checks compare them).
func (w *world) noteTierCommitted(n *simNode, tp node.TopicPartition, topicID, index uint64) {
	k := tierIncarnation{tp: tp, topicID: topicID}
	if w.tierCommitted == nil {
		w.tierCommitted = make(map[tierIncarnation]tierCommittedState)
	}
	cur, known := w.tierCommitted[k]
	if known && cur.index >= index {
		return
	}
	m, _, _, ok := n.core.TierManifest(tp)
	if !ok {
		return
	}
	w.tierCommitted[k] = tierCommittedState{index: index, manifest: m}
	if known {
		return
	}
	if prefix, ok := n.core.TierPrefix(tp); ok {
		if w.tierPrefixes == nil {
			w.tierPrefixes = make(map[string]tierIncarnation)
		}
		w.tierPrefixes[prefix] = k
	}
}

// tierNodeCompactions is what the local deletion check saw of a node:
// its compaction counts, and per partition its replica's counts and the
// committed remote log's end when the replica last decided a compaction.
type tierNodeCompactions struct {
	decided, finished uint64
	parts             map[node.TopicPartition]tierReplicaCompactions
}

// tierReplicaCompactions is what the check saw of one replica.
type tierReplicaCompactions struct {
	decided, done uint64
	committedEnd  int64
}

// checkTierDeletions runs the local deletion check on every node whose
// compaction counts moved since the last look: a replica that decided a
// compaction has the committed remote log's end noted; one that finished
// one is judged by the end noted (a compaction decided by an upload not
// yet committed fails even when the ADD commits before the compaction
// ends).
func (w *world) checkTierDeletions() {
	if !w.opts.Tiered {
		return
	}
	if len(w.tierCompactions) != len(w.nodes) {
		w.tierCompactions = make([]tierNodeCompactions, len(w.nodes))
	}
	for i, n := range w.nodes {
		if !n.up || n.core == nil {
			continue
		}
		seen := &w.tierCompactions[i]
		decided, finished := n.core.Compactions()
		if decided == seen.decided && finished == seen.finished {
			continue
		}
		if decided < seen.decided || finished < seen.finished || seen.parts == nil {
			*seen = tierNodeCompactions{parts: make(map[node.TopicPartition]tierReplicaCompactions)} // a restart: counts from zero
		}
		seen.decided, seen.finished = decided, finished
		for _, tp := range groupTopics(w.opts.Partitions) {
			w.checkTierDeletion(n, tp, seen.parts)
		}
	}
}

// checkTierDeletion notes or judges n's replica of tp (parts: what was
// seen of n's replicas).
func (w *world) checkTierDeletion(n *simNode, tp node.TopicPartition, parts map[node.TopicPartition]tierReplicaCompactions) {
	_, _, topicID, ok := n.core.TierManifest(tp)
	if !ok {
		return
	}
	first, start, decided, done, ok := n.core.TierLocal(tp)
	if !ok {
		return
	}
	r := parts[tp]
	if decided < r.decided || done < r.done {
		r = tierReplicaCompactions{} // the replica reopened
	}
	committed := w.tierCommitted[tierIncarnation{tp: tp, topicID: topicID}].manifest
	if decided != r.decided {
		r.committedEnd = committed.Next()
	}
	if done != r.done && decided > 0 && first > start {
		w.coverage.Inc("tier/deletion-checks")
		if end := min(committed.Next(), r.committedEnd); !committed.Active() || first > end {
			w.fail("tier: node %d deleted %s/%d's local records [%d, %d) while the committed manifest covered up to %d only (active %v) when it decided to: a local deletion no committed TIER_ADD covers",
				n.id, tp.Topic, tp.Partition, start, first, end, committed.Active())
		}
	}
	r.decided, r.done = decided, done
	parts[tp] = r
}

// checkTierPut is the upload check of a Put of key.
func (w *world) checkTierPut(key string) {
	i := strings.LastIndexByte(key, '/')
	if i < 0 {
		return
	}
	k, ok := w.tierPrefixes[key[:i]]
	if !ok {
		return // no replica applied anything of the incarnation yet
	}
	seg, ok := tier.ParseSegmentKey(key[:i], key)
	if !ok {
		return
	}
	committed := w.tierCommitted[k].manifest
	if !committed.Active() {
		return
	}
	w.coverage.Inc("tier/put-checks")
	if next := committed.Next(); seg.Base > next {
		w.fail("tier: %s/%d: an upload of [%d, %d) in term %d starts past the committed remote log's end %d: a gap no TIER_ADD can fill",
			k.tp.Topic, k.tp.Partition, seg.Base, seg.End, seg.Term, next)
		return
	}
	for _, s := range committed.Segments() {
		if s.Base < seg.End && seg.Base < s.End && s.Term < seg.Term {
			w.fail("tier: %s/%d: an upload of [%d, %d) in term %d overlaps the committed segment [%d, %d) of term %d: a covered range uploaded again as another object",
				k.tp.Topic, k.tp.Partition, seg.Base, seg.End, seg.Term, s.Base, s.End, s.Term)
			return
		}
	}
}
