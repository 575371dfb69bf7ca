package wal

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/strandlog/strand/raftlog"
)

// Open recovers the write-ahead log in dir and returns it, ready to append,
// with every record it holds in order. Recovery:
//  1. Segments are taken in sequence order; they must follow each other
//     without a gap, each starting with a header record naming its own
//     sequence (Rotate removes old segments oldest first, so a crash in it
//     leaves a suffix).
//  2. Damage (a record failing framing or its checksum, or a valid one with
//     impossible contents) in a segment before the last is ErrCorrupt:
//     those were synced before the next was created.
//  3. In the last segment, damage at offset o is a torn tail when no valid
//     record can be found after o: the file is cut at o. Otherwise it lies
//     inside synced data: ErrCorrupt. A last segment whose header is torn
//     was created but never synced: it is cut to nothing and its header
//     written again.
//  4. The last segment and the directory are fsynced before Open returns:
//     after a killed process the records may sit in the page cache only,
//     and the caller will treat every returned record as durable.
//
// With no segment at all, segment 1 is created.
func Open(disk raftlog.Disk, dir string) (*WAL, []Record, error) {
	return OpenCached(disk, dir, nil)
}

// OpenCached is Open, reusing what cache (nil: none) decoded when an
// earlier OpenCached recovered a log in the same directory, and
// remembering what it decodes now: a segment whose bytes up to the end of
// its last valid record are as they were is not decoded again, only the
// records after them. The durability audit (raftlog/audit) recovers a
// projection of the node's write-ahead log at every sync it checks; the
// records returned are Open's.
func OpenCached(disk raftlog.Disk, dir string, cache *Cache) (*WAL, []Record, error) {
	w, segRecs, err := OpenCachedSegments(disk, dir, cache)
	if err != nil {
		return nil, nil, err
	}
	total := 0
	for _, got := range segRecs {
		total += len(got)
	}
	var recs []Record // nil when there are none
	if total > 0 {
		// One copy sized once: got may be the cache's (Cache.scan), and
		// growing the list segment by segment copied it again and again.
		recs = make([]Record, 0, total)
		for _, got := range segRecs {
			recs = append(recs, got...)
		}
	}
	return w, recs, nil
}

// OpenCachedSegments is OpenCached returning the records of each segment
// apart, in segment order, instead of copied into one list: the
// durability audit recovers a projection of the node's write-ahead log at
// every sync it checks and reads the records once, and that copy was a
// third of its recovery. The lists may be cache's: read them, never write
// into them (a later recovery only appends past their ends: Cache.scan).
func OpenCachedSegments(disk raftlog.Disk, dir string, cache *Cache) (*WAL, [][]Record, error) {
	w := &WAL{disk: disk, dir: dir, cache: cache}
	segRecs, err := w.recover()
	if err != nil {
		if w.file != nil {
			w.file.Close()
		}
		return nil, nil, err
	}
	return w, segRecs, nil
}

// recover recovers the log (Open's rules) and returns each segment's
// records, in order.
func (w *WAL) recover() ([][]Record, error) {
	names, err := w.disk.List(w.dir)
	if err != nil {
		return nil, fmt.Errorf("wal: list %s: %w", w.dir, err)
	}
	for _, name := range names {
		seq, ok := parseName(name)
		if !ok {
			continue
		}
		if n := len(w.segs); n > 0 && w.segs[n-1].seq+1 != seq {
			return nil, fmt.Errorf("%w: %s: segment %d follows %d", ErrCorrupt, w.dir, seq, w.segs[n-1].seq)
		}
		w.segs = append(w.segs, segment{seq: seq, name: name})
	}
	if len(w.segs) == 0 {
		if err := w.create(1); err != nil {
			return nil, w.fail(err)
		}
		return nil, w.Sync()
	}
	w.cache.keepOnly(w.segs)
	segRecs := make([][]Record, 0, len(w.segs))
	for i, s := range w.segs {
		last := i == len(w.segs)-1
		got, err := w.readSegment(s, last)
		if err != nil {
			return nil, err
		}
		segRecs = append(segRecs, got)
	}
	w.dirty, w.dirDirty = true, true // rule 4
	if err := w.Sync(); err != nil {
		return nil, err
	}
	return segRecs, nil
}

// readSegment reads segment s and returns its write records; for the last
// one it keeps the file open as the active segment, cut after its last
// valid record.
func (w *WAL) readSegment(s segment, last bool) ([]Record, error) {
	f, err := w.disk.Open(w.path(s.name))
	if err != nil {
		return nil, fmt.Errorf("wal: open %s: %w", s.name, err)
	}
	data, err := w.cache.read(s, f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("wal: read %s: %w", s.name, err)
	}
	recs, end, err := w.cache.scan(s, data)
	if err == nil && end < len(data) && (!last || validAfter(data, end)) {
		err = fmt.Errorf("%w: %s: damaged record at offset %d", ErrCorrupt, s.name, end)
	}
	if err != nil || !last {
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", w.dir, err)
		}
		w.bytes += int64(len(data))
		return recs, nil
	}
	w.file, w.size = f, int64(end)
	if end < len(data) {
		if err := f.Truncate(int64(end)); err != nil {
			return nil, fmt.Errorf("wal: truncate %s: %w", s.name, err)
		}
	}
	if end == 0 { // rule 3: a header never synced
		hdr := appendFrame(nil, recordHeader, headerBody(s.seq))
		if _, err := f.WriteAt(hdr, 0); err != nil {
			return nil, fmt.Errorf("wal: write %s: %w", s.name, err)
		}
		w.size = int64(len(hdr))
	}
	w.bytes += w.size
	return recs, nil
}

// scan decodes the records of a segment with sequence seq. It returns the
// write records and the end of the last valid record; an error only for a
// valid record with impossible contents (ErrCorrupt).
func scan(data []byte, seq uint64) ([]Record, int, error) {
	return scanFrom(nil, data, 0, seq)
}

// scanFrom is scan from offset off, a record boundary, appending to recs.
func scanFrom(recs []Record, data []byte, off int, seq uint64) ([]Record, int, error) {
	for off < len(data) {
		t, body, size, err := decodeFrame(data[off:])
		if err != nil {
			break
		}
		switch {
		case off == 0:
			if t != recordHeader || len(body) != headerBodyBytes || body[0] != formatVersion ||
				binary.LittleEndian.Uint64(body[1:]) != seq {
				return nil, 0, fmt.Errorf("%w: bad segment header", ErrCorrupt)
			}
		case t == recordWrite:
			r, err := decodeWrite(body)
			if err != nil {
				return nil, 0, fmt.Errorf("%w: bad write record at offset %d", ErrCorrupt, off)
			}
			recs = append(recs, r)
		default:
			return nil, 0, fmt.Errorf("%w: record of type %d at offset %d", ErrCorrupt, t, off)
		}
		off += size
	}
	return recs, off, nil
}

// validAfter reports whether a valid record starts anywhere after off.
func validAfter(data []byte, off int) bool {
	for o := off + 1; o+frameHeaderBytes <= len(data); o++ {
		if _, _, _, err := decodeFrame(data[o:]); err == nil {
			return true
		}
	}
	return false
}

// readAll reads the whole file.
func readAll(f raftlog.File) ([]byte, error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	data := make([]byte, size)
	if size == 0 {
		return data, nil
	}
	n, err := f.ReadAt(data, 0)
	if err == io.EOF && int64(n) == size {
		err = nil
	}
	return data, err
}
