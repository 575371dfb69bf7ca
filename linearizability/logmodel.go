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
// State: the committed log as a sequence of values and the log start
// offset. Transitions, one per operation at its linearization point:
//
//	produce(vs) ok(base)       base == len(log); log += vs
//	fetch(o) ok(recs,hwm,ls)   hwm == len(log); ls <= o <= hwm; ls >= start (start = ls);
//	                           recs == log[o : o+k] with o+k <= hwm, k <= max when max > 0,
//	                           k >= 1 when o < hwm and the fetch was of this partition alone
//	fetch(o) out-of-range      hwm == len(log); o < ls or o > hwm; ls >= start (start = ls)
//	list-offsets latest → x    x == len(log)
//	list-offsets earliest → x  start <= x <= len(log) (start = x)
//
// With Options.StaleFetch, reads may be served from an older state:
// hwm <= len(log) instead of ==, and the log start is only bounded by hwm.
//
// Definitely failed produces have no effect and are left out of the history
// given to Porcupine; so are failed and indefinite reads, which constrain
// nothing. Indefinite produces are rewritten before the search, because
// Porcupine, left to place open-ended writes (Return = MaxInt64) itself,
// tries every order of every subset of them: exponential in their number,
// and hopeless when a history is refused and the whole space must be
// searched. The partition's layout (layout.go) first maps which positions
// some outcome accounts for: acknowledged batches, records read, and
//
//   - an indefinite produce whose values a read saw: it certainly happened,
//     at the offset the read saw. It becomes an acknowledgement at that
//     inferred offset, returning when the first operation that needed the
//     log longer than that offset returned (it had to come first).
//   - the indefinite produces no read saw can only sit in the gaps between
//     accounted positions (or beyond every observation, where they change
//     nothing). Each gap becomes one produce of anonymous records (value
//     "", which no real read matches) that may happen between the call of
//     the produces that could have filled it and the first return that
//     needed the log longer than the gap's start (layout.fills). A gap that
//     no unseen produce can explain gets none, and the history is refused.
//
// The search then has no open-ended operation and no choice of which
// indefinite produce went where: the rewriting is exact but for pooling the
// unseen records (a batch may count across two adjacent gaps).

// logState is an immutable log: the values b.values[:n]. Backings are only
// ever appended to, never overwritten, so states sharing a backing stay valid
// however Porcupine backtracks (Step stays pure as seen from outside).
type logState struct {
	b     *logBacking
	n     int
	start int64
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
		return logState{b: b, n: s.n + len(vs), start: s.start}
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
	return logState{b: b, n: s.n + len(vs), start: s.start}
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
	return s.b.hashes[s.n] ^ uint64(s.start)*0x9e3779b97f4a7c15
}

func logStatesEqual(x, y logState) bool {
	if x.n != y.n || x.start != y.start || x.hash() != y.hash() {
		return false
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
	alone      bool     // fetch: of this partition alone (Op.Alone)
	spec       OffsetSpec
}

// produceStatus says what a produce's output claims.
type produceStatus uint8

const (
	produceAcked    produceStatus = iota // ok at offset
	produceInferred                      // indefinite, but read at offset
	produceFill                          // unseen produces filling a gap, anonymous
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
	if next, ok := m.apply(state.(logState), input.(logInput), output.(logOutput)); ok {
		return []interface{}{next}
	}
	return nil
}

// apply is op's transition from s.
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
	if k == 0 && in.alone && in.offset < out.hwm {
		return s, false // records were there to serve
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
			return fmt.Sprintf("unseen produces → %d anonymous records at %d", len(in.values), out.offset)
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
	return fmt.Sprintf("len=%d start=%d [%s%s]", s.n, s.start, prefix, strings.Join(s.b.values[from:s.n], " "))
}
