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

// Classify maps a wire error code to an Action by the one table of codes,
// strandpb.ErrorCode.Info, which the node and the fake cluster use too.
// NONE, and a code this client does not know, give the zero Action: a
// definite failure.
func Classify(code strandpb.ErrorCode) Action {
	i := code.Info()
	return Action{Retriable: i.Retriable, RefreshMetadata: i.RefreshMetadata, MaybeWritten: i.MaybeWritten}
}

// ClassifyErr extends Classify to any error a request can end with: an
// *Error by its code, a *ConnError as retriable with a metadata refresh
// (maybe written when it was sent), anything else (an *UnreachableError,
// a *NotStrandError, a context's error) as a definite failure.
func ClassifyErr(err error) Action {
	if err == nil {
		return Action{}
	}
	var ue *UnreachableError
	var ns *NotStrandError
	if errors.As(err, &ue) || errors.As(err, &ns) {
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
