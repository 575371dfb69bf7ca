package txn

import (
	"fmt"
	"slices"
)

// EndTxn decides the id's open transaction: PrepareCommit or PrepareAbort
// at the next epoch (KIP-890: every transaction ends with an epoch bump,
// so its markers fence the epoch it ran at), or at its own epoch for a
// transactions v1 client (c.KeepEpoch). A resend of the EndTxn that
// decided the last transaction gets its answer again.
func (s *State) EndTxn(c EndTxn) Result {
	t, err := s.lookup(c.ID)
	if err != nil {
		return refuse(err)
	}
	if t.endedBy != noProducer && c.Producer == t.endedBy {
		return t.resentEnd(c.Commit)
	}
	if err := t.authorize(c.Producer); err != nil {
		return refuse(err)
	}
	if t.state != Ongoing {
		return refuse(fmt.Errorf("%w: no transaction open for %q (%v)", ErrInvalidTxnState, t.id, t.state))
	}
	var nextID int64
	if !c.KeepEpoch && t.producer.Epoch+1 >= EpochExhausted {
		pid, ok := s.takeProducerID()
		if !ok {
			return refuse(ErrProducerIDsNeeded)
		}
		nextID = pid
	}
	t.prepare(c.Commit, c.Producer, c.NowMs, !c.KeepEpoch)
	t.nextProducerID = nextID
	return Result{Producer: t.clientNext(), Prepared: true}
}

// resentEnd answers a resend of the EndTxn that decided t's last
// transaction.
func (t *txnID) resentEnd(commit bool) Result {
	decidedCommit := t.state == PrepareCommit || t.state == CompleteCommit
	switch {
	case commit != decidedCommit:
		return refuse(fmt.Errorf("%w: %q already %v", ErrInvalidTxnState, t.id, t.state))
	case t.state.prepared():
		return refuse(ErrConcurrentTransactions)
	}
	return Result{Producer: t.producer}
}

// prepare decides t's Ongoing transaction, at the next epoch if bump.
// endedBy is the client's ids, or noProducer when the coordinator aborts
// (a fence or a timeout, which always bump). Epochs never pass
// math.MaxInt16: a transaction runs at most at EpochExhausted (see
// EpochExhausted).
func (t *txnID) prepare(commit bool, endedBy Producer, nowMs int64, bump bool) {
	if t.state != Ongoing || t.producer.Epoch > EpochExhausted {
		panic(fmt.Sprintf("txn: prepare of %q in %v at epoch %d", t.id, t.state, t.producer.Epoch))
	}
	t.state = PrepareAbort
	if commit {
		t.state = PrepareCommit
	}
	if bump {
		t.producer.Epoch++
	}
	t.endedBy, t.lastUpdateMs = endedBy, nowMs
	t.pendingParts, t.pendingGroups = slices.Clone(t.partitions), slices.Clone(t.groups)
	if len(t.pendingParts) == 0 && len(t.pendingGroups) == 0 {
		t.complete(nowMs)
	}
}

// complete finishes t's prepared transaction once every marker is written.
func (t *txnID) complete(nowMs int64) {
	if t.state == PrepareCommit {
		t.state = CompleteCommit
	} else {
		t.state = CompleteAbort
	}
	if t.nextProducerID != 0 {
		t.producer, t.nextProducerID = Producer{ID: t.nextProducerID}, 0
	}
	t.partitions, t.groups, t.pendingParts, t.pendingGroups = nil, nil, nil, nil
	t.lastUpdateMs = nowMs
}

// MarkerWritten notes one partition's marker (or one group's offsets) of
// the id's prepared transaction; the last one completes it.
func (s *State) MarkerWritten(c MarkerWritten) Result {
	t := s.ids[c.ID]
	if t == nil || !t.state.prepared() || c.Marker != t.producer {
		return refuse(fmt.Errorf("%w: marker %+v for %q", ErrStale, c.Marker, c.ID))
	}
	if c.Group != "" {
		if i, ok := slices.BinarySearch(t.pendingGroups, c.Group); ok {
			t.pendingGroups = slices.Delete(t.pendingGroups, i, i+1)
		}
	} else if i, ok := slices.BinarySearchFunc(t.pendingParts, c.Partition, compareTP); ok {
		t.pendingParts = slices.Delete(t.pendingParts, i, i+1)
	}
	t.lastUpdateMs = c.NowMs
	if len(t.pendingParts) > 0 || len(t.pendingGroups) > 0 {
		return Result{}
	}
	t.complete(c.NowMs)
	return Result{Completed: true}
}

// timedOut reports whether t's open transaction is past its timeout at
// nowMs.
func (t *txnID) timedOut(nowMs int64) bool {
	if t.state != Ongoing {
		return false
	}
	// A start more than a timeout after nowMs is a clock the coordinator
	// cannot trust (the node that stamped it ran ahead or jumped, or this
	// one runs behind): the transaction counts as timed out, and is
	// aborted, rather than held open until the clocks meet. Before, a
	// coordinator whose clock had jumped an hour ahead stamped a
	// transaction its successor then kept open for that hour, and every
	// read_committed reader of its partitions waited at its first offset
	// (simnet seed 180 of the merged tree: the session's output topic's
	// last stable offset stuck at 12 for the whole drain).
	age := nowMs - t.txnStartMs
	return age > int64(t.timeoutMs) || age < -int64(t.timeoutMs)
}

// TimeoutAbort aborts a transaction past its timeout, fencing its
// producer (the abort's epoch bump): the producer's next request is
// refused with ErrProducerFenced.
func (s *State) TimeoutAbort(c TimeoutAbort) Result {
	t := s.ids[c.ID]
	if t == nil || t.state != Ongoing || c.Producer != t.producer || !t.timedOut(c.NowMs) {
		return refuse(fmt.Errorf("%w: timeout abort %+v for %q", ErrStale, c.Producer, c.ID))
	}
	t.prepare(false, noProducer, c.NowMs, true)
	return Result{Prepared: true}
}

// AdminAbort is an operator's abort of the id's open transaction
// (strand txn abort): a TimeoutAbort whatever the transaction's age and
// producer. It prepares the abort at epoch + 1, fencing the producer. A
// transaction already being aborted (a resend, or a timeout or fence got
// there first) is answered its producer, without Prepared; one being
// committed, or none open, is ErrInvalidTxnState; an unknown id
// ErrTransactionalIDNotFound.
func (s *State) AdminAbort(c AdminAbort) Result {
	t := s.ids[c.ID]
	switch {
	case t == nil:
		return refuse(fmt.Errorf("%w: %q", ErrTransactionalIDNotFound, c.ID))
	case t.state == PrepareAbort:
		return Result{Producer: t.producer}
	case t.state != Ongoing:
		return refuse(fmt.Errorf("%w: %q has no open transaction to abort (%v)", ErrInvalidTxnState, c.ID, t.state))
	}
	t.prepare(false, noProducer, c.NowMs, true)
	return Result{Producer: t.producer, Prepared: true}
}

// GrantProducerIDs adds [first, first+count) to the pool of producer ids.
// A block must lie above every id granted before, so none is handed out
// twice.
func (s *State) GrantProducerIDs(first, count int64) Result {
	if count < 1 || count > ProducerIDBlockMax || first < s.grantedEnd || first > 1<<62 {
		return refuse(fmt.Errorf("%w: producer id block %d+%d (granted up to %d)", ErrInvalid, first, count, s.grantedEnd))
	}
	if len(s.pool) >= ProducerIDBlocksMax {
		return refuse(fmt.Errorf("%w: %d producer id blocks unused", ErrInvalid, len(s.pool)))
	}
	s.pool = append(s.pool, idRange{first: first, end: first + count})
	s.grantedEnd = first + count
	return Result{}
}

// ExpireIDs forgets ids without an open or completing transaction whose
// last change is at least retentionMs old (Kafka's Dead state and
// transactional.id.expiration.ms).
func (s *State) ExpireIDs(nowMs, retentionMs int64) Result {
	if retentionMs < 1 {
		return refuse(fmt.Errorf("%w: id retention %d ms", ErrInvalid, retentionMs))
	}
	var gone []string
	for _, id := range s.names {
		t := s.ids[id]
		if t.state.idle() && nowMs-t.lastUpdateMs >= retentionMs {
			gone = append(gone, id)
		}
	}
	for _, id := range gone {
		s.remove(id)
	}
	return Result{Expired: len(gone)}
}
