package raftlog_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// countingDisk counts the calls that cost I/O.
type countingDisk struct {
	raftlog.Disk
	fileSyncs, dirSyncs, writes int
	reads                       int // ReadAt calls, not checked by expect
}

func (d *countingDisk) Open(name string) (raftlog.File, error) {
	f, err := d.Disk.Open(name)
	return &countingFile{File: f, disk: d}, err
}

func (d *countingDisk) SyncDir(dir string) error { d.dirSyncs++; return d.Disk.SyncDir(dir) }

func (d *countingDisk) reset() { d.fileSyncs, d.dirSyncs, d.writes, d.reads = 0, 0, 0, 0 }

type countingFile struct {
	raftlog.File
	disk *countingDisk
}

func (f *countingFile) Sync() error { f.disk.fileSyncs++; return f.File.Sync() }

func (f *countingFile) ReadAt(p []byte, off int64) (int, error) {
	f.disk.reads++
	return f.File.ReadAt(p, off)
}

func (f *countingFile) WriteAt(p []byte, off int64) (int, error) {
	f.disk.writes++
	return f.File.WriteAt(p, off)
}

func (d *countingDisk) expect(t *testing.T, what string, fileSyncs, dirSyncs, writes int) {
	t.Helper()
	if d.fileSyncs != fileSyncs || d.dirSyncs != dirSyncs || d.writes != writes {
		t.Fatalf("%s: %d file syncs, %d dir syncs, %d writes; want %d, %d, %d",
			what, d.fileSyncs, d.dirSyncs, d.writes, fileSyncs, dirSyncs, writes)
	}
	d.reset()
}

func batch(first, count, term uint64, size int) []*raftpb.Entry {
	var es []*raftpb.Entry
	for i := first; i < first+count; i++ {
		es = append(es, entry(i, term, fmt.Sprintf("%0*d", size, i)))
	}
	return es
}

// TestSyncCostsOnlyWhatIsDirty shows Sync fsyncs only files written since their last sync, dir-syncs only after creations or removals, and each Append costs one WriteAt per segment it touches.
func TestSyncCostsOnlyWhatIsDirty(t *testing.T) {
	disk := &countingDisk{Disk: memdisk.New()}
	l := mustOpen(t, disk, raftlog.Options{SegmentBytesMax: 400})
	disk.reset()
	must(t, l.Sync())
	disk.expect(t, "idle sync", 0, 0, 0)
	must(t, l.Append(batch(1, 5, 1, 20)))
	disk.expect(t, "append of 5 entries", 0, 0, 1)
	must(t, l.Sync())
	disk.expect(t, "sync after append", 1, 0, 0)
	must(t, l.SetHardState(hardState(1, 1, 3)))
	must(t, l.Sync())
	disk.expect(t, "hard state", 1, 0, 1)
	must(t, l.Append(batch(6, 6, 1, 20))) // rolls once: old segment synced, new one started
	disk.expect(t, "append across a roll", 1, 0, 3)
	must(t, l.Sync())
	disk.expect(t, "sync after roll", 1, 1, 0)
	must(t, l.SetHardState(hardState(1, 1, 11)))
	must(t, l.CreateSnapshot(10, nil, []byte("s")))
	disk.expect(t, "hard state and snapshot", 2, 1, 2) // log sync, snapshot file sync, its dir sync
	must(t, l.Sync())
	disk.expect(t, "sync after compaction", 0, 1, 0)
}

// TestFailedSyncIsSticky shows that after a failed fsync every write and Sync fails, so no later Sync can claim data the failed one lost, and that data synced before survives.
func TestFailedSyncIsSticky(t *testing.T) {
	disk := memdisk.New()
	l := mustOpen(t, disk, raftlog.Options{})
	must(t, l.Append(batch(1, 3, 1, 8)))
	must(t, l.Sync())
	must(t, l.Append(batch(4, 3, 1, 8)))
	disk.FailSync(true)
	err := l.Sync()
	if err == nil {
		t.Fatal("sync with failing disk succeeded")
	}
	disk.FailSync(false)
	for what, got := range map[string]error{
		"append":     l.Append(batch(7, 1, 1, 8)),
		"hard state": l.SetHardState(hardState(1, 1, 1)),
		"sync":       l.Sync(),
	} {
		if !errors.Is(got, err) && got.Error() != err.Error() {
			t.Fatalf("%s after failed sync: %v, want %v", what, got, err)
		}
	}
	l.Close()
	disk.Crash(nil)
	l = mustOpen(t, disk, raftlog.Options{})
	if last, _ := l.LastIndex(); last != 3 {
		t.Fatalf("last index %d after crash, want the 3 synced entries", last)
	}
}

// TestEntriesRespectMaxSize shows Entries returns at least one entry however small maxSize is, and stops before the entry that would pass maxSize.
func TestEntriesRespectMaxSize(t *testing.T) {
	l := mustOpen(t, memdisk.New(), raftlog.Options{TailCacheBytesMax: -1})
	must(t, l.Append(batch(1, 10, 1, 100)))
	if ents, _ := l.Entries(1, 11, 0); len(ents) != 1 {
		t.Fatalf("maxSize 0 gave %d entries", len(ents))
	}
	if ents, _ := l.Entries(1, 11, 3*108+50); len(ents) != 3 { // 108 bytes each as protobuf
		t.Fatalf("maxSize for 3 gave %d entries", len(ents))
	}
}

// TestCrashInsideApplySnapshotDiscardsOldLog shows that when power fails after the applied snapshot is durable but before the old segments are removed, Open discards those segments (they do not continue the snapshot) and keeps the newest hard state, which only they held.
func TestCrashInsideApplySnapshotDiscardsOldLog(t *testing.T) {
	mem := memdisk.New()
	faults := &faultDisk{Disk: mem, budget: -1}
	l := mustOpen(t, faults, raftlog.Options{SegmentBytesMax: 300})
	must(t, l.Append(batch(1, 20, 1, 30)))
	must(t, l.SetHardState(hardState(2, 3, 5)))
	must(t, l.Sync())
	faults.budget = 4 // snapshot file: truncate, write, sync, dir sync; then the power fails
	snap := &raftpb.Snapshot{Data: []byte("leader state"), Metadata: &raftpb.SnapshotMetadata{
		Index: new(uint64(30)), Term: new(uint64(2)), ConfState: &raftpb.ConfState{Voters: []uint64{1}}}}
	if err := l.ApplySnapshot(snap); !errors.Is(err, errPowerCut) {
		t.Fatalf("apply snapshot through a power cut: %v", err)
	}
	l.Close()
	mem.Crash(nil)
	faults.budget = -1
	l = mustOpen(t, faults, raftlog.Options{})
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	hs, _, _ := l.InitialState()
	got, _ := l.Snapshot()
	if first != 31 || last != 30 || string(got.GetData()) != "leader state" {
		t.Fatalf("after crash: first %d last %d snapshot %q", first, last, got.GetData())
	}
	if hs.GetTerm() != 2 || hs.GetVote() != 3 || hs.GetCommit() != 30 {
		t.Fatalf("hard state %v, want term 2 vote 3 and commit raised to the snapshot", hs)
	}
	want := []string{"log/00000000000000000030.snap", "log/00000000000000000031.log", "log/hardstate"}
	if files := mem.Files(); fmt.Sprint(files) != fmt.Sprint(want) {
		t.Fatalf("files left %v, want %v", files, want)
	}
}

// TestMissingSegmentsAfterSnapshotFailOpen shows that losing every segment after a locally created snapshot is reported as corruption, not opened as an empty log.
func TestMissingSegmentsAfterSnapshotFailOpen(t *testing.T) {
	mem := memdisk.New()
	l := mustOpen(t, mem, raftlog.Options{})
	must(t, l.Append(batch(1, 5, 1, 10)))
	must(t, l.SetHardState(hardState(1, 1, 5)))
	must(t, l.CreateSnapshot(3, nil, []byte("s")))
	must(t, l.Sync())
	l.Close()
	for _, name := range mem.Files() {
		if strings.HasSuffix(name, ".log") {
			must(t, mem.Remove(name))
		}
	}
	if _, err := raftlog.Open(mem, "log", raftlog.Options{}); !errors.Is(err, raftlog.ErrCorrupt) {
		t.Fatalf("open without segments: %v, want ErrCorrupt", err)
	}
}

// TestSaveWritesWhatAppendThenSetHardStateWrite shows Save leaves the same
// files, byte for byte, as Append followed by SetHardState (including a
// conflicting suffix and a hard state alone), and that they recover.
func TestSaveWritesWhatAppendThenSetHardStateWrite(t *testing.T) {
	type step struct {
		entries []*raftpb.Entry
		hs      *raftpb.HardState
	}
	steps := []step{
		{entriesOf(entry(1, 1, "a"), entry(2, 1, "b")), hardState(1, 1, 0)},
		{entriesOf(entry(3, 1, "c")), nil},
		{nil, hardState(1, 1, 2)},
		{entriesOf(entry(3, 2, "c2"), entry(4, 2, "")), hardState(2, 2, 2)},
		{entriesOf(entry(5, 2, "e")), hardState(2, 2, 4)},
	}
	saved, separate := memdisk.New(), memdisk.New()
	ls, lp := mustOpen(t, saved, raftlog.Options{}), mustOpen(t, separate, raftlog.Options{})
	for _, s := range steps {
		must(t, ls.Save(s.entries, s.hs))
		must(t, lp.Append(s.entries))
		if s.hs != nil {
			must(t, lp.SetHardState(s.hs))
		}
	}
	must(t, ls.Sync())
	must(t, lp.Sync())
	names, err := saved.List("log")
	must(t, err)
	other, err := separate.List("log")
	must(t, err)
	if !slices.Equal(names, other) {
		t.Fatalf("files %v vs %v", names, other)
	}
	for _, name := range names {
		if a, b := readAll(t, saved, "log/"+name), readAll(t, separate, "log/"+name); !bytes.Equal(a, b) {
			t.Fatalf("%s differs:\n%x\n%x", name, a, b)
		}
	}
	must(t, ls.Close())
	re := mustOpen(t, saved, raftlog.Options{})
	hs, _, err := re.InitialState()
	must(t, err)
	last, _ := re.LastIndex()
	if hs.GetTerm() != 2 || hs.GetCommit() != 4 || last != 5 {
		t.Fatalf("recovered hard state %v, last index %d", hs, last)
	}
}

// readAll reads a whole file of disk.
func readAll(t *testing.T, disk raftlog.Disk, name string) []byte {
	t.Helper()
	f, err := disk.Open(name)
	must(t, err)
	defer f.Close()
	size, err := f.Size()
	must(t, err)
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && size > 0 {
		t.Fatal(err)
	}
	return buf
}

// TestStartSyncSplitsTheFsync shows the two halves of a pipelined Sync: a
// power loss after StartSync but before its run keeps only what was synced
// before; once run returned nil, the writes before StartSync survive; a
// write in between panics; a failed run leaves the Log failed.
func TestStartSyncSplitsTheFsync(t *testing.T) {
	disk := memdisk.New()
	l := mustOpen(t, disk, raftlog.Options{})
	must(t, l.Append(batch(1, 3, 1, 20)))
	must(t, l.Sync())
	must(t, l.Append(batch(4, 6, 1, 20)))
	run := l.StartSync()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("write between StartSync and FinishSync did not panic")
			}
		}()
		_ = l.Append(batch(10, 1, 1, 20))
	}()
	clone := disk.Clone()
	clone.Crash(nil)
	if last, _ := mustOpen(t, clone, raftlog.Options{}).LastIndex(); last != 3 {
		t.Fatalf("power loss before the fsync ran: last index %d, want the 3 synced entries", last)
	}
	must(t, run())
	must(t, l.FinishSync(nil))
	l.Close()
	disk.Crash(nil)
	l = mustOpen(t, disk, raftlog.Options{})
	if last, _ := l.LastIndex(); last != 9 {
		t.Fatalf("power loss after the fsync ran: last index %d, want 9", last)
	}
	must(t, l.Append(batch(10, 1, 1, 20)))
	run = l.StartSync()
	if err := l.FinishSync(errors.New("device gone")); err == nil {
		t.Fatal("FinishSync of a failed run returned nil")
	}
	if err := l.Append(batch(11, 1, 1, 20)); err == nil {
		t.Fatal("append after a failed pipelined sync succeeded")
	}
	_ = run
}

// removeCountingDisk counts the unlinks made through it.
type removeCountingDisk struct {
	raftlog.Disk
	removes int
}

func (d *removeCountingDisk) Remove(name string) error {
	d.removes++
	return d.Disk.Remove(name)
}

// TestApplySnapshotLeavesUnlinksToTakeTrash: ApplySnapshot unlinks none of
// the old segments itself (an unlink of a large synced segment takes tens
// of ms, on the node's loop); it retires them by rename, and TakeTrash's
// job removes them; a crash before that job ran leaves only files
// recovery removes.
func TestApplySnapshotLeavesUnlinksToTakeTrash(t *testing.T) {
	for _, crash := range []bool{false, true} {
		mem := memdisk.New()
		disk := &removeCountingDisk{Disk: mem}
		l := mustOpen(t, disk, raftlog.Options{SegmentBytesMax: 300})
		must(t, l.Append(batch(1, 20, 1, 30)))
		must(t, l.SetHardState(hardState(2, 3, 5)))
		must(t, l.Sync())
		disk.removes = 0
		snap := &raftpb.Snapshot{Data: []byte("leader state"), Metadata: &raftpb.SnapshotMetadata{
			Index: new(uint64(30)), Term: new(uint64(2)), ConfState: &raftpb.ConfState{Voters: []uint64{1}}}}
		must(t, l.ApplySnapshot(snap))
		if disk.removes != 0 {
			t.Fatalf("ApplySnapshot unlinked %d files itself", disk.removes)
		}
		run := l.TakeTrash()
		if run == nil {
			t.Fatalf("ApplySnapshot retired no segment")
		}
		if crash {
			l.Close()
			mem.Crash(nil)
			l = mustOpen(t, mem, raftlog.Options{})
		} else {
			must(t, run())
		}
		want := []string{"log/00000000000000000030.snap", "log/00000000000000000031.log", "log/hardstate"}
		if files := mem.Files(); fmt.Sprint(files) != fmt.Sprint(want) {
			t.Fatalf("crash %v: files left %v, want %v", crash, files, want)
		}
		if first, _ := l.FirstIndex(); first != 31 {
			t.Fatalf("crash %v: first index %d, want 31", crash, first)
		}
	}
}
