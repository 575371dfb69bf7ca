package raftlog

import (
	"encoding/binary"
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// snapshotFlagApplied marks a snapshot received from the leader
// (ApplySnapshot), which discards the whole log; without it the snapshot was
// created locally (CreateSnapshot) and the log must continue it.
const snapshotFlagApplied = 1

// sideSlotBytes is the size of each of the two slots of the hard-state side
// file; each slot holds one hard-state record (33 bytes).
const sideSlotBytes = 64

// encodeSnapshot returns the snapshot record: flags u8, index u64, term u64,
// confState length u32, confState (protobuf), data.
func encodeSnapshot(snap *raftpb.Snapshot, applied bool) ([]byte, error) {
	conf, err := proto.MarshalOptions{Deterministic: true}.Marshal(snap.GetMetadata().GetConfState())
	if err != nil {
		return nil, fmt.Errorf("raftlog: marshal conf state: %w", err)
	}
	size := frameHeaderBytes + snapshotHeaderBytes + len(conf) + len(snap.GetData())
	if size-8 > recordBytesMax {
		return nil, fmt.Errorf("raftlog: snapshot of %d bytes too large", size)
	}
	buf, start := beginRecord(make([]byte, 0, size), recordSnapshot)
	var flags byte
	if applied {
		flags = snapshotFlagApplied
	}
	buf = append(buf, flags)
	buf = binary.LittleEndian.AppendUint64(buf, snap.GetMetadata().GetIndex())
	buf = binary.LittleEndian.AppendUint64(buf, snap.GetMetadata().GetTerm())
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(conf)))
	buf = append(buf, conf...)
	buf = append(buf, snap.GetData()...)
	endRecord(buf, start)
	return buf, nil
}

// decodeSnapshotBody decodes the body of a snapshot record. Data aliases body.
func decodeSnapshotBody(body []byte) (*raftpb.Snapshot, bool, error) {
	flags := body[0]
	index := binary.LittleEndian.Uint64(body[1:])
	term := binary.LittleEndian.Uint64(body[9:])
	confBytes := binary.LittleEndian.Uint32(body[17:])
	conf := &raftpb.ConfState{}
	if err := proto.Unmarshal(body[snapshotHeaderBytes:snapshotHeaderBytes+confBytes], conf); err != nil {
		return nil, false, err
	}
	snap := &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
		ConfState: raftpb.EnsureConfState(conf), Index: new(index), Term: new(term),
	}}
	if data := body[snapshotHeaderBytes+confBytes:]; len(data) > 0 {
		snap.Data = data
	}
	return snap, flags&snapshotFlagApplied != 0, nil
}

// writeSnapshotFile writes snap to its own file and makes it durable (file
// fsync, then directory fsync) before anything may depend on it. The Disk has
// no rename, so a crash mid-write leaves a torn file that recovery skips.
func (l *Log) writeSnapshotFile(snap *raftpb.Snapshot, applied bool) (string, error) {
	rec, err := encodeSnapshot(snap, applied)
	if err != nil {
		return "", err
	}
	name := snapshotName(snap.GetMetadata().GetIndex())
	f, err := l.disk.Open(l.path(name))
	if err != nil {
		return "", fmt.Errorf("raftlog: create %s: %w", name, err)
	}
	defer f.Close()
	if err := f.Truncate(0); err != nil {
		return "", fmt.Errorf("raftlog: truncate %s: %w", name, err)
	}
	if n, err := f.WriteAt(rec, 0); err != nil || n != len(rec) {
		return "", writeError(name, 0, err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("raftlog: sync %s: %w", name, err)
	}
	l.dirDirty = true
	return name, l.syncDir()
}

// installSnapshot makes snap the log's durable snapshot and removes the
// previous snapshot file (durable at the next directory sync; a stale one
// coming back is older and ignored).
func (l *Log) installSnapshot(snap *raftpb.Snapshot, applied bool) error {
	name, err := l.writeSnapshotFile(snap, applied)
	if err != nil {
		return err
	}
	return l.replaceSnapshot(snap, name)
}

// replaceSnapshot makes snap, durable in file name, the log's snapshot and
// removes the previous snapshot's file.
func (l *Log) replaceSnapshot(snap *raftpb.Snapshot, name string) error {
	if l.snapshotName != "" && l.snapshotName != name {
		if err := l.disk.Remove(l.path(l.snapshotName)); err != nil {
			return fmt.Errorf("raftlog: remove %s: %w", l.snapshotName, err)
		}
		l.dirDirty = true
	}
	l.snapshot, l.snapshotName = snap, name
	return nil
}

// CreateSnapshot records snapshot state data as of index (at most the last
// applied index, with its configuration; a nil confState keeps the previous
// one) and then deletes the whole segments that hold only entries at or
// below index. Entries above index are kept. The snapshot is durable when
// CreateSnapshot returns; the segment removals become durable at the next
// Sync (a removed segment that comes back after a crash is ignored). It
// syncs the log first (cheap when nothing is unsynced).
// Deleting a segment is one Remove, whatever its size.
func (l *Log) CreateSnapshot(index uint64, confState *raftpb.ConfState, data []byte) error {
	if err := l.writable(); err != nil {
		return err
	}
	if index < l.firstIndex {
		return raft.ErrSnapOutOfDate
	}
	if index > l.lastIndex {
		panic(fmt.Sprintf("raftlog: snapshot at %d beyond last index %d", index, l.lastIndex))
	}
	// Sync first: the log must continue the snapshot after any crash, so
	// the entries up to index may not be lost once it exists.
	if err := l.Sync(); err != nil {
		return err
	}
	if err := l.installSnapshot(l.localSnapshot(index, confState, data), false); err != nil {
		return l.fail(err)
	}
	if err := l.compact(index); err != nil {
		return l.fail(err)
	}
	return nil
}

// localSnapshot is the snapshot CreateSnapshot records.
func (l *Log) localSnapshot(index uint64, confState *raftpb.ConfState, data []byte) *raftpb.Snapshot {
	if confState == nil {
		confState = l.snapshot.GetMetadata().GetConfState()
	}
	return &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{
		ConfState: raftpb.EnsureConfState(proto.Clone(confState).(*raftpb.ConfState)),
		Index:     new(index),
		Term:      new(l.termAt(index)),
	}}
}

// StartCreateSnapshot is CreateSnapshot in two steps, for a caller whose
// fsyncs run off its thread: it returns run, which writes the snapshot's
// file and makes it durable (file fsync, directory fsync) on any
// goroutine, touching nothing else; FinishCreateSnapshot(run's error) then
// makes it the log's snapshot and compacts, as CreateSnapshot. Writes may
// go on meanwhile (not ApplySnapshot: it panics until the finish). Unlike
// CreateSnapshot it does not sync the log first: the caller guarantees the
// entries up to index are durable (raft applies only entries stable
// locally, and a compaction stays at or below the applied index).
func (l *Log) StartCreateSnapshot(index uint64, confState *raftpb.ConfState, data []byte) (run func() error, err error) {
	if err := l.writable(); err != nil {
		return nil, err
	}
	if l.creating != nil {
		panic("raftlog: StartCreateSnapshot while a snapshot is being created")
	}
	if index < l.firstIndex {
		return nil, raft.ErrSnapOutOfDate
	}
	if index > l.lastIndex {
		panic(fmt.Sprintf("raftlog: snapshot at %d beyond last index %d", index, l.lastIndex))
	}
	snap := l.localSnapshot(index, confState, data)
	rec, err := encodeSnapshot(snap, false)
	if err != nil {
		return nil, err
	}
	l.creating = snap
	disk, dir, name := l.disk, l.dir, snapshotName(index)
	return func() error {
		if err := writeSyncedFile(disk, dir, name, rec); err != nil {
			return err
		}
		if err := disk.SyncDir(dir); err != nil {
			return fmt.Errorf("raftlog: sync dir %s: %w", dir, err)
		}
		return nil
	}, nil
}

// FinishCreateSnapshot ends StartCreateSnapshot with its job's result: a
// failure fails the log; a snapshot that a compaction meanwhile made out
// of date (raft.ErrSnapOutOfDate) is removed; otherwise it becomes the
// log's snapshot, the previous one is removed and the log compacts.
func (l *Log) FinishCreateSnapshot(err error) error {
	snap := l.creating
	if snap == nil {
		panic("raftlog: FinishCreateSnapshot without StartCreateSnapshot")
	}
	l.creating = nil
	if err != nil {
		return l.fail(err)
	}
	if err := l.writable(); err != nil {
		return err
	}
	index := snap.GetMetadata().GetIndex()
	name := snapshotName(index)
	if index < l.firstIndex {
		if err := l.disk.Remove(l.path(name)); err != nil {
			return l.fail(fmt.Errorf("raftlog: remove %s: %w", name, err))
		}
		l.dirDirty = true
		return raft.ErrSnapOutOfDate
	}
	if err := l.replaceSnapshot(snap, name); err != nil {
		return l.fail(err)
	}
	if err := l.compact(index); err != nil {
		return l.fail(err)
	}
	return nil
}

// writeSyncedFile writes data as the file name of dir and syncs it.
func writeSyncedFile(disk Disk, dir, name string, data []byte) error {
	f, err := disk.Open(dir + "/" + name)
	if err != nil {
		return fmt.Errorf("raftlog: create %s: %w", name, err)
	}
	defer f.Close()
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("raftlog: truncate %s: %w", name, err)
	}
	if n, err := f.WriteAt(data, 0); err != nil || n != len(data) {
		return writeError(name, 0, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("raftlog: sync %s: %w", name, err)
	}
	return nil
}

// compact forgets entries up to index and retires the segments (never the
// active one) that hold nothing above it: each is renamed to
// "<name>.del", which recovery removes, and its unlink is left to
// TakeTrash's job (unlinking a 64 MiB segment takes 17-28 ms here, which
// the node's loop would wait for; a rename does not free blocks).
func (l *Log) compact(index uint64) error {
	drop := 0
	for drop < len(l.segments)-1 && l.segments[drop].lastIndex() <= index {
		s := l.segments[drop]
		s.file.Close()
		trash := s.name + trashSuffix
		if err := l.disk.Rename(l.path(s.name), l.path(trash)); err != nil {
			return fmt.Errorf("raftlog: retire %s: %w", s.name, err)
		}
		l.trash = append(l.trash, l.path(trash))
		l.dirDirty = true
		drop++
	}
	l.segments = append([]*segment(nil), l.segments[drop:]...)
	l.dropTailBelow(index)
	term := l.termAt(index)
	k := len(l.terms) - 1
	for l.terms[k].first > index {
		k--
	}
	l.terms = append([]termRun{{first: index, term: term}}, l.terms[k+1:]...)
	l.firstIndex = index + 1
	return nil
}

// ApplySnapshot replaces the log with snapshot received from the leader:
// every entry is discarded and the log restarts after the snapshot's index.
// It is durable when it returns, in this order: the snapshot file (synced,
// directory synced); the hard state in the side file; every old segment
// retired (renamed to <name>.del, as a compaction retires one) and the
// directory synced; then a new empty segment holding the hard state,
// synced. A crash before the renames are durable leaves old segments that
// do not continue the snapshot: recovery discards them, as it removes the
// .del files. The unlinks are TakeTrash's job, off the caller's loop.
func (l *Log) ApplySnapshot(snapshot *raftpb.Snapshot) error {
	if err := l.writable(); err != nil {
		return err
	}
	if l.creating != nil {
		panic("raftlog: ApplySnapshot while a snapshot is being created")
	}
	snap := raftpb.EnsureSnapshot(proto.Clone(snapshot).(*raftpb.Snapshot))
	index, term := snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()
	if current := l.firstIndex - 1; current != 0 && current >= index {
		return raft.ErrSnapOutOfDate
	}
	if err := l.installSnapshot(snap, true); err != nil {
		return l.fail(err)
	}
	if l.hasHard {
		if err := l.writeSideHardState(); err != nil {
			return l.fail(err)
		}
	}
	clear(l.pending) // writes to the segments retired now: the snapshot replaces them
	l.pending = l.pending[:0]
	for _, s := range l.segments {
		s.file.Close()
		trash := s.name + trashSuffix
		if err := l.disk.Rename(l.path(s.name), l.path(trash)); err != nil {
			return l.fail(fmt.Errorf("raftlog: retire %s: %w", s.name, err))
		}
		l.trash = append(l.trash, l.path(trash))
		l.dirDirty = true
	}
	l.segments = nil
	l.rollPending = false
	if err := l.syncDir(); err != nil {
		return err
	}
	clear(l.tail)
	l.tail, l.tailBytes = nil, 0
	l.firstIndex, l.lastIndex, l.written = index+1, index, index
	l.terms = []termRun{{first: index, term: term}}
	if _, err := l.createSegment(index+1, term); err != nil {
		return l.fail(err)
	}
	return l.Sync()
}

// writeSideHardState writes the current hard state to the next slot of the
// side file and syncs it. The side file is written only before an operation
// that may cut the records holding the newest hard state (truncation,
// ApplySnapshot); two slots alternate, so a torn write never loses the
// previous copy. Recovery takes the newest hard state found anywhere.
func (l *Log) writeSideHardState() error {
	if l.side == nil {
		f, err := l.disk.Open(l.path(sideFileName))
		if err != nil {
			return fmt.Errorf("raftlog: open %s: %w", sideFileName, err)
		}
		l.side = f
	}
	var rec [frameHeaderBytes + hardStateBodyBytes]byte
	if n, err := l.side.WriteAt(appendHardStateRecord(rec[:0], l.hard), l.sideSlot*sideSlotBytes); err != nil || n != len(rec) {
		return writeError(sideFileName, l.sideSlot*sideSlotBytes, err)
	}
	if err := l.side.Sync(); err != nil {
		return fmt.Errorf("raftlog: sync %s: %w", sideFileName, err)
	}
	l.sideSlot ^= 1
	if !l.sideDurable {
		l.dirDirty = true
		if err := l.syncDir(); err != nil {
			return err
		}
		l.sideDurable = true
	}
	return nil
}

// trashSuffix ends the name of a segment compaction retired: not a segment
// any more, removed by TakeTrash's job or by the next recovery.
const trashSuffix = ".del"

// TakeTrash returns the job that unlinks the segments compactions and
// ApplySnapshot retired
// since the last call (nil when none), to run on any goroutine: it touches
// only those files. Nothing waits for
// it, and a crash before it ran leaves files recovery removes; an error
// (the same name retired twice before a job ran) leaves a file the next
// recovery removes, so the caller may log it and go on.
func (l *Log) TakeTrash() (run func() error) {
	if len(l.trash) == 0 {
		return nil
	}
	paths, disk := l.trash, l.disk
	l.trash = nil
	return func() error {
		for _, p := range paths {
			if err := disk.Remove(p); err != nil {
				return fmt.Errorf("raftlog: remove %s: %w", p, err)
			}
		}
		return nil
	}
}
