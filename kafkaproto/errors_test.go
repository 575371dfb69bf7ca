package kafkaproto

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandlog/strand/proto/strandpb"
)

// kerrDisagreements are the Strand codes whose Definite flag differs from
// their Kafka code's kerr.Retriable (definite there means not retriable),
// each with the reason the row is still right. TestKafkaCodeTable fails on
// any other disagreement, and on an entry here that no longer disagrees.
var kerrDisagreements = map[strandpb.ErrorCode]string{
	// Kafka clients do not retry these by the flag: their idempotent
	// producer handles them (franz-go resets the producer id and epoch),
	// as Strand's clientlib.Window resends or renumbers. Nothing was
	// written, so failing is never a false definite.
	strandpb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE: "handled by the idempotent producer, not retried by the flag",
	strandpb.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID:   "handled by the idempotent producer, not retried by the flag",
	// Kafka has one code for a missing topic; its admin clients report it
	// for a delete of a topic that does not exist.
	strandpb.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND: "Kafka's only code for a missing topic",
	// Kafka's transactional producers back off and resend on it by name
	// (franz-go and librdkafka), not by the flag.
	strandpb.ErrorCode_ERROR_CODE_CONCURRENT_TRANSACTIONS: "retried by transactional producers by name",
	// Kafka's own answer for a topic id the topic no longer has; franz-go
	// counts it toward its unknown-topic limit rather than retrying
	// forever.
	strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID: "Kafka's own code for the same condition",
}

// TestKafkaCodeTable checks the one Strand↔Kafka error table against itself
// and against franz-go's kerr flags: every Strand code has exactly one row;
// a code that may have been written maps to a Kafka code kerr calls
// retriable (never a false definite); Definite agrees with !kerr.Retriable
// except for the listed, explained rows; and every row round-trips: Kafka
// code → strandCode → Kafka code gives the same Kafka code, the code a
// Kafka code maps back to is never more definite than any code that maps
// to it, and the first row of each Kafka code maps back to itself.
func TestKafkaCodeTable(t *testing.T) {
	seen := map[strandpb.ErrorCode]bool{}
	for _, row := range kafkaCodeRows {
		if seen[row.strand] {
			t.Errorf("%v has two rows", row.strand)
		}
		seen[row.strand] = true
	}
	for v, name := range strandpb.ErrorCode_name {
		if !seen[strandpb.ErrorCode(v)] {
			t.Errorf("%s has no row in kafkaCodeRows", name)
		}
	}
	for _, row := range kafkaCodeRows[1:] {
		checkKafkaRow(t, row.strand, row.kafka)
	}
	for code := range kerrDisagreements {
		if k := kafkaCodes[code]; code.Info().Definite() != k.Retriable {
			t.Errorf("%v: listed in kerrDisagreements but agrees with %v", code, k.Message)
		}
	}
}

// checkKafkaRow checks one row of kafkaCodeRows (see TestKafkaCodeTable).
func checkKafkaRow(t *testing.T, code strandpb.ErrorCode, k *kerr.Error) {
	t.Helper()
	info := code.Info()
	if k == nil || k.Code == 0 {
		t.Fatalf("%v maps to no Kafka error", code)
	}
	name := k.Message
	if info.MaybeWritten && !k.Retriable {
		t.Errorf("%v may have been written but maps to %s, which kerr calls definite", code, name)
	}
	if _, listed := kerrDisagreements[code]; info.Definite() == k.Retriable && !listed {
		t.Errorf("%v: Definite %v, but %s has kerr.Retriable %v", code, info.Definite(), name, k.Retriable)
	}
	back, ok := strandCodes[k.Code]
	if !ok {
		t.Errorf("%v → %s has no way back", code, name)
		return
	}
	if kafkaCodes[back] != k {
		t.Errorf("%v → %s → %v → %v: not a round trip", code, name, back, kafkaCodes[back].Message)
	}
	if b := back.Info(); b.Definite() && !info.Definite() || info.MaybeWritten && !b.MaybeWritten {
		t.Errorf("%v → %s comes back as %v, which is more definite", code, name, back)
	}
	if first := firstRowOf(k); first == code && back != code {
		t.Errorf("%v is the first row of %s but comes back as %v", code, name, back)
	}
}

// firstRowOf is the Strand code of k's first row.
func firstRowOf(k *kerr.Error) strandpb.ErrorCode {
	for _, row := range kafkaCodeRows {
		if row.kafka == k {
			return row.strand
		}
	}
	return strandpb.ErrorCode_ERROR_CODE_NONE
}

// A Kafka code the listener never answers comes back as INTERNAL (maybe
// written, so a checker never counts it as refused); none comes back as no
// error.
func TestStrandErrorDefault(t *testing.T) {
	if got := strandError(kerr.PolicyViolation.Code, nil).GetCode(); got != strandpb.ErrorCode_ERROR_CODE_INTERNAL {
		t.Errorf("unmapped Kafka code: %v, want INTERNAL", got)
	}
	if e := strandError(0, nil); e != nil {
		t.Errorf("no error: %v", e)
	}
}

// The mappings the architecture review found wrong, each as a Kafka client
// or the simulator's Kafka path sees it: INTERNAL may have been written, so
// a Kafka client must not get the definite UNKNOWN_SERVER_ERROR; and a
// full-disk refusal (KAFKA_STORAGE_ERROR) comes back as NOT_ENOUGH_SPACE,
// retriable and not written, not as INTERNAL; an unknown producer is
// Kafka's UNKNOWN_PRODUCER_ID, not OUT_OF_ORDER_SEQUENCE_NUMBER; a busy
// leader is not LEADER_NOT_AVAILABLE (every client would refresh metadata).
func TestKafkaCodesReviewFound(t *testing.T) {
	internal := &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INTERNAL}
	if got := kafkaCode(internal); !kerr.IsRetriable(kerr.ErrorForCode(got)) {
		t.Errorf("INTERNAL → Kafka code %d, which kerr calls definite", got)
	}
	if got := strandError(kerr.KafkaStorageError.Code, nil).GetCode(); got != strandpb.ErrorCode_ERROR_CODE_NOT_ENOUGH_SPACE {
		t.Errorf("KAFKA_STORAGE_ERROR → %v, want NOT_ENOUGH_SPACE", got)
	}
	busy := &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_BUSY}
	if got := kafkaCode(busy); got != kerr.RequestTimedOut.Code {
		t.Errorf("BUSY → Kafka code %d, want REQUEST_TIMED_OUT, which franz-go resends without a metadata refresh", got)
	}
	unknownProducer := &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID}
	if got := kafkaCode(unknownProducer); got != kerr.UnknownProducerID.Code {
		t.Errorf("UNKNOWN_PRODUCER_ID → Kafka code %d, want %d", got, kerr.UnknownProducerID.Code)
	}
}
