package tier

import (
	"testing"

	"pgregory.net/rapid"
)

// TestManifestProperties drives random ADDs (near the manifest's end, of
// random terms), TRIMs and retries against the manifest's promises: the
// invariants hold after every command; coverage from Start to Next has no
// gap; an accepted segment is where Locate finds it; a refused or
// duplicate one changes nothing; a Trim answers exactly the segments wholly
// below the new start; an upload NextUpload proposes is accepted.
func TestManifestProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var m Manifest
		logStart := int64(0)
		var added []Segment
		for step := 0; step < 60; step++ {
			before := m.Segments()
			beforeStart := m.start
			switch rapid.IntRange(0, 5).Draw(t, "cmd") {
			case 0, 1, 2: // an upload near the end
				base := m.Next() + rapid.Int64Range(-5, 5).Draw(t, "base-delta")
				if base < 0 {
					base = 0
				}
				seg := Segment{Base: base, End: base + rapid.Int64Range(1, 20).Draw(t, "len"), Bytes: 100, MaxTimeMs: -1, Term: rapid.Uint64Range(1, 4).Draw(t, "term")}
				want, active := m.Next(), m.Active()
				out, err := m.Add(seg)
				if err != nil {
					t.Fatal(err)
				}
				switch out {
				case Added:
					if !active {
						want = seg.Base
					}
					if seg.Base > want || seg.End <= want {
						t.Fatalf("added %+v although it does not cover %d", seg, want)
					}
					if got, ok := m.Locate(max(want, m.start)); !ok || got != seg {
						t.Fatalf("added %+v, Locate(%d) = %+v %v", seg, want, got, ok)
					}
					added = append(added, seg)
				default:
					if !sameSegs(before, m.Segments()) || beforeStart != m.start {
						t.Fatalf("outcome %v changed the manifest", out)
					}
				}
			case 3: // a retried ADD of something added before
				if len(added) > 0 {
					seg := added[rapid.IntRange(0, len(added)-1).Draw(t, "which")]
					listed := false
					for _, s := range before {
						listed = listed || s == seg
					}
					out, _ := m.Add(seg)
					if listed && out != Duplicate {
						t.Fatalf("retry of listed %+v: %v", seg, out)
					}
					if out != Added && (!sameSegs(before, m.Segments()) || beforeStart != m.start) {
						t.Fatalf("retry outcome %v changed the manifest", out)
					}
				}
			case 4: // the log start moves
				logStart += rapid.Int64Range(0, 15).Draw(t, "trim")
				wasActive := m.Active()
				gone := m.Trim(logStart)
				if wasActive && m.start < logStart {
					t.Fatalf("remote start %d below the trim to %d", m.start, logStart)
				}
				for _, s := range gone {
					if s.End > logStart {
						t.Fatalf("trim to %d dropped %+v", logStart, s)
					}
				}
				for _, s := range m.segs {
					if wasActive && s.End <= logStart {
						t.Fatalf("trim to %d kept %+v", logStart, s)
					}
				}
				if len(gone)+len(m.segs) != len(before) {
					t.Fatalf("trim lost or made segments: %d gone + %d kept != %d", len(gone), len(m.segs), len(before))
				}
			case 5: // what NextUpload proposes is accepted
				from := logStart
				if m.Active() {
					from = m.Next()
				}
				stable := from + 30
				sealed := []Range{{0, from + 3}, {from + 3, from + 10}}
				r, ok := m.NextUpload(logStart, sealed, stable)
				if !ok {
					t.Fatalf("no upload proposed from %d over %v", m.Next(), sealed)
				}
				if out, err := m.Add(Segment{Base: r.Base, End: r.End, Bytes: 1, MaxTimeMs: -1, Term: 9}); out != Added || err != nil {
					t.Fatalf("proposed %+v: %v %v", r, out, err)
				}
			}
			if err := m.Check(); err != nil {
				t.Fatal(err)
			}
			if !m.Empty() && m.segs[0].End <= m.start {
				t.Fatalf("a segment wholly below the log start %d is listed: %+v", logStart, m.segs[0])
			}
			for off := m.start; off < m.Next(); off++ {
				if _, ok := m.Locate(off); !ok {
					t.Fatalf("offset %d in [%d, %d) not located", off, m.start, m.Next())
				}
			}
			if _, ok := m.Locate(m.start - 1); ok && m.start > 0 {
				t.Fatalf("offset below the remote start located")
			}
			if r := m.LocalRemote(); r.Base != m.start || r.End < r.Base || (m.Empty() && r.End != r.Base) {
				t.Fatalf("local-remote range %+v, start %d, %d segments", r, m.start, len(m.segs))
			}
			for _, s := range m.segs {
				if m.Orphan(s, 100) {
					t.Fatalf("listed %+v called an orphan", s)
				}
			}
		}
	})
}

func sameSegs(a, b []Segment) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestNextUploadWaitsForStableAndSealed(t *testing.T) {
	var m Manifest
	sealed := []Range{{0, 10}, {10, 25}}
	if r, ok := m.NextUpload(0, sealed, 9); ok {
		t.Fatalf("uploaded %+v past the stable offset 9", r)
	}
	r, ok := m.NextUpload(0, sealed, 10)
	if !ok || r != (Range{0, 10}) {
		t.Fatalf("first upload %+v %v", r, ok)
	}
	m.Add(Segment{Base: 0, End: 10, Bytes: 1, MaxTimeMs: -1, Term: 1})
	if r, ok := m.NextUpload(0, sealed, 24); ok {
		t.Fatalf("uploaded %+v of a segment not yet stable", r)
	}
	if _, ok := m.NextUpload(0, []Range{{12, 25}}, 100); ok {
		t.Fatal("uploaded across a hole in the local log")
	}
	m.Trim(15)
	if r, ok := m.NextUpload(15, sealed, 100); !ok || r != (Range{15, 25}) {
		t.Fatalf("after the log start moved to 15: %+v %v", r, ok)
	}
	if _, ok := m.NextUpload(0, sealed[:1], 100); ok {
		t.Fatal("uploaded with nothing sealed past the remote end")
	}
}

func TestOrphan(t *testing.T) {
	var m Manifest
	m.Add(Segment{Base: 0, End: 10, Bytes: 1, MaxTimeMs: -1, Term: 2})
	m.Add(Segment{Base: 10, End: 20, Bytes: 1, MaxTimeMs: -1, Term: 3})
	m.Trim(12)
	for _, c := range []struct {
		seg  Segment
		term uint64
		want bool
	}{
		{Segment{Base: 10, End: 20, Term: 3}, 5, false}, // listed
		{Segment{Base: 0, End: 10, Term: 2}, 3, true},   // trimmed away
		{Segment{Base: 10, End: 18, Term: 2}, 3, true},  // lost a race
		{Segment{Base: 20, End: 30, Term: 3}, 3, false}, // this leader's upload in flight
		{Segment{Base: 20, End: 30, Term: 2}, 3, true},  // an old term's that never committed
		{Segment{Base: 20, End: 30, Term: 4}, 3, false}, // a newer leader's
		{Segment{Base: 10, End: 20, Term: 2}, 3, true},  // same range, another term
	} {
		if got := m.Orphan(c.seg, c.term); got != c.want {
			t.Errorf("Orphan(%+v, term %d) = %v", c.seg, c.term, got)
		}
	}
}

func TestSegmentKeys(t *testing.T) {
	seg := Segment{Base: 42, End: 1 << 40, Term: 7}
	key := SegmentKey("topics/abc/3", seg)
	if key != "topics/abc/3/00000000000000000042-00000001099511627776-7.seg" {
		t.Fatalf("key %s", key)
	}
	got, ok := ParseSegmentKey("topics/abc/3", key)
	if !ok || got != seg {
		t.Fatalf("parse %s: %+v %v", key, got, ok)
	}
	for _, bad := range []string{
		"topics/abc/3/00000000000000000042-00000001099511627776-07.seg",
		"topics/abc/3/00000000000000000042-00000000000000000042-7.seg",
		"topics/abc/3/x/00000000000000000042-00000001099511627776-7.seg",
		"topics/abc/30/00000000000000000042-00000001099511627776-7.seg",
		"topics/abc/3/00000000000000000042-00000001099511627776-7.idx",
		"topics/abc/3/42-1099511627776-7.seg",
	} {
		if _, ok := ParseSegmentKey("topics/abc/3", bad); ok {
			t.Errorf("parsed %s", bad)
		}
	}
}

// TestInactiveIgnoresTrims: a partition that never tiered keeps the zero
// manifest through trims (its snapshot and digest stay as before tiering).
func TestInactiveIgnoresTrims(t *testing.T) {
	var m Manifest
	if gone := m.Trim(50); gone != nil || m.Start() != 0 || m.Active() {
		t.Fatalf("inactive manifest after a trim: %+v", m)
	}
	if out, _ := m.Add(Segment{Base: 50, End: 60, Bytes: 1, MaxTimeMs: -1, Term: 1}); out != Added || m.Start() != 50 {
		t.Fatalf("first add: %v, start %d", out, m.Start())
	}
	if out, _ := m.Add(Segment{Base: 61, End: 70, Bytes: 1, MaxTimeMs: -1, Term: 1}); out != Stale {
		t.Fatalf("an add leaving a gap: %v", out)
	}
	m.Trim(65)
	if out, _ := m.Add(Segment{Base: 61, End: 70, Bytes: 1, MaxTimeMs: -1, Term: 1}); out != Added {
		t.Fatalf("an add covering the start after a trim past everything: %v", out)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}
