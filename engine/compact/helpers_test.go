package compact

import (
	"bytes"
	"encoding/binary"
	"iter"
	"slices"
	"strconv"
	"testing"

	"github.com/strandlog/strand/engine/recordbatch"
)

// noProducer is a batch without idempotence.
var noProducer = Producer{ID: -1}

// testLog is a partition's log as a test builds it: inputs in offset
// order (a compacted prefix, then raft batches and markers), the first
// dirty offset and the aborted index.
type testLog struct {
	inputs     []Input
	firstDirty int64
	aborted    []AbortedTxn
	next       int64
}

// rec is a record of key and value at ts; value "-" is a tombstone.
func rec(key, value string, ts int64) recordbatch.Record {
	r := recordbatch.Record{TimestampMs: ts, Key: []byte(key), Value: []byte(value)}
	if value == "-" {
		r.Value = nil
	}
	return r
}

// produce appends a raft batch of records and returns its base offset.
func (l *testLog) produce(t testing.TB, p Producer, transactional bool, records ...recordbatch.Record) int64 {
	t.Helper()
	b, err := recordbatch.Encode(nil, records)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	base := l.next
	l.inputs = append(l.inputs, Input{BaseOffset: base, Data: b, Producer: p, Transactional: transactional})
	l.next += int64(len(records))
	return base
}

// marker appends producer p's marker at ts and returns its offset; an
// abort enters the aborted index from first.
func (l *testLog) marker(p Producer, commit bool, first, ts int64) int64 {
	base := l.next
	l.inputs = append(l.inputs, Input{BaseOffset: base, Producer: p,
		Marker: &Marker{Commit: commit, CoordinatorEpoch: 1, TimestampMs: ts}})
	if !commit {
		l.aborted = append(l.aborted, AbortedTxn{ProducerID: p.ID, FirstOffset: first, LastOffset: base})
	}
	l.next++
	return base
}

// log is l as Compact reads it.
func (l *testLog) log() Log {
	return Log{FirstDirty: l.firstDirty, Aborted: l.aborted, Batches: func() iter.Seq2[Input, error] {
		return func(yield func(Input, error) bool) {
			for _, in := range l.inputs {
				if !yield(in, nil) {
					return
				}
			}
		}
	}}
}

// compact runs one pass and returns its result and the log after it: the
// emitted batches, then the raft batches from CleanedTo on.
func (l *testLog) compact(t testing.TB, d Decision) (Result, *testLog) {
	t.Helper()
	out := &testLog{next: l.next}
	res, err := Compact(l.log(), d, func(b []byte) error {
		out.inputs = append(out.inputs, Input{BaseOffset: int64(binary.LittleEndian.Uint64(b[offBase:])), Data: bytes.Clone(b)})
		return nil
	})
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	for _, in := range l.inputs {
		if !IsCompacted(in.Data) && in.BaseOffset >= res.CleanedTo {
			out.inputs = append(out.inputs, in)
		}
	}
	out.firstDirty = res.CleanedTo
	out.aborted = slices.DeleteFunc(slices.Clone(l.aborted), func(a AbortedTxn) bool {
		return slices.Contains(res.AbortedForgotten, a)
	})
	return res, out
}

// readRecord is one record a full read of a log returns.
type readRecord struct {
	offset   int64
	key      string
	value    []byte
	ts       int64
	control  bool
	producer int64
}

// readAll reads every record of inputs in order, as a consumer of the
// whole partition would.
func readAll(t testing.TB, inputs []Input) []readRecord {
	t.Helper()
	var out []readRecord
	for _, in := range inputs {
		switch {
		case IsCompacted(in.Data):
			b, err := DecodeBatch(in.Data)
			if err != nil {
				t.Fatalf("DecodeBatch at %d: %v", in.BaseOffset, err)
			}
			for _, r := range b.Records {
				out = append(out, readRecord{r.Offset, string(r.Key), r.Value, r.TimestampMs, b.Control, b.ProducerID})
			}
		case in.Marker != nil:
			out = append(out, readRecord{in.BaseOffset, "", nil, in.Marker.TimestampMs, true, in.Producer.ID})
		default:
			err := recordbatch.Decode(in.Data, func(i int, r recordbatch.Record) error {
				out = append(out, readRecord{in.BaseOffset + int64(i), string(r.Key), r.Value, r.TimestampMs, false, in.Producer.ID})
				return nil
			})
			if err != nil {
				t.Fatalf("Decode at %d: %v", in.BaseOffset, err)
			}
		}
	}
	return out
}

// keysAt is "key=value@offset" for every data record read, for messages.
func keysAt(records []readRecord) []string {
	var s []string
	for _, r := range records {
		v := string(r.value)
		if r.value == nil {
			v = "-"
		}
		if r.control {
			s = append(s, "marker@"+strconv.FormatInt(r.offset, 10))
			continue
		}
		s = append(s, r.key+"="+v+"@"+strconv.FormatInt(r.offset, 10))
	}
	return s
}

// decision is a decision at timeMs with delete.retention.ms retention
// and a roomy map, cleaning up to end.
func decision(end, timeMs, retention int64) Decision {
	return Decision{Generation: 1, CleanableEnd: end, TimeMs: timeMs, DeleteRetentionMs: retention, OffsetMapBytes: 1 << 16}
}
