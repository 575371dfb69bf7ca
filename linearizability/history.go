package linearizability

import (
	"fmt"
	"math"
	"sort"
	"sync"
)

// TopicPartition names one partition of one topic: the unit a log history is
// split by, since partitions are independent logs.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String renders tp as "topic/partition" for reports.
func (tp TopicPartition) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

func (tp TopicPartition) less(o TopicPartition) bool {
	if tp.Topic != o.Topic {
		return tp.Topic < o.Topic
	}
	return tp.Partition < o.Partition
}

// ClientID names a client process of the workload. A client's operations are
// expected to be sequential per partition; pipelining is allowed but the
// per-client checks then compare in call order.
type ClientID int

// OpID names one recorded operation; ids are dense from 0 in call order.
type OpID int

// Kind is what an operation does.
type Kind uint8

// The operation kinds.
const (
	KindProduce        Kind = iota + 1 // append records to a partition
	KindFetch                          // read records from an offset
	KindListOffsets                    // read the latest (high-water mark) or earliest offset
	KindCommitOffset                   // store a consumer group's offset for a partition
	KindFetchCommitted                 // read a consumer group's committed offset
	KindMemberEpoch                    // a heartbeat that gave a group member an epoch
)

func (k Kind) String() string {
	switch k {
	case KindProduce:
		return "produce"
	case KindFetch:
		return "fetch"
	case KindListOffsets:
		return "list-offsets"
	case KindCommitOffset:
		return "commit"
	case KindFetchCommitted:
		return "fetch-committed"
	case KindMemberEpoch:
		return "member-epoch"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Outcome is how an operation ended.
type Outcome uint8

// The outcomes. Pending operations are treated as indefinite by the checks.
const (
	OutcomePending    Outcome = iota // never returned (yet)
	OutcomeOK                        // succeeded; the result fields are set
	OutcomeFailed                    // definitely had no effect (refused before proposing)
	OutcomeIndefinite                // timed out or unknown: may or may not have taken effect
	OutcomeOutOfRange                // fetch refused: offset below log start or above high-water mark
)

func (o Outcome) String() string {
	return [...]string{"pending", "ok", "failed", "indefinite", "out-of-range"}[o]
}

// OffsetSpec selects which offset ListOffsets asks for.
type OffsetSpec uint8

// The offset specs, as Kafka's ListOffsets timestamps -1 and -2.
const (
	OffsetLatest   OffsetSpec = iota // the high-water mark
	OffsetEarliest                   // the log start offset
)

// Record is one record as sent (Offset unused) or as fetched.
type Record struct {
	Offset int64
	Key    string
	Value  string
}

// Op is one recorded operation: its input, its times and its outcome.
type Op struct {
	ID     OpID
	Client ClientID
	Kind   Kind
	TP     TopicPartition
	Group  string // commit, fetch-committed and member-epoch only
	// Member and MemberEpoch: a commit made as a group member (Member ""
	// for none), or a member-epoch op's member and the epoch it was given.
	Member      string
	MemberEpoch int32

	Sent        []Record // produce: the batch, in order
	FetchOffset int64    // fetch: the offset asked for
	MaxRecords  int64    // fetch: upper bound on records returned; 0 = none
	Poll        bool     // fetch: continues the client's previous fetch of TP (consumer position)
	// Alone (fetch): the request asked for TP alone, so an answer in range
	// below its high-water mark carries at least one record (the first
	// batch is served whole whatever the byte budget); a fetch of several
	// partitions may leave one out once its budget is spent.
	Alone        bool
	Spec         OffsetSpec // list offsets
	CommitOffset int64      // commit: the offset stored

	Call    int64 // virtual nanoseconds
	Return  int64 // virtual nanoseconds; meaningless while Pending
	Outcome Outcome

	Offset        int64    // ok produce: base offset; ok list offsets / fetch committed: the offset (-1: none committed)
	Received      []Record // ok fetch: records at FetchOffset, FetchOffset+1, ...
	HighWatermark int64    // ok or out-of-range fetch
	LogStart      int64    // ok or out-of-range fetch
}

func (op *Op) returned() bool { return op.Outcome != OutcomePending }

// indefinite reports whether op may or may not have taken effect.
func (op *Op) indefinite() bool {
	return op.Outcome == OutcomePending || op.Outcome == OutcomeIndefinite
}

// History is a concurrent client history in virtual time. Clients record the
// call of each operation and later its return; times are supplied by the
// caller (the simulator's virtual clock, or a test's monotonic clock), never
// read here. Safe for concurrent use so real-process tests can share one.
type History struct {
	mu      sync.Mutex
	ops     []Op
	values  map[string]OpID // every produced value, to enforce uniqueness
	drained map[TopicPartition]bool
	// ackedEnd is, per partition, one past the highest offset of an
	// acknowledged produce (an acknowledged op never changes again).
	ackedEnd map[TopicPartition]int64
}

// NewHistory returns an empty history.
func NewHistory() *History {
	return &History{values: make(map[string]OpID), drained: make(map[TopicPartition]bool),
		ackedEnd: make(map[TopicPartition]int64)}
}

// MarkDrained declares that tp was read whole at the end of the history:
// after faults healed and every other operation returned or was abandoned,
// fetches covered it from its log start up to its high-water mark. The checks
// then treat tp as Options.FinalDrain treats every partition. A simulator
// whose drain fails on some partitions marks only the others.
func (h *History) MarkDrained(tp TopicPartition) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drained[tp] = true
}

// drainedFunc reports, per partition, whether the checks may assume a final drain.
func (h *History) drainedFunc(opts Options) func(TopicPartition) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	drained := make(map[TopicPartition]bool, len(h.drained))
	for tp := range h.drained {
		drained[tp] = true
	}
	return func(tp TopicPartition) bool { return opts.FinalDrain || drained[tp] }
}

// Len is the number of operations recorded.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Ops returns a deep copy of the operations in id order.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Op, len(h.ops))
	for i, op := range h.ops {
		op.Sent = append([]Record(nil), op.Sent...)
		op.Received = append([]Record(nil), op.Received...)
		out[i] = op
	}
	return out
}

// Each calls fn with each operation in id order, without copying: fn must
// neither keep nor change the op, nor call the History's methods (its lock
// is held). A checker reading a long history often uses it instead of Ops.
func (h *History) Each(fn func(op *Op)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.ops {
		fn(&h.ops[i])
	}
}

// KindOf is the kind of operation id.
func (h *History) KindOf(id OpID) Kind {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ops[id].Kind
}

// AcknowledgedEnd is one past the highest offset an acknowledged produce to
// tp was given (0: none acknowledged).
func (h *History) AcknowledgedEnd(tp TopicPartition) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ackedEnd[tp]
}

func (h *History) call(op Op) OpID {
	h.mu.Lock()
	defer h.mu.Unlock()
	if op.Call < 0 || op.Call == math.MaxInt64 {
		panic(fmt.Sprintf("linearizability: call time %d out of range", op.Call))
	}
	op.ID = OpID(len(h.ops))
	op.Outcome = OutcomePending
	for _, r := range op.Sent {
		if prev, dup := h.values[r.Value]; dup {
			panic(fmt.Sprintf("linearizability: value %q produced by op %d and again by op %d; values must be unique", r.Value, prev, op.ID))
		}
		h.values[r.Value] = op.ID
	}
	h.ops = append(h.ops, op)
	return op.ID
}

// CallProduce records the call of a one-record produce. value must be unique
// in the history; key may be empty (keyless).
func (h *History) CallProduce(client ClientID, tp TopicPartition, key, value string, t int64) OpID {
	return h.CallProduceBatch(client, tp, []Record{{Key: key, Value: value}}, t)
}

// CallProduceBatch records the call of a produce of a batch, which takes
// effect atomically at consecutive offsets. Record offsets are ignored.
func (h *History) CallProduceBatch(client ClientID, tp TopicPartition, records []Record, t int64) OpID {
	if len(records) == 0 {
		panic("linearizability: produce of an empty batch")
	}
	sent := make([]Record, len(records))
	for i, r := range records {
		if r.Value == "" {
			panic("linearizability: produce of an empty value; values must be unique and non-empty")
		}
		sent[i] = Record{Offset: -1, Key: r.Key, Value: r.Value}
	}
	return h.call(Op{Client: client, Kind: KindProduce, TP: tp, Sent: sent, Call: t})
}

// MoveProduce re-files the pending produce id under partition tp: a client
// that learns only when the produce returns which partition it went to
// (which incarnation of a topic deleted and re-created under its name)
// files it there before recording the return. It panics on an op that is
// not a pending produce.
func (h *History) MoveProduce(id OpID, tp TopicPartition) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if id < 0 || int(id) >= len(h.ops) || h.ops[id].Kind != KindProduce || h.ops[id].returned() {
		panic(fmt.Sprintf("linearizability: op %d is not a pending produce", id))
	}
	h.ops[id].TP = tp
}

// CallFetch records a fetch from an explicit offset (a seek, or a reader
// without a position). maxRecords bounds the records the reply may hold; 0
// when the server may return any number (a byte limit, whole batches).
func (h *History) CallFetch(client ClientID, tp TopicPartition, offset, maxRecords int64, t int64) OpID {
	return h.call(Op{Client: client, Kind: KindFetch, TP: tp, FetchOffset: offset, MaxRecords: maxRecords, Call: t})
}

// CallPoll records a fetch that continues the client's previous fetch of tp
// from its consumer position: position must equal where that fetch ended, or
// the poll checks report a skip or a step back.
func (h *History) CallPoll(client ClientID, tp TopicPartition, position, maxRecords int64, t int64) OpID {
	return h.call(Op{Client: client, Kind: KindFetch, TP: tp, FetchOffset: position, MaxRecords: maxRecords, Poll: true, Call: t})
}

// Alone marks the pending fetch id as one that asked for its partition
// alone (Op.Alone).
func (h *History) Alone(id OpID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if id < 0 || int(id) >= len(h.ops) || h.ops[id].Kind != KindFetch {
		panic(fmt.Sprintf("linearizability: Alone of op %d, not a fetch", id))
	}
	h.ops[id].Alone = true
}

// CallListOffsets records a list-offsets request for the latest or earliest offset.
func (h *History) CallListOffsets(client ClientID, tp TopicPartition, spec OffsetSpec, t int64) OpID {
	return h.call(Op{Client: client, Kind: KindListOffsets, TP: tp, Spec: spec, Call: t})
}

// CallCommitOffset records a consumer group's offset commit for tp.
func (h *History) CallCommitOffset(client ClientID, group string, tp TopicPartition, offset int64, t int64) OpID {
	return h.call(Op{Client: client, Kind: KindCommitOffset, TP: tp, Group: group, CommitOffset: offset, Call: t})
}

// CallCommitOffsetAs records a commit made by a group member at a member
// epoch: the offset model then also checks it was not made in an epoch
// older than one the member had been given before (a fenced zombie's).
func (h *History) CallCommitOffsetAs(client ClientID, group, member string, epoch int32, tp TopicPartition, offset int64, t int64) OpID {
	return h.call(Op{Client: client, Kind: KindCommitOffset, TP: tp, Group: group, Member: member, MemberEpoch: epoch,
		CommitOffset: offset, Call: t})
}

// CallMemberEpoch records a heartbeat of a group member; ReturnMemberEpoch
// records the epoch its answer gave.
func (h *History) CallMemberEpoch(client ClientID, group, member string, t int64) OpID {
	return h.call(Op{Client: client, Kind: KindMemberEpoch, Group: group, Member: member, Call: t})
}

// ReturnMemberEpoch records the epoch a member's heartbeat was given.
func (h *History) ReturnMemberEpoch(id OpID, epoch int32, t int64) {
	h.finish(id, t, is(KindMemberEpoch), func(op *Op) { op.Outcome, op.MemberEpoch = OutcomeOK, epoch })
}

// CallFetchCommitted records a read of a consumer group's committed offset for tp.
func (h *History) CallFetchCommitted(client ClientID, group string, tp TopicPartition, t int64) OpID {
	return h.call(Op{Client: client, Kind: KindFetchCommitted, TP: tp, Group: group, Call: t})
}

// finish applies fill to the pending op id at time t, after checking the
// caller's preconditions (a broken one is a bug in the caller: panic).
func (h *History) finish(id OpID, t int64, want func(Kind) bool, fill func(op *Op)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if id < 0 || int(id) >= len(h.ops) {
		panic(fmt.Sprintf("linearizability: unknown op %d", id))
	}
	op := &h.ops[id]
	if op.returned() {
		panic(fmt.Sprintf("linearizability: op %d returned twice", id))
	}
	if want != nil && !want(op.Kind) {
		panic(fmt.Sprintf("linearizability: op %d is a %s; wrong return", id, op.Kind))
	}
	if t < op.Call || t == math.MaxInt64 {
		panic(fmt.Sprintf("linearizability: op %d returns at %d before its call at %d", id, t, op.Call))
	}
	op.Return = t
	fill(op)
}

func is(kinds ...Kind) func(Kind) bool {
	return func(k Kind) bool {
		for _, want := range kinds {
			if k == want {
				return true
			}
		}
		return false
	}
}

// ReturnProduce records an acknowledged produce: its batch got offsets
// baseOffset, baseOffset+1, ...
func (h *History) ReturnProduce(id OpID, baseOffset int64, t int64) {
	if baseOffset < 0 {
		panic(fmt.Sprintf("linearizability: op %d acknowledged at negative offset %d", id, baseOffset))
	}
	h.finish(id, t, is(KindProduce), func(op *Op) {
		op.Outcome, op.Offset = OutcomeOK, baseOffset
		h.ackedEnd[op.TP] = max(h.ackedEnd[op.TP], baseOffset+int64(len(op.Sent))) // finish holds the lock
	})
}

// ReturnFetch records a successful fetch. records are those at or after the
// offset asked for, in the order received (a client drops records of a
// returned batch that precede its offset before recording).
func (h *History) ReturnFetch(id OpID, records []Record, highWatermark, logStart int64, t int64) {
	got := append([]Record(nil), records...)
	h.finish(id, t, is(KindFetch), func(op *Op) {
		op.Outcome, op.Received, op.HighWatermark, op.LogStart = OutcomeOK, got, highWatermark, logStart
	})
}

// ReturnOutOfRange records a fetch refused because its offset lies below the
// log start or above the high-water mark, both as the server reported them.
func (h *History) ReturnOutOfRange(id OpID, logStart, highWatermark int64, t int64) {
	h.finish(id, t, is(KindFetch), func(op *Op) {
		op.Outcome, op.HighWatermark, op.LogStart = OutcomeOutOfRange, highWatermark, logStart
	})
}

// ReturnOffset records the result of list offsets, or of fetch committed
// (-1 when the group has committed nothing for the partition).
func (h *History) ReturnOffset(id OpID, offset int64, t int64) {
	h.finish(id, t, is(KindListOffsets, KindFetchCommitted), func(op *Op) {
		op.Outcome, op.Offset = OutcomeOK, offset
	})
}

// ReturnCommitted records an acknowledged offset commit.
func (h *History) ReturnCommitted(id OpID, t int64) {
	h.finish(id, t, is(KindCommitOffset), func(op *Op) { op.Outcome = OutcomeOK })
}

// Fail records a definite failure: the operation certainly had no effect
// (e.g. refused by a non-leader before proposing, when the caller knows it
// was not proposed). When in doubt, record Indefinite instead.
func (h *History) Fail(id OpID, t int64) {
	h.finish(id, t, nil, func(op *Op) { op.Outcome = OutcomeFailed })
}

// Indefinite records an operation whose effect is unknown (a timeout, a lost
// connection). The checks let it take effect at any time after its call, or
// never. Operations still pending when a check runs are treated the same.
func (h *History) Indefinite(id OpID, t int64) {
	h.finish(id, t, nil, func(op *Op) { op.Outcome = OutcomeIndefinite })
}

// sortedTPs returns the distinct partitions of ops, sorted.
func sortedTPs(ops []Op, keep func(*Op) bool) []TopicPartition {
	seen := make(map[TopicPartition]bool)
	var tps []TopicPartition
	for i := range ops {
		if keep(&ops[i]) && !seen[ops[i].TP] {
			seen[ops[i].TP] = true
			tps = append(tps, ops[i].TP)
		}
	}
	sort.Slice(tps, func(i, j int) bool { return tps[i].less(tps[j]) })
	return tps
}

func isLogOp(op *Op) bool {
	return op.Kind == KindProduce || op.Kind == KindFetch || op.Kind == KindListOffsets
}
