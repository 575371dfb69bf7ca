package simnet

import (
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/groups"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/node/groupsvc"
	"github.com/strandlog/strand/proto/strandpb"
)

// The group coordinators' restore, checked against the whole history.
// __strand_offsets is compacted (node/groupsvc/doc.go, "A compacted log"):
// a new coordinator restores the newest snapshot and replays what
// survives after it. The world keeps every record of each
// __strand_offsets partition's incarnation as the reference replay
// appends it (digests.go: first application of each index, so before any
// compaction removed it), and when a node's fresh coordinator reports its
// state after its first catch-up (node.Config.CoordinatorRestored; the
// leader also restores a throwaway one each sweep and reports it) the
// world replays the commands of the whole history below the same offset
// and compares the two states: a restore that lost a command a pass
// removed too early, kept a superseded value, or applied a tombstoned one
// fails here, not only when a client happens to read the group.

// offsetsHistory is one __strand_offsets incarnation's records, in
// offset order from 0.
type offsetsHistory struct {
	next    int64
	values  [][]byte // by offset; nil: a tombstone or no record
	compact bool     // a compaction pass was agreed on this partition
	// replay is the history's commands applied below replayed, reused
	// by the next check at or above it.
	replay   *groups.State
	replayed int64
}

// offsetsReplay holds the histories, by slot.
type offsetsReplay struct {
	w     *world
	slots map[int]*offsetsHistory // lookup only
}

func newOffsetsReplay(w *world) *offsetsReplay {
	return &offsetsReplay{w: w, slots: map[int]*offsetsHistory{}}
}

// onApply records a __strand_offsets entry the reference applied with res.
func (o *offsetsReplay) onApply(slot int, data []byte, res engine.Result) {
	e, err := engine.DecodeEntry(data)
	if err != nil {
		return
	}
	h := o.slots[slot]
	if h == nil {
		h = &offsetsHistory{}
		o.slots[slot] = h
	}
	switch e.Kind {
	case strandpb.EntryKind_ENTRY_KIND_COMPACT_DONE:
		o.w.coverage.Inc("group/offsets-compactions")
		h.compact = true
		return
	case strandpb.EntryKind_ENTRY_KIND_PRODUCE:
	default:
		return
	}
	if res.Err != nil || res.Duplicate {
		return
	}
	it := recordbatch.NewIterator(e.Batch)
	for it.Next() {
		off := res.BaseOffset + int64(it.Index())
		for int64(len(h.values)) < off {
			h.values = append(h.values, nil)
		}
		h.values = append(h.values, it.Record().Value)
		h.next = off + 1
	}
}

// onRestored compares a fresh coordinator's state as of next with the
// replay of every command of the history below next.
func (o *offsetsReplay) onRestored(n *simNode, slot int, next int64, snap *strandpb.GroupsSnapshot) {
	h := o.slots[slot]
	if h == nil || next > h.next {
		return // the reference has not seen the records (digest checks off)
	}
	if h.replay == nil || next < h.replayed {
		h.replay, h.replayed = groups.New(), 0
	}
	st := h.replay
	for off := h.replayed; off < next; off++ {
		if h.values[off] == nil {
			continue
		}
		var cmd strandpb.GroupCommand
		if proto.Unmarshal(h.values[off], &cmd) != nil {
			continue // no command: the coordinator skips it too
		}
		groupsvc.Apply(st, &cmd)
	}
	h.replayed = next
	o.w.coverage.Inc("group/restore-checked")
	if h.compact {
		o.w.coverage.Inc("group/restore-after-compaction")
	}
	if want := st.Snapshot(next); !proto.Equal(want, snap) {
		o.w.fail("%s: node %d's coordinator restored at offset %d differs from the replay of the whole history:\n got %v\nwant %v",
			o.w.incarnations.label(slot), n.id, next, snap, want)
	}
}

// onCoordinatorRestored is every node's node.Config.CoordinatorRestored.
func (c *checker) onCoordinatorRestored(n *simNode, tp node.TopicPartition, topicID uint64, next int64, snap *strandpb.GroupsSnapshot) {
	g, ok := c.w.groupOf[tp]
	if !ok {
		return
	}
	c.w.offsets.onRestored(n, c.w.incarnations.slot(g, topicID), next, snap)
}
