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

// Writer writes a new generation beside the current one (doc.go,
// "Switching generations"): Append each compacted batch in offset order,
// Commit makes it durable and current on disk, and the store's Finish
// makes reads see it. Append and Commit touch only the writer's files and
// the manifest, never the Store, so they may run off the goroutine that
// owns the Store while it keeps reading the old generation.
type Writer struct {
	disk       raftlog.Disk
	dir        string
	opts       Options
	m          manifest // the generation being written; segments so far
	files      []raftlog.File
	pos        int64 // bytes in the open segment
	lastIndex  int64 // position of the open segment's last indexed batch
	next       int64 // the offset after the last batch appended
	maxTimeMs  int64 // running maximum record timestamp
	sha        hash.Hash
	batchCount int64
	err        error
	committed  bool
}

// Begin starts writing generation gen, which must be above the current
// one, for the prefix from offset start (the log start the pass read).
// One Writer at a time: the next Begin waits for Finish.
func (s *Store) Begin(gen uint64, start int64) (*Writer, error) {
	if s.failed != nil {
		return nil, s.failed
	}
	if gen <= s.m.generation || s.writer != nil {
		return nil, fmt.Errorf("%w: begin generation %d at generation %d (a writer open: %v)", ErrGeneration, gen, s.m.generation, s.writer != nil)
	}
	if start < 0 {
		return nil, fmt.Errorf("%w: prefix start %d", ErrInput, start)
	}
	w := &Writer{disk: s.disk, dir: s.dir, opts: s.opts, m: manifest{generation: gen, start: start},
		next: start, maxTimeMs: -1 << 63, sha: sha256.New()}
	s.writer = w
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
	if w.err != nil || w.committed {
		return errors.Join(w.err, w.doneErr())
	}
	b, err := compact.DecodeBatch(batch)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInput, err)
	}
	if b.BaseOffset < w.next {
		return fmt.Errorf("%w: batch at offset %d after offset %d", ErrInput, b.BaseOffset, w.next)
	}
	if len(w.files) == 0 || w.pos > 0 && w.pos+int64(len(batch)) > w.opts.SegmentBytes {
		if err := w.roll(b.BaseOffset); err != nil {
			return w.fail(err)
		}
	}
	seg := &w.m.segments[len(w.m.segments)-1]
	w.maxTimeMs = max(w.maxTimeMs, b.MaxTimestampMs)
	if w.pos == 0 || w.pos-w.lastIndex >= w.opts.IndexIntervalBytes {
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

// doneErr is the error of a use after Commit.
func (w *Writer) doneErr() error {
	if w.committed {
		return fmt.Errorf("%w: generation %d already committed", ErrInput, w.m.generation)
	}
	return nil
}

// roll starts the next segment at offset base. It syncs nothing: every
// segment is synced at Commit, so Append never waits for the disk (a pass
// runs its CPU-bound part with no fsync, which the node's disk watchdog
// does not time: node's compaction_replica.go).
func (w *Writer) roll(base int64) error {
	name := path.Join(w.dir, segmentName(w.m.generation, len(w.files)))
	f, err := w.disk.Open(name)
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

// syncAll makes every segment of the generation durable.
func (w *Writer) syncAll() error {
	for _, f := range w.files {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	return nil
}

// Commit makes the written batches the durable current generation, the
// prefix [start, end) with digest (the pass's Result.CleanedTo and
// Digest); the store's Finish then makes reads see it. The batches must
// hash to digest (else ErrDigestMismatch and nothing changes). The steps:
// every segment synced, directory synced, the manifest written to manifest.tmp
// and synced, renamed over manifest, the directory synced (the commit
// point). An error before the rename leaves the old generation current;
// one from the rename on is ErrFailed: which manifest is durable is
// unknown until Open, and Finish fails the store.
func (w *Writer) Commit(end int64, digest [sha256.Size]byte) error {
	if w.err != nil || w.committed {
		return errors.Join(w.err, w.doneErr())
	}
	if end < w.next {
		return w.fail(fmt.Errorf("%w: prefix end %d below the last batch's end %d", ErrInput, end, w.next))
	}
	if got := [sha256.Size]byte(w.sha.Sum(nil)); got != digest && !bugCommitUnchecked {
		return w.fail(fmt.Errorf("%w: generation %d hashes to %x, decision says %x", ErrDigestMismatch, w.m.generation, got[:8], digest[:8]))
	}
	w.m.end, w.m.digest = end, digest
	if err := w.m.check(); err != nil {
		return w.fail(err) // a bug: Append keeps the rules
	}
	if bugSwitchNotAtomic { // planted (simbugs): the old generations go before the switch
		gen := w.m.generation
		if err := removeFiles(w.disk, w.dir, func(name string) bool {
			g, _, isSegment := parseSegmentName(name)
			return isSegment && g < gen
		}); err != nil {
			return w.fail(err)
		}
	}
	if err := errors.Join(w.syncAll(), w.disk.SyncDir(w.dir), w.writeManifest()); err != nil {
		return w.fail(err)
	}
	err := w.disk.Rename(path.Join(w.dir, manifestTmpName), path.Join(w.dir, manifestName))
	if err == nil {
		err = w.disk.SyncDir(w.dir)
	}
	if err != nil {
		return w.fail(fmt.Errorf("%w: switching to generation %d: %w", ErrFailed, w.m.generation, err))
	}
	w.committed = true
	return nil
}

// writeManifest writes the manifest to manifest.tmp and syncs it.
func (w *Writer) writeManifest() error {
	f, err := w.disk.Open(path.Join(w.dir, manifestTmpName))
	if err != nil {
		return err
	}
	data := appendManifest(nil, &w.m)
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt(data, 0)
	}
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// Batches is how many batches were appended.
func (w *Writer) Batches() int64 { return w.batchCount }

// Finish ends w's run, on the goroutine that owns the store: a committed
// generation becomes the one reads see; an uncommitted one is dropped. The
// files no longer named (the old generation's, or the dropped one's) stay
// for RemoveStale or the next Open. A writer that failed from the rename on
// fails the store (ErrFailed), as a failed fsync fails a raftlog.Log.
func (s *Store) Finish(w *Writer) error {
	if s.writer != w || w == nil {
		return fmt.Errorf("%w: finishing a writer this store did not begin", ErrGeneration)
	}
	s.writer = nil
	if w.committed {
		closeAll(s.files)
		s.m, s.files = w.m, w.files
		return nil
	}
	closeAll(w.files)
	if errors.Is(w.err, ErrFailed) {
		s.failed = w.err
		return s.failed
	}
	return nil
}
