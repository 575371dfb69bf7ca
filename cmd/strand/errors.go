package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/strandlog/strand/clientlib"
)

// The shape of every error the CLI prints is decided here, once: run
// prints "strand: " + userMessage(err), one line, and a hint to --help for
// usage errors. Commands add context with userErr and wrapErr; they never
// format a library error's text themselves, so messages do not stutter
// ("strand topic: strand: topic_exists: metadata: ...").

// userError is an error whose text is already written for the user.
type userError struct {
	msg   string
	cause error
}

func (e *userError) Error() string { return e.msg }
func (e *userError) Unwrap() error { return e.cause }

// userErr is a user-facing error with the given text; cause (may be nil)
// stays reachable for errors.Is.
func userErr(cause error, format string, args ...any) error {
	return &userError{msg: fmt.Sprintf(format, args...), cause: cause}
}

// wrapErr prefixes cause's rendering with context: "partition 2: ...".
func wrapErr(cause error, format string, args ...any) error {
	return &userError{msg: fmt.Sprintf(format, args...) + ": " + userMessage(cause), cause: cause}
}

// userMessage renders err as one line for a person at a shell.
func userMessage(err error) string {
	var (
		ue  *userError
		use *errUsage
		re  *clientlib.RetriesExhaustedError
		oe  *clientlib.OffsetOutOfRangeError
		ce  *clientlib.ConnError
		ur  *clientlib.UnreachableError
		ns  *clientlib.NotStrandError
		we  *clientlib.Error
	)
	switch {
	case errors.As(err, &ue):
		return ue.msg
	case errors.As(err, &use):
		return use.msg
	case errors.As(err, &re):
		s := userMessage(re.Err) + fmt.Sprintf(" (gave up after %d attempts)", re.Attempts)
		if errors.As(re.Err, &we) && we.Cause == nil {
			// Name the refusal's code, as for a delivery timeout's cause.
			s = userMessage(re.Err) + fmt.Sprintf(" (%s, gave up after %d attempts)", we.Code.Name(), re.Attempts)
		}
		if re.MaybeWritten {
			s += "; an earlier attempt may have been applied (for a produce: the record may have been written)"
		}
		return s
	case errors.As(err, &oe):
		return offsetOutOfRange(oe.Topic, oe.Partition, oe.Offset, oe.LogStartOffset, oe.HighWatermark)
	case errors.As(err, &ur):
		return unreachableMessage(strings.Join(ur.Addrs, ","), ur.Err)
	case errors.As(err, &ns):
		return ns.Error()
	case errors.As(err, &ce):
		return connMessage(ce.Addr, ce.Err)
	case errors.As(err, &we):
		msg := trimPackagePrefixes(we.Message)
		if msg == "" {
			msg = strings.ReplaceAll(we.Code.Name(), "_", " ")
		}
		var cause *clientlib.Error
		if errors.As(we.Cause, &cause) {
			return msg + "; last error: " + userMessage(cause) + " (" + cause.Code.Name() + ")"
		}
		if we.Cause != nil {
			return msg + "; last error: " + userMessage(we.Cause)
		}
		return msg
	case errors.Is(err, syscall.EADDRINUSE):
		var op *net.OpError
		if errors.As(err, &op) && op.Addr != nil {
			return fmt.Sprintf("cannot listen on %s: address already in use (is another strand running there?)", op.Addr)
		}
		return "address already in use (is another strand running there?)"
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer from the cluster in time (see --timeout)"
	}
	return trimPackagePrefixes(err.Error())
}

// connMessage says why a connection to addr failed: the network's
// reason, or that something answered but not as a strand node (a frame
// error: an HTTP server answers "HTTP/1.1", read as a huge frame length).
func connMessage(addr string, err error) string {
	var op *net.OpError
	var errno syscall.Errno
	if !errors.As(err, &op) && !errors.As(err, &errno) {
		return fmt.Sprintf("%s answered, but not as a strand node (%s)", addr, trimPackagePrefixes(err.Error()))
	}
	return fmt.Sprintf("cannot reach %s: %s", addr, rootCause(err))
}

// unreachableMessage is the one wording of "no node at addrs answered",
// shared by every command (and by clientlib's UnreachableError), with what
// to do about it.
func unreachableMessage(addrs string, err error) string {
	return fmt.Sprintf("cannot reach the cluster at %s: %s (is a cluster running there? 'strand dev' starts one on 127.0.0.1:9192)",
		addrs, rootCause(err))
}

// rootCause is the innermost useful text of a network error: "connection
// refused" rather than "dial tcp 127.0.0.1:1: connect: connection refused".
func rootCause(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

// packagePrefixes are the "pkg: " prefixes Go errors carry, which mean
// nothing to a user.
var packagePrefixes = []string{"strand: ", "clientlib: ", "metadata: ", "node: ", "engine: ", "raftlog: ", "recordbatch: ", "frame: "}

// trimPackagePrefixes removes leading package prefixes from s.
func trimPackagePrefixes(s string) string {
	for trimmed := true; trimmed; {
		trimmed = false
		for _, p := range packagePrefixes {
			if rest, ok := strings.CutPrefix(s, p); ok {
				s, trimmed = rest, true
			}
		}
	}
	return s
}

// topicErr gives the unknown-topic and topic-exists errors of commands
// about topic their user-facing text; other errors pass unchanged.
func topicErr(topic string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, clientlib.ErrUnknownTopic):
		return userErr(err, "topic %q does not exist (create it with: strand topic create %s --partitions N)", topic, topic)
	case errors.Is(err, clientlib.ErrTopicExists):
		return userErr(err, "topic %q already exists", topic)
	}
	return err
}

// offsetOutOfRange says where the readable range of topic/partition is and
// what to type instead.
func offsetOutOfRange(topic string, partition int32, offset, logStart, highWatermark int64) string {
	if offset < logStart {
		return fmt.Sprintf("offset %d is before the start of %s/%d (log start %d); use --from earliest or a larger offset",
			offset, topic, partition, logStart)
	}
	return fmt.Sprintf("offset %d is past the end of %s/%d (high-water mark %d); use --from latest or a smaller offset",
		offset, topic, partition, highWatermark)
}
