package linearizability

import (
	"math"
	"sort"
)

// layout is what one partition's history says about where records sit in
// its log, before any search: the positions some outcome accounts for (an
// acknowledged or inferred produce's batch, a record a read returned), the
// gaps between them, and the least length the log certainly had at each
// point in time. It bounds every indefinite produce's position, which keeps
// Porcupine's search small (see logOperations and logmodel.go).
type layout struct {
	// length is the greatest log length any outcome implies.
	length int64
	// gaps are the runs of positions below length that no outcome accounts
	// for, split wherever an outcome says the log was exactly that long,
	// in offset order.
	gaps []gap
	// byReturn: (return, length implied), sorted by return, length a
	// running maximum: the least length the log had by then.
	byReturn []lengthAt
	// byLength: (return, length implied), sorted by length, return a
	// running minimum from the end: the first return by which the log was
	// longer than a length.
	byLength []lengthAt
}

// gap is a run of positions [from, to) that no outcome accounts for.
type gap struct{ from, to int64 }

// lengthAt pairs an operation's return with the log length its outcome
// implies.
type lengthAt struct {
	ret, length int64
}

// impliedLength is the log length op's outcome implies at its
// linearization point (a lower bound, also when reads may be stale), and
// whether the outcome says the log was exactly that long.
func impliedLength(op *Op, stale bool) (n int64, exact, ok bool) {
	switch {
	case op.Kind == KindProduce && op.Outcome == OutcomeOK:
		return op.Offset + int64(len(op.Sent)), true, true
	case op.Kind == KindFetch && (op.Outcome == OutcomeOK || op.Outcome == OutcomeOutOfRange):
		return max(op.HighWatermark, op.LogStart), !stale, true
	case op.Kind == KindListOffsets && op.Outcome == OutcomeOK:
		return op.Offset, !stale && op.Spec == OffsetLatest, true
	}
	return 0, false, false
}

// newLayouts builds the layout of every partition of ops; inferred maps an
// indefinite produce that a read saw to its base offset.
func newLayouts(ops []Op, inferred map[OpID]int64, stale bool) map[TopicPartition]*layout {
	ls := make(map[TopicPartition]*layout)
	known := make(map[TopicPartition][]gap) // accounted runs
	exact := make(map[TopicPartition][]int64)
	get := func(tp TopicPartition) *layout {
		l := ls[tp]
		if l == nil {
			l = &layout{}
			ls[tp] = l
		}
		return l
	}
	for i := range ops {
		op := &ops[i]
		if n, ex, ok := impliedLength(op, stale); ok {
			l := get(op.TP)
			l.length = max(l.length, n)
			l.byReturn = append(l.byReturn, lengthAt{ret: op.Return, length: n})
			if ex {
				exact[op.TP] = append(exact[op.TP], n)
			}
		}
		switch {
		case op.Kind == KindProduce && op.Outcome == OutcomeOK:
			known[op.TP] = append(known[op.TP], gap{op.Offset, op.Offset + int64(len(op.Sent))})
			exact[op.TP] = append(exact[op.TP], op.Offset)
		case op.Kind == KindProduce && op.indefinite():
			if base, ok := inferred[op.ID]; ok {
				known[op.TP] = append(known[op.TP], gap{base, base + int64(len(op.Sent))})
			}
		case op.Kind == KindFetch && op.Outcome == OutcomeOK:
			for _, r := range op.Received {
				known[op.TP] = append(known[op.TP], gap{r.Offset, r.Offset + 1})
			}
		}
	}
	for tp, l := range ls {
		l.byLength = append([]lengthAt(nil), l.byReturn...)
		sort.Slice(l.byReturn, func(i, j int) bool { return l.byReturn[i].ret < l.byReturn[j].ret })
		for i := 1; i < len(l.byReturn); i++ {
			l.byReturn[i].length = max(l.byReturn[i].length, l.byReturn[i-1].length)
		}
		sort.Slice(l.byLength, func(i, j int) bool { return l.byLength[i].length < l.byLength[j].length })
		for i := len(l.byLength) - 2; i >= 0; i-- {
			l.byLength[i].ret = min(l.byLength[i].ret, l.byLength[i+1].ret)
		}
		l.gaps = gapsOf(known[tp], exact[tp], l.length)
	}
	return ls
}

// gapsOf returns the runs of [0, length) outside known, split at the exact
// lengths: a batch never straddles a length the log was seen to have.
func gapsOf(known []gap, exact []int64, length int64) []gap {
	sort.Slice(known, func(i, j int) bool { return known[i].from < known[j].from })
	sort.Slice(exact, func(i, j int) bool { return exact[i] < exact[j] })
	var gaps []gap
	at := int64(0)
	cut := func(from, to int64) {
		i := sort.Search(len(exact), func(i int) bool { return exact[i] > from })
		for ; i < len(exact) && exact[i] < to; i++ {
			if exact[i] > from {
				gaps = append(gaps, gap{from, exact[i]})
				from = exact[i]
			}
		}
		gaps = append(gaps, gap{from, to})
	}
	for _, k := range known {
		if k.from > at {
			cut(at, min(k.from, length))
		}
		at = max(at, k.to)
		if at >= length {
			break
		}
	}
	if at < length {
		cut(at, length)
	}
	return gaps
}

// before is the length the log certainly had at time t: the largest any
// operation that returned before t implies.
func (l *layout) before(t int64) int64 {
	i := sort.Search(len(l.byReturn), func(i int) bool { return l.byReturn[i].ret >= t })
	if i == 0 {
		return 0
	}
	return l.byReturn[i-1].length
}

// needBy is the earliest return of an operation whose outcome needs the log
// longer than n (MaxInt64 if none does).
func (l *layout) needBy(n int64) int64 {
	i := sort.Search(len(l.byLength), func(i int) bool { return l.byLength[i].length > n })
	if i == len(l.byLength) {
		return math.MaxInt64
	}
	return l.byLength[i].ret
}

// fill stands for the unseen indefinite produces that filled one gap: the
// gap's records appear at once when the log is gap.from long, as anonymous
// records, between call and ret.
type fill struct {
	gap
	call, ret int64
}

// fills explains l's gaps by unseen, the partition's indefinite produces
// that no read saw, sorted by call. Any of them that took effect sits in a
// gap (every other position is accounted for) or beyond every observation,
// where leaving it out is exact; so only the gaps enter the search, one
// step each.
//
// Collapsing a gap's batches into the step of its first is exact: no
// outcome says the log was a length strictly inside the gap (gaps are split
// there), so nothing can tell. Gaps fill in log order, so the first k gaps
// take the earliest-called records: gap k's step comes no earlier than the
// call of the record after those the gaps before it took, and no later than
// the first return of an operation that needed the log longer than the
// gap's start. Every record of the first k gaps was called before an
// operation needed the log as long as gap k's end, by a produce called
// while the log was shorter than that. Records are pooled: a batch may be
// counted across two adjacent gaps, which can only accept more. A gap that
// cannot be explained, or that reaches past below (a drained partition's
// largest log start: the drain read everything above it), gets no step, and
// the model then refuses the history at that length.
func (l *layout) fills(unseen []*Op, below int64) []fill {
	var out []fill
	next := 0        // unseen[:next] may have filled the gaps so far
	var supply int64 // records of unseen[:next]
	var demand int64 // records of the gaps before the one at hand
	for _, g := range l.gaps {
		if g.to > below {
			return out
		}
		lastBy := l.needBy(g.to - 1)
		for next < len(unseen) && unseen[next].Call <= lastBy && l.before(unseen[next].Call) < g.to {
			supply += int64(len(unseen[next].Sent))
			next++
		}
		if demand+g.to-g.from > supply {
			return out
		}
		// The produce holding record demand+1 in call order.
		var taken int64
		call := int64(math.MaxInt64)
		for _, op := range unseen[:next] {
			taken += int64(len(op.Sent))
			if taken > demand {
				call = op.Call
				break
			}
		}
		ret := l.needBy(g.from)
		if call > ret {
			return out
		}
		out = append(out, fill{gap: g, call: call, ret: ret})
		demand += g.to - g.from
	}
	return out
}
