// Package wal is a node-wide write-ahead log shared by every raft log of a
// node: each round the node writes every group's appends to the group's own
// raftlog segments without an fsync and the same appends here, then makes
// them all durable with one fsync of this log. The partition logs are
// fsynced lazily, before this log's old segments are removed.
//
// Files, in one directory: `<sequence, 20 digits>.wal` segments, each
// starting with a header record naming its sequence. Records are framed as
// raftlog's: length u32 | crc u32 (CRC32C of the length, then of the type
// and body) | type u8 | body. Only the last segment can hold unsynced bytes:
// a segment is synced before the next one is created. Only through
// raftlog.Disk.
package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/strandlog/strand/raftlog"
	"go.etcd.io/raft/v3/raftpb"
)

const (
	frameHeaderBytes = 9 // length, crc, type

	recordHeader byte = 1 // first record of a segment: version u8, sequence u64
	recordWrite  byte = 2 // one log's write: see Record

	headerBodyBytes = 9
	formatVersion   = 1

	flagReset byte = 1 << 0
	flagHard  byte = 1 << 1

	// recordBytesMax bounds a record's length field, so a damaged length
	// never makes recovery allocate absurd amounts.
	recordBytesMax = 1 << 30
	// dirBytesMax bounds a log directory name.
	dirBytesMax = 1 << 12

	suffix = ".wal"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt reports damage inside data this log synced: a record that fails
// its checksum or framing with a valid record after it, damage in a segment
// that is not the last, or segments that do not follow each other.
var ErrCorrupt = errors.New("wal: corrupt data")

// Record is one write to the raft log in directory Dir, in the order the
// node made it: with Reset, everything written earlier for Dir is void (the
// log was removed, replaced by a snapshot or rebuilt); then Entries
// (appended, replacing a conflicting suffix, as raftlog.Log.Save) and Hard
// (nil: unchanged). PrevTerm is the term the log held at the index before
// the first entry when the write was made (Prepare fills it in): replay
// skips entries that no longer attach to the log it recovers.
type Record struct {
	Dir      string
	Reset    bool
	PrevTerm uint64
	Entries  []*raftpb.Entry
	Hard     *raftpb.HardState
}

// Prepare returns the record of writing entries and hs to l, to be
// appended before l.Save(entries, hs).
func Prepare(l *raftlog.Log, entries []*raftpb.Entry, hs *raftpb.HardState) Record {
	r := Record{Dir: l.Dir(), Entries: entries, Hard: hs}
	if len(entries) > 0 {
		if t, err := l.Term(entries[0].GetIndex() - 1); err == nil {
			r.PrevTerm = t
		}
	}
	return r
}

// segment is one file of the log.
type segment struct {
	seq  uint64
	name string
}

// WAL is an open write-ahead log. It is not safe for concurrent use, except
// that the function StartSync returns may run on any goroutine while the
// WAL is used (it touches only the file and the Disk).
type WAL struct {
	disk raftlog.Disk
	dir  string
	segs []segment
	file raftlog.File // the last segment's
	size int64        // the last segment's size
	// bytes is the size of every segment: the caller flushes the partition
	// logs and calls Rotate past a threshold.
	bytes int64
	// dirty: written since the last sync; dirDirty: a segment was created
	// or removed since the last directory sync.
	dirty, dirDirty bool
	syncing         bool
	failed          error
	buf             []byte
	cache           *Cache // OpenCached's, nil otherwise
}

// Dir returns the directory of the log.
func (w *WAL) Dir() string { return w.dir }

// Bytes returns the size of all segments, synced or not.
func (w *WAL) Bytes() int64 { return w.bytes }

// Segments returns how many segment files the log has.
func (w *WAL) Segments() int { return len(w.segs) }

// Dirty reports whether bytes were written since the last sync began.
func (w *WAL) Dirty() bool { return w.dirty || w.dirDirty }

func segmentName(seq uint64) string { return fmt.Sprintf("%020d%s", seq, suffix) }

func (w *WAL) path(name string) string { return path.Join(w.dir, name) }

// Append writes recs after the log with one WriteAt, without an fsync.
// Nothing in them is durable before a sync started after it completes. An
// error wrapping raftlog.ErrNoSpace leaves the WAL usable (nothing of recs
// counts as written); any other fails it for good.
func (w *WAL) Append(recs ...Record) error {
	if w.failed != nil {
		return w.failed
	}
	buf := w.buf[:0]
	for i := range recs {
		buf = appendRecord(buf, &recs[i])
	}
	if len(buf) == 0 {
		return nil
	}
	if n, err := w.file.WriteAt(buf, w.size); err != nil || n != len(buf) {
		if err == nil {
			err = io.ErrShortWrite
		}
		err = fmt.Errorf("wal: write %s at %d: %w", w.segs[len(w.segs)-1].name, w.size, err)
		if errors.Is(err, raftlog.ErrNoSpace) {
			// Not failed: the next append overwrites what part of
			// this one reached the file, and a crash cuts it as a
			// torn tail.
			return err
		}
		return w.fail(err)
	}
	w.size += int64(len(buf))
	w.bytes += int64(len(buf))
	w.dirty = true
	if cap(buf) <= 16<<20 {
		w.buf = buf[:0]
	}
	return nil
}

// fail makes err the WAL's permanent error (after a failed write or fsync
// the node fail-stops: fsyncgate).
func (w *WAL) fail(err error) error {
	if w.failed == nil {
		w.failed = err
	}
	return err
}

// Sync makes everything appended so far durable. It may run while a sync
// StartSync began is in flight (both fsync the same file). An error leaves
// the WAL failed.
func (w *WAL) Sync() error {
	if w.failed != nil {
		return w.failed
	}
	if !w.dirty && !w.dirDirty {
		return nil
	}
	return w.finish(w.syncRun()())
}

// StartSync begins a sync of everything appended so far and returns run,
// which performs its fsyncs on any goroutine; its result goes to
// FinishSync. Appends may continue meanwhile (the next sync covers them).
// One sync may be started at a time.
func (w *WAL) StartSync() (run func() error) {
	if w.syncing {
		panic("wal: StartSync while a sync is unfinished")
	}
	if w.failed != nil {
		err := w.failed
		return func() error { return err }
	}
	w.syncing = true
	return w.syncRun()
}

// syncRun clears the dirty marks and returns the fsyncs they call for.
func (w *WAL) syncRun() func() error {
	f, name, dirty := w.file, w.segs[len(w.segs)-1].name, w.dirty
	syncDir, disk, dir := w.dirDirty, w.disk, w.dir
	w.dirty, w.dirDirty = false, false
	return func() error {
		if dirty {
			if err := f.Sync(); err != nil {
				return fmt.Errorf("wal: sync %s: %w", name, err)
			}
		}
		if syncDir {
			if err := disk.SyncDir(dir); err != nil {
				return fmt.Errorf("wal: sync dir %s: %w", dir, err)
			}
		}
		return nil
	}
}

// FinishSync ends the sync StartSync began with run's result: nil makes
// every Append before StartSync durable; an error fails the WAL.
func (w *WAL) FinishSync(err error) error {
	if !w.syncing {
		panic("wal: FinishSync without StartSync")
	}
	w.syncing = false
	return w.finish(err)
}

func (w *WAL) finish(err error) error {
	if err != nil {
		return w.fail(err)
	}
	return nil
}

// Rotate is Roll then RemoveOld: for a caller that synced every log first.
func (w *WAL) Rotate() error {
	if err := w.Roll(); err != nil {
		return err
	}
	return w.RemoveOld()
}

// Roll makes the log durable and starts a new segment; the older ones stay
// until RemoveOld. The caller then makes every write the older segments
// hold durable in its logs (it wrote them before Roll) and calls
// RemoveOld. No sync may be in flight.
func (w *WAL) Roll() error {
	if w.syncing {
		panic("wal: Roll while a sync is in flight")
	}
	if w.failed != nil {
		return w.failed
	}
	if err := w.Sync(); err != nil {
		return err
	}
	if err := w.create(w.segs[len(w.segs)-1].seq + 1); err != nil {
		return w.fail(err)
	}
	return w.Sync()
}

// RemoveOld removes every segment but the last: nothing in them is needed
// once the caller's logs hold their writes durably.
func (w *WAL) RemoveOld() error {
	if w.failed != nil {
		return w.failed
	}
	return w.finish(w.StartRemoveOld()())
}

// StartRemoveOld forgets every segment but the last and returns run, which
// removes their files oldest first and syncs the directory, on any
// goroutine while appends and syncs of the last segment go on (unlinking
// a 64 MiB segment took ~100 ms on the node's loop). Until run returns, a
// crash may leave some of them: recovery replays them, which is harmless
// (their writes are durable in the logs, and replay folds every record of
// a log into the tail the newest describe). Remove the old segments of one
// Roll before the next Roll, so the files left always follow each other.
// An error from run is the caller's to treat as fatal.
func (w *WAL) StartRemoveOld() (run func() error) {
	if w.failed != nil {
		err := w.failed
		return func() error { return err }
	}
	old := slices.Clone(w.segs[:len(w.segs)-1])
	w.segs = w.segs[len(old):]
	w.bytes = w.size
	disk, dir := w.disk, w.dir
	paths := make([]string, len(old))
	for i, s := range old {
		paths[i] = w.path(s.name)
	}
	return func() error {
		if len(paths) == 0 {
			return nil
		}
		for _, p := range paths {
			if err := disk.Remove(p); err != nil {
				return fmt.Errorf("wal: remove %s: %w", p, err)
			}
		}
		if err := disk.SyncDir(dir); err != nil {
			return fmt.Errorf("wal: sync dir %s: %w", dir, err)
		}
		return nil
	}
}

// create starts segment seq as the active one, with its header record (not
// synced).
func (w *WAL) create(seq uint64) error {
	name := segmentName(seq)
	f, err := w.disk.Open(w.path(name))
	if err != nil {
		return fmt.Errorf("wal: create %s: %w", name, err)
	}
	if size, err := f.Size(); err != nil || size != 0 {
		f.Close()
		return fmt.Errorf("wal: create %s: exists with %d bytes (%v)", name, size, err)
	}
	if w.file != nil {
		w.file.Close()
	}
	w.file, w.size = f, 0
	w.segs = append(w.segs, segment{seq: seq, name: name})
	w.dirDirty = true
	hdr := appendFrame(nil, recordHeader, headerBody(seq))
	if _, err := f.WriteAt(hdr, 0); err != nil {
		return fmt.Errorf("wal: write %s: %w", name, err)
	}
	w.size = int64(len(hdr))
	w.bytes += w.size
	w.dirty = true
	return nil
}

// Close closes the active file. It does not sync.
func (w *WAL) Close() error {
	if w.file == nil {
		return nil
	}
	err := w.file.Close()
	w.file = nil
	if w.failed == nil {
		w.failed = errors.New("wal: closed")
	}
	return err
}

// parseName returns the sequence of a segment file name.
func parseName(name string) (uint64, bool) {
	s, ok := strings.CutSuffix(name, suffix)
	if !ok || len(s) != 20 {
		return 0, false
	}
	seq, err := strconv.ParseUint(s, 10, 64)
	return seq, err == nil && seq > 0
}

func headerBody(seq uint64) []byte {
	b := make([]byte, headerBodyBytes)
	b[0] = formatVersion
	binary.LittleEndian.PutUint64(b[1:], seq)
	return b
}
