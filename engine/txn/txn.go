package txn

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/strandlog/strand/proto/strandpb"
)

// TxnState is a transactional id's state, Kafka's TransactionState. The
// numbers are stored in snapshots: never renumber.
type TxnState int32

// Kafka's states. Dead is never stored: an id expired by ExpireIDs is
// removed, which is what Kafka's Dead leads to.
const (
	// Empty: an InitProducerId bumped the epoch; no transaction yet.
	Empty TxnState = 1
	// Ongoing: partitions or a group joined the transaction.
	Ongoing TxnState = 2
	// PrepareCommit: the commit is decided (durable in the coordinator's
	// log); markers are being written.
	PrepareCommit TxnState = 3
	// PrepareAbort: the abort is decided; markers are being written.
	PrepareAbort TxnState = 4
	// CompleteCommit: every commit marker is written.
	CompleteCommit TxnState = 5
	// CompleteAbort: every abort marker is written.
	CompleteAbort TxnState = 6
	// Dead: the id expired (reported by Describe of nothing; never held).
	Dead TxnState = 7
)

// String is Kafka's name of the state.
func (s TxnState) String() string {
	switch s {
	case Empty:
		return "Empty"
	case Ongoing:
		return "Ongoing"
	case PrepareCommit:
		return "PrepareCommit"
	case PrepareAbort:
		return "PrepareAbort"
	case CompleteCommit:
		return "CompleteCommit"
	case CompleteAbort:
		return "CompleteAbort"
	case Dead:
		return "Dead"
	}
	return "Unknown"
}

// prepared reports whether the state waits for markers.
func (s TxnState) prepared() bool { return s == PrepareCommit || s == PrepareAbort }

// idle reports whether no transaction is open or being completed.
func (s TxnState) idle() bool { return s == Empty || s == CompleteCommit || s == CompleteAbort }

// Limits that keep one command's work and one id's state bounded.
const (
	// NameMax bounds transactional ids, topic and group names.
	NameMax = 255
	// PartitionsMax bounds the partitions of one transaction.
	PartitionsMax = 1 << 14
	// GroupsMax bounds the groups (AddOffsetsToTxn) of one transaction.
	GroupsMax = 64
	// ProducerIDBlockMax bounds one grant of producer ids (the metadata
	// group's own bound).
	ProducerIDBlockMax = 1 << 20
	// ProducerIDBlocksMax bounds the unused blocks the pool holds.
	ProducerIDBlocksMax = 16
	// EpochExhausted is the epoch at which a producer id is used up
	// (Kafka's isEpochExhausted: Short.MaxValue - 1): the next bump moves
	// the transactional id to a fresh producer id at epoch 0. Keeps every
	// epoch, including a fence's bump above it, ≤ math.MaxInt16.
	EpochExhausted int16 = math.MaxInt16 - 1
	// DefaultMaxTimeoutMs is Kafka's transaction.max.timeout.ms default
	// (15 minutes).
	DefaultMaxTimeoutMs int32 = 15 * 60 * 1000
	// DefaultIDRetentionMs is Kafka's transactional.id.expiration.ms
	// default (7 days).
	DefaultIDRetentionMs int64 = 7 * 24 * 60 * 60 * 1000
)

// Refusals. Each carries its wire code (strandpb.CodeOf). A refused
// command changes nothing, except CONCURRENT_TRANSACTIONS from
// InitProducerId on an Ongoing id, which answers the fence it started
// (Result.Fenced).
var (
	// ErrProducerFenced: the epoch is not the transactional id's current
	// one: a newer producer took the id, or the coordinator aborted the
	// transaction (timeout). Kafka answers PRODUCER_FENCED on coordinator
	// APIs and INVALID_PRODUCER_EPOCH on produce.
	ErrProducerFenced = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED, "txn: producer fenced by a newer epoch")
	// ErrInvalidTxnState: the operation does not fit the state (an EndTxn
	// without a transaction, a commit retried as an abort).
	ErrInvalidTxnState = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_TXN_STATE, "txn: invalid transaction state")
	// ErrInvalidProducerIDMapping: the transactional id is unknown, or
	// holds another producer id.
	ErrInvalidProducerIDMapping = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_PRODUCER_ID_MAPPING, "txn: producer id not mapped to the transactional id")
	// ErrInvalidTimeout: transaction.timeout.ms outside 1..the maximum.
	ErrInvalidTimeout = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_TRANSACTION_TIMEOUT, "txn: transaction timeout above transaction.max.timeout.ms or below 1 ms")
	// ErrConcurrentTransactions: the id's previous transaction is still
	// writing its markers; back off and resend.
	ErrConcurrentTransactions = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_CONCURRENT_TRANSACTIONS, "txn: previous transaction still completing")
	// ErrTransactionalIDNotFound: Describe of an id the coordinator does
	// not hold.
	ErrTransactionalIDNotFound = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_TRANSACTIONAL_ID_NOT_FOUND, "txn: transactional id not found")
	// ErrProducerIDsNeeded: the pool of producer ids is empty. Retriable:
	// the host allocates a block from the metadata group, proposes it
	// (GrantProducerIDs) and resends.
	ErrProducerIDsNeeded = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE, "txn: coordinator has no producer ids left")
	// ErrStale: a marker report or timeout abort for a transaction that is
	// no longer the id's current one (a duplicate, or overtaken). The host
	// drops it.
	ErrStale = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_TXN_STATE, "txn: stale coordinator command")
	// ErrInvalid: a malformed command (empty or oversized names, negative
	// partitions, too many partitions, an overlapping grant).
	ErrInvalid = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "txn: invalid command")
)

// Producer is a producer id and epoch.
type Producer struct {
	ID    int64
	Epoch int16
}

// noProducer is "none" (Kafka's NO_PRODUCER_ID, NO_PRODUCER_EPOCH).
var noProducer = Producer{ID: -1, Epoch: -1}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// compareTP orders partitions by topic, then number.
func compareTP(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// normalise sorts and de-duplicates ps into a fresh slice.
func normalise(ps []TopicPartition) []TopicPartition {
	out := slices.Clone(ps)
	slices.SortFunc(out, compareTP)
	return slices.Compact(out)
}

// union returns the sorted union of two sorted, distinct lists.
func union(a, b []TopicPartition) []TopicPartition {
	out := append(slices.Clone(a), b...)
	slices.SortFunc(out, compareTP)
	return slices.Compact(out)
}

// idRange is unused producer ids [first, end).
type idRange struct{ first, end int64 }

// txnID is one transactional id's record.
type txnID struct {
	id    string
	state TxnState
	// producer: the current id and epoch. Ongoing: the transaction's.
	// Prepare*/Complete*: the markers' (the transaction's epoch + 1).
	producer Producer
	// beforeInit: what the client held before the last InitProducerId
	// bump, so a resent InitProducerId (KIP-360) gets the same answer;
	// noProducer once a transaction starts.
	beforeInit Producer
	// nextProducerID: the id the record moves to, at epoch 0, when the
	// prepared transaction completes (its epoch is exhausted); 0: none.
	nextProducerID int64
	timeoutMs      int32
	txnStartMs     int64 // when the transaction went Ongoing
	lastUpdateMs   int64
	partitions     []TopicPartition // sorted: the transaction's partitions
	groups         []string         // sorted: its groups (AddOffsetsToTxn)
	pendingParts   []TopicPartition // sorted: Prepare*: markers not yet written
	pendingGroups  []string         // sorted: Prepare*: groups not yet completed
	// endedBy: the ids the EndTxn that prepared the last transaction came
	// with (a resend of it gets the same answer); noProducer when the
	// coordinator ended it (a fence or timeout) or none was ended.
	endedBy Producer
}

// clientNext is what the client holds once the id's transaction ended:
// the markers' epoch, or the fresh id at epoch 0.
func (t *txnID) clientNext() Producer {
	if t.nextProducerID != 0 {
		return Producer{ID: t.nextProducerID, Epoch: 0}
	}
	return t.producer
}

// State is every transactional id of one coordinator partition.
type State struct {
	ids   map[string]*txnID
	names []string // sorted ids: the only order ids are walked in
	// pool: unused producer ids, ascending blocks.
	pool []idRange
	// grantedEnd: one past the highest id ever granted.
	grantedEnd int64
}

// New returns an empty state.
func New() *State { return &State{ids: make(map[string]*txnID), grantedEnd: 1} }

// validName reports whether s is a usable id, topic or group name.
func validName(s string) bool { return s != "" && len(s) <= NameMax }

// insert adds a record in id order.
func (s *State) insert(t *txnID) {
	s.ids[t.id] = t
	i, _ := slices.BinarySearch(s.names, t.id)
	s.names = slices.Insert(s.names, i, t.id)
}

// remove forgets the id.
func (s *State) remove(id string) {
	delete(s.ids, id)
	if i, ok := slices.BinarySearch(s.names, id); ok {
		s.names = slices.Delete(s.names, i, i+1)
	}
}

// takeProducerID hands out the lowest unused producer id.
func (s *State) takeProducerID() (int64, bool) {
	if len(s.pool) == 0 {
		return 0, false
	}
	id := s.pool[0].first
	s.pool[0].first++
	if s.pool[0].first == s.pool[0].end {
		s.pool = slices.Delete(s.pool, 0, 1)
	}
	return id, true
}

// ProducerIDsLeft is how many unused producer ids the pool holds: the
// host grants a new block before it runs out.
func (s *State) ProducerIDsLeft() int64 {
	var n int64
	for _, r := range s.pool {
		n += r.end - r.first
	}
	return n
}
