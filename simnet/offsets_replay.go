package simnet

import (
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/groups"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/node/groupsvc"
	"github.com/strandlog/strand/proto/strandpb"
)

// The coordinators' restore, checked against the whole history (the
// transaction coordinators' __strand_transactions the same way).
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
	replay   coordinatorReplay
	replayed int64
}

// coordinatorReplay is a coordinator's pure state, as the replay builds
// it: engine/groups' for __strand_offsets, engine/txn's for
// __strand_transactions.
type coordinatorReplay interface {
	apply(value []byte)
	snapshot(asOf int64) proto.Message
}

type groupsReplay struct{ st *groups.State }

func (r groupsReplay) apply(value []byte) {
	var cmd strandpb.GroupCommand
	if proto.Unmarshal(value, &cmd) == nil { // else no command: the coordinator skips it too
		groupsvc.Apply(r.st, &cmd)
	}
}
func (r groupsReplay) snapshot(asOf int64) proto.Message { return r.st.Snapshot(asOf) }

type txnReplay struct{ st *txn.State }

func (r txnReplay) apply(value []byte) {
	if cmd, err := txn.DecodeCommand(value); err == nil {
		r.st.Apply(cmd)
	}
}
func (r txnReplay) snapshot(asOf int64) proto.Message { return r.st.Snapshot(asOf) }

// newReplay is an empty replay of topic's coordinator.
func newReplay(topic string) coordinatorReplay {
	if topic == node.TransactionsTopic {
		return txnReplay{st: txn.New()}
	}
	return groupsReplay{st: groups.New()}
}

// isCoordinatorTopic reports whether topic's log is a coordinator's.
func isCoordinatorTopic(topic string) bool {
	return topic == node.OffsetsTopic || topic == node.TransactionsTopic
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
		o.w.coverage.Inc("coordinator/compactions")
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
func (o *offsetsReplay) onRestored(n *simNode, slot int, topic string, next int64, snap proto.Message) {
	h := o.slots[slot]
	if h == nil || next > h.next {
		return // the reference has not seen the records (digest checks off)
	}
	if h.replay == nil || next < h.replayed {
		h.replay, h.replayed = newReplay(topic), 0
	}
	for off := h.replayed; off < next; off++ {
		if h.values[off] != nil {
			h.replay.apply(h.values[off])
		}
	}
	h.replayed = next
	kind := "group"
	if topic == node.TransactionsTopic {
		kind = "txn"
	}
	o.w.coverage.Inc(kind + "/restore-checked")
	if h.compact {
		o.w.coverage.Inc(kind + "/restore-after-compaction")
	}
	if want := h.replay.snapshot(next); !proto.Equal(want, snap) {
		o.w.fail("%s: node %d's coordinator restored at offset %d differs from the replay of the whole history:\n got %v\nwant %v",
			o.w.incarnations.label(slot), n.id, next, snap, want)
	}
}

// onCoordinatorRestored is every node's node.Config.CoordinatorRestored.
func (c *checker) onCoordinatorRestored(n *simNode, tp node.TopicPartition, topicID uint64, next int64, snap proto.Message) {
	g, ok := c.w.groupOf[tp]
	if !ok {
		return
	}
	c.w.offsets.onRestored(n, c.w.incarnations.slot(g, topicID), tp.Topic, next, snap)
}
