package node

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/strandlog/strand/engine/tier"
	"github.com/strandlog/strand/objstore/dirstore"
)

// TestReadRemoteLog: a partition's remote log is read from its objects
// alone: the contiguous run ending at the highest offset (an older term's
// overlapping object and objects of another partition left out), each
// segment's size, CRC and newest timestamp from the object; an empty
// prefix is an empty log from 0, and an object whose batches do not hold
// the offsets its key names fails the read.
func TestReadRemoteLog(t *testing.T) {
	ctx := context.Background()
	store, err := dirstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	put := func(prefix string, base, end int64, term uint64, first int64) tier.Segment {
		t.Helper()
		var bs []tier.Batch
		for o := first; o < end; o++ {
			bs = append(bs, tier.Batch{BaseOffset: o, NextOffset: o + 1, ProducerID: -1, BaseSequence: -1, MaxTimeMs: 100 + o, Data: []byte{byte(o)}})
		}
		obj, err := tier.EncodeObject(bs)
		if err != nil {
			t.Fatal(err)
		}
		seg := tier.Segment{Base: base, End: end, Term: term, Bytes: int64(len(obj)), CRC: crc32c(obj), MaxTimeMs: 100 + end - 1}
		if err := store.Put(ctx, tier.SegmentKey(prefix, seg), bytes.NewReader(obj), int64(len(obj))); err != nil {
			t.Fatal(err)
		}
		return seg
	}
	const prefix = "topics/u/0"
	a := put(prefix, 3, 6, 1, 3)
	put(prefix, 4, 8, 1, 4) // an overlapping upload that lost its race
	b := put(prefix, 6, 9, 2, 6)
	put("topics/u/10", 9, 12, 2, 9)
	m, err := readRemoteLog(ctx, store, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Segments(); m.Start() != 3 || m.Next() != 9 || len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("remote log [%d, %d) %+v; want [3, 9) of %+v %+v", m.Start(), m.Next(), got, a, b)
	}
	if m, err := readRemoteLog(ctx, store, "topics/u/1"); err != nil || !m.Active() || m.Start() != 0 || m.Next() != 0 {
		t.Fatalf("empty prefix: [%d, %d) active %v, %v", m.Start(), m.Next(), m.Active(), err)
	}
	put(prefix, 9, 12, 2, 10) // its batches start at 10, its key says 9
	if _, err := readRemoteLog(ctx, store, prefix); !errors.Is(err, tier.ErrCorrupt) {
		t.Fatalf("an object unlike its key: %v, want ErrCorrupt", err)
	}
}

// TestReadRemoteLogStartMarker: the remote log read for a recovery starts
// at the highest log start marker under the prefix (a delete-records or
// retention trim the lost cluster applied), leaving out the objects
// wholly below it, whose deletion was still pending; a marker below the
// first object gives way to it.
func TestReadRemoteLogStartMarker(t *testing.T) {
	ctx := context.Background()
	store, err := dirstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "topics/u/0"
	var segs []tier.Segment
	for _, r := range [][2]int64{{3, 6}, {6, 9}, {9, 12}} {
		var bs []tier.Batch
		for o := r[0]; o < r[1]; o++ {
			bs = append(bs, tier.Batch{BaseOffset: o, NextOffset: o + 1, ProducerID: -1, BaseSequence: -1, MaxTimeMs: 100 + o, Data: []byte{byte(o)}})
		}
		obj, err := tier.EncodeObject(bs)
		if err != nil {
			t.Fatal(err)
		}
		seg := tier.Segment{Base: r[0], End: r[1], Term: 1, Bytes: int64(len(obj)), CRC: crc32c(obj), MaxTimeMs: 100 + r[1] - 1}
		if err := store.Put(ctx, tier.SegmentKey(prefix, seg), bytes.NewReader(obj), int64(len(obj))); err != nil {
			t.Fatal(err)
		}
		segs = append(segs, seg)
	}
	for _, c := range []struct {
		mark      int64
		wantStart int64
		want      []tier.Segment
	}{
		{1, 3, segs},     // a marker below the first object
		{4, 4, segs},     // delete-records inside the first object
		{7, 7, segs[1:]}, // the first object's deletion pending
		{12, 12, nil},    // every record deleted
	} {
		if err := store.Put(ctx, tier.StartKey(prefix, c.mark), bytes.NewReader(nil), 0); err != nil {
			t.Fatal(err)
		}
		m, err := readRemoteLog(ctx, store, prefix)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Segments(); m.Start() != c.wantStart || m.Next() != 12 || len(got) != len(c.want) || (len(got) > 0 && got[0] != c.want[0]) {
			t.Fatalf("marker %d: remote log [%d, %d) of %+v; want [%d, 12) of %+v", c.mark, m.Start(), m.Next(), got, c.wantStart, c.want)
		}
	}
}
