package clientlib

import (
	"fmt"
	"slices"
	"testing"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// rec is a compacted record at offset; value "" is a tombstone.
func rec(offset int64, key, value string) compact.Record {
	r := compact.Record{Offset: offset, Record: recordbatch.Record{TimestampMs: 100 + offset, Key: []byte(key)}}
	if value != "" {
		r.Value = []byte(value)
	}
	return r
}

// compactedBytes is one compacted batch over [base, base+delta].
func compactedBytes(t testing.TB, base int64, delta int32, records ...compact.Record) []byte {
	t.Helper()
	b := compact.Batch{BaseOffset: base, LastOffsetDelta: delta, FirstTimestampMs: 100 + base, MaxTimestampMs: 100 + base,
		DeleteHorizonMs: compact.NoHorizon, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: records}
	for _, r := range records {
		if r.Value == nil {
			b.DeleteHorizonMs = 1000
		}
	}
	out, err := compact.AppendBatch(nil, &b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// offsetsOf is "key@offset" of records.
func offsetsOf(records []*Record) []string {
	var out []string
	for _, r := range records {
		out = append(out, fmt.Sprintf("%s@%d", r.Key, r.Offset))
	}
	return out
}

// TestDecodeCompactedBatches shows the consumer reads a compacted prefix
// followed by the live log: each survivor at its own offset (gaps where
// compaction removed records, even whole batches), a tombstone as a null
// value, an emptied batch moving the position past its range, the live
// raft batch after it dense from its base; a read from inside the prefix
// skips what lies before; the high-water mark caps records and position.
func TestDecodeCompactedBatches(t *testing.T) {
	live, err := recordbatch.Encode(nil, []recordbatch.Record{{TimestampMs: 1, Key: []byte("d"), Value: []byte("1")}})
	if err != nil {
		t.Fatal(err)
	}
	batches := []*strandpb.FetchResponse_Batch{
		{BaseOffset: 0, Records: compactedBytes(t, 0, 4, rec(1, "a", "2"), rec(4, "b", ""))},
		{BaseOffset: 9, Records: compactedBytes(t, 9, 2)}, // emptied, kept for its producer
		{BaseOffset: 12, Records: compactedBytes(t, 12, 0, rec(12, "c", "1"))},
		{BaseOffset: 13, Records: live},
	}
	records, next, err := decodeBatches("t", 0, batches, 0, 14, false)
	if err != nil || next != 14 {
		t.Fatalf("next %d, %v", next, err)
	}
	if got, want := offsetsOf(records), []string{"a@1", "b@4", "c@12", "d@13"}; !slices.Equal(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}
	if records[1].Value != nil || string(records[0].Value) != "2" || records[2].Timestamp.UnixMilli() != 112 {
		t.Fatalf("values or timestamps: %+v %+v %+v", records[0], records[1], records[2])
	}
	records, next, err = decodeBatches("t", 0, batches[:2], 2, 10, false)
	if got := offsetsOf(records); err != nil || !slices.Equal(got, []string{"b@4"}) || next != 10 {
		t.Fatalf("from 2 to hwm 10: %q next %d %v", got, next, err)
	}
	bad := slices.Clone(batches[0].Records)
	bad[len(bad)-1] ^= 1
	if _, _, err := decodeBatches("t", 0, []*strandpb.FetchResponse_Batch{{Records: bad}}, 0, 14, false); err == nil {
		t.Fatalf("damaged compacted batch decoded")
	}
}
