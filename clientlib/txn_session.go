package clientlib

import (
	"context"
	"errors"
	"fmt"

	"github.com/strandlog/strand/proto/strandpb"
)

// ErrUnstableOffsetCommit: a group's offsets for the partition are
// pending in a transaction not yet ended (KIP-447), so its committed
// offset is not known yet. Retriable: the transaction's end settles it.
var ErrUnstableOffsetCommit = &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNSTABLE_OFFSET_COMMIT}

// ErrSessionEndPending matches a *SessionEndPendingError.
var ErrSessionEndPending = errors.New("clientlib: the transaction session's last End did not finish")

// SessionEndPendingError: a TransactSession's End could not learn its
// transaction's outcome (ctx ended, the coordinator unreachable), so the
// transaction is still open. Retriable: the next End, or the next Poll
// (which ends it as the failed End asked first), finishes it.
type SessionEndPendingError struct {
	Commit bool  // what the failed End asked
	Err    error // why it did not finish
}

func (e *SessionEndPendingError) Error() string {
	return fmt.Sprintf("clientlib: the transaction session's End(commit=%v) did not finish (the next Poll or End finishes it): %v", e.Commit, e.Err)
}

func (e *SessionEndPendingError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrSessionEndPending) hold.
func (e *SessionEndPendingError) Is(target error) bool { return target == ErrSessionEndPending }

// Retriable is true: ending again finishes the transaction.
func (e *SessionEndPendingError) Retriable() bool { return true }

// errRevokedInTxn is why End aborts after a rebalance took partitions
// during the transaction.
var errRevokedInTxn = errors.New("clientlib: partitions were revoked or lost during the transaction")

// TransactSession is exactly-once consume-transform-produce (franz-go's
// GroupTransactSession, Kafka's transactional consume-process-produce
// loop): a GroupConsumer reading at read_committed whose offsets are
// committed inside the transactions of a transactional Client, so each
// transaction's output and the input positions it consumed become
// visible together or not at all.
//
//	s, err := clientlib.NewTransactSession(txnClient, "group", []string{"in"})
//	for {
//		fs := s.Poll(ctx) // opens a transaction when none is open
//		for _, r := range fs.Records() {
//			s.Produce(ctx, transform(r), nil)
//		}
//		committed, err := s.End(ctx, true) // false: aborted, the input comes again
//		...
//	}
//
// End aborts instead of committing when a rebalance revoked (or lost)
// partitions of the member after the transaction handed out records: the
// partitions' new owner reads them again from the committed offsets, so
// committing this transaction's output would duplicate it. After every
// abort the member's positions go back to the group's committed offsets,
// so the aborted transaction's input is delivered again. Offsets are
// read only when stable (no transaction holds pending offsets for them),
// so a new owner never starts before its predecessor's last commit.
//
// Poll, Produce and End must be called from one goroutine, like
// GroupConsumer's methods; the session owns the GroupConsumer (its
// auto-commit is off, its isolation read_committed).
type TransactSession struct {
	c *Client
	g *GroupConsumer

	open       bool  // a transaction is open (Poll began it)
	handedOut  bool  // a Poll of the open transaction returned records
	failed     error // non-nil: End must abort (a revoke or loss)
	endPending bool  // the last End failed with the outcome unknown
	endCommit  bool  // what that End asked
	// offsetsSent: the open transaction holds the positions (a retried
	// commit must not send them again: its EndTxn may have been decided,
	// and the next epoch fences the old one's AddOffsetsToTxn).
	offsetsSent bool
	rewind      bool // positions must go back to the committed offsets
	closed      bool
}

// NewTransactSession returns a session consuming topics as a member of
// group through the transactional Client c (made with TransactionalID)
// and producing into c's transactions. opts configure the GroupConsumer;
// AutoCommitInterval and FetchIsolation are overridden (offsets commit in
// the transactions; reads are read_committed). OnRevoked and OnLost still
// run, after the session notes the revocation; they must not commit.
func NewTransactSession(c *Client, group string, topics []string, opts ...GroupOpt) (*TransactSession, error) {
	if c.txn == nil {
		return nil, ErrNotTransactional
	}
	opts = append(append([]GroupOpt(nil), opts...), AutoCommitInterval(0),
		GroupConsumerOpts(FetchIsolation(ReadCommitted)))
	g, err := NewGroupConsumer(c, group, topics, opts...)
	if err != nil {
		return nil, err
	}
	s := &TransactSession{c: c, g: g}
	g.cfg.requireStable = true
	userRevoked, userLost := g.cfg.onRevoked, g.cfg.onLost
	g.cfg.onRevoked = func(ctx context.Context, ps []TopicPartition) {
		s.noteRevoked()
		if userRevoked != nil {
			userRevoked(ctx, ps)
		}
	}
	g.cfg.onLost = func(ps []TopicPartition) {
		s.noteRevoked()
		if userLost != nil {
			userLost(ps)
		}
	}
	return s, nil
}

// noteRevoked dooms the open transaction when it handed out records: a
// rebalance took partitions whose input it may hold.
func (s *TransactSession) noteRevoked() {
	if s.open && s.handedOut && s.failed == nil {
		s.failed = errRevokedInTxn
	}
}

// Client is the session's transactional Client.
func (s *TransactSession) Client() *Client { return s.c }

// GroupConsumer is the session's group member (for Assigned, Position,
// GroupMetadata); polling or committing through it directly breaks the
// session's guarantees.
func (s *TransactSession) GroupConsumer() *GroupConsumer { return s.g }

// Poll opens a transaction when none is open, then polls the group (see
// GroupConsumer.Poll): the records it returns belong to the open
// transaction, which End ends. After an End that did not finish
// (*SessionEndPendingError) it first ends that transaction as asked. A
// failed BeginTransaction (a fenced producer: *ProducerFencedError), an
// End still unfinished, or a rewind that could not read the committed
// offsets is returned as the Fetches' error.
func (s *TransactSession) Poll(ctx context.Context) Fetches {
	switch {
	case s.closed:
		return Fetches{{Err: ErrClientClosed}}
	case s.endPending:
		if _, err := s.End(ctx, s.endCommit); err != nil {
			return Fetches{{Err: err}}
		}
	}
	if s.rewind {
		if err := s.rewindToCommitted(ctx); err != nil {
			return Fetches{{Err: err}}
		}
	}
	if !s.open {
		if err := s.c.BeginTransaction(); err != nil {
			return Fetches{{Err: err}}
		}
		s.open, s.handedOut, s.failed, s.offsetsSent = true, false, nil, false
	}
	fs := s.g.Poll(ctx)
	if len(fs.Records()) > 0 {
		s.handedOut = true
	}
	return fs
}

// Produce produces r in the open transaction (see Client.Produce); with
// no transaction open the promise gets ErrNoTransaction.
func (s *TransactSession) Produce(ctx context.Context, r *Record, promise func(*Record, error)) {
	s.c.Produce(ctx, r, promise)
}

// End ends the open transaction. With commit true it sends the member's
// positions of every owned partition as the group's offsets and commits,
// unless partitions were revoked or lost during the transaction: then,
// and when commit is false, it aborts. It reports whether the
// transaction committed.
//
// committed false, err nil: aborted, and the positions are back at the
// committed offsets; the next Poll delivers the aborted input again.
// committed false, err non-nil:
//   - a *ProducerFencedError: another producer took the transactional id
//     (or the coordinator timed the transaction out); close the session;
//   - a *TransactionAbortableError (a record or the offsets failed): the
//     session aborted and rewound, as above; the error says why;
//   - a *SessionEndPendingError (ctx ended, coordinator unreachable): the
//     outcome is not known yet; the next End or Poll finishes it, as this
//     End asked (that End's commit argument is ignored);
//   - any other error (a closed Client, a refusal): close the session.
func (s *TransactSession) End(ctx context.Context, commit bool) (committed bool, err error) {
	if !s.open {
		return false, ErrNoTransaction
	}
	if s.endPending {
		commit = s.endCommit // its EndTxn may be decided: only the same decision gets the answer
	}
	var cause error
	if commit && s.failed == nil {
		cause = s.commit(ctx)
		if cause == nil {
			s.open, s.endPending = false, false
			return true, nil
		}
		var ae *TransactionAbortableError
		if !errors.As(cause, &ae) {
			return false, s.unfinished(commit, cause)
		}
	}
	if err := s.c.AbortTransaction(ctx); err != nil && !errors.Is(err, ErrNoTransaction) {
		return false, s.unfinished(false, err)
	}
	s.open, s.endPending, s.rewind = false, false, true
	if err := s.rewindToCommitted(ctx); err != nil {
		return false, errors.Join(cause, err) // the next Poll rewinds first
	}
	return false, cause
}

// unfinished is End's error when it could not end the transaction: when
// the outcome is unknown (a retriable failure, a lost connection, ctx),
// the session ends it as commit says at the next End or Poll; any other
// error (fenced, closed, a refusal) is returned as it is.
func (s *TransactSession) unfinished(commit bool, err error) error {
	unknown := IsRetriable(err) || isConnErr(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	if !unknown {
		return err
	}
	s.endPending, s.endCommit = true, commit
	return &SessionEndPendingError{Commit: commit, Err: err}
}

// commit sends the owned partitions' positions in the transaction and
// commits it.
func (s *TransactSession) commit(ctx context.Context) error {
	if err := s.c.Flush(ctx); err != nil {
		return err
	}
	offsets := make(map[TopicPartition]int64, len(s.g.owned))
	for _, tp := range s.g.owned {
		if pos, ok := s.g.Position(tp.Topic, tp.Partition); ok {
			offsets[tp] = pos
		}
	}
	if len(offsets) > 0 && !s.offsetsSent {
		if err := s.c.SendOffsetsToTransaction(ctx, offsets, s.g.GroupMetadata()); err != nil {
			var ae *TransactionAbortableError
			if !errors.As(err, &ae) && !errors.Is(err, ErrProducerFenced) {
				err = &TransactionAbortableError{Err: err} // the transaction noted it abortable
			}
			return err
		}
		s.offsetsSent = true
	}
	return s.c.CommitTransaction(ctx)
}

// rewindToCommitted moves every owned partition back to the group's
// stable committed offset (the aborted transaction's input is read
// again).
func (s *TransactSession) rewindToCommitted(ctx context.Context) error {
	if len(s.g.owned) > 0 {
		if err := s.g.seekCommitted(ctx, s.g.owned); err != nil {
			return fmt.Errorf("clientlib: rewinding to the committed offsets of group %q: %w", s.g.group, err)
		}
	}
	s.rewind = false
	return nil
}

// Close aborts the open transaction (its input is read again by the
// partitions' next owner) and leaves the group; the Client stays open.
func (s *TransactSession) Close(ctx context.Context) error {
	if s.closed {
		return nil
	}
	var err error
	if s.open {
		if aerr := s.c.AbortTransaction(ctx); aerr != nil && !errors.Is(aerr, ErrNoTransaction) {
			err = aerr
		}
		s.open = false
	}
	s.closed = true
	return errors.Join(err, s.g.Close(ctx))
}

// fetchCommitted reads the group's committed offsets of ps: stable ones
// (KIP-447) when the member is a TransactSession's.
func (g *GroupConsumer) fetchCommitted(ctx context.Context, ps []TopicPartition) ([]CommittedOffset, error) {
	if g.cfg.requireStable {
		return g.c.fetchStableOffsets(ctx, g.group, ps)
	}
	return g.c.FetchOffsets(ctx, g.group, ps...)
}

// FetchStableOffsets is FetchOffsets with require_stable (KIP-447): the
// offsets as of the last transaction that ended, never a value a
// committed transaction's markers have not reached yet. While a
// transaction holds pending offsets of a partition asked for (none named:
// every partition), it backs off and asks again (ErrUnstableOffsetCommit
// once the retries run out).
func (c *Client) FetchStableOffsets(ctx context.Context, group string, partitions ...TopicPartition) ([]CommittedOffset, error) {
	return c.fetchStableOffsets(ctx, group, partitions)
}

// fetchStableOffsets is FetchOffsets with require_stable: while a
// transaction holds pending offsets of a partition asked for, it backs
// off and asks again (ErrUnstableOffsetCommit once the retries run out).
func (c *Client) fetchStableOffsets(ctx context.Context, group string, ps []TopicPartition) ([]CommittedOffset, error) {
	req := &strandpb.OffsetFetchRequest{Group: group, Partitions: partitionsToWire(ps), RequireStable: true}
	var out []CommittedOffset
	err := c.withRetries(ctx, func() error {
		resp, err := c.groupRequest(ctx, group, &strandpb.Request{Body: &strandpb.Request_OffsetFetch{OffsetFetch: req}})
		if err != nil {
			return err
		}
		a := resp.GetOffsetFetch()
		if unstable := partitionsFromWire(a.GetUnstable()); len(unstable) > 0 {
			return &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNSTABLE_OFFSET_COMMIT,
				Message: fmt.Sprintf("group %q has offsets pending in a transaction for %v", group, unstable)}
		}
		out = offsetsFromWire(a.GetOffsets())
		return nil
	})
	return out, err
}
