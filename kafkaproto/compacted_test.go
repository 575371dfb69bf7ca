package kafkaproto

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/engine/recordbatch"
)

// compactedBatch encodes b in engine/compact's form.
func compactedBatch(t testing.TB, b compact.Batch) []byte {
	t.Helper()
	out, err := compact.AppendBatch(nil, &b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// kafkaRecords parses the records of a served Kafka batch with franz-go's
// record parser: offset and timestamp as a client computes them.
func kafkaRecords(t *testing.T, served []byte) (kmsg.RecordBatch, []kmsg.Record) {
	t.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(served); err != nil {
		t.Fatal(err)
	}
	if uint32(rb.CRC) != crc32.Checksum(served[v2AttrOffset:], castagnoli) {
		t.Fatalf("CRC %x does not cover the batch", uint32(rb.CRC))
	}
	var out []kmsg.Record
	rest := rb.Records
	for i := int32(0); i < rb.NumRecords; i++ {
		n, used := binary.Varint(rest)
		if used <= 0 || int(n) > len(rest)-used {
			t.Fatalf("record %d: bad length", i)
		}
		var r kmsg.Record
		if err := r.ReadFrom(rest[:used+int(n)]); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		out = append(out, r)
		rest = rest[used+int(n):]
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes after the records", len(rest))
	}
	return rb, out
}

// TestAppendCompacted shows a compacted batch served as Kafka's cleaner
// leaves one: the original offset range with gaps, survivors at their own
// offsets and timestamps with keys, values (a tombstone null) and headers,
// producer fields and bits kept, a CRC Kafka clients check; an empty kept
// batch and a marker too; damaged input is ErrCorruptBatch.
func TestAppendCompacted(t *testing.T) {
	rec := func(off, ts int64, key, value string) compact.Record {
		r := compact.Record{Offset: off, Record: recordbatch.Record{TimestampMs: ts, Key: []byte(key)}}
		if value != "" {
			r.Value = []byte(value)
		}
		return r
	}
	withHeader := rec(104, 1007, "b", "2")
	withHeader.Headers = []recordbatch.Header{{Key: "h", Value: []byte("v")}}
	in := compactedBatch(t, compact.Batch{BaseOffset: 100, LastOffsetDelta: 9, FirstTimestampMs: 1000, DeleteHorizonMs: 5000,
		ProducerID: 7, ProducerEpoch: 3, BaseSequence: 40, Transactional: true,
		Records: []compact.Record{rec(101, 1003, "a", ""), withHeader, rec(109, 999, "c", "3")}})
	served, err := AppendCompacted([]byte("x"), in, 12)
	if err != nil || served[0] != 'x' {
		t.Fatalf("%v", err)
	}
	rb, recs := kafkaRecords(t, served[1:])
	if rb.FirstOffset != 100 || rb.LastOffsetDelta != 9 || rb.NumRecords != 3 || rb.PartitionLeaderEpoch != 12 ||
		rb.ProducerID != 7 || rb.ProducerEpoch != 3 || rb.FirstSequence != 40 || rb.Attributes != attrTransactional ||
		rb.FirstTimestamp != 1000 || rb.MaxTimestamp != 1007 || int(rb.Length) != len(served)-13 {
		t.Fatalf("header %+v", rb)
	}
	want := []struct {
		off, ts    int64
		key, value string
		null       bool
	}{{101, 1003, "a", "", true}, {104, 1007, "b", "2", false}, {109, 999, "c", "3", false}}
	for i, w := range want {
		r := recs[i]
		if rb.FirstOffset+int64(r.OffsetDelta) != w.off || rb.FirstTimestamp+r.TimestampDelta64 != w.ts ||
			string(r.Key) != w.key || (r.Value == nil) != w.null || string(r.Value) != w.value {
			t.Errorf("record %d: %+v, want %+v", i, r, w)
		}
	}
	if len(recs[1].Headers) != 1 || recs[1].Headers[0].Key != "h" || string(recs[1].Headers[0].Value) != "v" {
		t.Errorf("headers %+v", recs[1].Headers)
	}

	empty := compactedBatch(t, compact.Batch{BaseOffset: 7, LastOffsetDelta: 2, FirstTimestampMs: 5, MaxTimestampMs: 6,
		DeleteHorizonMs: compact.NoHorizon, ProducerID: 1, ProducerEpoch: 0, BaseSequence: 10})
	served, err = AppendCompacted(nil, empty, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rb, recs := kafkaRecords(t, served); rb.NumRecords != 0 || len(recs) != 0 || rb.LastOffsetDelta != 2 || rb.FirstSequence != 10 {
		t.Fatalf("empty batch %+v", rb)
	}

	marker := compactedBatch(t, compact.Batch{BaseOffset: 20, FirstTimestampMs: 9, DeleteHorizonMs: 100, ProducerID: 1,
		ProducerEpoch: 1, BaseSequence: -1, Transactional: true, Control: true,
		Records: []compact.Record{{Offset: 20, Record: recordbatch.Record{TimestampMs: 9, Key: compact.ControlKey(true), Value: compact.ControlValue(4)}}}})
	served, err = AppendCompacted(nil, marker, 0)
	if err != nil {
		t.Fatal(err)
	}
	want2 := AppendControl(nil, 20, 0, Marker{ProducerID: 1, ProducerEpoch: 1, CoordinatorEpoch: 4, Commit: true, TimestampMs: 9})
	if string(served) != string(want2) {
		t.Fatalf("marker served\n%x\nwant Kafka's control batch\n%x", served, want2)
	}

	bad := append([]byte(nil), in...)
	bad[len(bad)-1] ^= 1
	if out, err := AppendCompacted([]byte("x"), bad, 0); !errors.Is(err, ErrCorruptBatch) || string(out) != "x" {
		t.Fatalf("damaged batch: %v, dst %q", err, out)
	}
}

// FuzzAppendCompacted: any bytes either fail with ErrCorruptBatch leaving
// dst alone, or give a Kafka batch franz-go parses with the CRC right and
// as many records as the compacted batch holds.
func FuzzAppendCompacted(f *testing.F) {
	f.Add(compactedBatch(f, compact.Batch{BaseOffset: 3, LastOffsetDelta: 1, FirstTimestampMs: 1, DeleteHorizonMs: compact.NoHorizon,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		Records: []compact.Record{{Offset: 4, Record: recordbatch.Record{TimestampMs: 2, Key: []byte("k"), Value: []byte("v")}}}}))
	f.Add([]byte{2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		b, decErr := compact.DecodeBatch(in)
		out, err := AppendCompacted(nil, in, 1)
		if (err != nil) != (decErr != nil) {
			t.Fatalf("AppendCompacted %v, DecodeBatch %v", err, decErr)
		}
		if err != nil {
			if !errors.Is(err, ErrCorruptBatch) || len(out) != 0 {
				t.Fatalf("%v, %d bytes out", err, len(out))
			}
			return
		}
		rb, recs := kafkaRecords(t, out)
		if len(recs) != len(b.Records) || rb.FirstOffset != b.BaseOffset {
			t.Fatalf("%d records at %d, want %d at %d", len(recs), rb.FirstOffset, len(b.Records), b.BaseOffset)
		}
	})
}

// TestCompactedToStrand shows the simulator's Kafka client turns a
// compacted v2 batch back into engine/compact's form: the offset range,
// the survivors at their offsets with timestamps, keys, values (a
// tombstone null) and headers, the producer fields, the horizon dropped
// (Kafka's form does not carry it); a damaged CRC is ErrCorruptBatch; and
// the fetch decoder routes gapped batches here (decodeFetch's compacted).
func TestCompactedToStrand(t *testing.T) {
	in := compact.Batch{BaseOffset: 100, LastOffsetDelta: 9, FirstTimestampMs: 1000, DeleteHorizonMs: compact.NoHorizon,
		ProducerID: 7, ProducerEpoch: 3, BaseSequence: 40,
		Records: []compact.Record{
			{Offset: 101, Record: recordbatch.Record{TimestampMs: 1003, Key: []byte("a")}},
			{Offset: 104, Record: recordbatch.Record{TimestampMs: 1007, Key: []byte("b"), Value: []byte("2"),
				Headers: []recordbatch.Header{{Key: "h", Value: []byte("v")}}}},
		}}
	served, err := AppendCompacted(nil, compactedBatch(t, in), 12)
	if err != nil {
		t.Fatal(err)
	}
	if !compacted(served) {
		t.Fatal("a gapped batch not seen as compacted")
	}
	back, err := CompactedToStrand(nil, served)
	if err != nil {
		t.Fatal(err)
	}
	got, err := compact.DecodeBatch(back)
	if err != nil {
		t.Fatal(err)
	}
	in.MaxTimestampMs = 1007
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("round trip\n got %+v\nwant %+v", got, in)
	}
	served[len(served)-1] ^= 1
	if _, err := CompactedToStrand(nil, served); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("damaged batch: %v", err)
	}
}

// TestDecodeFetchGappedWholeBatch shows the fetch decoder hands a
// compacted prefix's batch that kept every record of its range, but
// starts past the fetch offset (the batches before it removed), in
// engine/compact's form, which allows the gap; a plain batch would claim
// the fetch offset (a native reader refuses it: found by the simulator's
// compacted-topic workload, seed 19, whose final read stuck at the gap).
// A batch right after the one before it stays plain, and without the
// fetch offsets nothing but a batch missing records is converted.
func TestDecodeFetchGappedWholeBatch(t *testing.T) {
	whole := func(base int64) []byte {
		served, err := AppendCompacted(nil, compactedBatch(t, compact.Batch{BaseOffset: base, FirstTimestampMs: 1000,
			DeleteHorizonMs: compact.NoHorizon, ProducerID: 7, ProducerEpoch: 3, BaseSequence: int32(base),
			Records: []compact.Record{{Offset: base, Record: recordbatch.Record{TimestampMs: 1000, Key: []byte("k"), Value: []byte("v")}}}}), 12)
		if err != nil {
			t.Fatal(err)
		}
		return served
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(clientFetchByName)
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "kv"
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.HighWatermark = 300
	rp.RecordBatches = append(whole(210), whole(211)...)
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	body := resp.AppendTo([]byte{0}) // an empty tag section, then the body
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)+4))
	frame = binary.BigEndian.AppendUint32(frame, 7)
	frame = append(frame, body...)
	for _, c := range []struct {
		name string
		from map[fetchedPartition]int64
		want []bool // per batch: in engine/compact's form
	}{
		{"past the fetch offset", map[fetchedPartition]int64{{"kv", 0}: 209}, []bool{true, false}},
		{"at the fetch offset", map[fetchedPartition]int64{{"kv", 0}: 210}, []bool{false, false}},
		{"no fetch offsets", nil, []bool{false, false}},
	} {
		got, err := decodeFetch(frame, 7, clientFetchByName, topicNames{}, c.from)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		bs := got.GetFetch().GetPartitions()[0].GetBatches()
		if len(bs) != len(c.want) {
			t.Fatalf("%s: %d batches", c.name, len(bs))
		}
		for i, b := range bs {
			if compact.IsCompacted(b.GetRecords()) != c.want[i] || b.GetBaseOffset() != 210+int64(i) {
				t.Fatalf("%s: batch %d at %d compacted %v, want %v", c.name, i, b.GetBaseOffset(),
					compact.IsCompacted(b.GetRecords()), c.want[i])
			}
			if c.want[i] {
				cb, err := compact.DecodeBatch(b.GetRecords())
				if err != nil || len(cb.Records) != 1 || cb.Records[0].Offset != 210 || string(cb.Records[0].Value) != "v" {
					t.Fatalf("%s: batch %d %+v, %v", c.name, i, cb, err)
				}
			} else if _, err := recordbatch.Validate(b.GetRecords()); err != nil {
				t.Fatalf("%s: batch %d: %v", c.name, i, err)
			}
		}
	}
}
