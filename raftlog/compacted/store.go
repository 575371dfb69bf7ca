package compacted

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/strandlog/strand/raftlog"
)

// Errors of the store; callers match them with errors.Is.
var (
	// ErrCorrupt: a manifest, segment or batch that fails its CRC or its
	// checks, a segment of the wrong size or missing. The message names
	// the file and what is wrong. The replica's prefix is unusable: the
	// node installs it again from a peer.
	ErrCorrupt = errors.New("compacted: corrupt compacted prefix")
	// ErrGeneration: Begin with a generation not above the current one,
	// or while another generation is being written.
	ErrGeneration = errors.New("compacted: wrong generation")
	// ErrInput: a batch handed to Append that is not a canonical
	// compacted batch, or out of offset order, or a Commit end below the
	// batches written.
	ErrInput = errors.New("compacted: bad input")
	// ErrDigestMismatch: the batches of a generation do not hash to the
	// digest its decision recorded (Commit) or its manifest holds (Verify).
	ErrDigestMismatch = errors.New("compacted: digest mismatch")
	// ErrFailed: an earlier error struck after the new manifest was
	// written, so which generation is durable is unknown until Open.
	ErrFailed = errors.New("compacted: store failed; reopen it")
)

// corruptf is an ErrCorrupt with details.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// File names in the store's directory.
const (
	manifestName    = "manifest"
	manifestTmpName = "manifest.tmp"
	segmentSuffix   = ".seg"
)

// Options tune a store; zero values take the defaults.
type Options struct {
	// SegmentBytes rolls a generation's segment file once it holds this
	// many bytes (a batch is never split, so one may exceed it).
	SegmentBytes int64
	// IndexIntervalBytes is the sparse index's spacing: a batch is
	// indexed when it starts this far past the last indexed one (Kafka's
	// index.interval.bytes).
	IndexIntervalBytes int64
}

// Defaults of Options.
const (
	SegmentBytesDefault       = 64 << 20
	IndexIntervalBytesDefault = 4096
)

// withDefaults fills in zero options.
func (o Options) withDefaults() Options {
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = SegmentBytesDefault
	}
	if o.IndexIntervalBytes <= 0 {
		o.IndexIntervalBytes = IndexIntervalBytesDefault
	}
	return o
}

// Store is one replica's compacted prefix of one partition: the current
// generation's segments, read by offset. It is not safe for concurrent use,
// except that a Writer's Append and Commit may run beside it (Writer).
type Store struct {
	disk   raftlog.Disk
	dir    string
	opts   Options
	m      manifest
	files  []raftlog.File // the current generation's segments, open
	writer *Writer        // the open Writer, if any
	failed error
}

// segmentName is the file of segment i of generation gen: names sort by
// generation, then segment.
func segmentName(gen uint64, i int) string {
	return fmt.Sprintf("%020d-%06d%s", gen, i, segmentSuffix)
}

// parseSegmentName reads a segment file's generation and number.
func parseSegmentName(name string) (gen uint64, i int, ok bool) {
	stem, found := strings.CutSuffix(name, segmentSuffix)
	g, n, cut := strings.Cut(stem, "-")
	if !found || !cut || len(g) != 20 || len(n) != 6 {
		return 0, 0, false
	}
	gen, err1 := strconv.ParseUint(g, 10, 64)
	num, err2 := strconv.Atoi(n)
	return gen, num, err1 == nil && err2 == nil
}

// Open opens the store in dir, recovering from a crash at any step of a
// Commit: the manifest names the current generation (none: the empty
// generation 0); any other generation's segments (a half-written one, or
// the one a switch replaced) and a leftover manifest.tmp are removed. It
// checks the manifest's CRC and rules and each segment's size; batches are
// checked as they are read (Verify reads them all).
//
// It syncs dir before anything else: a process killed between a Commit's
// rename of the manifest and its SyncDir leaves the page cache holding the
// new generation, which Open reads, but a power loss later would still
// bring the old one back. The store's owner reports what it opened as held
// (node/compaction_held.go: peers trim their raft logs by it), so what Open
// returns must be durable: the manifest's and the segments' bytes were
// synced before the rename, and the SyncDir makes the rename so too
// (simulator seed 143).
func Open(disk raftlog.Disk, dir string, opts Options) (*Store, error) {
	s := &Store{disk: disk, dir: dir, opts: opts.withDefaults()}
	if err := disk.SyncDir(dir); err != nil {
		return nil, fmt.Errorf("compacted: syncing %s before reading its manifest: %w", dir, err)
	}
	m, err := s.readManifest()
	if err != nil {
		return nil, err
	}
	s.m = m
	if err := s.removeUnnamed(); err != nil {
		return nil, err
	}
	files, err := s.openSegments(&s.m)
	if err != nil {
		return nil, err
	}
	s.files = files
	return s, nil
}

// readManifest reads and decodes the manifest; a missing one is the empty
// generation 0.
func (s *Store) readManifest() (manifest, error) {
	names, err := s.disk.List(s.dir)
	if err != nil {
		return manifest{}, err
	}
	if !contains(names, manifestName) {
		return manifest{}, nil
	}
	data, err := readWhole(s.disk, path.Join(s.dir, manifestName), manifestBytesMax)
	if err != nil {
		return manifest{}, err
	}
	m, err := decodeManifest(data)
	if err != nil {
		return manifest{}, fmt.Errorf("%s: %w", path.Join(s.dir, manifestName), err)
	}
	return m, nil
}

// contains reports whether sorted names holds name.
func contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// readWhole reads a whole file of at most limit bytes.
func readWhole(disk raftlog.Disk, name string, limit int64) ([]byte, error) {
	f, err := disk.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size > limit {
		return nil, corruptf("%s: %d bytes, at most %d", name, size, limit)
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil && !(errors.Is(err, io.EOF) && size == 0) {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return data, nil
}

// removeUnnamed removes the store's files the manifest does not name
// (other generations' segments, manifest.tmp) and syncs the directory if
// it removed any; files of other names are left alone. Open runs it, when
// no writer can be at work.
func (s *Store) removeUnnamed() error {
	return removeFiles(s.disk, s.dir, func(name string) bool {
		gen, i, isSegment := parseSegmentName(name)
		current := isSegment && gen == s.m.generation && i < len(s.m.segments)
		return (isSegment && !current) || name == manifestTmpName
	})
}

// StaleRemoval returns the removal of the generations the current one
// replaced: run, it removes the segments of every generation below the
// current one and syncs the directory if it removed any. It is bound on
// the store's goroutine (after a Finish) and may run off it, before or
// beside a later generation's Begin, Append and Commit: it never touches
// the current generation, a later one being written, or manifest.tmp
// (which a later Commit writes). On a failed store it returns ErrFailed
// (the manifest on disk may name other files); leftovers of an
// uncommitted generation above the current one wait for the next Open.
func (s *Store) StaleRemoval() func() error {
	disk, dir, gen, failed := s.disk, s.dir, s.m.generation, s.failed
	return func() error {
		if failed != nil {
			return failed
		}
		return removeFiles(disk, dir, func(name string) bool {
			g, _, isSegment := parseSegmentName(name)
			return isSegment && g < gen
		})
	}
}

// RemoveStale runs StaleRemoval at once, on the store's goroutine.
func (s *Store) RemoveStale() error { return s.StaleRemoval()() }

// removeFiles removes the files of dir that stale picks and syncs the
// directory if it removed any.
func removeFiles(disk raftlog.Disk, dir string, stale func(name string) bool) error {
	names, err := disk.List(dir)
	if err != nil {
		return err
	}
	removed := false
	for _, name := range names {
		if stale(name) {
			if err := disk.Remove(path.Join(dir, name)); err != nil {
				return err
			}
			removed = true
		}
	}
	if removed {
		return disk.SyncDir(dir)
	}
	return nil
}

// openSegments opens m's segment files and checks their sizes.
func (s *Store) openSegments(m *manifest) ([]raftlog.File, error) {
	names, err := s.disk.List(s.dir)
	if err != nil {
		return nil, err
	}
	files := make([]raftlog.File, 0, len(m.segments))
	for i := range m.segments {
		name := segmentName(m.generation, i)
		err := corruptf("segment %s missing", path.Join(s.dir, name))
		if contains(names, name) {
			var f raftlog.File
			f, err = s.openSegment(name, m.segments[i].bytes)
			files = append(files, f)
		}
		if err != nil {
			closeAll(files)
			return nil, err
		}
	}
	return files, nil
}

// openSegment opens one segment file and checks it holds want bytes.
func (s *Store) openSegment(name string, want int64) (raftlog.File, error) {
	f, err := s.disk.Open(path.Join(s.dir, name))
	if err != nil {
		return nil, err
	}
	size, err := f.Size()
	if err == nil && size != want {
		err = corruptf("segment %s: %d bytes, manifest says %d", path.Join(s.dir, name), size, want)
	}
	return f, err
}

// closeAll closes files, ignoring nil ones and errors (read handles).
func closeAll(files []raftlog.File) {
	for _, f := range files {
		if f != nil {
			_ = f.Close()
		}
	}
}

// Close releases the segment files. A Writer not finished is abandoned:
// its files go at the next Open.
func (s *Store) Close() error {
	closeAll(s.files)
	s.files = nil
	return nil
}

// Generation is the current generation: the decision whose pass wrote the
// prefix, 0 before any.
func (s *Store) Generation() uint64 { return s.m.generation }

// Start and End bound the prefix: it covers offsets [Start, End) (End is
// the pass's Result.CleanedTo); offsets inside with no batch were removed.
func (s *Store) Start() int64 { return s.m.start }

// End is the offset after the prefix: the raft log holds the rest.
func (s *Store) End() int64 { return s.m.end }

// Digest is the SHA-256 of the current generation's batches in order, as
// compact.Result.Digest gives it.
func (s *Store) Digest() [sha256.Size]byte { return s.m.digest }

// Bytes is the size of the current generation's segments.
func (s *Store) Bytes() int64 {
	var total int64
	for i := range s.m.segments {
		total += s.m.segments[i].bytes
	}
	return total
}

// SegmentInfo is one segment of the current generation: its batches cover
// offsets [Base, End) in Bytes bytes.
type SegmentInfo struct {
	Base, End, Bytes int64
}

// Segments appends the current generation's segments, oldest first, to
// dst: retention on a compact,delete topic weighs them as Kafka weighs
// cleaned segments.
func (s *Store) Segments(dst []SegmentInfo) []SegmentInfo {
	for i := range s.m.segments {
		seg := &s.m.segments[i]
		dst = append(dst, SegmentInfo{Base: seg.base, End: seg.end, Bytes: seg.bytes})
	}
	return dst
}
