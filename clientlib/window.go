package clientlib

import (
	"errors"

	"github.com/strandlog/strand/internal/clientcore"
	"github.com/strandlog/strand/proto/strandpb"
)

// windowErrors is the producer's error vocabulary for its Windows
// (clientcore.Window): what an answer means, by ClassifyErr, and the
// errors a batch fails with.
func windowErrors() clientcore.WindowErrors {
	return clientcore.WindowErrors{Classify: windowMeaning, Exhausted: retriesExhausted, Timeout: deliveryTimedOut}
}

// windowMeaning is ClassifyErr as a Window needs it. A *TopicGoneError
// fails the batch at once (its id is gone); a bare UNKNOWN_TOPIC_ID, which
// the producer gets only while its metadata still names the id the batch
// was sent under (handle), is retried: the answering node knows a newer
// topic than the client or lags behind it, and the refresh it starts tells
// which. Either way that attempt was refused before anything was written
// (a node checks the topic id first).
func windowMeaning(err error) clientcore.ErrorMeaning {
	var tg *TopicGoneError
	switch {
	case errors.As(err, &tg):
		return clientcore.ErrorMeaning{}
	case errors.Is(err, ErrUnknownTopicID):
		return clientcore.ErrorMeaning{Retriable: true}
	}
	a := ClassifyErr(err)
	return clientcore.ErrorMeaning{Retriable: a.Retriable, MaybeWritten: a.MaybeWritten,
		SequenceRefused: errors.Is(err, ErrOutOfOrderSequence) || errors.Is(err, ErrUnknownProducerID)}
}

// txnWindowErrors is windowErrors for a transactional producer: an
// UNKNOWN_PRODUCER_ID or OUT_OF_ORDER_SEQUENCE fails the batch at once
// instead of renumbering it under a local epoch bump, which a
// transaction's epoch (the coordinator's) cannot take. The failure makes
// the transaction abortable, and AbortTransaction re-initializes the
// producer (KIP-360, txnState.bumpNeeded).
func txnWindowErrors() clientcore.WindowErrors {
	e := windowErrors()
	e.Classify = func(err error) clientcore.ErrorMeaning {
		if sequenceLost(err) {
			return clientcore.ErrorMeaning{}
		}
		return windowMeaning(err)
	}
	return e
}

// sequenceLost: the partition's producer state is out of step with the
// producer's sequence numbers.
func sequenceLost(err error) bool {
	return errors.Is(err, ErrOutOfOrderSequence) || errors.Is(err, ErrUnknownProducerID)
}

// retriesExhausted fails a batch whose last retriable attempt failed, or
// that failed for good after an attempt that may be in the log. A batch
// whose topic is gone keeps its *TopicGoneError, saying whether it may
// be in the deleted topic.
func retriesExhausted(attempts int, maybeWritten bool, err error) error {
	maybeWritten = maybeWritten && !bugExhaustedDefinite() // planted (simbugs builds only)
	var tg *TopicGoneError
	if errors.As(err, &tg) {
		gone := *tg
		gone.MaybeWritten = maybeWritten
		return &gone
	}
	return &RetriesExhaustedError{Attempts: attempts, MaybeWritten: maybeWritten, Err: err}
}

// deliveryTimedOut fails a batch that waited past its delivery timeout.
func deliveryTimedOut(last error) error {
	return &Error{Code: strandpb.ErrorCode_ERROR_CODE_TIMEOUT, Message: "delivery timeout", Cause: last}
}
