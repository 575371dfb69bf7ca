package txn

import (
	"fmt"
	"slices"
)

// Description is one transactional id as DescribeTransactions shows it.
type Description struct {
	ID       string
	State    TxnState
	Producer Producer
	// TimeoutMs is the id's transaction.timeout.ms.
	TimeoutMs int32
	// TxnStartMs is when the open transaction started (-1 when none).
	TxnStartMs int64
	// Partitions and Groups are the open or completing transaction's,
	// sorted.
	Partitions []TopicPartition
	Groups     []string
}

// Describe returns the id's description, or ErrTransactionalIDNotFound.
func (s *State) Describe(id string) (Description, error) {
	t := s.ids[id]
	if t == nil {
		return Description{}, fmt.Errorf("%w: %q", ErrTransactionalIDNotFound, id)
	}
	d := Description{ID: t.id, State: t.state, Producer: t.producer, TimeoutMs: t.timeoutMs, TxnStartMs: -1,
		Partitions: slices.Clone(t.partitions), Groups: slices.Clone(t.groups)}
	if t.state == Ongoing || t.state.prepared() {
		d.TxnStartMs = t.txnStartMs
	}
	return d, nil
}

// IDs returns every transactional id, sorted (ListTransactions).
func (s *State) IDs() []string { return slices.Clone(s.names) }

// Prepared is a decided transaction whose markers are still to be written.
type Prepared struct {
	ID     string
	Commit bool
	// Marker is the producer id and epoch every marker carries.
	Marker Producer
	// KeptEpoch: the client's EndTxn kept the epoch (transactions v1), so
	// Marker's epoch is the one the transaction ran at, not the next.
	KeptEpoch bool
	// Partitions and Groups still wait for their marker, sorted.
	Partitions []TopicPartition
	Groups     []string
}

// Pending returns every prepared transaction, sorted by id: after a
// fail-over (Restore, or replay of the log) the new coordinator writes
// their markers, since the decision is already durable.
func (s *State) Pending() []Prepared {
	var out []Prepared
	for _, id := range s.names {
		t := s.ids[id]
		if !t.state.prepared() {
			continue
		}
		out = append(out, Prepared{ID: id, Commit: t.state == PrepareCommit, Marker: t.producer,
			KeptEpoch: t.endedBy == t.producer, Partitions: slices.Clone(t.pendingParts), Groups: slices.Clone(t.pendingGroups)})
	}
	return out
}

// TimedOut names an open transaction past its timeout.
type TimedOut struct {
	ID       string
	Producer Producer
}

// Expired returns the open transactions past their timeout at nowMs,
// sorted by id: the host proposes a TimeoutAbort for each. Pure: nothing
// changes until the abort is applied.
func (s *State) Expired(nowMs int64) []TimedOut {
	var out []TimedOut
	for _, id := range s.names {
		if t := s.ids[id]; t.timedOut(nowMs) {
			out = append(out, TimedOut{ID: id, Producer: t.producer})
		}
	}
	return out
}

// Verify is AddPartitionsToTxn's verify-only form (KIP-890 part 1): for
// each partition, nil when it is in the producer's open transaction, else
// why not. The partition leader asks it before accepting a transactional
// write, so no write lands outside a transaction the coordinator knows
// (a hanging transaction). A read: nothing changes.
func (s *State) Verify(id string, p Producer, partitions []TopicPartition) []error {
	out := make([]error, len(partitions))
	t, err := s.lookup(id)
	if err == nil {
		err = t.authorize(p)
	}
	if err == nil && t.state != Ongoing {
		err = fmt.Errorf("%w: no transaction open for %q", ErrInvalidTxnState, id)
	}
	for i, tp := range partitions {
		switch {
		case err != nil:
			out[i] = err
		case !slices.ContainsFunc(t.partitions, func(x TopicPartition) bool { return x == tp }):
			out[i] = fmt.Errorf("%w: %s/%d not in the transaction of %q", ErrInvalidTxnState, tp.Topic, tp.Partition, id)
		}
	}
	return out
}

// VerifyGroup is Verify for a group's offsets: nil when group was added
// (AddOffsetsToTxn) to the producer's open transaction, else why not. The
// group coordinator asks it before it takes a TxnOffsetCommit (KIP-447),
// so no transactional offsets wait outside a transaction the coordinator
// knows and will send the group a marker for. A read.
func (s *State) VerifyGroup(id string, p Producer, group string) error {
	t, err := s.lookup(id)
	if err == nil {
		err = t.authorize(p)
	}
	switch {
	case err != nil:
		return err
	case t.state != Ongoing:
		return fmt.Errorf("%w: no transaction open for %q", ErrInvalidTxnState, id)
	}
	if _, ok := slices.BinarySearch(t.groups, group); !ok {
		return fmt.Errorf("%w: group %q not in the transaction of %q", ErrInvalidTxnState, group, id)
	}
	return nil
}

// StateOf returns the id's state, false for an unknown id: a cheap read for
// the host's counters (Describe copies the transaction).
func (s *State) StateOf(id string) (TxnState, bool) {
	if t := s.ids[id]; t != nil {
		return t.state, true
	}
	return 0, false
}

// OpenCount counts the transactions open or being completed (Ongoing,
// PrepareCommit, PrepareAbort) and returns the oldest one's start (-1
// when none): the host's open-transaction gauges.
func (s *State) OpenCount() (open int, oldestStartMs int64) {
	oldestStartMs = -1
	for _, id := range s.names {
		t := s.ids[id]
		if t.state.idle() {
			continue
		}
		open++
		if oldestStartMs < 0 || t.txnStartMs < oldestStartMs {
			oldestStartMs = t.txnStartMs
		}
	}
	return open, oldestStartMs
}
