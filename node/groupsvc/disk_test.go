package groupsvc

import (
	"bytes"
	"fmt"
	"iter"
	"sort"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// passLog is a partition log as engine/compact's passes leave it: the
// compacted prefix's batches, then the batches written since.
type passLog struct {
	in         []compact.Input
	ends       []int64 // the offset after each batch
	hw         int64
	firstDirty int64
	passes     int64
}

func (l *passLog) LogStartOffset() int64 { return 0 }
func (l *passLog) HighWatermark() int64  { return l.hw }
func (l *passLog) Read(offset int64, maxBytes int32) ([]Batch, error) {
	var out []Batch
	size := 0
	for i := sort.Search(len(l.ends), func(i int) bool { return l.ends[i] > offset }); i < len(l.in); i++ {
		if len(out) > 0 && size+len(l.in[i].Data) > int(maxBytes) {
			break
		}
		out, size = append(out, Batch{BaseOffset: l.in[i].BaseOffset, Data: l.in[i].Data}), size+len(l.in[i].Data)
	}
	return out, nil
}
func (l *passLog) Damaged(format string, args ...any) error {
	return fmt.Errorf("%w: p/0"+format, append([]any{errDamaged}, args...)...)
}
func (l *passLog) Warn(string, error) {}

func (l *passLog) write(t *testing.T, recs []recordbatch.Record) {
	t.Helper()
	data, err := recordbatch.Encode(nil, recs)
	if err != nil {
		t.Fatal(err)
	}
	l.in = append(l.in, compact.Input{BaseOffset: l.hw, Data: data, Producer: compact.Producer{ID: -1, Epoch: -1, BaseSequence: -1}})
	l.hw += int64(len(recs))
	l.ends = append(l.ends, l.hw)
}

// bytes is the log's stored batch bytes.
func (l *passLog) bytes() int64 {
	var n int64
	for _, in := range l.in {
		n += int64(len(in.Data))
	}
	return n
}

// pass compacts [0, cleanableEnd) as the node's replicas do, at nowMs.
func (l *passLog) pass(t *testing.T, cleanableEnd, nowMs int64) {
	t.Helper()
	l.passes++
	log := compact.Log{FirstDirty: l.firstDirty, Batches: func() iter.Seq2[compact.Input, error] {
		return func(yield func(compact.Input, error) bool) {
			for _, in := range l.in {
				if !yield(in, nil) {
					return
				}
			}
		}
	}}
	var out []compact.Input
	var ends []int64
	res, err := compact.Compact(log, compact.Decision{Generation: uint64(l.passes), CleanableEnd: cleanableEnd, TimeMs: nowMs,
		OffsetMapBytes: 8 << 20}, func(b []byte) error {
		h, err := compact.DecodeHeader(b)
		if err != nil {
			return err
		}
		out, ends = append(out, compact.Input{BaseOffset: h.BaseOffset, Data: bytes.Clone(b)}), append(ends, h.LastOffset()+1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, in := range l.in {
		if !compact.IsCompacted(in.Data) && in.BaseOffset >= res.CleanedTo {
			out, ends = append(out, in), append(ends, l.ends[i])
		}
	}
	l.in, l.ends, l.firstDirty = out, ends, res.CleanedTo
}

// TestOffsetsDiskBoundedByLiveGroups measures __strand_offsets' batches
// under a long commit stream: 100,000 offset commits (4 partitions each)
// by 10 groups, each written as the node writes it (one keyed batch per
// command, a snapshot batch with its tombstones every 1,000 commands, the
// default), with a pass every 10,000 commands up to the last 1,000 (the
// active segment) at delete.retention.ms=0. Without compaction the log
// grows with every commit; with it, the log after the passes is a snapshot
// of 40 offsets and the commands after it, whatever the history's length.
// A coordinator restored from the compacted log has the writer's state.
func TestOffsetsDiskBoundedByLiveGroups(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	const every, passEvery, active = 1000, 10_000, 1000
	log := &passLog{}
	co := New(7, 1, 0)
	var id uint64
	propose := func(cmd *strandpb.GroupCommand, nowMs int64) {
		id++
		cmd.RequestId, cmd.NowMs = id, nowMs
		v, err := proto.MarshalOptions{Deterministic: true}.Marshal(cmd)
		if err != nil {
			t.Fatal(err)
		}
		co.Wait(id, func(Applied) {})
		log.write(t, co.Records(cmd, v, nowMs))
		if err := co.CatchUp(log, every); err != nil {
			t.Fatal(err)
		}
	}
	var written, peak int64
	for i := range n {
		nowMs := int64(1_000_000 + i)
		cmd := &strandpb.OffsetCommitRequest{Group: fmt.Sprintf("consumers-%d", i%10), MemberEpoch: -1}
		for p := range int32(4) {
			cmd.Offsets = append(cmd.Offsets, &strandpb.OffsetCommitPartition{Topic: "events", Partition: p, Offset: int64(i)})
		}
		before := log.bytes()
		propose(&strandpb.GroupCommand{Body: &strandpb.GroupCommand_Commit{Commit: cmd}}, nowMs)
		if co.SnapshotDue(every) {
			propose(&strandpb.GroupCommand{Body: &strandpb.GroupCommand_Snapshot{Snapshot: co.State.Snapshot(co.Next)}}, nowMs)
		}
		written += log.bytes() - before
		if (i+1)%passEvery == 0 {
			log.pass(t, log.hw-active, nowMs)
		}
		peak = max(peak, log.bytes())
	}
	end := int64(1_000_000 + n)
	log.pass(t, log.hw-active, end)
	log.pass(t, log.hw-active, end+1) // the tombstones the last one stamped go
	after := log.bytes()
	t.Logf("%d commits by 10 groups: %d bytes written (the log without compaction), %d after the passes (%d batches), peak %d; %.0fx smaller",
		n, written, after, len(log.in), peak, float64(written)/float64(after))
	// Bounded by the live state and the active segment: one snapshot, at
	// most two intervals of commands (the active segment and the
	// commands since the last snapshot) and their keys.
	perCommand := written / int64(n)
	if bound := 3 * every * perCommand; after > bound {
		t.Fatalf("%d bytes after compaction, want at most %d (three snapshot intervals of commands)", after, bound)
	}
	restored := New(8, 1, 0)
	if err := restored.CatchUp(log, every); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(restored.State.Snapshot(0), co.State.Snapshot(0)) {
		t.Fatalf("the coordinator restored from the compacted log differs from the writer")
	}
}
