package node

import (
	"errors"
	"strings"
	"testing"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// TestRefuseKeyless shows the compacted-topic produce check: a batch with
// a record whose key is null is ErrInvalidRecord (wire INVALID_RECORD,
// definite) with Kafka's message naming the partition and the record; an
// empty key is a key, as in Kafka.
func TestRefuseKeyless(t *testing.T) {
	tp := TopicPartition{Topic: "kv", Partition: 3}
	batch, err := recordbatch.Encode(nil, []recordbatch.Record{
		{TimestampMs: 1, Key: []byte("a"), Value: []byte("1")},
		{TimestampMs: 1, Value: []byte("keyless")},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = refuseKeyless(tp, batch)
	if !errors.Is(err, ErrInvalidRecord) || !strings.Contains(err.Error(), "Compacted topic cannot accept message without key in topic partition kv-3") ||
		!strings.Contains(err.Error(), "record 1") {
		t.Fatalf("keyless: %v", err)
	}
	if code := strandpb.CodeOf(err); code != strandpb.ErrorCode_ERROR_CODE_INVALID_RECORD || !code.Info().Definite() {
		t.Fatalf("code %v, want a definite INVALID_RECORD", code)
	}
	keyed, err := recordbatch.Encode(nil, []recordbatch.Record{
		{TimestampMs: 1, Key: []byte("a"), Value: []byte("1")},
		{TimestampMs: 1, Key: []byte{}, Value: nil},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := refuseKeyless(tp, keyed); err != nil {
		t.Fatalf("keyed batch (an empty key, a tombstone) refused: %v", err)
	}
}
