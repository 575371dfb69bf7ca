package clientlib

import (
	"time"

	"github.com/strandlog/strand/engine/recordbatch"
)

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is one record to produce or one consumed. A nil Key or Value is
// null, as in Kafka (a null value is a tombstone).
type Record struct {
	Topic string
	// Partition is where the record goes when the client uses
	// ManualPartitioner, and is set to the chosen partition otherwise.
	Partition int32
	Key       []byte
	Value     []byte
	Headers   []Header
	// Timestamp is the producer's time for the record; a zero Timestamp is
	// set to the time Produce is called. Millisecond precision on the wire.
	Timestamp time.Time
	// Offset is set when the record is written with AcksAll, and for
	// consumed records; -1 when the acks level cannot know it.
	Offset int64
	// TopicID is set on a produced record when its promise runs: the id
	// of the topic its batch was produced under (nil when the cluster
	// names no ids, or the record failed before it was batched). On
	// success the record is in that topic; on a failure that may have
	// written it (MaybeWritten), that topic is where it may be. A topic
	// deleted and created again under its name has a new id, so a caller
	// can tell which of the two holds the record. Ignored when producing;
	// the consumer leaves it nil.
	TopicID []byte
}

// payloadBytes is what the 1 MiB limit counts: key, value and headers.
func (r *Record) payloadBytes() int {
	n := len(r.Key) + len(r.Value)
	for i := range r.Headers {
		n += len(r.Headers[i].Key) + len(r.Headers[i].Value)
	}
	return n
}

// batchRecord converts r for the batch builder.
func (r *Record) batchRecord() recordbatch.Record {
	out := recordbatch.Record{TimestampMs: r.Timestamp.UnixMilli(), Key: r.Key, Value: r.Value}
	if len(r.Headers) > 0 {
		out.Headers = make([]recordbatch.Header, len(r.Headers))
		for i, h := range r.Headers {
			out.Headers[i] = recordbatch.Header{Key: h.Key, Value: h.Value}
		}
	}
	return out
}

// ProduceResult is one record's outcome in ProduceSync.
type ProduceResult struct {
	Record *Record
	Err    error
}

// ProduceResults are ProduceSync's outcomes, in argument order.
type ProduceResults []ProduceResult

// FirstErr is the first record's error, or nil when all succeeded.
func (rs ProduceResults) FirstErr() error {
	for _, r := range rs {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}
