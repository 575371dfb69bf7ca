package clientlib

import (
	"errors"
	"fmt"
	"testing"
)

// A Poll that waited through empty answers before one brought records
// returns one entry per partition: records in the order they came, the
// last high-water mark, the first error. Before, it returned one entry per
// answer, and a caller taking the partition's first entry (as the
// real-process kill test's recorder did) saw an empty read and then a
// position past it: a "poll-skip".
func TestMergeFetchesOneEntryPerPartition(t *testing.T) {
	rec := func(o int64) *Record { return &Record{Offset: o} }
	boom := errors.New("boom")
	got := mergeFetches(Fetches{
		{Topic: "b", Partition: 0, HighWatermark: 3},
		{Topic: "a", Partition: 1, HighWatermark: 5, LogStartOffset: 1},
		{Topic: "a", Partition: 1, Records: []*Record{rec(5), rec(6)}, HighWatermark: 7, LogStartOffset: 2},
		{Topic: "a", Partition: 0, Err: boom},
		{Topic: "a", Partition: 1, Records: []*Record{rec(7)}, HighWatermark: 8, LogStartOffset: 2},
		{Err: boom},
		{Err: boom},
	})
	want := "[{ 0 0 0 0 boom} { 0 0 0 0 boom} {a 0 0 0 0 boom} {a 1 3 8 2 <nil>} {b 0 0 3 0 <nil>}]"
	var s []string
	for _, f := range got {
		s = append(s, fmt.Sprintf("{%s %d %d %d %d %v}", f.Topic, f.Partition, len(f.Records), f.HighWatermark, f.LogStartOffset, f.Err))
	}
	if fmt.Sprint(s) != want {
		t.Fatalf("merged %v\nwant   %s", s, want)
	}
	if r := got[3].Records; r[0].Offset != 5 || r[1].Offset != 6 || r[2].Offset != 7 {
		t.Fatalf("records out of order: %d %d %d", r[0].Offset, r[1].Offset, r[2].Offset)
	}
}

// An answer whose later batch failed its CRC brings the records before it
// with the error: the merged entry's high-water mark is that answer's, not
// an earlier empty answer's below its records. Found by the simulator's
// plain consumers (seed 150: records 193..194 handed out with high-water
// mark 193, a read beyond the high-water mark).
func TestMergeFetchesHighWatermarkOfRecordsWithError(t *testing.T) {
	rec := func(o int64) *Record { return &Record{Offset: o} }
	corrupt := errors.New("corrupt batch")
	got := mergeFetches(Fetches{
		{Topic: "a", Partition: 0, HighWatermark: 193, LogStartOffset: 4},
		{Topic: "a", Partition: 0, Records: []*Record{rec(193), rec(194)}, HighWatermark: 204, LogStartOffset: 5, Err: corrupt},
	})
	if len(got) != 1 || got[0].HighWatermark != 204 || got[0].LogStartOffset != 5 || got[0].Err != corrupt || len(got[0].Records) != 2 {
		t.Fatalf("merged %+v, want records 193..194 with high-water mark 204, log start 5 and the error", got)
	}
}
