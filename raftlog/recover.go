package raftlog

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"go.etcd.io/raft/v3/raftpb"
)

// Open opens, or creates empty, the log in dir of disk, recovering from a
// crash by these rules.
//
// Files in the log's directory: "<20-digit base index>.log" segments,
// "<20-digit index>.snap" snapshots (one record each), and "hardstate", the
// hard-state side file (two 64-byte slots).
//
//  1. Snapshot: the snapshot files are tried newest first; the first whose
//     record is valid is the snapshot (index S, term T). Invalid or older
//     files are removed. With none valid, S = T = 0.
//  2. Segments are taken in base order. A segment before the last one that
//     ends with a valid seal (seal.go) is taken from its seal alone: base,
//     last index, term runs, hard state; its records are checked when first
//     read. Every other segment is scanned, records from offset 0, every
//     checksum verified. A segment starts with a segment record naming its
//     base; entries follow with consecutive indexes from the base and terms
//     that never go down; hard-state records may sit anywhere after the
//     segment record; a seal may only be the last record. A seal ending the
//     last segment (a roll cut short) is cut like a torn tail; when the last
//     file is dropped, the segment before it is scanned after all.
//  3. Damage = a record that fails framing or its checksum. In a segment that
//     is not the last one, damage fails Open with ErrCorrupt (file, offset):
//     segments are synced before the next one is created, so they hold only
//     synced data. In the last segment, damage at offset o is a torn tail
//     when no valid record can be found after o; the file is truncated to o.
//     When a valid record follows, the damage sits inside synced data:
//     ErrCorrupt. A last segment whose segment record itself is torn (and
//     nothing valid follows) was created but never synced: it is removed.
//     A record with a valid checksum but wrong contents (an index out of
//     sequence, a term going down, a segment record in the middle, a base
//     that differs from the name) is ErrCorrupt anywhere.
//  4. Segments other than the last whose entries are all at or below S are
//     leftovers of compaction and are removed.
//  5. The first remaining segment must continue the snapshot: it holds entry
//     S with term T, or its base is S+1 and its segment record gives T as
//     the term before it. If not: when the snapshot was applied from a
//     leader, the segments are leftovers of an interrupted ApplySnapshot
//     (raft applies a snapshot only when the log does not hold entry S with
//     term T) and are removed; otherwise ErrCorrupt (data is missing). No
//     segment at all after a locally created snapshot is ErrCorrupt too.
//  6. Each next segment must start right after the previous one's last
//     entry, and its segment record must carry the previous last entry's
//     term. Otherwise ErrCorrupt: truncation and compaction remove segment
//     files durably in an order that never leaves a gap.
//  7. The hard state is the newest (greatest term, then commit, then vote
//     set) of every valid hard-state record read (segments, discarded ones
//     included, and side-file slots): term, vote and commit only grow, so the
//     greatest is the last written. A damaged side-file slot is ignored (it
//     may be a torn write). Its commit is raised to S when below (a snapshot
//     is committed); a commit above the last index is ErrCorrupt.
//  8. Before Open returns, the last segment is fsynced and the directory
//     synced: after a process crash without power loss the recovered bytes
//     may still be unsynced in the page cache, and raft will treat every
//     recovered entry as stable. (The other segments were synced when the
//     next one was created; snapshot and side files when written.)
//
// Torn data can only be data that was never synced; whatever survives is a
// prefix of the writes (in the order issued) since the last Sync.
func Open(disk Disk, dir string, options Options) (*Log, error) {
	l := &Log{disk: disk, dir: dir, segmentBytesMax: options.SegmentBytesMax, tailCacheBytesMax: options.TailCacheBytesMax,
		beforeSync: options.BeforeSync}
	if l.segmentBytesMax <= 0 {
		l.segmentBytesMax = DefaultSegmentBytesMax
	}
	if l.tailCacheBytesMax == 0 {
		l.tailCacheBytesMax = DefaultTailCacheBytesMax
	}
	r := &recovery{log: l, plantedBugs: options.plantedBugs}
	if err := r.run(); err != nil {
		r.closeAll()
		return nil, err
	}
	l.written = l.lastIndex
	return l, nil
}

// recovery is the state of one Open.
type recovery struct {
	//lint:ignore U1000 empty without -tags simbugs
	plantedBugs
	log      *Log
	segments []namedBase
	snaps    []namedBase
	hasSide  bool
	applied  bool
	scans    []*scan
	obsolete []string // files to remove once the recovered state is durable
	opened   []File   // files to close on failure
}

type namedBase struct {
	name string
	base uint64
}

// scan is what scanning one segment found.
type scan struct {
	seg      *segment
	runs     []termRun
	lastTerm uint64 // term of the last entry, or prevTerm
	tornAt   int64  // offset of a torn tail, -1 when none
}

func (r *recovery) run() error {
	l := r.log
	if err := r.list(); err != nil {
		return err
	}
	if err := r.loadSnapshot(); err != nil {
		return err
	}
	if r.hasSide {
		if err := r.loadSide(); err != nil {
			return err
		}
	}
	if err := r.scanSegments(); err != nil {
		return err
	}
	if err := r.assemble(); err != nil {
		return err
	}
	if l.hasHard && l.hard.commit < l.firstIndex-1 {
		l.hard.commit = l.firstIndex - 1
	}
	if l.hasHard && l.hard.commit > l.lastIndex {
		return fmt.Errorf("%w: %s: hard state commit %d beyond last index %d", ErrCorrupt, l.dir, l.hard.commit, l.lastIndex)
	}
	return r.finish()
}

// list sorts the directory's files into segments, snapshots and the side file.
func (r *recovery) list() error {
	names, err := r.log.disk.List(r.log.dir)
	if err != nil {
		return fmt.Errorf("raftlog: list %s: %w", r.log.dir, err)
	}
	for _, name := range names {
		if base, ok := parseName(name, ".log"); ok {
			r.segments = append(r.segments, namedBase{name, base})
		} else if index, ok := parseName(name, ".snap"); ok {
			r.snaps = append(r.snaps, namedBase{name, index})
		} else if name == sideFileName {
			r.hasSide = true
		} else if _, ok := parseName(name, ".log"+trashSuffix); ok {
			r.obsolete = append(r.obsolete, name) // compaction retired it
		}
	}
	sort.Slice(r.segments, func(a, b int) bool { return r.segments[a].base < r.segments[b].base })
	sort.Slice(r.snaps, func(a, b int) bool { return r.snaps[a].base < r.snaps[b].base })
	return nil
}

// parseName parses a 20-digit number followed by suffix.
func parseName(name, suffix string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

// readAll reads the whole named file of the log's directory.
func (r *recovery) readAll(name string) (File, []byte, error) {
	f, err := r.log.disk.Open(r.log.path(name))
	if err != nil {
		return nil, nil, fmt.Errorf("raftlog: open %s: %w", name, err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("raftlog: size of %s: %w", name, err)
	}
	buf := make([]byte, size)
	if n, err := f.ReadAt(buf, 0); n != len(buf) {
		f.Close()
		return nil, nil, fmt.Errorf("raftlog: read %s: %w", name, err)
	}
	return f, buf, nil
}

// loadSnapshot picks the newest valid snapshot file (rule 1).
func (r *recovery) loadSnapshot() error {
	l := r.log
	l.snapshot = emptySnapshot()
	found := false
	for k := len(r.snaps) - 1; k >= 0; k-- {
		nb := r.snaps[k]
		if found {
			r.obsolete = append(r.obsolete, nb.name)
			continue
		}
		f, buf, err := r.readAll(nb.name)
		if err != nil {
			return err
		}
		f.Close()
		recordType, body, size, err := decodeRecord(buf)
		if err == nil && recordType == recordSnapshot && size == int64(len(buf)) {
			snap, applied, err := decodeSnapshotBody(body)
			if err == nil && snap.GetMetadata().GetIndex() == nb.base {
				l.snapshot, l.snapshotName, r.applied, found = snap, nb.name, applied, true
				continue
			}
		}
		r.obsolete = append(r.obsolete, nb.name)
	}
	index, term := l.snapshot.GetMetadata().GetIndex(), l.snapshot.GetMetadata().GetTerm()
	l.firstIndex, l.lastIndex = index+1, index
	l.terms = []termRun{{first: index, term: term}}
	return nil
}

// loadSide reads the side file's two hard-state slots (rule 7).
func (r *recovery) loadSide() error {
	l := r.log
	f, buf, err := r.readAll(sideFileName)
	if err != nil {
		return err
	}
	l.side, l.sideDurable = f, true
	var newest int64 = -1
	for slot := int64(0); slot < 2; slot++ {
		if int64(len(buf)) < slot*sideSlotBytes {
			break
		}
		recordType, body, _, err := decodeRecord(buf[slot*sideSlotBytes:])
		if err != nil || recordType != recordHardState {
			continue
		}
		if h := decodeHardStateBody(body); !l.hasHard || h.newer(l.hard) {
			l.hard, l.hasHard, newest = h, true, slot
		}
	}
	l.sideSlot = 0
	if newest == 0 {
		l.sideSlot = 1
	}
	return nil
}

// noteHard folds a hard-state record into the newest seen.
func (l *Log) noteHard(body []byte) { l.noteHardState(decodeHardStateBody(body)) }

// noteHardState folds h into the newest hard state seen.
func (l *Log) noteHardState(h hardState) {
	if !l.hasHard || h.newer(l.hard) {
		l.hard, l.hasHard = h, true
	}
}

// scanSegments takes in every segment: from its seal when it has a valid
// one and is not the last, else by a scan of the whole file.
func (r *recovery) scanSegments() error {
	for k, nb := range r.segments {
		last := k == len(r.segments)-1
		if !last {
			ok, err := r.takeSeal(nb)
			if err != nil {
				return err
			}
			if ok {
				continue
			}
		}
		if err := r.scanSegment(nb, last); err != nil {
			return err
		}
	}
	// The last file may have been dropped (created, never synced): the
	// segment before it is the active one and must be scanned after all.
	if n := len(r.scans); n > 0 && !r.scans[n-1].seg.indexed {
		sc := r.scans[n-1]
		r.scans = r.scans[:n-1]
		sc.seg.file.Close()
		sc.seg.file = nil
		return r.scanSegment(namedBase{sc.seg.name, sc.seg.base}, true)
	}
	return nil
}

// takeSeal takes in a segment from the seal at its end; ok false means it
// has none valid (older format or damage) and must be scanned.
func (r *recovery) takeSeal(nb namedBase) (ok bool, err error) {
	f, err := r.log.disk.Open(r.log.path(nb.name))
	if err != nil {
		return false, fmt.Errorf("raftlog: open %s: %w", nb.name, err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return false, fmt.Errorf("raftlog: size of %s: %w", nb.name, err)
	}
	sl, ok := readSeal(f, size, nb.base)
	if !ok {
		f.Close()
		return false, nil
	}
	r.opened = append(r.opened, f)
	s := &segment{base: sl.base, prevTerm: sl.prevTerm, name: nb.name, file: f, size: size, last: sl.last, sealEnd: sl.end}
	r.scans = append(r.scans, &scan{seg: s, runs: sl.runs, lastTerm: sl.lastTerm, tornAt: -1})
	if sl.hasHard {
		r.log.noteHardState(sl.hard)
	}
	return true, nil
}

// scanSegment reads and checks one segment (rules 2 and 3).
func (r *recovery) scanSegment(nb namedBase, last bool) error {
	f, buf, err := r.readAll(nb.name)
	if err != nil {
		return err
	}
	recordType, body, size, err := decodeRecord(buf)
	if err != nil {
		f.Close()
		if last && !followedByValid(buf, 0, nb.base) {
			r.obsolete = append(r.obsolete, nb.name)
			return nil
		}
		return corruptf(nb.name, 0, "bad segment record: %v", err)
	}
	r.opened = append(r.opened, f)
	if recordType != recordSegment || decodeSegmentBody(body).base != nb.base {
		return corruptf(nb.name, 0, "first record (type %d) is not the segment record of base %d", recordType, nb.base)
	}
	h := decodeSegmentBody(body)
	s := &segment{base: h.base, prevTerm: h.prevTerm, name: nb.name, file: f, last: h.base - 1, sealEnd: -1, indexed: true}
	sc := &scan{seg: s, lastTerm: h.prevTerm, tornAt: -1}
	off := size
	for off < int64(len(buf)) {
		recordType, body, size, err := decodeRecord(buf[off:])
		if err != nil {
			if !last || followedByValid(buf, off, s.lastIndex()+1) {
				return corruptf(nb.name, off, "%v, followed by valid data", err)
			}
			sc.tornAt = off
			break
		}
		if recordType == recordSeal {
			if err := r.scanSeal(sc, body, off, off+size == int64(len(buf)), last); err != nil {
				return err
			}
			if last {
				break // the roll did not finish: the segment is active again
			}
			off += size
			continue
		}
		if err := r.scanRecord(sc, recordType, body, off, size); err != nil {
			return err
		}
		off += size
	}
	s.size = off
	r.scans = append(r.scans, sc)
	return nil
}

// scanRecord takes in one valid record of a segment.
func (r *recovery) scanRecord(sc *scan, recordType byte, body []byte, off, size int64) error {
	s := sc.seg
	switch recordType {
	case recordEntry:
		h := decodeEntryHeader(body)
		if want := s.lastIndex() + 1; h.index != want {
			return corruptf(s.name, off, "entry %d where %d belongs", h.index, want)
		}
		if h.term < sc.lastTerm {
			return corruptf(s.name, off, "entry %d term %d below %d", h.index, h.term, sc.lastTerm)
		}
		if len(sc.runs) == 0 || sc.runs[len(sc.runs)-1].term != h.term {
			sc.runs = append(sc.runs, termRun{first: h.index, term: h.term})
		}
		s.push(off, uint32(size))
		sc.lastTerm = h.term
	case recordHardState:
		r.log.noteHard(body)
	default:
		return corruptf(s.name, off, "unexpected record type %d", recordType)
	}
	return nil
}

// scanSeal checks a seal record met while scanning a segment: it must be
// the file's last record and agree with what the scan found. In the last
// segment it is cut as a torn tail would be: a crash came between the seal
// and the next segment's creation, and the segment takes appends again.
func (r *recovery) scanSeal(sc *scan, body []byte, off int64, atEnd, last bool) error {
	s := sc.seg
	sl, _ := decodeSealBody(body) // decodeRecord checked it
	if !atEnd || sl.base != s.base || sl.last != s.lastIndex() || sl.prevTerm != s.prevTerm ||
		sl.lastTerm != sc.lastTerm || sl.end != off {
		return corruptf(s.name, off, "seal (base %d last %d end %d) does not match the segment (last %d)",
			sl.base, sl.last, sl.end, s.lastIndex())
	}
	if sl.hasHard {
		r.log.noteHardState(sl.hard)
	}
	if last {
		sc.tornAt = off
		return nil
	}
	s.sealEnd = off
	return nil
}

// followedByValid reports whether a valid entry or hard-state record starts
// anywhere after off in buf. Candidates are filtered cheaply (type, length,
// and an entry index in the range the rest of the file could hold) before
// their checksum is computed, and the checksum work is bounded; past the
// bound the answer is a conservative true (Open refuses rather than drop
// data it could not rule out).
func followedByValid(buf []byte, off int64, nextIndex uint64) bool {
	budget := 4*int64(len(buf)) + 1<<20
	for p := off + 1; p+frameHeaderBytes <= int64(len(buf)); p++ {
		length := int64(binary.LittleEndian.Uint32(buf[p:]))
		if length == 0 || p+8+length > int64(len(buf)) {
			continue
		}
		switch buf[p+8] {
		case recordHardState:
			if length != 1+hardStateBodyBytes {
				continue
			}
		case recordEntry:
			if length < 1+entryHeaderBytes {
				continue
			}
			index := binary.LittleEndian.Uint64(buf[p+frameHeaderBytes+8:])
			if index < nextIndex || index-nextIndex > uint64(len(buf)) {
				continue
			}
		default:
			continue
		}
		if budget -= length; budget < 0 {
			return true
		}
		if _, _, _, err := decodeRecord(buf[p:]); err == nil {
			return true
		}
	}
	return false
}

// emptySnapshot is the snapshot of a log that never had one.
func emptySnapshot() *raftpb.Snapshot { return raftpb.EnsureSnapshot(nil) }

// assemble applies rules 4 to 6 and sets the log's segments and terms.
func (r *recovery) assemble() error {
	l := r.log
	snapIndex, snapTerm := l.firstIndex-1, l.terms[0].term
	var live []*scan
	for k, sc := range r.scans {
		if k < len(r.scans)-1 && sc.seg.lastIndex() <= snapIndex {
			r.drop(sc)
			continue
		}
		live = append(live, sc)
	}
	if len(live) == 0 && snapIndex > 0 && !r.applied {
		// CreateSnapshot syncs the log first and never removes the active
		// segment: with no valid segment left, synced data is missing.
		return fmt.Errorf("%w: %s: no segment continues snapshot %d", ErrCorrupt, l.dir, snapIndex)
	}
	if len(live) > 0 && !continues(live[0], snapIndex, snapTerm) {
		if !r.applied {
			return corruptf(live[0].seg.name, 0, "log does not continue snapshot %d term %d", snapIndex, snapTerm)
		}
		for _, sc := range live {
			r.drop(sc)
		}
		live = nil
	}
	for k := 1; k < len(live); k++ {
		prev, s := live[k-1], live[k].seg
		if s.base != prev.seg.lastIndex()+1 || s.prevTerm != prev.lastTerm {
			return corruptf(s.name, 0, "segment base %d term before %d does not follow %s (last entry %d term %d)",
				s.base, s.prevTerm, prev.seg.name, prev.seg.lastIndex(), prev.lastTerm)
		}
	}
	for _, sc := range live {
		for _, run := range sc.runs {
			if run.first > snapIndex {
				l.pushTerm(run.first, run.term)
			}
		}
		l.segments = append(l.segments, sc.seg)
		l.lastIndex = max(l.lastIndex, sc.seg.lastIndex())
	}
	return nil
}

// continues reports whether the scanned segment continues the snapshot
// (index, term) (rule 5).
func continues(sc *scan, index, term uint64) bool {
	s := sc.seg
	if s.base == index+1 {
		return s.prevTerm == term
	}
	if s.base > index || s.lastIndex() < index {
		return false
	}
	t := s.prevTerm
	for _, run := range sc.runs {
		if run.first <= index {
			t = run.term
		}
	}
	return t == term
}

// drop marks a scanned segment for removal.
func (r *recovery) drop(sc *scan) {
	sc.seg.file.Close()
	sc.seg.file = nil
	r.obsolete = append(r.obsolete, sc.seg.name)
}

// finish repairs what recovery found and makes it durable: the torn tail
// cut, the hard state re-written before files holding copies of it are
// removed, the removals, and a new segment when none is left.
func (r *recovery) finish() error {
	l := r.log
	// Files found may exist only in the page cache (reopen without a
	// crash); the directory sync at the end makes their names durable, as
	// later steps (and sideDurable) assume.
	l.dirDirty = true
	// Likewise the bytes of the last segment: after a process crash (not a
	// power loss) they may sit unsynced in the page cache, yet raft will
	// take everything recovered as stable (rule 8).
	if n := len(l.segments); n > 0 && !r.bugTrustPageCache() {
		l.segments[n-1].dirty = true
	}
	// And the snapshot's bytes: a process killed between writing a
	// snapshot and syncing it leaves a valid record in the page cache
	// only, and the removals below would make the segments it replaces
	// go for good (found by the simulator once logs were compacted).
	if err := r.syncSnapshot(); err != nil {
		return err
	}
	// And the side file's: a process killed after a truncation wrote its
	// hard state there, before the fsync, leaves a slot in the page cache
	// that rule 7 adopts; a power loss later would take the term or vote
	// back (found by the simulator's recovery check, seed 15).
	if l.side != nil && !r.bugTrustPageCache() {
		if err := l.side.Sync(); err != nil {
			return fmt.Errorf("raftlog: sync %s: %w", sideFileName, err)
		}
	}
	if len(l.segments) == 0 {
		// The newest hard state may sit only in files about to go, one of
		// which may even bear the new segment's name.
		if l.hasHard {
			if err := l.writeSideHardState(); err != nil {
				return err
			}
		}
		if err := r.removeObsolete(); err != nil {
			return err
		}
		if _, err := l.createSegment(l.firstIndex, l.terms[0].term); err != nil {
			return err
		}
		return l.Sync()
	}
	active := l.segments[len(l.segments)-1]
	if sc := r.scans; len(sc) > 0 && sc[len(sc)-1].seg == active && sc[len(sc)-1].tornAt >= 0 {
		if err := active.file.Truncate(active.size); err != nil {
			return fmt.Errorf("raftlog: truncate %s: %w", active.name, err)
		}
		active.dirty = true
	}
	if len(r.obsolete) > 0 && l.hasHard {
		var rec [frameHeaderBytes + hardStateBodyBytes]byte
		l.writeAt(active, appendHardStateRecord(rec[:0], l.hard))
	}
	if err := l.Sync(); err != nil {
		return err
	}
	return r.removeObsolete()
}

// syncSnapshot fsyncs the snapshot file recovery adopted, if any.
func (r *recovery) syncSnapshot() error {
	l := r.log
	if l.snapshotName == "" || r.bugTrustPageCache() {
		return nil
	}
	f, err := l.disk.Open(l.path(l.snapshotName))
	if err != nil {
		return fmt.Errorf("raftlog: open %s: %w", l.snapshotName, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("raftlog: sync %s: %w", l.snapshotName, err)
	}
	return nil
}

// removeObsolete removes the files recovery found useless and syncs the
// directory.
func (r *recovery) removeObsolete() error {
	l := r.log
	if len(r.obsolete) == 0 {
		return nil
	}
	for _, name := range r.obsolete {
		if err := l.disk.Remove(l.path(name)); err != nil {
			return fmt.Errorf("raftlog: remove %s: %w", name, err)
		}
	}
	r.obsolete = nil
	l.dirDirty = true
	return l.syncDir()
}

// closeAll closes every file opened by a failed recovery.
func (r *recovery) closeAll() {
	for _, f := range r.opened {
		f.Close()
	}
	if r.log.side != nil {
		r.log.side.Close()
	}
	for _, s := range r.log.segments {
		if s.file != nil {
			s.file.Close()
		}
	}
}
