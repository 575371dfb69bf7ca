package raftlog

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"path"
	"sort"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Options sizes a Log. Zero fields take the defaults.
type Options struct {
	// SegmentBytesMax rolls the active segment once it holds this many bytes.
	SegmentBytesMax int64
	// TailCacheBytesMax bounds the cache of the most recently appended
	// entries, which serves raft's read-back of fresh entries (committed
	// entries to apply, appends to followers) without I/O. Negative disables
	// the cache.
	TailCacheBytesMax int64
	// BeforeSync, when set, runs before every fsync of the log's segments
	// that the Log makes: Sync, and a roll's sync. A node that writes a
	// write-ahead log beside its logs (raftlog/wal) makes that durable
	// there first, so a log never holds durably a write the write-ahead log
	// could lose (recovery replays the write-ahead log over the log). Its
	// error fails the Log, as a failed fsync.
	BeforeSync func() error

	//lint:ignore U1000 empty without -tags simbugs
	plantedBugs // planted bugs: empty unless built with -tags simbugs
}

const (
	// DefaultSegmentBytesMax is the default Options.SegmentBytesMax.
	DefaultSegmentBytesMax = 64 << 20
	// DefaultTailCacheBytesMax is the default Options.TailCacheBytesMax.
	DefaultTailCacheBytesMax = 8 << 20

	// writeBufferBytesKept bounds the write buffer kept between Appends.
	writeBufferBytesKept = 16 << 20
	// tailEntryOverheadBytes is charged per cached entry besides its data.
	tailEntryOverheadBytes = 64
)

// ErrCorrupt reports corruption inside synced data: a record that fails its
// checksum or framing and is followed by valid data, or a damaged snapshot.
// Open refuses to start on it rather than lose or serve damaged records.
var ErrCorrupt = errors.New("raftlog: corrupt data")

// ErrClosed is returned by a Log after Close.
var ErrClosed = errors.New("raftlog: log closed")

// segment is one segment file and the index of the entries in it.
type segment struct {
	base     uint64 // index of the first entry it holds (or would hold)
	prevTerm uint64 // term of entry base-1, from the segment record
	name     string // file name within the log's directory
	file     File
	size     int64  // bytes written, synced or not
	last     uint64 // index of its last entry (base-1 when it holds none)
	sealEnd  int64  // offset of its seal record; -1 while unsealed (seal.go)
	// indexed says starts and sizes hold every entry: always for the
	// active segment; for a sealed one Open took from its seal, once an
	// entry of it was read (indexSegment).
	indexed bool
	starts  []int64  // starts[j]: offset of the record of entry base+j
	sizes   []uint32 // sizes[j]: size in bytes of that record
	dirty   bool     // written since its last Sync
}

// lastIndex returns the index of the segment's last entry (base-1 when it
// holds none).
func (s *segment) lastIndex() uint64 { return s.last }

// push indexes the record of the next entry, at off with size bytes.
func (s *segment) push(off int64, size uint32) {
	s.starts = append(s.starts, off)
	s.sizes = append(s.sizes, size)
	s.last++
}

// termRun says that entries from first on have term, up to the next run.
type termRun struct {
	first, term uint64
}

// Log is one raft group's durable log: etcd raft's Storage plus the writes a
// Ready asks for, on segmented append-only files of a Disk. Log does no
// locking; one goroutine drives it (the node's Ready loop).
//
// Writes (Append, SetHardState) are buffered in the page cache of the Disk
// and become durable only after Sync returns nil; ApplySnapshot and
// CreateSnapshot are durable when they return. Reads see the writes at once,
// as raft requires.
//
// Any error from a write or a Sync leaves the Log failed: every later write
// returns the same error. The caller must then fail-stop (stop the raft group
// or the process and recover with Open): after a failed fsync the page cache
// may have dropped the data, so retrying an fsync can report success for
// bytes that are gone.
type Log struct {
	disk              Disk
	dir               string
	segmentBytesMax   int64
	tailCacheBytesMax int64
	beforeSync        func() error // Options.BeforeSync

	segments     []*segment // by base; the last one is active
	snapshot     *raftpb.Snapshot
	snapshotName string // file of the current snapshot, "" when none
	hard         hardState
	hasHard      bool
	firstIndex   uint64    // snapshot index + 1
	lastIndex    uint64    // firstIndex-1 when the log holds no entry
	terms        []termRun // covers [firstIndex-1, lastIndex]
	tail         []*raftpb.Entry
	tailBytes    int64
	dirDirty     bool     // files created or removed since the last SyncDir
	trash        []string // retired segments' paths, for TakeTrash
	// rollPending: SaveSome sealed the active segment; the next write
	// creates the next one, once the sealed one is durable (finishRoll).
	rollPending bool
	// creating is the snapshot StartCreateSnapshot is writing, nil when
	// none.
	creating *raftpb.Snapshot

	side        File  // hard-state side file, opened on first use
	sideSlot    int64 // slot the next side write goes to (0 or 1)
	sideDurable bool  // the side file's name is durable

	// pending are the writes made and not issued yet (SaveSome's), in
	// order; inflight those a StartSync's job issues, inflightLast the
	// last index then; written the last index whose record is on file
	// (the tail cache holds every entry above it).
	pending      []pendingWrite
	inflight     []pendingWrite
	inflightLast uint64
	written      uint64

	writeBuf []byte // a buffer of a completed write, kept for reuse
	failed   error
	closed   bool
	syncing  bool // between StartSync and FinishSync: no write may come
}

var _ raft.Storage = (*Log)(nil)

func (l *Log) path(name string) string { return path.Join(l.dir, name) }

func segmentName(base uint64) string   { return fmt.Sprintf("%020d.log", base) }
func snapshotName(index uint64) string { return fmt.Sprintf("%020d.snap", index) }

const sideFileName = "hardstate"

// corruptf returns an error wrapping ErrCorrupt naming file and offset.
func corruptf(name string, off int64, format string, args ...any) error {
	return fmt.Errorf("%w: %s at offset %d: %s", ErrCorrupt, name, off, fmt.Sprintf(format, args...))
}

// fail records a write-path error: the Log is unusable from now on.
func (l *Log) fail(err error) error {
	if l.failed == nil {
		l.failed = err
	}
	return err
}

// writable returns the error that forbids writing, if any.
func (l *Log) writable() error {
	if l.closed {
		return ErrClosed
	}
	return l.failed
}

// InitialState implements raft.Storage.
func (l *Log) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	cs := proto.Clone(raftpb.EnsureConfState(l.snapshot.GetMetadata().GetConfState())).(*raftpb.ConfState)
	if !l.hasHard {
		return nil, cs, nil
	}
	hs := &raftpb.HardState{Term: new(l.hard.term), Vote: new(l.hard.vote), Commit: new(l.hard.commit)}
	return hs, cs, nil
}

// Entries implements raft.Storage. The entries' Data alias a buffer read
// from the segment (or the entries appended, for the tail cache); neither
// Log nor the caller may mutate them.
func (l *Log) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	if l.closed {
		return nil, ErrClosed
	}
	if lo < l.firstIndex {
		return nil, raft.ErrCompacted
	}
	if hi > l.lastIndex+1 {
		panic(fmt.Sprintf("raftlog: entries hi %d beyond last index %d", hi, l.lastIndex))
	}
	if l.lastIndex < l.firstIndex {
		return nil, raft.ErrUnavailable
	}
	if lo >= hi {
		return []*raftpb.Entry{}, nil
	}
	hi, err := l.limit(lo, hi, maxSize)
	if err != nil {
		return nil, err
	}
	tailFirst := l.tailFirst()
	if lo >= tailFirst {
		out := make([]*raftpb.Entry, hi-lo)
		copy(out, l.tail[lo-tailFirst:hi-tailFirst])
		return out, nil
	}
	if hi <= tailFirst {
		return l.readEntries(lo, hi)
	}
	// Entries from tailFirst on may not be on file yet (SaveSome).
	out, err := l.readEntries(lo, tailFirst)
	if err != nil {
		return nil, err
	}
	return append(out, l.tail[:hi-tailFirst]...), nil
}

// limit returns the end of the longest run of entries from lo (at least
// one, at most up to hi) whose encoded size stays within maxSize, counted as
// raft counts it (protobuf size). Sealed segments it reaches are indexed.
func (l *Log) limit(lo, hi, maxSize uint64) (uint64, error) {
	if maxSize == math.MaxUint64 {
		return hi, nil
	}
	var total uint64
	for i := lo; i < hi; {
		s := l.segments[l.segmentOf(i)]
		if err := l.indexSegment(s); err != nil {
			return 0, err
		}
		for end := min(hi, s.lastIndex()+1); i < end; i++ {
			dataBytes := uint64(s.sizes[i-s.base]) - frameHeaderBytes - entryHeaderBytes
			total += entryProtoBytes(l.termAt(i), i, dataBytes)
			if total > maxSize && i > lo {
				return i, nil
			}
		}
	}
	return hi, nil
}

// entryProtoBytes is proto.Size of an entry as Entries returns it: Term,
// Index and Type set, Data nil when empty.
func entryProtoBytes(term, index uint64, dataBytes uint64) uint64 {
	n := 1 + varintBytes(term) + 1 + varintBytes(index) + 2
	if dataBytes > 0 {
		n += 1 + varintBytes(dataBytes) + dataBytes
	}
	return n
}

func varintBytes(x uint64) uint64 { return uint64(bits.Len64(x|1)+6) / 7 }

// segmentOf returns the position in l.segments of the segment holding entry
// i, which must exist.
func (l *Log) segmentOf(i uint64) int {
	k := sort.Search(len(l.segments), func(k int) bool { return l.segments[k].base > i }) - 1
	if k < 0 || i > l.segments[k].lastIndex() {
		panic(fmt.Sprintf("raftlog: no segment holds entry %d", i))
	}
	return k
}

// readEntries reads entries [lo, hi) from the segments, one ReadAt per
// segment, checking every record's checksum and index.
func (l *Log) readEntries(lo, hi uint64) ([]*raftpb.Entry, error) {
	out := make([]*raftpb.Entry, 0, hi-lo)
	structs := make([]raftpb.Entry, hi-lo)
	values := make([]entryValues, hi-lo)
	for k := l.segmentOf(lo); lo < hi; k++ {
		s := l.segments[k]
		if err := l.indexSegment(s); err != nil {
			return nil, err
		}
		end := min(hi, s.lastIndex()+1)
		from := s.starts[lo-s.base]
		to := s.starts[end-1-s.base] + int64(s.sizes[end-1-s.base])
		buf := make([]byte, to-from)
		if n, err := s.file.ReadAt(buf, from); n != len(buf) {
			return nil, fmt.Errorf("raftlog: read %s at %d: %w", s.name, from, err)
		}
		for i := lo; i < end; i++ {
			j := len(out)
			off := s.starts[i-s.base] - from
			rec := buf[off : off+int64(s.sizes[i-s.base])]
			if err := decodeEntryInto(&structs[j], &values[j], rec, i); err != nil {
				return nil, corruptf(s.name, s.starts[i-s.base], "%v", err)
			}
			out = append(out, &structs[j])
		}
		lo = end
	}
	return out, nil
}

// entryValues holds the scalar fields an Entry points to, so that a batch of
// entries costs three allocations rather than three per entry.
type entryValues struct {
	term, index uint64
	entryType   raftpb.EntryType
}

// decodeEntryInto decodes the entry record rec, which must hold entry index,
// into e. Data aliases rec, capped so appends cannot reach past it.
func decodeEntryInto(e *raftpb.Entry, v *entryValues, rec []byte, index uint64) error {
	recordType, body, size, err := decodeRecord(rec)
	if err != nil {
		return err
	}
	if recordType != recordEntry || size != int64(len(rec)) {
		return fmt.Errorf("record type %d size %d is not entry %d", recordType, size, index)
	}
	h := decodeEntryHeader(body)
	if h.index != index {
		return fmt.Errorf("entry %d where %d belongs", h.index, index)
	}
	v.term, v.index, v.entryType = h.term, h.index, raftpb.EntryType(h.entryType)
	e.Term, e.Index, e.Type = &v.term, &v.index, &v.entryType
	if data := body[entryHeaderBytes:]; len(data) > 0 {
		e.Data = data[:len(data):len(data)]
	}
	return nil
}

// Term implements raft.Storage.
func (l *Log) Term(i uint64) (uint64, error) {
	if i+1 < l.firstIndex {
		return 0, raft.ErrCompacted
	}
	if i > l.lastIndex {
		return 0, raft.ErrUnavailable
	}
	return l.termAt(i), nil
}

// termAt returns the term of entry i in [firstIndex-1, lastIndex].
func (l *Log) termAt(i uint64) uint64 {
	k := sort.Search(len(l.terms), func(k int) bool { return l.terms[k].first > i }) - 1
	if k < 0 || i+1 < l.firstIndex || i > l.lastIndex {
		panic(fmt.Sprintf("raftlog: term of %d outside [%d, %d]", i, l.firstIndex-1, l.lastIndex))
	}
	return l.terms[k].term
}

// LastIndex implements raft.Storage.
func (l *Log) LastIndex() (uint64, error) { return l.lastIndex, nil }

// FirstIndex implements raft.Storage.
func (l *Log) FirstIndex() (uint64, error) { return l.firstIndex, nil }

// Snapshot implements raft.Storage.
func (l *Log) Snapshot() (*raftpb.Snapshot, error) {
	return proto.Clone(l.snapshot).(*raftpb.Snapshot), nil
}

// tailFirst returns the index of the first cached entry.
func (l *Log) tailFirst() uint64 { return l.lastIndex + 1 - uint64(len(l.tail)) }

// cacheTail adds freshly appended entries (ending at lastIndex) to the tail
// cache and evicts the oldest beyond its bound.
func (l *Log) cacheTail(entries []*raftpb.Entry) {
	l.tail = append(l.tail, entries...)
	for _, e := range entries {
		l.tailBytes += int64(len(e.GetData())) + tailEntryOverheadBytes
	}
	l.evictTail()
}

// evictTail evicts the oldest cached entries beyond the cache's bound (all,
// when it is negative: no cache), never one above written: an entry whose
// write is pending or running is read from memory only.
func (l *Log) evictTail() {
	first := l.tailFirst()
	drop := 0
	for drop < len(l.tail) && (l.tailCacheBytesMax < 0 || l.tailBytes > l.tailCacheBytesMax) && first+uint64(drop) <= l.written {
		l.tailBytes -= int64(len(l.tail[drop].GetData())) + tailEntryOverheadBytes
		l.tail[drop] = nil
		drop++
	}
	l.tail = l.tail[drop:]
}

// SetTailCacheBytesMax changes the tail cache's bound (negative: no cache,
// except for entries not on file yet), evicting the oldest entries beyond
// it now: a node that hosts more logs gives each a smaller share of its
// memory.
func (l *Log) SetTailCacheBytesMax(n int64) {
	l.tailCacheBytesMax = n
	l.evictTail()
}

// TailCacheBytesMax returns the tail cache's bound (negative: no cache).
func (l *Log) TailCacheBytesMax() int64 { return l.tailCacheBytesMax }

// cutTail drops cached entries at and above index i.
func (l *Log) cutTail(i uint64) {
	first := l.tailFirst()
	keep := 0
	if i > first {
		keep = int(min(i-first, uint64(len(l.tail))))
	}
	for _, e := range l.tail[keep:] {
		l.tailBytes -= int64(len(e.GetData())) + tailEntryOverheadBytes
	}
	clear(l.tail[keep:])
	l.tail = l.tail[:keep]
}

// dropTailBelow drops cached entries at and below index i.
func (l *Log) dropTailBelow(i uint64) {
	first := l.tailFirst()
	drop := 0
	for drop < len(l.tail) && first+uint64(drop) <= i {
		l.tailBytes -= int64(len(l.tail[drop].GetData())) + tailEntryOverheadBytes
		l.tail[drop] = nil
		drop++
	}
	l.tail = l.tail[drop:]
}

// Close releases the log's files without syncing. Pending writes are
// dropped (what a kill would lose: nothing a Sync covered).
func (l *Log) Close() error {
	if l.closed {
		return ErrClosed
	}
	l.closed = true
	l.pending = nil
	var first error
	for _, s := range l.segments {
		if err := s.file.Close(); err != nil && first == nil {
			first = err
		}
	}
	if l.side != nil {
		if err := l.side.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Dir returns the log's directory on its Disk.
func (l *Log) Dir() string { return l.dir }
