package simnet

import (
	"errors"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/internal/clientcore"
	"github.com/strandlog/strand/proto/strandpb"
)

// wireWindowErrors is the private producers' error vocabulary for their
// clientcore.Windows: the meaning clientlib's producer gives (its
// windowErrors), built from clientlib's public errors and ClassifyErr.
func wireWindowErrors() clientcore.WindowErrors {
	return clientcore.WindowErrors{
		Classify: func(err error) clientcore.ErrorMeaning {
			a := clientlib.ClassifyErr(err)
			return clientcore.ErrorMeaning{Retriable: a.Retriable, MaybeWritten: a.MaybeWritten,
				SequenceRefused: errors.Is(err, clientlib.ErrOutOfOrderSequence) || errors.Is(err, clientlib.ErrUnknownProducerID)}
		},
		Exhausted: func(attempts int, maybeWritten bool, err error) error {
			return &clientlib.RetriesExhaustedError{Attempts: attempts, MaybeWritten: maybeWritten, Err: err}
		},
		Timeout: func(last error) error {
			return &clientlib.Error{Code: strandpb.ErrorCode_ERROR_CODE_TIMEOUT, Message: "delivery timeout", Cause: last}
		},
	}
}
