package simnet

import (
	"slices"
	"strings"

	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// Every record of a compacted partition stays on a majority of its
// replicas (issue 24; node/compaction_held.go), checked on topicKV after
// every round of every node: a replica holds offset o when its compacted
// prefix, as a power loss now would leave it (the end prefixes.go read
// from the durable view), ends past o, or its raft log starts at or below
// o and its high-water mark (the highest it reported since its disk was
// last replaced) is past o. Every offset from the partition's log start
// (the highest any replica reported) to the highest durable prefix end
// must be held by at least a majority of the voters, less the replicas
// whose disk was replaced and that do not yet hold every such offset
// again, and less the replicas whose disk was damaged (bit flips, failed
// reads: their prefixes may be discarded): so a single disk replacement
// (a wipe, an incident's replaceDisk) never loses an acknowledged record,
// and one that struck a replica holding a record alone is a failure
// ("compaction: ... held by"), as is any loss, which the final kv read
// would see only as a partition that never serves its start again.
// Below the highest offset some replica's raft log no longer holds (its
// first batch: trimmed, or a raft snapshot installed), the same majority
// must hold the offset in their compacted prefixes: a raft log's copy is
// no copy there, since any replica behind may be sent a raft snapshot past
// it ("... held in the compacted prefixes of"; PrefixTrimUnheld breaks it
// at most passes, while the first rule needs two followers snapshotted
// before they passed). Replicas that never reported the partition count
// for nothing; one that is down counts with what its disk held. The
// offsets past the highest prefix end are raft's own to keep (the
// durability audit, audit.go). Coverage: check/prefix-held.

// heldReplica is one node's replica of a compacted partition.
type heldReplica struct {
	disk      *memdisk.Disk // the disk these figures are of
	prefixEnd int64         // durable prefix end (0: none)
	raftFrom  int64         // first offset of the raft log (-1: never read)
	hwm       int64         // highest high-water mark reported on this disk
	lost      bool          // its disk was replaced and it does not hold everything again yet
}

// heldPartition is one compacted partition's replicas, by node index.
type heldPartition struct {
	replicas map[int]*heldReplica
	voters   int
	logStart int64
	failed   bool
}

// heldCheck is the check, by replica directory prefix
// ("p/<topic>@<id>/<partition>").
type heldCheck struct {
	w     *world
	parts map[string]*heldPartition
	// damaged are the nodes whose disk had a fault injected: sticky.
	damaged map[int]bool
	// keys caches each topicKV replica's key, so the check after every
	// round does not build it anew.
	keys map[heldKey]string
}

// heldKey names a partition of one incarnation of topicKV.
type heldKey struct {
	topicID   uint64
	partition int32
}

func newHeldCheck(w *world) *heldCheck {
	return &heldCheck{w: w, parts: map[string]*heldPartition{}, damaged: map[int]bool{}, keys: map[heldKey]string{}}
}

// key is the replica directory prefix of topicKV's partition of
// incarnation topicID.
func (h *heldCheck) key(topicID uint64, partition int32) string {
	k := heldKey{topicID: topicID, partition: partition}
	key, ok := h.keys[k]
	if !ok {
		key = strings.TrimSuffix(replicaLogDir(topicKV, topicID, partition), "/log")
		h.keys[k] = key
	}
	return key
}

// replica returns n's figures of the partition at key, reset when n's
// disk is not the one they were of (lost: a replaced disk).
func (h *heldCheck) replica(key string, n *simNode) *heldReplica {
	p := h.parts[key]
	if p == nil {
		p = &heldPartition{replicas: map[int]*heldReplica{}}
		h.parts[key] = p
	}
	r := p.replicas[n.index]
	if r == nil {
		r = &heldReplica{disk: n.disk, raftFrom: -1}
		p.replicas[n.index] = r
	}
	h.refresh(r, n)
	return r
}

// refresh resets r when n's disk was replaced since.
func (h *heldCheck) refresh(r *heldReplica, n *simNode) {
	if r.disk != n.disk {
		*r = heldReplica{disk: n.disk, raftFrom: -1, lost: true}
	}
}

// notePrefix records n's durable prefix end in the compacted directory dir
// (prefixes.go comparePrefix).
func (h *heldCheck) notePrefix(n *simNode, dir string, end int64) {
	key := strings.TrimSuffix(dir, "/compacted")
	if !strings.HasPrefix(key, "p/"+topicKV+"@") {
		return
	}
	h.replica(key, n).prefixEnd = end
}

// afterProcess reads n's replicas of topicKV and checks them.
func (h *heldCheck) afterProcess(n *simNode, statuses []node.GroupStatus) {
	if !h.w.opts.Compacted || n.core == nil {
		return
	}
	if n.hasFaults() || n.flipped {
		h.damaged[n.index] = true
	}
	for _, s := range statuses {
		if s.Topic != topicKV || s.TopicID == 0 {
			continue
		}
		key := h.key(s.TopicID, s.Partition)
		r := h.replica(key, n)
		p := h.parts[key]
		if hold, ok := n.core.RaftLogHolding(s.TopicPartition); ok {
			r.raftFrom = hold.From
			p.voters = max(p.voters, hold.Voters)
		}
		r.hwm = max(r.hwm, s.HighWatermark)
		p.logStart = max(p.logStart, s.LogStartOffset)
		h.check(key, p)
	}
}

// holds reports whether r holds offset o.
func (r *heldReplica) holds(o int64) bool {
	return o < r.prefixEnd || (r.raftFrom >= 0 && r.raftFrom <= o && o < r.hwm)
}

// check fails the run when an offset of p's compacted range is held by
// fewer replicas than it must be.
func (h *heldCheck) check(key string, p *heldPartition) {
	if p.failed || p.voters == 0 {
		return
	}
	var idxBuf [16]int // replicas are few: no allocation per round
	idx := idxBuf[:0]
	for i := range p.replicas {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	var end, trimmed int64
	for _, i := range idx {
		r := p.replicas[i]
		h.refresh(r, h.w.nodes[i])
		end, trimmed = max(end, r.prefixEnd), max(trimmed, r.raftFrom)
	}
	if end <= p.logStart {
		return
	}
	// The count of holders changes only at these offsets.
	var pointsBuf [49]int64
	points := append(pointsBuf[:0], p.logStart)
	for _, i := range idx {
		r := p.replicas[i]
		for _, o := range [...]int64{r.prefixEnd, r.raftFrom, r.hwm} {
			if o > p.logStart && o < end {
				points = append(points, o)
			}
		}
	}
	slices.Sort(points)
	points = slices.Compact(points)
	for _, i := range idx {
		if r := p.replicas[i]; r.lost && !slices.ContainsFunc(points, func(o int64) bool { return !r.holds(o) }) {
			r.lost = false // holds every offset again
		}
	}
	lost := 0
	for _, i := range idx {
		if p.replicas[i].lost || h.damaged[i] {
			lost++
		}
	}
	need := p.voters/2 + 1 - lost
	h.w.coverage.Inc("check/prefix-held")
	var holdersBuf, inPrefixBuf [16]int
	for _, o := range points {
		holders, inPrefix := holdersBuf[:0], inPrefixBuf[:0]
		for _, i := range idx {
			if r := p.replicas[i]; r.holds(o) {
				holders = append(holders, int(h.w.nodes[i].id))
				if o < r.prefixEnd {
					inPrefix = append(inPrefix, int(h.w.nodes[i].id))
				}
			}
		}
		switch {
		case len(holders) < need:
			p.failed = true
			h.w.fail("compaction: %s offset %d (below a prefix end %d) held by %d replicas (nodes %v: prefix or raft log), fewer than a majority of %d voters less %d replaced or damaged disks: a single disk replacement can lose it",
				key, o, end, len(holders), slices.Clone(holders), p.voters, lost)
			return
		case o < trimmed && len(inPrefix) < need:
			p.failed = true
			h.w.fail("compaction: %s offset %d is gone from a raft log (one starts at %d) but held in the compacted prefixes of %d replicas (nodes %v), fewer than a majority of %d voters less %d replaced or damaged disks: raft snapshots can leave it on fewer",
				key, o, trimmed, len(inPrefix), slices.Clone(inPrefix), p.voters, lost)
			return
		}
	}
}
