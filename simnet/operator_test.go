package simnet

import (
	"errors"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/proto/strandpb"
)

// requestCoverageSample is how many seeds TestSimRequestCoverage runs:
// every seed sends every type, so the first one should cover them all.
const requestCoverageSample = 3

// Every request type of the wire protocol (every field of
// strandpb.Request's body, read from the descriptor) reaches a node's
// Handle in the sample, authorization is on in some of its seeds with
// the intruder's requests of every type refused, and each seed's operator read-back ran: a request
// type added to wire.proto without the simulator sending it fails here.
func TestSimRequestCoverage(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	total := NewCoverage()
	for seed := uint64(1); seed <= requestCoverageSample; seed++ {
		res := runSeed(t, seedOptions(t, seed, "mixed", ""), "")
		if res.Failed() {
			t.Fatalf("seed %d failed: %s", seed, firstLine(res.Failures[0]))
		}
		total.Merge(res.Coverage)
	}
	expected := append(RequestCoverageNames(), "auth/run", "auth/refused", "operator/acked", "operator/trim-acked",
		// SASL (sasl.go): exchanges by the simulator's clients and by
		// clientlib's, refusals, re-authentication after a restart.
		"sasl/authenticated", "sasl/authenticated-clientlib", "sasl/refused", "sasl/impostor-refused",
		"sasl/reauth-after-restart",
		// SASL on the Kafka listener (kafka_sasl.go): the Kafka impostor
		// refused, a request before authentication among its attempts
		// (exchanges that succeed need the Kafka codec: TestSimKafkaCodec).
		"kafka-sasl/refused", "kafka-sasl/impostor-refused", "kafka-sasl/refused-unauthenticated-request")
	for _, t := range requestTypes() {
		expected = append(expected, "auth/refused/"+t) // an intruder's request of every type refused
	}
	requireCoverage(t, total, expected)
	if got := total.Count("check/operator-verified"); got != requestCoverageSample {
		t.Errorf("the operator's read-back ran in %d of %d seeds", got, requestCoverageSample)
	}
}

// The request types are the body oneof's fields: the ones the node
// serves, plus hello and raft (the runtime's), and requestType names a
// request by its field.
func TestRequestTypesFromDescriptor(t *testing.T) {
	types := requestTypes()
	for _, want := range []string{"hello", "produce", "alter_configs", "offset_delete", "alter_quotas", "cluster_members", "raft"} {
		if !slices.Contains(types, want) {
			t.Errorf("request types %v lack %s", types, want)
		}
	}
	if len(types) != requestBody().Fields().Len() || len(types) < 30 {
		t.Errorf("%d request types, want every one of the oneof's %d", len(types), requestBody().Fields().Len())
	}
	req := &strandpb.Request{Body: &strandpb.Request_AlterQuotas{AlterQuotas: &strandpb.AlterQuotasRequest{}}}
	if got := requestType(req); got != "alter_quotas" {
		t.Errorf("requestType = %q, want alter_quotas", got)
	}
	if got := requestType(&strandpb.Request{}); got != "" {
		t.Errorf("requestType of an empty request = %q", got)
	}
}

// A cell may end as its last acknowledged value or as any ambiguous one,
// never as a value only a refused or intruder request named; cells never
// acknowledged may still be absent.
func TestOperatorLedgerAcceptsAckedOrAmbiguous(t *testing.T) {
	l := newOpLedger()
	l.acked([]cellWrite{{"user/a", "1"}})
	l.ambiguous([]cellWrite{{"user/a", "2"}, {"user/b", "7"}})
	l.acked([]cellWrite{{"user/a", "3"}})
	for _, tc := range []struct {
		actual map[string]string
		bad    string // "" when accepted; else the key named
	}{
		{map[string]string{"user/a": "3"}, ""},
		{map[string]string{"user/a": "2", "user/b": "7"}, ""}, // the ambiguous change applied late
		{map[string]string{"user/a": "1"}, "user/a"},          // an overwritten acknowledgement
		{map[string]string{"user/a": "3", "user/b": "9"}, "user/b"},
		{map[string]string{}, "user/a"}, // an acknowledged user lost
	} {
		got := l.mismatch("user/", tc.actual)
		if (got == "") != (tc.bad == "") || !strings.Contains(got, tc.bad) {
			t.Errorf("mismatch(%v) = %q, want one naming %q", tc.actual, got, tc.bad)
		}
	}
}

// An intruder's clientlib call that failed without a node's decision is
// undecided, also when the client gave up after an attempt whose answer
// was lost (a *clientlib.RetriesExhaustedError, never retriable itself,
// wrapping the last attempt's UNAVAILABLE: seed 241); a definite code
// other than a refusal is not.
func TestIntruderErrorDecidesNothing(t *testing.T) {
	unavailable := &clientlib.Error{Code: strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE, Message: "node: cannot authorize User:intruder yet"}
	invalid := &clientlib.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{unavailable, true},
		{&clientlib.ConnError{Addr: "n1", Sent: true, Err: errors.New("reset")}, true},
		{&clientlib.RetriesExhaustedError{Attempts: 21, MaybeWritten: true, Err: unavailable}, true},
		{invalid, false},
		{&clientlib.RetriesExhaustedError{Attempts: 3, MaybeWritten: true, Err: invalid}, false},
	} {
		if got := decidesNothing(tc.err); got != tc.want {
			t.Errorf("decidesNothing(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// Seed 241 of the standard sample: the intruder's describe_acls gave up
// after 21 attempts, the last answered UNAVAILABLE by a node replaying its
// metadata after an earlier answer was lost; it failed as a wrong refusal
// until decidesNothing looked through the spent retries.
func TestSimIntruderRetriesSpentUndecided(t *testing.T) {
	if testing.Short() {
		t.Skip("a simulator seed")
	}
	if res := runSeed(t, sampleOptions(t, 241, "mixed", ""), ""); res.Failed() {
		t.Fatalf("seed 241 failed: %s", firstLine(res.Failures[0]))
	}
}
