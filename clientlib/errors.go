package clientlib

import (
	"errors"
	"fmt"
	"strings"

	"github.com/strandlog/strand/proto/strandpb"
)

// Error is a typed error from the cluster, or one the client raises with the
// same meaning (a record over 1 MiB, a request that got no answer in time).
// It carries the data a caller needs to act, so callers never match strings:
//
//	var se *clientlib.Error
//	if errors.As(err, &se) && se.Code == strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE {
//		seekTo(se.LogStartOffset)
//	}
//
// errors.Is(err, clientlib.ErrNotLeader) and the other sentinels below match
// any *Error with the same Code.
type Error struct {
	Code    strandpb.ErrorCode
	Message string
	// LeaderID and LeaderAddress are the leader the answering node knows,
	// for NOT_LEADER (0 and "" when it knows none).
	LeaderID      uint64
	LeaderAddress string
	// LogStartOffset and HighWatermark bound the readable offsets, for
	// OFFSET_OUT_OF_RANGE.
	LogStartOffset int64
	HighWatermark  int64
	// Cause is the last error of a request given up at its delivery
	// timeout (Code TIMEOUT), nil otherwise; errors.Is and As see it.
	Cause error
}

// Sentinels for errors.Is; each matches every *Error with its Code.
var (
	ErrNotLeader          = &Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_LEADER}
	ErrUnknownTopic       = &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION}
	ErrRecordTooLarge     = &Error{Code: strandpb.ErrorCode_ERROR_CODE_RECORD_TOO_LARGE}
	ErrOffsetOutOfRange   = &Error{Code: strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE}
	ErrNotEnoughReplicas  = &Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS}
	ErrTimeout            = &Error{Code: strandpb.ErrorCode_ERROR_CODE_TIMEOUT}
	ErrInvalidRequest     = &Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST}
	ErrTopicExists        = &Error{Code: strandpb.ErrorCode_ERROR_CODE_TOPIC_EXISTS}
	ErrOutOfOrderSequence = &Error{Code: strandpb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE}
	ErrProducerFenced     = &Error{Code: strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED}
	ErrUnavailable        = &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE}
	// ErrInvalidReplicationFactor: a factor below 1 or above the cluster's
	// size.
	ErrInvalidReplicationFactor = &Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR}
	// ErrTopicNotFound: the metadata group has no such topic. ErrUnknownTopic
	// matches it too.
	ErrTopicNotFound = &Error{Code: strandpb.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND}
	// ErrUnknownProducerID: the partition has no state for the idempotent
	// producer (retention deleted its batches); the producer renumbers
	// under a new epoch as after OUT_OF_ORDER_SEQUENCE.
	ErrUnknownProducerID = &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID}
)

// Client-side errors that have no wire code.
var (
	// ErrClientClosed fails calls made after Close, and records still
	// buffered when Close gives up on them.
	ErrClientClosed = errors.New("clientlib: client closed")
	// ErrNoSeeds is returned by NewClient when no seed address is given.
	ErrNoSeeds = errors.New("clientlib: no seed addresses")
)

// errorFromWire converts a wire error; nil and NONE give nil.
func errorFromWire(e *strandpb.Error) error {
	if e == nil || e.GetCode() == strandpb.ErrorCode_ERROR_CODE_NONE {
		return nil
	}
	return &Error{
		Code:           e.GetCode(),
		Message:        e.GetMessage(),
		LeaderID:       e.GetLeaderId(),
		LeaderAddress:  e.GetLeaderAddress(),
		LogStartOffset: e.GetLogStartOffset(),
		HighWatermark:  e.GetHighWatermark(),
	}
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("strand: ")
	b.WriteString(e.Code.Name())
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	switch e.Code {
	case strandpb.ErrorCode_ERROR_CODE_NOT_LEADER:
		fmt.Fprintf(&b, " (leader %d %q)", e.LeaderID, e.LeaderAddress)
	case strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE:
		fmt.Fprintf(&b, " (log start %d, high-water mark %d)", e.LogStartOffset, e.HighWatermark)
	}
	if e.Cause != nil {
		b.WriteString("; last error: ")
		b.WriteString(e.Cause.Error())
	}
	return b.String()
}

// Unwrap gives Cause (nil for an error straight from a node).
func (e *Error) Unwrap() error { return e.Cause }

// Is matches sentinels by Code; ErrUnknownTopic also matches
// TOPIC_NOT_FOUND (a topic that does not exist is unknown everywhere).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	return t.Code == e.Code || t == ErrUnknownTopic && e.Code == strandpb.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND
}

// Retriable reports whether the same request may succeed if sent again
// (after refreshing metadata where Classify says so).
func (e *Error) Retriable() bool { return Classify(e.Code).Retriable }

// ConnError is a failure of the connection to a node: dial, handshake, a
// broken or closed stream. It is always retriable. Sent says whether the
// request had been handed to the socket: if so, a write may have happened.
type ConnError struct {
	Addr string
	Sent bool
	Err  error
}

// Error implements error.
func (e *ConnError) Error() string {
	return fmt.Sprintf("clientlib: connection to %s: %v", e.Addr, e.Err)
}

// Unwrap gives the cause.
func (e *ConnError) Unwrap() error { return e.Err }

// Retriable is always true: another connection may succeed.
func (e *ConnError) Retriable() bool { return true }

// RetriesExhaustedError fails a record whose batch kept failing with
// retriable errors until the attempts or the delivery timeout ran out, or
// failed for good (Err) after an attempt whose outcome is unknown.
// MaybeWritten is true when some attempt's outcome was unknown (a timeout, a
// connection lost after sending) and that attempt may be in the log or
// still get there (it may wait at a node and be written after a later
// attempt was refused): the record may be in the log even though its
// promise got this error, exactly like a timeout in any client. Without
// MaybeWritten, and for every other error a promise gets, the record is
// not in the log and will not be.
type RetriesExhaustedError struct {
	Attempts     int
	MaybeWritten bool
	Err          error
}

// Error implements error.
func (e *RetriesExhaustedError) Error() string {
	s := fmt.Sprintf("clientlib: giving up after %d attempts: %v", e.Attempts, e.Err)
	if e.MaybeWritten {
		s += " (an earlier attempt may have been applied: the record written, the change made)"
	}
	return s
}

// Unwrap gives the last attempt's error.
func (e *RetriesExhaustedError) Unwrap() error { return e.Err }

// Retriable is false: the client already retried.
func (e *RetriesExhaustedError) Retriable() bool { return false }

// IsRetriable reports whether err says a retry may succeed: a retriable
// *Error, a *ConnError, or any error with a Retriable() bool method.
func IsRetriable(err error) bool {
	var r interface{ Retriable() bool }
	return errors.As(err, &r) && r.Retriable()
}

// UnreachableError fails a request that no address could take: every
// known node and seed refused the connection, timed out dialing, or
// closed it during the handshake. Callers print it as is; it is the one
// wording of "the cluster is not there". It is not retriable: the client
// already tried every address it knows. A Client that a node answered
// before never returns it (Client.unreachable): it retries the last
// address's *ConnError, as after any connection lost before sending. It
// unwraps to the last address's *ConnError.
type UnreachableError struct {
	Addrs []string // the addresses tried, in order
	Err   error    // the last address's failure, a *ConnError
}

// Error implements error.
func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the cluster at %s: %v", strings.Join(e.Addrs, ","), causeOf(e.Err))
}

// Unwrap gives the last address's failure.
func (e *UnreachableError) Unwrap() error { return e.Err }

// Retriable is false: every address was tried.
func (e *UnreachableError) Retriable() bool { return false }

// causeOf is a *ConnError's cause (its address is said by the caller), or
// err.
func causeOf(err error) error {
	var ce *ConnError
	if errors.As(err, &ce) {
		return ce.Err
	}
	return err
}

// NotStrandError is a handshake answered with something that is not a
// Strand frame (an HTTP server, a Kafka broker, a TLS endpoint): the
// address is wrong, and no retry can fix it. It unwraps to a *ConnError
// whose cause is what the first answer looked like.
type NotStrandError struct {
	Addr string
	Err  error // a *ConnError
}

// Error implements error.
func (e *NotStrandError) Error() string {
	var te *TLSError
	if errors.As(e.Err, &te) {
		return te.Error()
	}
	return fmt.Sprintf("%s does not speak the Strand protocol (%v)", e.Addr, causeOf(e.Err))
}

// Unwrap gives the decoding failure.
func (e *NotStrandError) Unwrap() error { return e.Err }

// Retriable is false.
func (e *NotStrandError) Retriable() bool { return false }

// OptionError is NewClient refusing an option's value: what the option
// is, the value given, and why it cannot be honoured.
type OptionError struct {
	Option string // the option's name, e.g. "BatchBytes"
	Value  any
	Reason string
}

// Error implements error.
func (e *OptionError) Error() string {
	return fmt.Sprintf("clientlib: %s(%v): %s", e.Option, e.Value, e.Reason)
}
