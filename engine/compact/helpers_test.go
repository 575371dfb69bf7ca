package compact

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/strandlog/strand/engine/recordbatch"
)

// fataler is what the helpers need of *testing.T and *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

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
func (l *testLog) produce(t fataler, p Producer, transactional bool, records ...recordbatch.Record) int64 {
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
func (l *testLog) compact(t fataler, d Decision) (Result, *testLog) {
	t.Helper()
	return l.compactWith(t, d, l.log(), Compact)
}

// compactInSteps is compact run as a Pass in steps of stepBytes, over
// l's log with From when from is set (else each step walks Batches again).
func (l *testLog) compactInSteps(t fataler, d Decision, stepBytes int64, from bool) (Result, *testLog) {
	t.Helper()
	log := l.log()
	if from {
		log.From = func(offset int64) iter.Seq2[Input, error] {
			return func(yield func(Input, error) bool) {
				for _, in := range l.inputs {
					if in.BaseOffset >= offset && !yield(in, nil) {
						return
					}
				}
			}
		}
	}
	return l.compactWith(t, d, log, func(log Log, d Decision, emit func([]byte) error) (Result, error) {
		p, err := NewPass(log, d, emit)
		if err != nil {
			return Result{}, err
		}
		for steps := 0; steps <= 2*len(l.inputs)+2; steps++ {
			done, err := p.Step(stepBytes)
			if err != nil || done {
				return p.Result(), err
			}
		}
		t.Fatalf("a pass of %d batches in steps of %d bytes did not end", len(l.inputs), stepBytes)
		return Result{}, nil
	})
}

// compactWith is compact with run in Compact's place.
func (l *testLog) compactWith(t fataler, d Decision, log Log, run func(Log, Decision, func([]byte) error) (Result, error)) (Result, *testLog) {
	t.Helper()
	out := &testLog{next: l.next}
	res, err := run(log, d, func(b []byte) error {
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
	headers  string
}

// headerText is a record's headers as text, to compare them.
func headerText(hs []recordbatch.Header) string {
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "%s=%q;", h.Key, h.Value)
	}
	return b.String()
}

// readAll reads every record of inputs in order, as a consumer of the
// whole partition would.
func readAll(t fataler, inputs []Input) []readRecord {
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
				out = append(out, readRecord{r.Offset, string(r.Key), r.Value, r.TimestampMs, b.Control, b.ProducerID, headerText(r.Headers)})
			}
		case in.Marker != nil:
			out = append(out, readRecord{in.BaseOffset, "", nil, in.Marker.TimestampMs, true, in.Producer.ID, ""})
		default:
			err := recordbatch.Decode(in.Data, func(i int, r recordbatch.Record) error {
				out = append(out, readRecord{in.BaseOffset + int64(i), string(r.Key), r.Value, r.TimestampMs, false, in.Producer.ID, headerText(r.Headers)})
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

// kafkaBatch encodes records as a stored Kafka RecordBatch v2 (base offset
// 0, uncompressed), as the Kafka listener stores what a producer sent.
func kafkaBatch(p Producer, transactional bool, records []recordbatch.Record) []byte {
	var body []byte
	first := records[0].TimestampMs
	for i, r := range records {
		rec := []byte{0}
		rec = binary.AppendVarint(rec, r.TimestampMs-first)
		rec = binary.AppendVarint(rec, int64(i))
		rec = appendNullable(rec, r.Key)
		rec = appendNullable(rec, r.Value)
		rec = binary.AppendVarint(rec, int64(len(r.Headers)))
		for _, h := range r.Headers {
			rec = appendNullable(rec, []byte(h.Key))
			rec = appendNullable(rec, h.Value)
		}
		body = binary.AppendVarint(body, int64(len(rec)))
		body = append(body, rec...)
	}
	if p.ID < 0 {
		p = Producer{ID: -1, Epoch: -1, BaseSequence: -1}
	}
	b := make([]byte, recordbatch.KafkaHeaderBytes, recordbatch.KafkaHeaderBytes+len(body))
	b = append(b, body...)
	be := binary.BigEndian
	be.PutUint32(b[8:], uint32(len(b)-12))
	b[16] = 2
	if transactional {
		be.PutUint16(b[21:], 0x10)
	}
	be.PutUint32(b[23:], uint32(len(records)-1))
	be.PutUint64(b[27:], uint64(first))
	be.PutUint64(b[35:], uint64(first))
	be.PutUint64(b[43:], uint64(p.ID))
	be.PutUint16(b[51:], uint16(p.Epoch))
	be.PutUint32(b[53:], uint32(p.BaseSequence))
	be.PutUint32(b[57:], uint32(len(records)))
	be.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}
