package groupsvc

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// keyedLog is a Log of batches of keyed records whose offsets a
// compaction may have left gaps between.
type keyedLog struct {
	batches []Batch
	ends    []int64    // the offset after each batch's last record
	recs    []keyedRec // every record, for compact
	hw      int64
	warned  []string
}

type keyedRec struct {
	off int64
	rec recordbatch.Record
}

func (l *keyedLog) LogStartOffset() int64 { return 0 }
func (l *keyedLog) HighWatermark() int64  { return l.hw }
func (l *keyedLog) Read(offset int64, maxBytes int32) ([]Batch, error) {
	var out []Batch
	size := 0
	for i, b := range l.batches {
		if l.ends[i] <= offset { // wholly below
			continue
		}
		if len(out) > 0 && size+len(b.Data) > int(maxBytes) {
			break
		}
		out, size = append(out, b), size+len(b.Data)
	}
	return out, nil
}
func (l *keyedLog) Damaged(format string, args ...any) error {
	return fmt.Errorf("%w: p/0"+format, append([]any{errDamaged}, args...)...)
}
func (l *keyedLog) Warn(msg string, _ error) { l.warned = append(l.warned, msg) }

// write appends records as one batch, each record its own offset.
func (l *keyedLog) write(t *testing.T, recs []recordbatch.Record) {
	t.Helper()
	data, err := recordbatch.Encode(nil, recs)
	if err != nil {
		t.Fatal(err)
	}
	l.batches = append(l.batches, Batch{BaseOffset: l.hw, Data: data})
	l.ends = append(l.ends, l.hw+int64(len(recs)))
	for i, r := range recs {
		l.recs = append(l.recs, keyedRec{off: l.hw + int64(i), rec: r})
	}
	l.hw += int64(len(recs))
}

// compact keeps the latest record of each key, drops tombstones
// (delete.retention.ms=0) and keyless records, and keeps every survivor's
// offset: one batch per survivor, in a pass's form. The last record stays whatever it is
// (a pass never cleans the active segment).
func (l *keyedLog) compact(t *testing.T) {
	t.Helper()
	latest := make(map[string]int64)
	for _, r := range l.recs {
		latest[string(r.rec.Key)] = r.off
	}
	var kept []keyedRec
	l.batches, l.ends = nil, nil
	for _, r := range l.recs {
		last := r.off == l.hw-1
		if !last && (r.rec.Key == nil || r.rec.Value == nil || latest[string(r.rec.Key)] != r.off) {
			continue
		}
		data, err := compact.AppendBatch(nil, &compact.Batch{BaseOffset: r.off, FirstTimestampMs: r.rec.TimestampMs,
			DeleteHorizonMs: compact.NoHorizon, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
			Records: []compact.Record{{Offset: r.off, Record: r.rec}}})
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, r)
		l.batches = append(l.batches, Batch{BaseOffset: r.off, Data: data})
		l.ends = append(l.ends, r.off+1)
	}
	l.recs = kept
}

// leader drives a coordinator as the node does: each command proposed
// with a wait, written, then read back; a snapshot every `every`.
type leader struct {
	t   *testing.T
	co  *Coordinator
	log *keyedLog
	id  uint64
}

func (ld *leader) propose(cmd *strandpb.GroupCommand) {
	ld.t.Helper()
	ld.id++
	cmd.RequestId, cmd.NowMs = ld.id, 1000
	v, err := proto.Marshal(cmd)
	if err != nil {
		ld.t.Fatal(err)
	}
	ld.co.Wait(ld.id, func(Applied) {})
	ld.log.write(ld.t, ld.co.Records(cmd, v, 1000))
	if err := ld.co.CatchUp(ld.log, 1000); err != nil {
		ld.t.Fatal(err)
	}
}

func groupCommit(group string, partition int32, offset int64) *strandpb.GroupCommand {
	return &strandpb.GroupCommand{Body: &strandpb.GroupCommand_Commit{Commit: &strandpb.OffsetCommitRequest{
		Group: group, MemberEpoch: -1, Offsets: []*strandpb.OffsetCommitPartition{{Topic: "t", Partition: partition, Offset: offset}}}}}
}

// run commits n times over 10 groups of 4 partitions, with a snapshot
// when one is due every `every` commands and a group deleted now and then.
func (ld *leader) run(n, every int) {
	for i := range n {
		g := fmt.Sprintf("g%d", i%10)
		if i%97 == 96 {
			ld.propose(&strandpb.GroupCommand{Body: &strandpb.GroupCommand_DeleteGroup{DeleteGroup: g}})
		} else {
			ld.propose(groupCommit(g, int32(i%4), int64(i)))
		}
		if ld.co.SnapshotDue(every) {
			ld.propose(&strandpb.GroupCommand{Body: &strandpb.GroupCommand_Snapshot{Snapshot: ld.co.State.Snapshot(ld.co.Next)}})
		}
	}
}

// TestCompactedRestoreEqualsReplay shows the keyed log's contract: after
// compaction (the latest record per key, tombstones gone) a fresh
// coordinator restores the state the writer built from the whole
// history, by the newest snapshot (the back-scan) and by the forward
// replay from the log start (a scan too short to find it), and the log
// holds about one snapshot interval of commands, not the history.
func TestCompactedRestoreEqualsReplay(t *testing.T) {
	log := &keyedLog{}
	ld := &leader{t: t, co: New(5, 1, 0), log: log}
	ld.run(2000, 100)
	before := len(log.recs)
	log.compact(t)
	if len(log.recs) > 2*100+2 || before < 2000 {
		t.Fatalf("%d records before compaction, %d after: want ≥ 2000, then at most two intervals", before, len(log.recs))
	}
	want := ld.co.State.Snapshot(0)
	for _, scan := range []int{4000, 1} {
		co := New(6, 1, 0)
		if err := co.CatchUp(log, scan/4); err != nil {
			t.Fatal(err)
		}
		if got := co.State.Snapshot(0); !proto.Equal(got, want) {
			t.Fatalf("scan %d: restored state differs from the writer's:\n got %v\nwant %v", scan, got, want)
		}
		if co.RestoredFrom < 0 || co.Next != log.hw {
			t.Fatalf("scan %d: restored from %d, next %d (hw %d)", scan, co.RestoredFrom, co.Next, log.hw)
		}
	}
}

// TestSnapshotWaitsForOwnCommand shows a coordinator proposes no snapshot
// before it read back a command of its own: one of an earlier term could
// still land after it with a larger as_of.
func TestSnapshotWaitsForOwnCommand(t *testing.T) {
	log := &keyedLog{}
	old := &leader{t: t, co: New(1, 1, 0), log: log}
	old.run(50, 1000)
	co := New(2, 1, 0)
	if err := co.CatchUp(log, 1000); err != nil {
		t.Fatal(err)
	}
	if co.SnapshotDue(10) {
		t.Fatalf("snapshot due before a command of term 2 was read back")
	}
	ld := &leader{t: t, co: co, log: log, id: 1000}
	ld.propose(groupCommit("g0", 0, 1))
	if !co.SnapshotDue(10) {
		t.Fatalf("no snapshot due after 51 commands, one of them its own")
	}
}

// TestTombstonesOfSnapshotBatch shows a snapshot's batch tombstones every
// command below its as_of the coordinator applied, oldest first, and that
// applying the batch clears them.
func TestTombstonesOfSnapshotBatch(t *testing.T) {
	log := &keyedLog{}
	ld := &leader{t: t, co: New(3, 1, 0), log: log}
	for i := range 5 {
		ld.propose(groupCommit("g", 0, int64(i)))
	}
	snap := &strandpb.GroupCommand{Body: &strandpb.GroupCommand_Snapshot{Snapshot: ld.co.State.Snapshot(3)}}
	recs := ld.co.Records(snap, []byte{1}, 7)
	if len(recs) != 4 || string(recs[0].Key) != string(SnapshotKey) {
		t.Fatalf("records %v: want the snapshot then 3 tombstones", recs)
	}
	for i, r := range recs[1:] {
		if want := CommandKey(3, uint64(i+1)); r.Value != nil || string(r.Key) != string(want) {
			t.Fatalf("tombstone %d: key %x value %v, want %x and null", i, r.Key, r.Value, want)
		}
	}
	ld.propose(&strandpb.GroupCommand{Body: &strandpb.GroupCommand_Snapshot{Snapshot: ld.co.State.Snapshot(ld.co.Next)}})
	if n := ld.co.Tombstoned.Len(); n != 0 {
		t.Fatalf("%d commands still waiting for a tombstone after the snapshot batch applied", n)
	}
}
