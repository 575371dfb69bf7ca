package txn

import (
	"fmt"
	"slices"
)

// InitProducerID is Kafka's InitProducerId with a transactional id.
type InitProducerID struct {
	ID           string
	TimeoutMs    int32
	MaxTimeoutMs int32 // the proposer's transaction.max.timeout.ms
	// Expected is the producer id and epoch the client holds (KIP-360), or
	// nil for a fresh producer.
	Expected *Producer
	NowMs    int64
}

// AddPartitions is Kafka's AddPartitionsToTxn (a write, not verify-only).
type AddPartitions struct {
	ID         string
	Producer   Producer
	Partitions []TopicPartition
	NowMs      int64
}

// AddOffsets is Kafka's AddOffsetsToTxn.
type AddOffsets struct {
	ID       string
	Producer Producer
	Group    string
	NowMs    int64
}

// EndTxn is Kafka's EndTxn.
type EndTxn struct {
	ID       string
	Producer Producer
	Commit   bool
	// KeepEpoch decides at the transaction's epoch: a Kafka transactions v1
	// client (EndTxn below v5) cannot learn a new one. Fencing aborts
	// (InitProducerId, timeouts) bump it all the same.
	KeepEpoch bool
	NowMs     int64
}

// MarkerWritten reports one partition's marker (or, with Group set, one
// group's offsets) of a prepared transaction as done.
type MarkerWritten struct {
	ID        string
	Marker    Producer // the prepared transaction's producer id and marker epoch
	Partition TopicPartition
	Group     string
	NowMs     int64
}

// TimeoutAbort aborts a transaction Expired named.
type TimeoutAbort struct {
	ID       string
	Producer Producer // the transaction's, as Expired reported it
	NowMs    int64
}

// AdminAbort is an operator's abort of the id's open transaction.
type AdminAbort struct {
	ID    string
	NowMs int64
}

// Result is a command's outcome.
type Result struct {
	// Err is the refusal, nil when applied.
	Err error
	// Producer: InitProducerId's and EndTxn's answer, the ids the client
	// uses next.
	Producer Producer
	// Fenced: an InitProducerId found a transaction open and began its
	// abort (Err is ErrConcurrentTransactions; markers are due).
	Fenced bool
	// Prepared: the command decided a transaction (its markers are due):
	// EndTxn, TimeoutAbort, AdminAbort, a fencing InitProducerId.
	Prepared bool
	// Completed: the marker report finished the transaction.
	Completed bool
	// Expired: ids ExpireIDs forgot.
	Expired int
}

// refuse is a Result carrying err.
func refuse(err error) Result { return Result{Err: err} }

// InitProducerID gives the transactional id a producer id and a new epoch,
// fencing every older epoch; see the package doc for the cases.
func (s *State) InitProducerID(c InitProducerID) Result {
	if !validName(c.ID) || c.MaxTimeoutMs < 1 {
		return refuse(fmt.Errorf("%w: transactional id %q, max timeout %d", ErrInvalid, c.ID, c.MaxTimeoutMs))
	}
	if c.TimeoutMs < 1 || c.TimeoutMs > c.MaxTimeoutMs {
		return refuse(fmt.Errorf("%w: %d ms, want 1..%d", ErrInvalidTimeout, c.TimeoutMs, c.MaxTimeoutMs))
	}
	t := s.ids[c.ID]
	if t == nil {
		pid, ok := s.takeProducerID()
		if !ok {
			return refuse(ErrProducerIDsNeeded)
		}
		t = &txnID{id: c.ID, state: Empty, producer: Producer{ID: pid}, beforeInit: noProducer, endedBy: noProducer,
			timeoutMs: c.TimeoutMs, lastUpdateMs: c.NowMs}
		s.insert(t)
		return Result{Producer: t.producer}
	}
	if c.Expected != nil && *c.Expected == t.beforeInit && t.state == Empty {
		return Result{Producer: t.producer} // a resend of the bump that made this epoch
	}
	if c.Expected != nil && *c.Expected != t.producer && *c.Expected != t.clientNext() {
		return refuse(fmt.Errorf("%w: expected %+v, id holds %+v", ErrProducerFenced, *c.Expected, t.producer))
	}
	switch {
	case t.state.prepared():
		return refuse(ErrConcurrentTransactions)
	case t.state == Ongoing:
		t.prepare(false, noProducer, c.NowMs, true)
		return Result{Err: ErrConcurrentTransactions, Fenced: true, Prepared: true}
	}
	return s.bump(t, c)
}

// bump moves an idle id to its next epoch (or, its epoch exhausted, a
// fresh producer id at epoch 0).
func (s *State) bump(t *txnID, c InitProducerID) Result {
	next := Producer{ID: t.producer.ID, Epoch: t.producer.Epoch + 1}
	if t.producer.Epoch >= EpochExhausted {
		pid, ok := s.takeProducerID()
		if !ok {
			return refuse(ErrProducerIDsNeeded)
		}
		next = Producer{ID: pid}
	}
	t.beforeInit, t.producer = t.producer, next
	t.state, t.timeoutMs, t.lastUpdateMs = Empty, c.TimeoutMs, c.NowMs
	t.endedBy = noProducer
	return Result{Producer: t.producer}
}

// authorize checks that p may act on t's transaction: the current id and
// epoch, and no transaction still completing.
func (t *txnID) authorize(p Producer) error {
	if t.state.prepared() && p == t.clientNext() {
		return ErrConcurrentTransactions
	}
	if p.ID != t.producer.ID {
		return fmt.Errorf("%w: producer id %d, id %q holds %d", ErrInvalidProducerIDMapping, p.ID, t.id, t.producer.ID)
	}
	if p.Epoch != t.producer.Epoch && !bugSkipFence {
		return fmt.Errorf("%w: epoch %d, current %d", ErrProducerFenced, p.Epoch, t.producer.Epoch)
	}
	if t.state.prepared() {
		return ErrConcurrentTransactions
	}
	return nil
}

// lookup finds id for a producer request.
func (s *State) lookup(id string) (*txnID, error) {
	if !validName(id) {
		return nil, fmt.Errorf("%w: transactional id %q", ErrInvalid, id)
	}
	t := s.ids[id]
	if t == nil {
		return nil, fmt.Errorf("%w: unknown transactional id %q", ErrInvalidProducerIDMapping, id)
	}
	return t, nil
}

// begin makes t Ongoing if it was idle.
func (t *txnID) begin(nowMs int64) {
	if t.state != Ongoing {
		t.state, t.txnStartMs = Ongoing, nowMs
		t.partitions, t.groups = nil, nil
		t.beforeInit, t.endedBy = noProducer, noProducer
	}
	t.lastUpdateMs = nowMs
}

// AddPartitions adds partitions to the id's transaction, starting one if
// none is open.
func (s *State) AddPartitions(c AddPartitions) Result {
	if len(c.Partitions) == 0 || len(c.Partitions) > PartitionsMax {
		return refuse(fmt.Errorf("%w: %d partitions", ErrInvalid, len(c.Partitions)))
	}
	for _, p := range c.Partitions {
		if !validName(p.Topic) || p.Partition < 0 {
			return refuse(fmt.Errorf("%w: partition %s/%d", ErrInvalid, p.Topic, p.Partition))
		}
	}
	t, err := s.lookup(c.ID)
	if err == nil {
		err = t.authorize(c.Producer)
	}
	if err != nil {
		return refuse(err)
	}
	var merged []TopicPartition
	if t.state == Ongoing {
		merged = union(t.partitions, normalise(c.Partitions))
	} else {
		merged = normalise(c.Partitions)
	}
	if len(merged) > PartitionsMax {
		return refuse(fmt.Errorf("%w: transaction would span %d partitions", ErrInvalid, len(merged)))
	}
	t.begin(c.NowMs)
	t.partitions = merged
	return Result{}
}

// AddOffsets adds a group's offsets to the id's transaction.
func (s *State) AddOffsets(c AddOffsets) Result {
	if !validName(c.Group) {
		return refuse(fmt.Errorf("%w: group %q", ErrInvalid, c.Group))
	}
	t, err := s.lookup(c.ID)
	if err == nil {
		err = t.authorize(c.Producer)
	}
	if err != nil {
		return refuse(err)
	}
	var groups []string
	if t.state == Ongoing {
		groups = slices.Clone(t.groups)
	}
	if i, found := slices.BinarySearch(groups, c.Group); !found {
		groups = slices.Insert(groups, i, c.Group)
	}
	if len(groups) > GroupsMax {
		return refuse(fmt.Errorf("%w: transaction would span %d groups", ErrInvalid, len(groups)))
	}
	t.begin(c.NowMs)
	t.groups = groups
	return Result{}
}
