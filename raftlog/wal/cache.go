package wal

import (
	"bytes"
	"io"

	"github.com/strandlog/strand/raftlog"
)

// Cache holds the records OpenCached decoded from each segment of one
// write-ahead log directory, with the bytes they came from. A segment's
// records up to the end of its last valid record are a function of its
// bytes up to there (scan reads frame after frame), so when those bytes
// are unchanged only what follows them needs decoding: an appended
// segment costs a comparison of its old bytes and a decode of its new
// ones. The zero value is empty and ready; a nil *Cache caches nothing.
//
// Rejected: keying segments by name and size alone (a recovery that cut a
// torn tail and wrote new bytes of the same length would reuse stale
// records).
type Cache struct {
	segs map[string]cachedSegment
	// scratch receives a cached segment's old bytes for the comparison
	// (read), reused from one recovery to the next.
	scratch []byte
}

// cachedSegment is one segment as a scan last saw it: its bytes, the
// records decoded from them and the end of the last valid one. Records'
// entry data alias data[:end], which is never written; read may write
// the bytes past end (no record refers to them).
type cachedSegment struct {
	data []byte
	recs []Record
	end  int
}

// read returns the bytes of segment s, open as f (readAll). When the
// cache holds s and f still begins with its bytes up to the end of its
// last valid record (read into scratch and compared: never trusted by
// size), only the bytes after them are read into new memory, appended in
// place to the cached ones; scan then decodes only those. Otherwise the
// whole file is read anew.
func (c *Cache) read(s segment, f raftlog.File) ([]byte, error) {
	if c == nil {
		return readAll(f)
	}
	old, ok := c.segs[s.name]
	if !ok || old.end == 0 {
		return readAll(f)
	}
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size < int64(old.end) {
		return readAll(f)
	}
	if cap(c.scratch) < old.end {
		c.scratch = make([]byte, old.end, 2*old.end)
	}
	prefix := c.scratch[:old.end]
	if err := readFull(f, prefix, 0); err != nil {
		return nil, err
	}
	if !bytes.Equal(prefix, old.data[:old.end]) {
		return readAll(f)
	}
	data := old.data[:old.end]
	if int64(cap(data)) < size {
		grown := make([]byte, old.end, 2*size) // records keep the old array
		copy(grown, data)
		data = grown
	}
	data = data[:size]
	if err := readFull(f, data[old.end:], int64(old.end)); err != nil {
		return nil, err
	}
	return data, nil
}

// readFull reads len(p) bytes of f at off.
func readFull(f raftlog.File, p []byte, off int64) error {
	if len(p) == 0 {
		return nil
	}
	n, err := f.ReadAt(p, off)
	if err == io.EOF && n == len(p) {
		err = nil
	}
	return err
}

// scan is scan(data, s.seq) for segment s, reusing and updating the
// cache's view of s.
func (c *Cache) scan(s segment, data []byte) ([]Record, int, error) {
	if c == nil {
		return scan(data, s.seq)
	}
	old, ok := c.segs[s.name]
	var recs []Record
	var end int
	var err error
	if ok && old.end > 0 && len(data) >= old.end && bytes.Equal(data[:old.end], old.data[:old.end]) {
		// Appending may write into old.recs' spare capacity, past the
		// end of every list handed out before (OpenCachedSegments), which
		// no one reads; the entry is replaced or deleted below.
		recs, end, err = scanFrom(old.recs, data, old.end, s.seq)
	} else {
		recs, end, err = scan(data, s.seq)
	}
	if err != nil {
		delete(c.segs, s.name)
		return nil, 0, err
	}
	if c.segs == nil {
		c.segs = map[string]cachedSegment{}
	}
	c.segs[s.name] = cachedSegment{data: data, recs: recs, end: end}
	return recs, end, nil
}

// keepOnly forgets the segments not in segs (removed since).
func (c *Cache) keepOnly(segs []segment) {
	if c == nil || len(c.segs) == 0 {
		return
	}
	live := make(map[string]bool, len(segs)) // lookup only
	for _, s := range segs {
		live[s.name] = true
	}
	for name := range c.segs {
		if !live[name] {
			delete(c.segs, name)
		}
	}
}
