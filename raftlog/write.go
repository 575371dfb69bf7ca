package raftlog

import (
	"errors"
	"fmt"
	"io"

	"go.etcd.io/raft/v3/raftpb"
)

// Append writes entries after the log, first truncating any existing suffix
// that starts at entries[0].Index (a conflicting suffix raft replaced).
// Entries below FirstIndex are skipped, as raft.MemoryStorage does. Each
// segment touched gets one WriteAt. Log keeps references to entries (in its
// tail cache): as raft promises, they must not be mutated afterwards.
//
// Truncation is made durable before Append returns (hard state saved to the
// side file, later segments removed and the directory synced, the cut
// segment truncated and synced), so bytes of the replaced suffix can never
// come back after a crash behind entries written later. It costs up to three
// fsyncs (four when unsynced writes precede it) and happens only when a new
// leader overwrites a follower's tail.
func (l *Log) Append(entries []*raftpb.Entry) error {
	if _, _, err := l.appendWith(entries, nil, false); err != nil {
		return err
	}
	return l.writePending()
}

// Save is Append(entries) then SetHardState(state) (state nil: none), with
// the hard state record written in the same WriteAt as the entries when
// there are any: one write system call per Ready instead of two. The bytes
// on disk are the same.
func (l *Log) Save(entries []*raftpb.Entry, state *raftpb.HardState) error {
	var h *hardState
	if state != nil {
		h = &hardState{term: state.GetTerm(), vote: state.GetVote(), commit: state.GetCommit()}
	}
	wrote, _, err := l.appendWith(entries, h, false)
	if err != nil {
		return err
	}
	if !wrote && state != nil {
		if err := l.setHardState(state); err != nil {
			return err
		}
	}
	return l.writePending()
}

// SaveSome is Save, except that it issues no write and stops at a segment
// roll. It encodes the entries the active segment takes (and seals it when
// it would roll) as pending writes, which the next StartSync's job issues
// before its fsyncs (or the next Sync, Save or other synchronous write
// does), and returns how many of entries it took (all: it took the hard
// state too). Until their write completes the entries are served from
// memory (the tail cache keeps every entry not yet on file, whatever its
// bound). The sealed segment must be durable before the next one is
// created, so the next write creates it, fsyncing the sealed segment first
// unless a Sync, or a StartSync's job whose FinishSync came back, covered
// it. A caller that syncs through StartSync's jobs off its thread
// therefore never waits for a roll's fsync, nor for a write: it syncs
// after SaveSome returned fewer than all, then saves the rest (and the
// hard state). A truncation (a new leader overwriting this log's tail)
// still writes and syncs in SaveSome.
func (l *Log) SaveSome(entries []*raftpb.Entry, state *raftpb.HardState) (int, error) {
	var h *hardState
	if state != nil {
		h = &hardState{term: state.GetTerm(), vote: state.GetVote(), commit: state.GetCommit()}
	}
	wrote, n, err := l.appendWith(entries, h, true)
	if err != nil || wrote || n < len(entries) || state == nil {
		return n, err
	}
	return n, l.setHardState(state)
}

// appendWith is Append, also writing hard state h (when not nil) right
// after the entries; it reports whether h was written and how many of
// entries were (or were below the first index). With stopAtRoll it stops
// at a segment roll (SaveSome).
func (l *Log) appendWith(entries []*raftpb.Entry, h *hardState, stopAtRoll bool) (bool, int, error) {
	l.checkNotSyncing()
	if err := l.writable(); err != nil {
		return false, 0, err
	}
	if len(entries) == 0 {
		return false, 0, nil
	}
	first := entries[0].GetIndex()
	if first+uint64(len(entries))-1 < l.firstIndex {
		return false, len(entries), nil
	}
	skipped := 0
	if first < l.firstIndex {
		skipped = int(l.firstIndex - first)
		entries = entries[skipped:]
		first = l.firstIndex
	}
	if first > l.lastIndex+1 {
		panic(fmt.Sprintf("raftlog: append at %d leaves a gap after last index %d", first, l.lastIndex))
	}
	l.checkBatch(entries, first)
	if first <= l.lastIndex {
		if err := l.truncateFrom(first); err != nil {
			return false, 0, l.fail(err)
		}
	}
	n, err := l.write(entries, h, stopAtRoll)
	if err != nil {
		return false, 0, l.fail(err)
	}
	l.cacheTail(entries[:n])
	return h != nil && n == len(entries), skipped + n, nil
}

// checkBatch panics unless entries are consecutive from first with terms
// that never go down, starting at or above the term of entry first-1.
func (l *Log) checkBatch(entries []*raftpb.Entry, first uint64) {
	prevTerm := l.termAt(first - 1)
	for j, e := range entries {
		if e.GetIndex() != first+uint64(j) {
			panic(fmt.Sprintf("raftlog: append of entry %d at position of %d", e.GetIndex(), first+uint64(j)))
		}
		if e.GetTerm() < prevTerm {
			panic(fmt.Sprintf("raftlog: entry %d has term %d below %d", e.GetIndex(), e.GetTerm(), prevTerm))
		}
		if t := e.GetType(); t < 0 || t > 255 {
			panic(fmt.Sprintf("raftlog: entry %d has type %d", e.GetIndex(), t))
		}
		prevTerm = e.GetTerm()
	}
}

// write encodes entries after the last one, rolling segments on the way,
// then hard state h when not nil, with one WriteAt per segment. With
// stopAtRoll it seals the active segment where it would roll and returns
// how many entries it wrote (h is then not written).
func (l *Log) write(entries []*raftpb.Entry, h *hardState, stopAtRoll bool) (int, error) {
	s, err := l.activeSegment()
	if err != nil {
		return 0, err
	}
	buf := l.takePending(s)
	for i, e := range entries {
		recordBytes := int64(frameHeaderBytes + entryHeaderBytes + len(e.GetData()))
		if s.lastIndex() >= s.base && s.size+int64(len(buf))+recordBytes > l.segmentBytesMax {
			if stopAtRoll {
				l.rollPending = true
				return i, l.seal(s, buf)
			}
			next, err := l.roll(buf)
			if err != nil {
				return 0, err
			}
			s, buf = next, l.takePending(next)
		}
		s.push(s.size+int64(len(buf)), uint32(recordBytes))
		eh := entryHeader{term: e.GetTerm(), index: e.GetIndex(), entryType: byte(e.GetType())}
		buf = appendEntryRecord(buf, eh, e.GetData())
		l.lastIndex = eh.index
		l.pushTerm(eh.index, eh.term)
	}
	if h != nil {
		l.hard, l.hasHard = *h, true
		buf = appendHardStateRecord(buf, *h)
	}
	l.deferWrite(s, buf, true)
	return len(entries), nil
}

// activeSegment returns the segment writes go to: after a SaveSome that
// sealed the last one, the next segment, created now (finishRoll).
func (l *Log) activeSegment() (*segment, error) {
	if l.rollPending {
		return l.finishRoll()
	}
	return l.segments[len(l.segments)-1], nil
}

// finishRoll ends the roll SaveSome began: it syncs the sealed segment
// unless a sync covered it already (the fsync SaveSome's caller moved off
// its thread), then creates the next segment.
func (l *Log) finishRoll() (*segment, error) {
	s := l.segments[len(l.segments)-1]
	if err := l.syncSealed(s); err != nil {
		return nil, err
	}
	l.rollPending = false
	return l.createSegment(l.lastIndex+1, l.termAt(l.lastIndex))
}

// syncSealed syncs sealed segment s when it holds unsynced writes.
func (l *Log) syncSealed(s *segment) error {
	if !s.dirty {
		return nil
	}
	if err := l.writePending(); err != nil {
		return err
	}
	if err := l.runBeforeSync(); err != nil {
		return err
	}
	if err := s.file.Sync(); err != nil {
		return fmt.Errorf("raftlog: sync %s: %w", s.name, err)
	}
	s.dirty = false
	return nil
}

// pendingWrite is bytes of segment seg at offset off that no WriteAt has
// issued yet (SaveSome's: StartSync's job issues them).
type pendingWrite struct {
	seg *segment
	off int64
	buf []byte
}

// writeAt appends a copy of buf to segment s, as a pending write.
func (l *Log) writeAt(s *segment, buf []byte) {
	l.deferWrite(s, buf, false)
}

// deferWrite appends buf to segment s as a pending write, extending the
// last one when it ends where buf goes; owned says the Log may keep buf
// itself (no other reference to it remains), else it is copied.
func (l *Log) deferWrite(s *segment, buf []byte, owned bool) {
	if len(buf) == 0 {
		return
	}
	if n := len(l.pending); n > 0 && l.pending[n-1].seg == s && l.pending[n-1].off+int64(len(l.pending[n-1].buf)) == s.size {
		l.pending[n-1].buf = append(l.pending[n-1].buf, buf...)
	} else {
		if !owned {
			buf = append(l.spareBuf(), buf...)
		}
		l.pending = append(l.pending, pendingWrite{seg: s, off: s.size, buf: buf})
	}
	s.size += int64(len(buf))
	s.dirty = true
}

// takePending returns the buffer the next bytes of segment s go to, for
// deferWrite(s, buf, true): the pending write ending s, taken back (s.size
// goes back to its offset), so that a write extends it in place, else a
// spare buffer.
func (l *Log) takePending(s *segment) []byte {
	if n := len(l.pending); n > 0 {
		if p := l.pending[n-1]; p.seg == s && p.off+int64(len(p.buf)) == s.size {
			l.pending = l.pending[:n-1]
			s.size = p.off
			return p.buf
		}
	}
	return l.spareBuf()
}

// spareBuf returns the write buffer kept for reuse (empty), if any.
func (l *Log) spareBuf() []byte {
	b := l.writeBuf[:0]
	l.writeBuf = nil
	return b
}

// keepBuf keeps the buffer of a write that completed for reuse, when it is
// not too large.
func (l *Log) keepBuf(b []byte) {
	if cap(b) <= writeBufferBytesKept && cap(b) > cap(l.writeBuf) {
		l.writeBuf = b[:0]
	}
}

// writePending issues the pending writes now, in order, on the caller's
// goroutine: every synchronous path that syncs, truncates or replaces
// files first calls it, so the bytes on file are always a prefix of the
// writes in the order the Log made them.
func (l *Log) writePending() error {
	for i, p := range l.pending {
		if n, err := p.seg.file.WriteAt(p.buf, p.off); err != nil || n != len(p.buf) {
			return l.fail(writeError(p.seg.name, p.off, err))
		}
		l.keepBuf(p.buf)
		l.pending[i] = pendingWrite{}
	}
	l.pending = l.pending[:0]
	l.written = l.lastIndex
	return nil
}

// pushTerm records that entry i, the new last entry, has term.
func (l *Log) pushTerm(i, term uint64) {
	if l.terms[len(l.terms)-1].term != term {
		l.terms = append(l.terms, termRun{first: i, term: term})
	}
}

// roll seals and syncs the active segment and starts the next one, so that
// every segment but the last is complete, sealed and durable: recovery may
// then read only its seal, and treat any damage in it as corruption.
// pending, bytes not yet written to the active segment, go with the seal
// in one write.
func (l *Log) roll(pending []byte) (*segment, error) {
	s := l.segments[len(l.segments)-1]
	if err := l.seal(s, pending); err != nil {
		return nil, err
	}
	if err := l.syncSealed(s); err != nil {
		return nil, err
	}
	return l.createSegment(l.lastIndex+1, l.termAt(l.lastIndex))
}

// createSegment creates segment base and writes its segment record and the
// current hard state (so the newest hard state survives when older
// segments are deleted). The file is not synced. The write is issued now,
// not left pending: a compaction may retire every older segment on the
// strength of this one (renames a kill keeps), so a kill must never leave
// it without its segment record, as it would if that were only in the
// Log's memory (found by the simulator, seed 2: "no segment continues
// snapshot" on every partition of a killed node).
func (l *Log) createSegment(base, prevTerm uint64) (*segment, error) {
	name := segmentName(base)
	f, err := l.disk.Open(l.path(name))
	if err != nil {
		return nil, fmt.Errorf("raftlog: create %s: %w", name, err)
	}
	if size, err := f.Size(); err != nil || size != 0 {
		f.Close()
		return nil, fmt.Errorf("raftlog: create %s: exists with %d bytes (%v)", name, size, err)
	}
	s := &segment{base: base, prevTerm: prevTerm, name: name, file: f, last: base - 1, sealEnd: -1, indexed: true}
	l.segments = append(l.segments, s)
	l.dirDirty = true
	var small [2*frameHeaderBytes + segmentBodyBytes + hardStateBodyBytes]byte
	buf := appendSegmentRecord(small[:0], segmentHeader{base: base, prevTerm: prevTerm})
	if l.hasHard {
		buf = appendHardStateRecord(buf, l.hard)
	}
	if n, err := f.WriteAt(buf, 0); err != nil || n != len(buf) {
		return nil, writeError(name, 0, err)
	}
	s.size, s.dirty = int64(len(buf)), true
	return s, nil
}

// SetHardState records raft's term, vote and commit index (written when it
// returns, durable after the next Sync).
func (l *Log) SetHardState(state *raftpb.HardState) error {
	if err := l.setHardState(state); err != nil {
		return err
	}
	return l.writePending()
}

// setHardState is SetHardState as a pending write.
func (l *Log) setHardState(state *raftpb.HardState) error {
	l.checkNotSyncing()
	if err := l.writable(); err != nil {
		return err
	}
	s, err := l.activeSegment()
	if err != nil {
		return l.fail(err)
	}
	l.hard = hardState{term: state.GetTerm(), vote: state.GetVote(), commit: state.GetCommit()}
	l.hasHard = true
	var rec [frameHeaderBytes + hardStateBodyBytes]byte
	l.writeAt(s, appendHardStateRecord(rec[:0], l.hard))
	return nil
}

// Sync makes every write so far durable. Raft must not be told that an entry
// or hard state is stable (Advance, or messages that depend on it) before the
// Sync covering it returned nil. It fsyncs only the segments written since
// their last sync (in practice the active one), then the directory when
// files were created or removed.
// On error the caller must fail-stop: never retry an fsync.
func (l *Log) Sync() error {
	l.checkNotSyncing()
	if err := l.writable(); err != nil {
		return err
	}
	if err := l.writePending(); err != nil {
		return err
	}
	if err := l.runBeforeSync(); err != nil {
		return l.fail(err)
	}
	for _, s := range l.segments { // oldest first: a crash mid-Sync never leaves an older segment behind a newer one
		if !s.dirty {
			continue
		}
		if err := s.file.Sync(); err != nil {
			return l.fail(fmt.Errorf("raftlog: sync %s: %w", s.name, err))
		}
		s.dirty = false
	}
	return l.syncDir()
}

// Dirty reports whether the log holds writes no sync has covered (or
// started to cover) yet.
func (l *Log) Dirty() bool {
	if l.dirDirty {
		return true
	}
	for _, s := range l.segments {
		if s.dirty {
			return true
		}
	}
	return false
}

// Flush returns run, which fsyncs the log's files written since their last
// Sync (and its directory when files came or went) through handles of its
// own, so it may run on any goroutine while the Log goes on being written,
// truncated or closed: it makes durable at least every write made before
// Flush. The Log's own marks stay (its next Sync fsyncs those files again):
// a node-wide write-ahead log uses it to retire its old segments without
// holding the log's writes (raftlog/wal). A failed Log, or a failure to
// open a handle, returns a run that reports the error.
func (l *Log) Flush() (run func() error) {
	if err := l.writable(); err != nil {
		return func() error { return err }
	}
	if err := l.writePending(); err != nil {
		return func() error { return err }
	}
	var files []File
	var names []string
	for _, s := range l.segments { // oldest first, as Sync
		if !s.dirty {
			continue
		}
		f, err := l.disk.Open(l.path(s.name))
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return func() error { return fmt.Errorf("raftlog: flush %s: %w", s.name, err) }
		}
		files, names = append(files, f), append(names, s.name)
	}
	syncDir, disk, dir := l.dirDirty, l.disk, l.dir
	return func() error {
		var first error
		for i, f := range files {
			if err := f.Sync(); err != nil && first == nil {
				first = fmt.Errorf("raftlog: flush %s: %w", names[i], err)
			}
			f.Close()
		}
		if syncDir && first == nil {
			if err := disk.SyncDir(dir); err != nil {
				first = fmt.Errorf("raftlog: flush dir %s: %w", dir, err)
			}
		}
		return first
	}
}

// runBeforeSync runs Options.BeforeSync, if any.
func (l *Log) runBeforeSync() error {
	if l.beforeSync == nil {
		return nil
	}
	if err := l.beforeSync(); err != nil {
		return fmt.Errorf("raftlog: %s: before sync: %w", l.dir, err)
	}
	return nil
}

// StartSync is the first half of a Sync whose writes and fsyncs run
// elsewhere (the node's pipelined loop hands them to a storage worker): it
// takes the pending writes (SaveSome's), the segments written since their
// last sync, and the directory when files were created or removed, and
// returns run, which issues those writes in order, then fsyncs. run
// touches only those files and the Disk, never the Log's state, so it may
// run on any goroutine while the Log is read (entries it writes are served
// from memory until FinishSync). Until FinishSync the Log must not be
// written or synced (a write panics): the caller passes run's result to
// FinishSync first. A failed write's error is one WriteFailed reports, so a
// caller can tell a write refused for space (the file then holds a prefix
// of the writes, as after a kill) from a failed fsync. A failed Log
// returns a run that reports its error.
func (l *Log) StartSync() (run func() error) {
	write, sync := l.StartSyncPhases()
	return func() error {
		if err := write(); err != nil {
			return err
		}
		return sync()
	}
}

// StartSyncPhases is StartSync with run in its two phases: write issues
// the pending writes in order, sync then fsyncs the files and the
// directory. run is write, then sync unless write failed; a caller that
// runs them as two steps (the simulator, so that a crash can land after
// the writes and before their fsync, where a process kill leaves them
// unsynced in the page cache) does the same, one after the other, and
// passes FinishSync the first error.
func (l *Log) StartSyncPhases() (write, sync func() error) {
	return l.startSync(true)
}

// startSync is StartSyncPhases; without fsync, sync does nothing (a
// planted bug's hook: StartWriteOnly in simbugs builds).
func (l *Log) startSync(fsync bool) (write, sync func() error) {
	if l.syncing {
		panic("raftlog: StartSync while a sync is unfinished")
	}
	if err := l.writable(); err != nil {
		fail := func() error { return err }
		return fail, fail
	}
	l.syncing = true
	writes := l.pending
	l.pending, l.inflight, l.inflightLast = nil, writes, l.lastIndex
	var files []File
	var names []string
	for _, s := range l.segments { // oldest first, as Sync
		if s.dirty {
			files, names = append(files, s.file), append(names, s.name)
			s.dirty = false
		}
	}
	syncDir, disk, dir := l.dirDirty, l.disk, l.dir
	l.dirDirty = false
	write = func() error {
		for _, p := range writes {
			if n, err := p.seg.file.WriteAt(p.buf, p.off); err != nil || n != len(p.buf) {
				return &writeFailure{err: writeError(p.seg.name, p.off, err)}
			}
		}
		return nil
	}
	sync = func() error {
		if !fsync {
			return nil
		}
		for i, f := range files {
			if err := f.Sync(); err != nil {
				return fmt.Errorf("raftlog: sync %s: %w", names[i], err)
			}
		}
		if syncDir {
			if err := disk.SyncDir(dir); err != nil {
				return fmt.Errorf("raftlog: sync dir %s: %w", dir, err)
			}
		}
		return nil
	}
	return write, sync
}

// writeFailure is the error of a StartSync job whose write failed.
type writeFailure struct{ err error }

func (e *writeFailure) Error() string { return e.err.Error() }
func (e *writeFailure) Unwrap() error { return e.err }

// WriteFailed reports whether err, a StartSync job's, came from one of its
// writes rather than from an fsync. A write refused for space (ErrNoSpace)
// leaves the files holding a prefix of the writes, as a kill would: the
// caller may reopen the log from its files. After a failed fsync it never
// may (fsyncgate).
func WriteFailed(err error) bool {
	var w *writeFailure
	return errors.As(err, &w)
}

// FinishSync ends the sync StartSync began with run's result err: nil makes
// every write before StartSync durable; an error leaves the Log failed (the
// caller must fail-stop, as after Sync, or after a write refused for space
// reopen the log).
func (l *Log) FinishSync(err error) error {
	if !l.syncing {
		panic("raftlog: FinishSync without StartSync")
	}
	l.syncing = false
	writes := l.inflight
	l.inflight = nil
	if err != nil {
		return l.fail(err)
	}
	for _, p := range writes {
		l.keepBuf(p.buf)
	}
	if l.pending == nil {
		clear(writes)
		l.pending = writes[:0]
	}
	l.written = max(l.written, min(l.inflightLast, l.lastIndex))
	l.evictTail()
	return nil
}

// syncDir makes pending creations and removals durable.
func (l *Log) syncDir() error {
	if !l.dirDirty {
		return nil
	}
	if err := l.disk.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("raftlog: sync dir %s: %w", l.dir, err))
	}
	l.dirDirty = false
	return nil
}

// truncateFrom durably removes entries i..lastIndex (firstIndex <= i <=
// lastIndex). Order matters: (0) the log is synced; (1) the hard state goes
// to the side file, since the records holding it may be cut; (2) later
// segments are removed and the directory synced; (3) the segment holding i
// is truncated, given a copy of the hard state, and synced. A crash anywhere
// in between leaves a prefix of the old log (at least up to i-1) with an
// intact hard state, never a gap that recovery could mistake for corruption.
func (l *Log) truncateFrom(i uint64) error {
	// The side file's hard state must not become durable before the entries
	// its commit index covers.
	if err := l.Sync(); err != nil {
		return err
	}
	if l.hasHard {
		if err := l.writeSideHardState(); err != nil {
			return err
		}
	}
	k := l.segmentOf(i)
	if err := l.indexSegment(l.segments[k]); err != nil {
		return err
	}
	for _, s := range l.segments[k+1:] {
		s.file.Close()
		if err := l.disk.Remove(l.path(s.name)); err != nil {
			return fmt.Errorf("raftlog: remove %s: %w", s.name, err)
		}
		l.dirDirty = true
	}
	clear(l.segments[k+1:])
	l.segments = l.segments[:k+1]
	if err := l.syncDir(); err != nil {
		return err
	}
	s := l.segments[k]
	j := i - s.base
	s.size = s.starts[j] // the seal goes too: s is the active segment again
	s.starts, s.sizes, s.last, s.sealEnd = s.starts[:j], s.sizes[:j], i-1, -1
	l.rollPending = false
	if err := s.file.Truncate(s.size); err != nil {
		return fmt.Errorf("raftlog: truncate %s: %w", s.name, err)
	}
	if l.hasHard { // a segment copy again, so the side file is only a stopgap
		var rec [frameHeaderBytes + hardStateBodyBytes]byte
		l.writeAt(s, appendHardStateRecord(rec[:0], l.hard))
		if err := l.writePending(); err != nil {
			return err
		}
	}
	if err := s.file.Sync(); err != nil {
		return fmt.Errorf("raftlog: sync %s: %w", s.name, err)
	}
	s.dirty = false
	l.cutTail(i)
	l.lastIndex = i - 1
	l.written = min(l.written, l.lastIndex)
	l.cutTerms(i)
	return nil
}

// cutTerms forgets the terms of entries at and above i.
func (l *Log) cutTerms(i uint64) {
	k := len(l.terms)
	for k > 1 && l.terms[k-1].first >= i {
		k--
	}
	l.terms = l.terms[:k]
}

// writeError describes a failed or short WriteAt.
func writeError(name string, off int64, err error) error {
	if err == nil {
		err = io.ErrShortWrite
	}
	return fmt.Errorf("raftlog: write %s at %d: %w", name, off, err)
}

// checkNotSyncing panics when a write or Sync comes between StartSync and
// FinishSync: the fsyncs in flight would not cover it.
func (l *Log) checkNotSyncing() {
	if l.syncing {
		panic("raftlog: write or sync while a StartSync is unfinished")
	}
}
