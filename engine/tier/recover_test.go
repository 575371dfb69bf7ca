package tier

import (
	"errors"
	"reflect"
	"testing"
)

// TestChain: the remote log is the run of contiguous objects ending at
// the highest offset, whatever the listing's order: a stale object of an
// older term beside a listed one, an overlapping upload that lost its
// race, a gap (everything below it is left out), the newer term's object
// preferred among two of the same range.
func TestChain(t *testing.T) {
	s := func(base, end int64, term uint64) Segment {
		return Segment{Base: base, End: end, Term: term, Bytes: 10}
	}
	for _, c := range []struct {
		name string
		segs []Segment
		want []Segment
	}{
		{"none", nil, nil},
		{"one", []Segment{s(4, 9, 1)}, []Segment{s(4, 9, 1)}},
		{"contiguous", []Segment{s(9, 12, 2), s(0, 4, 1), s(4, 9, 1)}, []Segment{s(0, 4, 1), s(4, 9, 1), s(9, 12, 2)}},
		{"same range, two terms", []Segment{s(0, 4, 1), s(4, 9, 1), s(4, 9, 3), s(9, 12, 3)}, []Segment{s(0, 4, 1), s(4, 9, 3), s(9, 12, 3)}},
		{"overlap that lost", []Segment{s(0, 4, 1), s(2, 7, 2), s(4, 9, 1), s(9, 12, 2)}, []Segment{s(0, 4, 1), s(4, 9, 1), s(9, 12, 2)}},
		{"gap", []Segment{s(0, 4, 1), s(5, 9, 1), s(9, 12, 1)}, []Segment{s(5, 9, 1), s(9, 12, 1)}},
		{"uncommitted tail", []Segment{s(0, 4, 1), s(4, 9, 1), s(9, 15, 2)}, []Segment{s(0, 4, 1), s(4, 9, 1), s(9, 15, 2)}},
	} {
		if got := Chain(c.segs); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: Chain = %v, want %v", c.name, got, c.want)
		}
		for i := range c.segs { // any order of the listing
			rot := append(append([]Segment(nil), c.segs[i:]...), c.segs[:i]...)
			if got := Chain(rot); !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s rotated by %d: Chain = %v, want %v", c.name, i, got, c.want)
			}
		}
	}
}

// TestRemoteLog: a recovery's log honours the highest log start marker:
// a delete-records inside the first object starts the log there, the
// objects wholly below it (trimmed, their deletion pending) are left out,
// a marker below the first object (its objects deleted, the marker late)
// gives way to that object, and a marker past every object is an empty
// log there.
func TestRemoteLog(t *testing.T) {
	s := func(base, end int64) Segment { return Segment{Base: base, End: end, Term: 1, Bytes: 10} }
	segs := []Segment{s(0, 4), s(4, 9), s(9, 12)}
	for _, c := range []struct {
		name      string
		segs      []Segment
		starts    []int64
		want      []Segment
		wantStart int64
	}{
		{"no marker", segs, nil, segs, 0},
		{"inside the first object", segs, []int64{2}, segs, 2},
		{"highest marker wins", segs, []int64{6, 2, 5}, segs[1:], 6},
		{"at an object's end", segs, []int64{9}, segs[2:], 9},
		{"below the first object", segs[1:], []int64{2}, segs[1:], 4},
		{"past every object", segs, []int64{15}, []Segment{}, 15},
		{"nothing", nil, nil, nil, 0},
	} {
		got, start := RemoteLog(c.segs, c.starts)
		if len(got) == 0 && len(c.want) == 0 {
			got, c.want = nil, nil
		}
		if !reflect.DeepEqual(got, c.want) || start != c.wantStart {
			t.Errorf("%s: RemoteLog = %v from %d, want %v from %d", c.name, got, start, c.want, c.wantStart)
		}
		if _, err := Restore(got, start); err != nil {
			t.Errorf("%s: the log does not restore: %v", c.name, err)
		}
	}
}

// TestStartKey: a marker's key reads back; other keys do not.
func TestStartKey(t *testing.T) {
	const prefix = "topics/u/3"
	if k := StartKey(prefix, 1234); k != "topics/u/3/00000000000000001234.start" {
		t.Fatalf("StartKey = %q", k)
	}
	if s, ok := ParseStartKey(prefix, StartKey(prefix, 1234)); !ok || s != 1234 {
		t.Fatalf("ParseStartKey = %d %v", s, ok)
	}
	for _, k := range []string{StartKey("topics/u/4", 1), SegmentKey(prefix, Segment{Base: 1, End: 2, Term: 1}),
		prefix + "/-0000000000000000001.start", prefix + "/1234.start", prefix + "/x/00000000000000001234.start"} {
		if _, ok := ParseStartKey(prefix, k); ok {
			t.Errorf("ParseStartKey(%q) accepted", k)
		}
	}
}

// TestDescriptorRoundTrip: a descriptor reads back as written; what no
// node writes is ErrDescriptor.
func TestDescriptorRoundTrip(t *testing.T) {
	d := Descriptor{Name: "orders", ID: "0123abcd-4567-89ef-8123-456789abcdef", Partitions: 3, ReplicationFactor: 3,
		Configs: [][2]string{{"local.retention.bytes", "4096"}, {"remote.storage.enable", "true"}}}
	b, err := EncodeDescriptor(d)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeDescriptor(b)
	if err != nil || !reflect.DeepEqual(back, d) {
		t.Fatalf("DecodeDescriptor = %+v, %v; want %+v", back, err, d)
	}
	for _, bad := range []string{
		``, `{}`, `[]`, `{"version":2,"name":"a","id":"x","partitions":1,"replication_factor":1,"configs":[]}`,
		`{"version":1,"name":"a","id":"x","partitions":0,"replication_factor":1,"configs":[]}`,
		`{"version":1,"name":"a/b","id":"x","partitions":1,"replication_factor":1,"configs":[]}`,
		`{"version":1,"name":"a","id":"../x","partitions":1,"replication_factor":1,"configs":[]}`,
		`{"version":1,"name":"a","id":"x","partitions":1,"replication_factor":1,"configs":[["b","1"],["a","2"]]}`,
		`{"version":1,"name":"a","id":"x","partitions":1,"replication_factor":1,"configs":[],"extra":1}`,
		`{"version":1,"name":"a","id":"x","partitions":1,"replication_factor":1,"configs":[]} {}`,
	} {
		if _, err := DecodeDescriptor([]byte(bad)); !errors.Is(err, ErrDescriptor) {
			t.Errorf("DecodeDescriptor(%s) = %v, want ErrDescriptor", bad, err)
		}
	}
	if _, err := EncodeDescriptor(Descriptor{Name: "a"}); !errors.Is(err, ErrDescriptor) {
		t.Errorf("EncodeDescriptor of an incomplete descriptor: %v", err)
	}
}

// FuzzDecodeDescriptor: bytes read from the bucket never panic the
// decoder; what it accepts re-encodes to a descriptor that decodes the
// same.
func FuzzDecodeDescriptor(f *testing.F) {
	b, _ := EncodeDescriptor(Descriptor{Name: "t", ID: "id", Partitions: 2, ReplicationFactor: 1, Configs: [][2]string{{"a", "b"}}})
	f.Add(b)
	f.Add([]byte(`{"version":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := DecodeDescriptor(b)
		if err != nil {
			if !errors.Is(err, ErrDescriptor) {
				t.Fatalf("error not ErrDescriptor: %v", err)
			}
			return
		}
		again, err := EncodeDescriptor(d)
		if err != nil {
			t.Fatalf("accepted %+v does not encode: %v", d, err)
		}
		if back, err := DecodeDescriptor(again); err != nil || !reflect.DeepEqual(back, d) {
			t.Fatalf("re-encoded %+v decodes to %+v, %v", d, back, err)
		}
	})
}
