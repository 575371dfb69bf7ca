package clientlib

import (
	"errors"

	"github.com/strandlog/strand/proto/strandpb"
)

// Action is what a client should do about an error code. It is the sans-IO
// error classifier shared by the producer, the consumer, the admin calls and
// the simulator's client workload, so all of them react alike.
type Action struct {
	// Retriable: the same request may succeed later; back off and resend.
	Retriable bool
	// RefreshMetadata: the client's view of leaders or topics is stale.
	RefreshMetadata bool
	// MaybeWritten: a write answered this way may still have happened
	// (TIMEOUT, a lost connection after sending, an internal error).
	MaybeWritten bool
}

// Classify maps a wire error code to an Action. NONE gives the zero
// Action. OUT_OF_ORDER_SEQUENCE is retriable here; the idempotent Window
// decides what it means for a given batch.
func Classify(code strandpb.ErrorCode) Action {
	switch code {
	case strandpb.ErrorCode_ERROR_CODE_NONE:
		return Action{}
	case strandpb.ErrorCode_ERROR_CODE_NOT_LEADER,
		strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION,
		strandpb.ErrorCode_ERROR_CODE_NOT_CONTROLLER,
		strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE:
		return Action{Retriable: true, RefreshMetadata: true}
	case strandpb.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS,
		strandpb.ErrorCode_ERROR_CODE_TIMEOUT:
		// Conservative: a proposal may have reached the raft log before
		// the node gave up waiting for it.
		return Action{Retriable: true, MaybeWritten: true}
	case strandpb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE,
		strandpb.ErrorCode_ERROR_CODE_CORRUPT_BATCH:
		return Action{Retriable: true}
	case strandpb.ErrorCode_ERROR_CODE_INTERNAL:
		return Action{MaybeWritten: true}
	case strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID,
		strandpb.ErrorCode_ERROR_CODE_CLUSTER_ID_MISMATCH:
		// The topic or cluster the request was made for is gone: a resend
		// would read or write another log. Definite, no retry.
		return Action{}
	default:
		// RECORD_TOO_LARGE, OFFSET_OUT_OF_RANGE, INVALID_REQUEST,
		// TOPIC_EXISTS, PRODUCER_FENCED, UNSUPPORTED_VERSION,
		// INVALID_CONFIG and codes this client does not know: a definite
		// refusal that a resend cannot change.
		return Action{}
	}
}

// ClassifyErr extends Classify to any error a request can end with: an
// *Error by its code, a *ConnError as retriable with a metadata refresh
// (maybe written when it was sent), anything else as a definite failure.
func ClassifyErr(err error) Action {
	if err == nil {
		return Action{}
	}
	var se *Error
	if errors.As(err, &se) {
		return Classify(se.Code)
	}
	var ce *ConnError
	if errors.As(err, &ce) {
		return Action{Retriable: true, RefreshMetadata: true, MaybeWritten: ce.Sent}
	}
	return Action{}
}
