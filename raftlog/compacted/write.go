package compacted

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"path"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/raftlog"
)

// Writer writes a new generation beside the current one: Append each
// compacted batch in offset order, then Commit switches to it atomically,
// or Abort drops it. Until Commit's switch the store reads the old
// generation; a crash anywhere leaves one of the two whole (doc.go,
// "Switching generations").
type Writer struct {
	s          *Store
	m          manifest // the generation being written; segments so far
	files      []raftlog.File
	pos        int64 // bytes in the open segment
	lastIndex  int64 // position of the open segment's last indexed batch
	next       int64 // the offset after the last batch appended
	maxTimeMs  int64 // running maximum record timestamp
	sha        hash.Hash
	err        error
	done       bool
	batchCount int64
}

// Begin starts writing generation gen, which must be above the current
// one, for the prefix from offset start (the log start the pass read).
// One Writer at a time.
func (s *Store) Begin(gen uint64, start int64) (*Writer, error) {
	if s.failed != nil {
		return nil, s.failed
	}
	if gen <= s.m.generation || s.writing {
		return nil, fmt.Errorf("%w: begin generation %d at generation %d (writing: %v)", ErrGeneration, gen, s.m.generation, s.writing)
	}
	if start < 0 {
		return nil, fmt.Errorf("%w: prefix start %d", ErrInput, start)
	}
	s.writing = true
	w := &Writer{s: s, m: manifest{generation: gen, start: start}, next: start, maxTimeMs: -1 << 63, sha: sha256.New()}
	return w, nil
}

// fail records the writer's first error and returns it.
func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// Append writes one compacted batch (compact's form, checked whole) after
// the ones before it: its base offset at or past the end of the last one.
func (w *Writer) Append(batch []byte) error {
	if w.err != nil {
		return w.err
	}
	b, err := compact.DecodeBatch(batch)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInput, err)
	}
	if b.BaseOffset < w.next {
		return fmt.Errorf("%w: batch at offset %d after offset %d", ErrInput, b.BaseOffset, w.next)
	}
	if len(w.files) == 0 || w.pos > 0 && w.pos+int64(len(batch)) > w.s.opts.SegmentBytes {
		if err := w.roll(b.BaseOffset); err != nil {
			return w.fail(err)
		}
	}
	seg := &w.m.segments[len(w.m.segments)-1]
	w.maxTimeMs = max(w.maxTimeMs, b.MaxTimestampMs)
	if w.pos == 0 || w.pos-w.lastIndex >= w.s.opts.IndexIntervalBytes {
		seg.index = append(seg.index, indexEntry{offset: b.BaseOffset, position: w.pos, maxTimestampMs: w.maxTimeMs})
		w.lastIndex = w.pos
	}
	if _, err := w.files[len(w.files)-1].WriteAt(batch, w.pos); err != nil {
		return w.fail(err)
	}
	w.sha.Write(batch)
	w.pos += int64(len(batch))
	w.next = b.LastOffset() + 1
	seg.bytes, seg.end = w.pos, w.next
	w.batchCount++
	return nil
}

// roll syncs the open segment, if any, and starts the next at offset base.
func (w *Writer) roll(base int64) error {
	if err := w.syncLast(); err != nil {
		return err
	}
	name := path.Join(w.s.dir, segmentName(w.m.generation, len(w.files)))
	f, err := w.s.disk.Open(name)
	if err != nil {
		return err
	}
	w.files = append(w.files, f)
	if err := f.Truncate(0); err != nil { // a leftover of an abandoned attempt
		return err
	}
	w.m.segments = append(w.m.segments, segment{base: base, end: base})
	w.pos, w.lastIndex = 0, 0
	return nil
}

// syncLast makes the open segment durable.
func (w *Writer) syncLast() error {
	if len(w.files) == 0 {
		return nil
	}
	return w.files[len(w.files)-1].Sync()
}

// Commit makes the written batches the store's current generation, the
// prefix [start, end) with digest (the pass's Result.CleanedTo and
// Digest). The batches must hash to digest (else ErrDigestMismatch and
// nothing changes). The switch: segments synced, directory synced, the
// manifest written to manifest.tmp and synced, renamed over manifest, the
// directory synced (the commit point), then the old generation's files
// removed. An error before the rename leaves the old generation current
// (call Abort); one after it fails the store (ErrFailed) until Open tells
// which is.
func (w *Writer) Commit(end int64, digest [sha256.Size]byte) error {
	if w.err != nil {
		return w.err
	}
	if end < w.next {
		return w.fail(fmt.Errorf("%w: prefix end %d below the last batch's end %d", ErrInput, end, w.next))
	}
	if got := [sha256.Size]byte(w.sha.Sum(nil)); got != digest {
		return w.fail(fmt.Errorf("%w: generation %d hashes to %x, decision says %x", ErrDigestMismatch, w.m.generation, got[:8], digest[:8]))
	}
	w.m.end, w.m.digest = end, digest
	if err := w.m.check(); err != nil {
		return w.fail(err) // a bug: Append keeps the rules
	}
	if err := errors.Join(w.syncLast(), w.s.disk.SyncDir(w.s.dir), w.s.writeManifest(&w.m)); err != nil {
		return w.fail(err)
	}
	w.done = true
	w.s.writing = false
	s := w.s
	closeAll(s.files)
	s.m, s.files = w.m, w.files
	if err := s.disk.Rename(path.Join(s.dir, manifestTmpName), path.Join(s.dir, manifestName)); err != nil {
		return s.failWith(err)
	}
	if err := s.disk.SyncDir(s.dir); err != nil {
		return s.failWith(err)
	}
	if err := s.removeStale(); err != nil {
		return fmt.Errorf("compacted: generation %d is current; removing the old one: %w", s.m.generation, err)
	}
	return nil
}

// failWith fails the store for good: the manifest on disk may be either.
func (s *Store) failWith(err error) error {
	s.failed = fmt.Errorf("%w: %w", ErrFailed, err)
	return s.failed
}

// writeManifest writes m to manifest.tmp and syncs it.
func (s *Store) writeManifest(m *manifest) error {
	f, err := s.disk.Open(path.Join(s.dir, manifestTmpName))
	if err != nil {
		return err
	}
	data := appendManifest(nil, m)
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt(data, 0)
	}
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// Abort drops the generation being written: its files are removed (what
// a failure leaves goes at the next Open). The store keeps its current
// generation.
func (w *Writer) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	w.s.writing = false
	closeAll(w.files)
	w.err = fmt.Errorf("%w: writer aborted", ErrGeneration)
	if w.s.failed != nil {
		return w.s.failed
	}
	return w.s.removeStale()
}

// Batches is how many batches were appended.
func (w *Writer) Batches() int64 { return w.batchCount }
