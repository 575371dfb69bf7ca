package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// sampleRecords covers null and empty keys and values, headers with null
// and empty values, and timestamps before and after the first.
func sampleRecords() []Record {
	return []Record{
		{TimestampMs: 1_700_000_000_000, Key: []byte("k1"), Value: []byte("v1")},
		{TimestampMs: 1_700_000_000_005, Key: nil, Value: []byte("no key")},
		{TimestampMs: 1_699_999_999_990, Key: []byte{}, Value: nil},
		{TimestampMs: 1_700_000_000_100, Key: []byte("h"), Value: []byte{}, Headers: []Header{
			{Key: "trace", Value: []byte("abc")},
			{Key: "", Value: nil},
			{Key: "empty", Value: []byte{}},
		}},
	}
}

// tb is what the helpers need of testing.TB and *rapid.T alike.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// decodeAll collects a batch's records, copying headers (reused by Decode).
func decodeAll(t tb, batch []byte) ([]Record, error) {
	var out []Record
	err := Decode(batch, func(i int, r Record) error {
		if i != len(out) {
			t.Fatalf("Decode gave index %d, want %d", i, len(out))
		}
		r.Headers = append([]Header(nil), r.Headers...)
		out = append(out, r)
		return nil
	})
	return out, err
}

// mustEncode encodes records or fails the test.
func mustEncode(t tb, records []Record) []byte {
	t.Helper()
	b, err := Encode(nil, records)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return b
}

// TestRoundTrip shows Encode, Validate and Decode agree on every field,
// keeping null apart from empty.
func TestRoundTrip(t *testing.T) {
	records := sampleRecords()
	batch := mustEncode(t, records)
	info, err := Validate(batch)
	if err != nil {
		t.Fatalf("Validate: %v", err)
	}
	want := Info{RecordCount: 4, FirstTimestampMs: 1_700_000_000_000, MaxTimestampMs: 1_700_000_000_100}
	if info != want {
		t.Fatalf("Info = %+v, want %+v", info, want)
	}
	got, err := decodeAll(t, batch)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if !reflect.DeepEqual(got, records) {
		t.Fatalf("decoded %#v\nwant %#v", got, records)
	}
	if got[1].Key != nil || got[2].Key == nil || got[2].Value != nil || got[3].Value == nil {
		t.Fatalf("null and empty not kept apart: %#v", got)
	}
	again := mustEncode(t, got)
	if !bytes.Equal(again, batch) {
		t.Fatalf("re-encoding differs")
	}
}

// TestDecodeDoesNotCopy shows keys and values are slices of the batch.
func TestDecodeDoesNotCopy(t *testing.T) {
	batch := mustEncode(t, []Record{{Key: []byte("key"), Value: []byte("value")}})
	it := NewIterator(batch)
	if !it.Next() {
		t.Fatalf("no record: %v", it.Err())
	}
	r := it.Record()
	r.Value[0] = 'V'
	if !bytes.Contains(batch, []byte("Value")) {
		t.Fatalf("value is a copy, not a view of the batch")
	}
}

// TestBuilderAppendsToBuffer shows Finish keeps the caller's prefix and
// Len tracks the encoded size.
func TestBuilderAppendsToBuffer(t *testing.T) {
	var b Builder
	b.Reset([]byte("prefix"))
	if b.Len() != HeaderBytes || b.Count() != 0 {
		t.Fatalf("empty builder: Len %d Count %d", b.Len(), b.Count())
	}
	if _, err := b.Finish(); !errors.Is(err, ErrEmpty) {
		t.Fatalf("Finish of an empty batch: %v, want ErrEmpty", err)
	}
	b.Reset([]byte("prefix"))
	for _, r := range sampleRecords() {
		if err := b.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	out, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(out, []byte("prefix")) || len(out)-6 != b.Len() || b.Count() != 4 {
		t.Fatalf("out %d bytes, Len %d, Count %d", len(out), b.Len(), b.Count())
	}
	if _, err := Validate(out[6:]); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

// TestLimits shows a record over 1 MiB and a batch over BatchBytesMax are
// refused by both Builder and Validate, while a record of exactly 1 MiB
// (key, value and headers together) passes.
func TestLimits(t *testing.T) {
	big := make([]byte, RecordBytesMax-10)
	exact := Record{Key: make([]byte, 5), Value: big, Headers: []Header{{Key: "ab", Value: []byte("cde")}}}
	batch, err := Encode(nil, []Record{exact})
	if err != nil {
		t.Fatalf("exactly 1 MiB: %v", err)
	}
	if _, err := Validate(batch); err != nil {
		t.Fatalf("Validate exactly 1 MiB: %v", err)
	}
	over := exact
	over.Key = make([]byte, 6)
	if _, err := Encode(nil, []Record{over}); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("Encode of 1 MiB + 1: %v, want ErrRecordTooLarge", err)
	}
	// Hand-build a batch holding an oversized record: Validate must refuse it.
	forged := forgeBatch(1, 0, func(b []byte) []byte {
		b = binary.AppendVarint(b, 0)
		b = binary.AppendVarint(b, -1)
		b = binary.AppendVarint(b, RecordBytesMax+1)
		b = append(b, make([]byte, RecordBytesMax+1)...)
		return binary.AppendUvarint(b, 0)
	})
	if _, err := Validate(forged); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("Validate of 1 MiB + 1: %v, want ErrRecordTooLarge", err)
	}
	var b Builder
	b.Reset(nil)
	if err := b.Append(exact); err != nil {
		t.Fatal(err)
	}
	if err := b.Append(Record{Value: make([]byte, 64<<10)}); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("Append past BatchBytesMax: %v, want ErrBatchTooLarge", err)
	}
	if b.Count() != 1 {
		t.Fatalf("refused record changed the batch: Count %d", b.Count())
	}
	if _, err := Validate(make([]byte, BatchBytesMax+1)); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("Validate of an oversized batch: %v, want ErrBatchTooLarge", err)
	}
}

// forgeBatch builds a batch header around a hand-written records section
// with a correct CRC, so tests reach the record checks.
func forgeBatch(count uint32, firstTimestampMs int64, records func([]byte) []byte) []byte {
	b := make([]byte, HeaderBytes)
	b = records(b)
	b[0] = Magic
	binary.LittleEndian.PutUint32(b[8:12], count)
	binary.LittleEndian.PutUint64(b[12:20], uint64(firstTimestampMs))
	binary.LittleEndian.PutUint32(b[20:24], uint32(len(b)-HeaderBytes))
	fixCRC(b)
	return b
}

// fixCRC rewrites a batch's CRC after a test changed its bytes.
func fixCRC(b []byte) {
	binary.LittleEndian.PutUint32(b[4:8], crc32.Checksum(b[8:], castagnoli))
}

// TestValidateRefusesDamage shows each field's damage is refused with the
// right sentinel, also when the CRC is recomputed to match.
func TestValidateRefusesDamage(t *testing.T) {
	good := mustEncode(t, sampleRecords())
	record := func(parts ...[]byte) func([]byte) []byte {
		return func(b []byte) []byte {
			for _, p := range parts {
				b = append(b, p...)
			}
			return b
		}
	}
	tests := []struct {
		name  string
		batch []byte
		want  error
	}{
		{"short", good[:HeaderBytes-1], ErrCorrupt},
		{"magic", withByte(good, 0, 2, true), ErrCorrupt},
		{"compression", withByte(good, 1, 1, true), ErrCorrupt},
		{"attribute bit", withByte(good, 1, 0x80, true), ErrCorrupt},
		{"reserved", withByte(good, 3, 1, true), ErrCorrupt},
		{"crc", withByte(good, 4, good[4]^1, false), ErrCorrupt},
		{"bit flip in records", withByte(good, 30, good[30]^0x10, false), ErrCorrupt},
		{"count zero", withUint32(good, 8, 0), ErrEmpty},
		{"count one more", withUint32(good, 8, 5), ErrCorrupt},
		{"count one less", withUint32(good, 8, 3), ErrCorrupt},
		{"count huge", withUint32(good, 8, math.MaxUint32), ErrCorrupt},
		{"records_bytes", withUint32(good, 20, uint32(len(good)-HeaderBytes-1)), ErrCorrupt},
		{"trailing byte", appendFixed(good, 0), ErrCorrupt},
		{"truncated", truncateFixed(good, 1), ErrCorrupt},
		{"first delta not zero", forgeBatch(1, 5, record([]byte{2, 1, 1, 0})), ErrCorrupt},
		{"non-minimal varint", forgeBatch(1, 5, record([]byte{0x80, 0x00, 1, 1, 0})), ErrCorrupt},
		{"key length below -1", forgeBatch(1, 5, record([]byte{0, 3, 1, 0})), ErrCorrupt},
		{"key past end", forgeBatch(1, 5, record([]byte{0, 20, 1, 0})), ErrCorrupt},
		{"header count past end", forgeBatch(1, 5, record([]byte{0, 1, 1, 9})), ErrCorrupt},
		{"header key past end", forgeBatch(1, 5, record([]byte{0, 1, 1, 1, 9, 1})), ErrCorrupt},
		{"header value below -1", forgeBatch(1, 5, record([]byte{0, 1, 1, 1, 0, 3})), ErrCorrupt},
		{"varint overflow", forgeBatch(1, 5, record(bytes.Repeat([]byte{0xff}, 10), []byte{1, 1, 1, 0})), ErrCorrupt},
		{"timestamp overflow", forgeBatch(2, math.MaxInt64, record([]byte{0, 1, 1, 0}, []byte{2, 1, 1, 0})), ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Validate(tt.batch)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Validate: %v, want %v", err, tt.want)
			}
			if _, derr := decodeAll(t, tt.batch); derr == nil {
				t.Fatalf("Decode accepted what Validate refused (%v)", err)
			}
		})
	}
}

// withByte returns a copy of b with b[i] = v, the CRC recomputed if fix.
func withByte(b []byte, i int, v byte, fix bool) []byte {
	c := bytes.Clone(b)
	c[i] = v
	if fix {
		fixCRC(c)
	}
	return c
}

// withUint32 returns a copy of b with a u32 field changed and CRC fixed.
func withUint32(b []byte, i int, v uint32) []byte {
	c := bytes.Clone(b)
	binary.LittleEndian.PutUint32(c[i:], v)
	fixCRC(c)
	return c
}

// appendFixed appends bytes inside records_bytes, keeping length and CRC
// consistent, so only the record walk can see the damage.
func appendFixed(b []byte, extra ...byte) []byte {
	c := append(bytes.Clone(b), extra...)
	binary.LittleEndian.PutUint32(c[20:24], uint32(len(c)-HeaderBytes))
	fixCRC(c)
	return c
}

// truncateFixed drops the last n bytes, keeping length and CRC consistent.
func truncateFixed(b []byte, n int) []byte {
	c := bytes.Clone(b[:len(b)-n])
	binary.LittleEndian.PutUint32(c[20:24], uint32(len(c)-HeaderBytes))
	fixCRC(c)
	return c
}

// TestDecodeStopsAtCallbackError shows fn's error ends Decode and is returned.
func TestDecodeStopsAtCallbackError(t *testing.T) {
	stop := errors.New("stop")
	calls := 0
	err := Decode(mustEncode(t, sampleRecords()), func(int, Record) error {
		calls++
		return stop
	})
	if err != stop || calls != 1 {
		t.Fatalf("err %v after %d calls, want stop after 1", err, calls)
	}
}

// recordGen draws records with null/empty keys and values, headers and
// timestamps spread both ways from the first.
func recordGen() *rapid.Generator[Record] {
	nullable := func(t *rapid.T, label string) []byte {
		if rapid.IntRange(0, 4).Draw(t, label+"Null") == 0 {
			return nil
		}
		return rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, label)
	}
	return rapid.Custom(func(t *rapid.T) Record {
		r := Record{
			TimestampMs: rapid.Int64Range(-1<<40, 1<<40).Draw(t, "ts"),
			Key:         nullable(t, "key"),
			Value:       nullable(t, "value"),
		}
		for i := rapid.IntRange(0, 3).Draw(t, "headers"); i > 0; i-- {
			r.Headers = append(r.Headers, Header{Key: rapid.StringN(0, 8, -1).Draw(t, "hkey"), Value: nullable(t, "hvalue")})
		}
		return r
	})
}

// TestRapidRoundTrip shows, for random record lists, that Encode's batch
// validates with the right Info, decodes to the same records and
// re-encodes to the same bytes.
func TestRapidRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		records := rapid.SliceOfN(recordGen(), 1, 30).Draw(t, "records")
		batch, err := Encode(nil, records)
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		info, err := Validate(batch)
		if err != nil {
			t.Fatalf("Validate: %v", err)
		}
		maxTs := int64(math.MinInt64)
		for _, r := range records {
			maxTs = max(maxTs, r.TimestampMs)
		}
		if info.RecordCount != int32(len(records)) || info.FirstTimestampMs != records[0].TimestampMs || info.MaxTimestampMs != maxTs {
			t.Fatalf("Info %+v for %d records, max ts %d", info, len(records), maxTs)
		}
		got, err := decodeAll(t, batch)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if !reflect.DeepEqual(got, records) {
			t.Fatalf("decoded %#v\nwant %#v", got, records)
		}
		if again := mustEncode(t, got); !bytes.Equal(again, batch) {
			t.Fatalf("re-encoding differs")
		}
	})
}

// TestValidateAllocatesNothing shows the validation hot path is free of
// allocations.
func TestValidateAllocatesNothing(t *testing.T) {
	batch := mustEncode(t, sampleRecords())
	if n := testing.AllocsPerRun(100, func() { _, _ = Validate(batch) }); n != 0 {
		t.Fatalf("Validate allocates %v times", n)
	}
}

// Grow doubles the buffer up to the limit, keeping what is in it: a
// 256 KiB batch built a 1 KiB record at a time, growing before each
// append, moves its buffer at most 9 times (1 KiB doubling), where
// append's own growth moved it 18 times; it never grows past the
// limit while the limit holds the record, and the batch is the same.
func TestBuilderGrowDoubles(t *testing.T) {
	value := make([]byte, 1<<10)
	var plain, grown Builder
	grown.Reset(make([]byte, 0, 1<<10))
	plain.Reset(make([]byte, 0, 1<<10))
	const limit = 256<<10 + HeaderBytes
	moves, plainMoves := 0, 0
	for plain.Len()+len(value)+16 <= 256<<10 {
		r := Record{TimestampMs: 5, Value: value}
		before, plainBefore := cap(grown.buf), cap(plain.buf)
		grown.Grow(len(value)+16+HeaderBytes, limit)
		if err := grown.Append(r); err != nil {
			t.Fatal(err)
		}
		if err := plain.Append(r); err != nil {
			t.Fatal(err)
		}
		if cap(grown.buf) != before {
			moves++
		}
		if cap(plain.buf) != plainBefore {
			plainMoves++
		}
		if cap(grown.buf) > limit {
			t.Fatalf("grew to %d bytes, past the limit %d", cap(grown.buf), limit)
		}
	}
	if moves > 9 {
		t.Errorf("the buffer moved %d times (append alone: %d), want at most 9", moves, plainMoves)
	}
	a, err := grown.Finish()
	if err != nil {
		t.Fatal(err)
	}
	b, err := plain.Finish()
	if err != nil || !bytes.Equal(a, b) {
		t.Fatalf("the grown batch differs from the plain one (%v)", err)
	}
}
