package linearizability

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The Porcupine model of one partition log.
//
// State: the committed log as a sequence of values, the log start offset, and
// credits: the records of produces that may still take effect unseen,
// pooled (see below). Transitions, one per operation at its linearization point:
//
//	produce(vs) ok(base)       base == len(log); log += vs
//	fetch(o) ok(recs,hwm,ls)   hwm == len(log); ls <= o <= hwm; ls >= start (start = ls);
//	                           recs == log[o : o+k] with o+k <= hwm, k <= max when max > 0
//	fetch(o) out-of-range      hwm == len(log); o < ls or o > hwm; ls >= start (start = ls)
//	list-offsets latest → x    x == len(log)
//	list-offsets earliest → x  start <= x <= len(log) (start = x)
//	produce(vs) unseen         credits += len(vs)
//
// and before any operation but the last, any part of the credits may be
// spent: log += that many anonymous records. With Options.StaleFetch,
// reads may be served from an older state: hwm <= len(log) instead of ==, and
// the log start is only bounded by hwm.
//
// Definitely failed produces have no effect and are left out of the history
// given to Porcupine; so are failed and indefinite reads, which constrain
// nothing. Indefinite produces are rewritten, because Porcupine, left to
// place open-ended writes (Return = MaxInt64) itself, tries every order of
// every subset of them: exponential in their number, and hopeless when a
// history is refused and the whole space must be searched.
//
//   - One whose values a read saw certainly happened, at the offset the read
//     saw: it becomes an acknowledgement at that inferred offset (still with
//     Return = MaxInt64), which pins its one legal place.
//   - One that no read saw can only have shifted offsets. It becomes an
//     instant operation at its call that adds a credit; spending the credit
//     at a later linearization point appends anonymous records (value "",
//     which no real read matches). This is exact: an op linearized after the
//     credit was added has Return >= the produce's call, which is all real
//     time asks of the produce's effect; conversely any linearization that
//     places the produce's effect at p can add the credit just after the last
//     op that returned before the call, which precedes p. Anonymous records
//     make the order of spending irrelevant, so the state sets stay about one
//     per length instead of one per subset and order.
//   - With Options.FinalDrain an unseen one is dropped: it cannot have taken
//     effect before the drain, and after it nothing observes.

// logState is an immutable log: the values b.values[:n]. Backings are only
// ever appended to, never overwritten, so states sharing a backing stay valid
// however Porcupine backtracks (Step stays pure as seen from outside).
type logState struct {
	b       *logBacking
	n       int
	start   int64
	credits []int // nil, or one element: the pooled records of unseen produces not yet spent; never mutated
	// spendBelow, when > 0, is where credits may no longer be spent: on a
	// drained partition that retention trimmed, an unseen produce that
	// took effect lies below the largest log start reported (the drain
	// read everything above it), so its records fill positions below it.
	spendBelow int64
}

// logBacking holds values and prefix hashes: hashes[i] hashes values[:i].
type logBacking struct {
	values []string
	hashes []uint64
}

func newLogState() logState {
	return logState{b: &logBacking{hashes: []uint64{fnvOffset64}}}
}

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

func hashAppend(h uint64, v string) uint64 {
	for i := 0; i < len(v); i++ {
		h ^= uint64(v[i])
		h *= fnvPrime64
	}
	h ^= 0xff // separator: ("ab","c") and ("a","bc") differ
	return h * fnvPrime64
}

// appendValues returns s with vs appended, sharing s's backing when it can.
func (s logState) appendValues(vs []string) logState {
	b := s.b
	switch {
	case s.n == len(b.values):
		// The backing ends where s does: extend it in place.
	case s.n+len(vs) <= len(b.values) && equalStrings(b.values[s.n:s.n+len(vs)], vs):
		return logState{b: b, n: s.n + len(vs), start: s.start, credits: s.credits, spendBelow: s.spendBelow}
	default:
		nb := &logBacking{
			values: make([]string, s.n, s.n+len(vs)+8),
			hashes: make([]uint64, s.n+1, s.n+len(vs)+9),
		}
		copy(nb.values, b.values[:s.n])
		copy(nb.hashes, b.hashes[:s.n+1])
		b = nb
	}
	for _, v := range vs {
		b.hashes = append(b.hashes, hashAppend(b.hashes[len(b.hashes)-1], v))
		b.values = append(b.values, v)
	}
	return logState{b: b, n: s.n + len(vs), start: s.start, credits: s.credits, spendBelow: s.spendBelow}
}

// withCredit returns s with one more unseen produce of size records pending.
// Credits are pooled: the state keeps only their total, so one step yields
// one state per length however many batch sizes are pending (see spends).
func (s logState) withCredit(size int, spendBelow int64) logState {
	if spendBelow > 0 {
		s.spendBelow = spendBelow
	}
	pool := size
	if len(s.credits) == 1 {
		pool += s.credits[0]
	}
	s.credits = []int{pool}
	return s
}

// spends returns the state reachable from s by spending exactly need
// pooled credit records (the least that serves: spending more can always
// wait for a later step), if the pool holds that many. Pooling over-
// approximates: an unseen batch may be spent in parts. That never refuses
// a linearizable history, and it only loses the refusal of a high-water
// mark inside an unseen, never-read batch on a partition that was not
// drained (a drained one has no credits). Counting batches exactly made
// the states one per sub-multiset of sizes, which explodes once batches
// of several sizes time out unseen.
func (s logState) spends(need int64, exact bool) []logState {
	if need <= 0 && (!exact || need == 0) {
		return []logState{s}
	}
	if need < 0 || len(s.credits) == 0 || int64(s.credits[0]) < need {
		return nil
	}
	if s.spendBelow > 0 && int64(s.n)+need > s.spendBelow {
		return nil
	}
	next := s.appendValues(make([]string, need))
	next.credits = nil
	if left := s.credits[0] - int(need); left > 0 {
		next.credits = []int{left}
	}
	return []logState{next}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (s logState) hash() uint64 {
	h := s.b.hashes[s.n] ^ uint64(s.start)*0x9e3779b97f4a7c15
	for _, c := range s.credits {
		h = (h ^ uint64(c)) * fnvPrime64
	}
	return h
}

func logStatesEqual(x, y logState) bool {
	if x.n != y.n || x.start != y.start || x.spendBelow != y.spendBelow || x.hash() != y.hash() || len(x.credits) != len(y.credits) {
		return false
	}
	for i := range x.credits {
		if x.credits[i] != y.credits[i] {
			return false
		}
	}
	if x.b == y.b {
		return true
	}
	for i := x.n - 1; i >= 0; i-- {
		if x.b.values[i] != y.b.values[i] {
			return false
		}
	}
	return true
}

// logInput is a log operation as the model sees it.
type logInput struct {
	op         OpID
	tp         TopicPartition
	kind       Kind
	values     []string // produce
	offset     int64    // fetch
	maxRecords int64    // fetch
	spec       OffsetSpec
	spendBelow int64 // unseen produce: see logState.spendBelow (0: anywhere)
}

// produceStatus says what a produce's output claims.
type produceStatus uint8

const (
	produceAcked    produceStatus = iota // ok at offset
	produceInferred                      // indefinite, but read at offset
	produceUnseen                        // indefinite and never read: a credit
)

// logOutput is a log operation's observed result.
type logOutput struct {
	produce    produceStatus
	offset     int64    // produce base, list-offsets result
	outOfRange bool     // fetch
	records    []Record // fetch
	hwm, start int64    // fetch
}

// logModel is the partition-log specification; stale relaxes reads.
type logModel struct{ stale bool }

func (m logModel) step(state, input, output interface{}) []interface{} {
	s := state.(logState)
	in := input.(logInput)
	out := output.(logOutput)
	if in.kind == KindProduce && out.produce == produceUnseen {
		return []interface{}{s.withCredit(len(in.values), in.spendBelow)}
	}
	need, exact := m.lengthNeeded(in, out)
	var next []interface{}
	for _, sp := range s.spends(need-int64(s.n), exact) {
		if ns, ok := m.apply(sp, in, out); ok {
			next = append(next, ns)
		}
	}
	return next
}

// lengthNeeded is the log length op requires at its linearization point:
// exactly, or at least.
func (m logModel) lengthNeeded(in logInput, out logOutput) (int64, bool) {
	switch {
	case in.kind == KindProduce:
		return out.offset, true
	case in.kind == KindFetch:
		return out.hwm, !m.stale
	case in.spec == OffsetLatest:
		return out.offset, !m.stale
	}
	return out.offset, false
}

// apply is op's transition from s, with no credit spent.
func (m logModel) apply(s logState, in logInput, out logOutput) (logState, bool) {
	switch in.kind {
	case KindProduce:
		if out.offset != int64(s.n) {
			return s, false
		}
		return s.appendValues(in.values), true
	case KindFetch:
		return m.fetch(s, in, out)
	}
	return m.listOffsets(s, in, out)
}

// bounds checks a read's reported high-water mark and log start against s and
// returns the state with the log start advanced.
func (m logModel) bounds(s logState, hwm, start int64) (logState, bool) {
	n := int64(s.n)
	if m.stale {
		return s, hwm <= n && start >= 0 && start <= hwm
	}
	if hwm != n || start < s.start || start > hwm {
		return s, false
	}
	s.start = start
	return s, true
}

func (m logModel) fetch(s logState, in logInput, out logOutput) (logState, bool) {
	next, ok := m.bounds(s, out.hwm, out.start)
	if !ok {
		return s, false
	}
	inRange := in.offset >= out.start && in.offset <= out.hwm
	if out.outOfRange {
		return next, !inRange
	}
	k := int64(len(out.records))
	if !inRange || in.offset+k > out.hwm || (in.maxRecords > 0 && k > in.maxRecords) {
		return s, false
	}
	for i, r := range out.records {
		o := in.offset + int64(i)
		if r.Offset != o || r.Value == "" || s.b.values[o] != r.Value {
			return s, false
		}
	}
	return next, true
}

func (m logModel) listOffsets(s logState, in logInput, out logOutput) (logState, bool) {
	n := int64(s.n)
	if in.spec == OffsetLatest {
		if m.stale {
			return s, out.offset >= 0 && out.offset <= n
		}
		return s, out.offset == n
	}
	if m.stale {
		return s, out.offset >= 0 && out.offset <= n
	}
	if out.offset < s.start || out.offset > n {
		return s, false
	}
	s.start = out.offset
	return s, true
}

// porcupineModel returns the log model in Porcupine's form, partitioned by
// topic-partition.
func (m logModel) porcupineModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: partitionBy(func(in interface{}) string {
			return tpKey(in.(logInput).tp)
		}),
		Init:  func() []interface{} { return []interface{}{newLogState()} },
		Step:  m.step,
		Equal: func(a, b interface{}) bool { return logStatesEqual(a.(logState), b.(logState)) },
		Hash:  func(s interface{}) uint64 { return s.(logState).hash() },
		DescribeOperation: func(input, output interface{}) string {
			return describeLogOp(input.(logInput), output.(logOutput))
		},
		DescribeState: func(state interface{}) string { return describeLogState(state.(logState)) },
		DescribeOperationMetadata: func(info interface{}) string {
			if info == nil {
				return ""
			}
			return fmt.Sprint(info)
		},
	}
	return nm.ToModel()
}

// tpKey renders tp so that string order is (topic, partition) order.
func tpKey(tp TopicPartition) string {
	return fmt.Sprintf("%s\x00%020d", tp.Topic, int64(tp.Partition)-math.MinInt32)
}

// partitionBy splits a history by key, in key order, keeping each piece in
// history order: deterministic whatever the map does.
func partitionBy(key func(input interface{}) string) func([]porcupine.Operation) [][]porcupine.Operation {
	return func(history []porcupine.Operation) [][]porcupine.Operation {
		pieces := make(map[string][]porcupine.Operation)
		var keys []string
		for _, op := range history {
			k := key(op.Input)
			if _, ok := pieces[k]; !ok {
				keys = append(keys, k)
			}
			pieces[k] = append(pieces[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, len(keys))
		for i, k := range keys {
			out[i] = pieces[k]
		}
		return out
	}
}

func describeLogOp(in logInput, out logOutput) string {
	switch in.kind {
	case KindProduce:
		vs := strings.Join(in.values, ",")
		switch out.produce {
		case produceAcked:
			return fmt.Sprintf("produce(%s) → %d", vs, out.offset)
		case produceInferred:
			return fmt.Sprintf("produce(%s) → ? (read at %d)", vs, out.offset)
		default:
			return fmt.Sprintf("produce(%s) → ? (never read: may take effect later)", vs)
		}
	case KindFetch:
		if out.outOfRange {
			return fmt.Sprintf("fetch(%d) → out of range start=%d hwm=%d", in.offset, out.start, out.hwm)
		}
		vs := make([]string, len(out.records))
		for i, r := range out.records {
			vs[i] = fmt.Sprintf("%d:%s", r.Offset, r.Value)
		}
		return fmt.Sprintf("fetch(%d) → [%s] start=%d hwm=%d", in.offset, strings.Join(vs, " "), out.start, out.hwm)
	default:
		which := "latest"
		if in.spec == OffsetEarliest {
			which = "earliest"
		}
		return fmt.Sprintf("list-offsets(%s) → %d", which, out.offset)
	}
}

func describeLogState(s logState) string {
	const tail = 4
	from := 0
	if s.n > tail {
		from = s.n - tail
	}
	prefix := ""
	if from > 0 {
		prefix = "… "
	}
	credits := ""
	if len(s.credits) > 0 {
		credits = fmt.Sprintf(" unseen=%v", s.credits)
	}
	return fmt.Sprintf("len=%d start=%d [%s%s]%s", s.n, s.start, prefix, strings.Join(s.b.values[from:s.n], " "), credits)
}
