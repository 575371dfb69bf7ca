package linearizability

import (
	"fmt"
	"sort"
	"strings"
)

// AnomalyKind names a class of log anomaly, after Jepsen's Kafka checker.
type AnomalyKind string

// The anomalies CheckLog reports. Each is exact (no sampling) and checked per
// topic-partition.
const (
	// LostWrite: a produce acknowledged at offset o, and a read of offset o
	// returned another value.
	LostWrite AnomalyKind = "lost-write"
	// Duplicate: one value at two or more offsets (acknowledgements and reads).
	Duplicate AnomalyKind = "duplicate"
	// InconsistentOffsets: two reads disagree about the value at an offset.
	InconsistentOffsets AnomalyKind = "inconsistent-offsets"
	// NonmonotonicSend: a client's acknowledged produces to a partition, in
	// call order, got non-increasing offsets.
	NonmonotonicSend AnomalyKind = "nonmonotonic-send"
	// PollSkip: a read skipped offsets: a fetch's records start after its
	// offset or leave a gap, or a poll starts after where the client's
	// previous fetch ended.
	PollSkip AnomalyKind = "poll-skip"
	// NonmonotonicPoll: a read went back: a fetch's records start before its
	// offset or repeat, or a poll starts before where the previous one ended.
	NonmonotonicPoll AnomalyKind = "nonmonotonic-poll"
	// G1a: the value of a definitely failed produce was read (aborted read).
	G1a AnomalyKind = "G1a"
	// Unseen: with a final drain, an acknowledged value was never read.
	Unseen AnomalyKind = "unseen"
	// KeyOrder: two produces of one key, the second called after the first
	// was acknowledged, got non-increasing offsets.
	KeyOrder AnomalyKind = "key-order"
	// ReadBeyondHighWatermark: a fetch returned a record at or above the
	// high-water mark it reported (R10).
	ReadBeyondHighWatermark AnomalyKind = "read-beyond-hwm"
	// NonmonotonicHighWatermark: a client saw the high-water mark move back
	// (a read called after another returned reported a lower one).
	NonmonotonicHighWatermark AnomalyKind = "nonmonotonic-hwm"
	// NonmonotonicLogStart: a client saw the log start offset move back.
	NonmonotonicLogStart AnomalyKind = "nonmonotonic-log-start"
)

// Anomaly is one violation found in a history, with the evidence.
type Anomaly struct {
	Kind    AnomalyKind
	Warning bool // tolerated under the options given (reported, not failed)
	TP      TopicPartition
	Offsets []int64  // sorted, distinct
	Values  []string // sorted, distinct
	Ops     []OpID   // sorted, distinct
	Detail  string
}

func (a Anomaly) String() string {
	level := ""
	if a.Warning {
		level = " (warning)"
	}
	return fmt.Sprintf("%s%s %s offsets=%v values=%v ops=%v: %s", a.Kind, level, a.TP, a.Offsets, a.Values, a.Ops, a.Detail)
}

// obs is one observation of a value at an offset by an operation.
type obs struct {
	offset int64
	value  string
	op     OpID
}

func newAnomaly(kind AnomalyKind, tp TopicPartition, detail string, evidence ...obs) Anomaly {
	a := Anomaly{Kind: kind, TP: tp, Detail: detail}
	for _, e := range evidence {
		if e.offset >= 0 {
			a.Offsets = append(a.Offsets, e.offset)
		}
		if e.value != "" {
			a.Values = append(a.Values, e.value)
		}
		if e.op >= 0 {
			a.Ops = append(a.Ops, e.op)
		}
	}
	a.Offsets = uniqueSorted(a.Offsets, func(x, y int64) bool { return x < y })
	a.Values = uniqueSorted(a.Values, func(x, y string) bool { return x < y })
	a.Ops = uniqueSorted(a.Ops, func(x, y OpID) bool { return x < y })
	return a
}

func uniqueSorted[T comparable](xs []T, less func(a, b T) bool) []T {
	sort.Slice(xs, func(i, j int) bool { return less(xs[i], xs[j]) })
	out := xs[:0]
	for i, x := range xs {
		if i == 0 || x != out[len(out)-1] {
			out = append(out, x)
		}
	}
	return out
}

// CheckLog runs the Jepsen-style log checks over h and returns every anomaly
// found, in a deterministic order (partition, kind, offsets, values, ops).
func CheckLog(h *History, opts Options) []Anomaly {
	ops := h.Ops()
	drained := h.drainedFunc(opts)
	var out []Anomaly
	for _, tp := range sortedTPs(ops, isLogOp) {
		var tpOps []*Op
		for i := range ops {
			if isLogOp(&ops[i]) && ops[i].TP == tp {
				tpOps = append(tpOps, &ops[i])
			}
		}
		sort.SliceStable(tpOps, func(i, j int) bool { return callOrder(tpOps[i], tpOps[j]) })
		out = append(out, checkPartition(tp, tpOps, drained(tp), opts.StaleFetch)...)
	}
	sortAnomalies(out)
	return out
}

func callOrder(a, b *Op) bool {
	if a.Call != b.Call {
		return a.Call < b.Call
	}
	return a.ID < b.ID
}

// partitionView indexes what the operations of one partition observed.
type partitionView struct {
	tp          TopicPartition
	ops         []*Op            // in call order
	readAt      map[int64][]obs  // offset → reads of it
	readsOf     map[string][]obs // value → reads of it
	ackOf       map[string]obs   // value → acknowledged offset
	values      []string         // every value acknowledged or read, sorted
	offsets     []int64          // every offset read, sorted
	logStartMax int64            // the highest log start any read reported
}

func newPartitionView(tp TopicPartition, ops []*Op) *partitionView {
	v := &partitionView{tp: tp, ops: ops, readAt: map[int64][]obs{}, readsOf: map[string][]obs{}, ackOf: map[string]obs{}}
	seenValue := map[string]bool{}
	for _, op := range ops {
		switch {
		case op.Kind == KindFetch && op.Outcome == OutcomeOK:
			v.logStartMax = max(v.logStartMax, op.LogStart)
			for _, r := range op.Received {
				o := obs{offset: r.Offset, value: r.Value, op: op.ID}
				if len(v.readAt[r.Offset]) == 0 {
					v.offsets = append(v.offsets, r.Offset)
				}
				v.readAt[r.Offset] = append(v.readAt[r.Offset], o)
				v.readsOf[r.Value] = append(v.readsOf[r.Value], o)
				seenValue[r.Value] = true
			}
		case op.Kind == KindFetch && op.Outcome == OutcomeOutOfRange:
			v.logStartMax = max(v.logStartMax, op.LogStart)
		case op.Kind == KindListOffsets && op.Outcome == OutcomeOK && op.Spec == OffsetEarliest:
			v.logStartMax = max(v.logStartMax, op.Offset)
		case op.Kind == KindProduce && op.Outcome == OutcomeOK:
			for i, r := range op.Sent {
				v.ackOf[r.Value] = obs{offset: op.Offset + int64(i), value: r.Value, op: op.ID}
				seenValue[r.Value] = true
			}
		}
	}
	for val := range seenValue {
		v.values = append(v.values, val)
	}
	sort.Strings(v.values)
	sort.Slice(v.offsets, func(i, j int) bool { return v.offsets[i] < v.offsets[j] })
	return v
}

func checkPartition(tp TopicPartition, ops []*Op, drained, stale bool) []Anomaly {
	v := newPartitionView(tp, ops)
	var out []Anomaly
	out = append(out, v.fetchShape()...)
	out = append(out, v.pollSessions()...)
	out = append(out, v.duplicates()...)
	out = append(out, v.inconsistentOffsets()...)
	out = append(out, v.lostAndUnseen(drained)...)
	out = append(out, v.g1a()...)
	out = append(out, v.nonmonotonicSend()...)
	out = append(out, v.keyOrder()...)
	out = append(out, v.clientBounds(stale)...)
	return out
}

// fetchShape checks each successful fetch on its own: records dense from the
// offset asked for, all below the high-water mark reported.
func (v *partitionView) fetchShape() []Anomaly {
	var out []Anomaly
	for _, op := range v.ops {
		if op.Kind != KindFetch || op.Outcome != OutcomeOK {
			continue
		}
		prev := op.FetchOffset - 1
		skipped, back, beyond := false, false, false
		for _, r := range op.Received {
			e := obs{offset: r.Offset, value: r.Value, op: op.ID}
			switch {
			case r.Offset > prev+1 && !skipped:
				skipped = true
				out = append(out, newAnomaly(PollSkip, v.tp, fmt.Sprintf("fetch from %d skipped offsets %d..%d", op.FetchOffset, prev+1, r.Offset-1), e))
			case r.Offset <= prev && !back:
				back = true
				out = append(out, newAnomaly(NonmonotonicPoll, v.tp, fmt.Sprintf("fetch from %d returned offset %d after %d", op.FetchOffset, r.Offset, prev), e))
			}
			if r.Offset >= op.HighWatermark && !beyond {
				beyond = true
				out = append(out, newAnomaly(ReadBeyondHighWatermark, v.tp, fmt.Sprintf("record at %d with high-water mark %d", r.Offset, op.HighWatermark), e))
			}
			prev = r.Offset
		}
	}
	return out
}

// pollSessions checks that each poll of a client starts where the client's
// previous fetch of the partition ended (its consumer position), or at the
// log start an out-of-range answer below it named.
func (v *partitionView) pollSessions() []Anomaly {
	type session struct {
		next int64
		last OpID
	}
	sessions := map[ClientID]*session{}
	var out []Anomaly
	for _, op := range v.ops {
		if op.Kind != KindFetch {
			continue
		}
		s := sessions[op.Client]
		if op.Poll && s != nil && op.FetchOffset != s.next {
			kind, what := PollSkip, "skipped"
			if op.FetchOffset < s.next {
				kind, what = NonmonotonicPoll, "went back"
			}
			out = append(out, newAnomaly(kind, v.tp,
				fmt.Sprintf("client %d polled from %d but its position after op %d was %d (%s)", op.Client, op.FetchOffset, s.last, s.next, what),
				obs{offset: s.next, op: s.last}, obs{offset: op.FetchOffset, op: op.ID}))
		}
		next := op.FetchOffset
		switch {
		case op.Outcome == OutcomeOK && len(op.Received) > 0:
			next = op.Received[len(op.Received)-1].Offset + 1
		case op.Outcome == OutcomeOutOfRange && op.FetchOffset < op.LogStart:
			// Retention passed the position: the out-of-range answer
			// names the log start, and a consumer that goes on does so
			// from there, explicitly (R22), never silently.
			next = op.LogStart
		}
		sessions[op.Client] = &session{next: next, last: op.ID}
	}
	return out
}

func (v *partitionView) duplicates() []Anomaly {
	var out []Anomaly
	for _, val := range v.values {
		ev := append([]obs(nil), v.readsOf[val]...)
		if ack, ok := v.ackOf[val]; ok {
			ev = append(ev, ack)
		}
		offsets := map[int64]bool{}
		for _, e := range ev {
			offsets[e.offset] = true
		}
		if len(offsets) > 1 {
			out = append(out, newAnomaly(Duplicate, v.tp, fmt.Sprintf("value %q at %d offsets", val, len(offsets)), ev...))
		}
	}
	return out
}

func (v *partitionView) inconsistentOffsets() []Anomaly {
	var out []Anomaly
	for _, o := range v.offsets {
		reads := v.readAt[o]
		distinct := map[string]bool{}
		for _, e := range reads {
			distinct[e.value] = true
		}
		if len(distinct) > 1 {
			out = append(out, newAnomaly(InconsistentOffsets, v.tp, fmt.Sprintf("offset %d read as %d different values", o, len(distinct)), reads...))
		}
	}
	return out
}

// lostAndUnseen checks every acknowledged value: a read of its offset that
// saw another value is a lost write; with a final drain, a value read nowhere
// (and not below the log start, where retention may have removed it) is unseen.
func (v *partitionView) lostAndUnseen(finalDrain bool) []Anomaly {
	var out []Anomaly
	for _, val := range v.values {
		ack, ok := v.ackOf[val]
		if !ok {
			continue
		}
		var other []obs
		for _, e := range v.readAt[ack.offset] {
			if e.value != val {
				other = append(other, e)
			}
		}
		switch {
		case len(other) > 0:
			out = append(out, newAnomaly(LostWrite, v.tp,
				fmt.Sprintf("%q acknowledged at %d by op %d, but offset %d read as %q", val, ack.offset, ack.op, ack.offset, other[0].value),
				append(other, ack)...))
		case finalDrain && len(v.readsOf[val]) == 0 && ack.offset >= v.logStartMax:
			out = append(out, newAnomaly(Unseen, v.tp,
				fmt.Sprintf("%q acknowledged at %d by op %d, never read", val, ack.offset, ack.op), ack))
		}
	}
	return out
}

func (v *partitionView) g1a() []Anomaly {
	var out []Anomaly
	for _, op := range v.ops {
		if op.Kind != KindProduce || op.Outcome != OutcomeFailed {
			continue
		}
		for _, r := range op.Sent {
			if reads := v.readsOf[r.Value]; len(reads) > 0 {
				out = append(out, newAnomaly(G1a, v.tp,
					fmt.Sprintf("%q from failed produce op %d was read at %d", r.Value, op.ID, reads[0].offset),
					append([]obs{{offset: -1, op: op.ID}}, reads...)...))
			}
		}
	}
	return out
}

// nonmonotonicSend compares each client's acknowledged produces in call order.
func (v *partitionView) nonmonotonicSend() []Anomaly {
	last := map[ClientID]*Op{}
	var out []Anomaly
	for _, op := range v.ops {
		if op.Kind != KindProduce || op.Outcome != OutcomeOK {
			continue
		}
		if prev := last[op.Client]; prev != nil && op.Offset <= prev.Offset {
			out = append(out, newAnomaly(NonmonotonicSend, v.tp,
				fmt.Sprintf("client %d: op %d acknowledged at %d after op %d at %d", op.Client, op.ID, op.Offset, prev.ID, prev.Offset),
				obs{offset: prev.Offset, value: prev.Sent[0].Value, op: prev.ID}, obs{offset: op.Offset, value: op.Sent[0].Value, op: op.ID}))
		}
		last[op.Client] = op
	}
	return out
}

// timed is one observation placed in real time, for the "returned before
// called" comparisons.
type timed struct {
	call, ret int64
	value     int64 // the offset, high-water mark or log start observed
	label     string
	op        OpID
}

// realTimeRegressions reports each item b for which some item a returned
// before b was called and a.value > b.value (or >= when strict), against the
// largest such a. items must be in call order.
func realTimeRegressions(items []timed, strict bool) [][2]timed {
	byReturn := append([]timed(nil), items...)
	sort.SliceStable(byReturn, func(i, j int) bool { return byReturn[i].ret < byReturn[j].ret })
	var out [][2]timed
	var best timed
	have, j := false, 0
	for _, b := range items {
		for ; j < len(byReturn) && byReturn[j].ret < b.call; j++ {
			if !have || byReturn[j].value > best.value {
				best, have = byReturn[j], true
			}
		}
		if have && (best.value > b.value || (strict && best.value == b.value)) {
			out = append(out, [2]timed{best, b})
		}
	}
	return out
}

// keyOrder checks, per key, that a produce called after another of the same
// key was acknowledged got a higher offset, whichever clients sent them.
func (v *partitionView) keyOrder() []Anomaly {
	byKey := map[string][]timed{}
	var keys []string
	for _, op := range v.ops {
		if op.Kind != KindProduce || op.Outcome != OutcomeOK {
			continue
		}
		for i, r := range op.Sent {
			if r.Key == "" {
				continue
			}
			if _, ok := byKey[r.Key]; !ok {
				keys = append(keys, r.Key)
			}
			byKey[r.Key] = append(byKey[r.Key], timed{call: op.Call, ret: op.Return, value: op.Offset + int64(i), label: r.Value, op: op.ID})
		}
	}
	sort.Strings(keys)
	var out []Anomaly
	for _, k := range keys {
		for _, p := range realTimeRegressions(byKey[k], true) {
			a, b := p[0], p[1]
			out = append(out, newAnomaly(KeyOrder, v.tp,
				fmt.Sprintf("key %q: op %d acknowledged at %d, then op %d (called after) at %d", k, a.op, a.value, b.op, b.value),
				obs{offset: a.value, value: a.label, op: a.op}, obs{offset: b.value, value: b.label, op: b.op}))
		}
	}
	return out
}

// clientBounds checks that no client sees the high-water mark or the log
// start move back. Errors by default: Strand reads through ReadIndex, and R10
// promises a consumer's view never regresses. Warnings with StaleFetch.
func (v *partitionView) clientBounds(stale bool) []Anomaly {
	hwm, start := map[ClientID][]timed{}, map[ClientID][]timed{}
	var clients []ClientID
	note := func(c ClientID) {
		if _, ok := hwm[c]; !ok {
			hwm[c] = nil
			clients = append(clients, c)
		}
	}
	for _, op := range v.ops {
		t := timed{call: op.Call, ret: op.Return, op: op.ID}
		switch {
		case op.Kind == KindFetch && (op.Outcome == OutcomeOK || op.Outcome == OutcomeOutOfRange):
			note(op.Client)
			t.value = op.HighWatermark
			hwm[op.Client] = append(hwm[op.Client], t)
			t.value = op.LogStart
			start[op.Client] = append(start[op.Client], t)
		case op.Kind == KindListOffsets && op.Outcome == OutcomeOK:
			note(op.Client)
			t.value = op.Offset
			if op.Spec == OffsetLatest {
				hwm[op.Client] = append(hwm[op.Client], t)
			} else {
				start[op.Client] = append(start[op.Client], t)
			}
		}
	}
	sort.Slice(clients, func(i, j int) bool { return clients[i] < clients[j] })
	var out []Anomaly
	for _, c := range clients {
		for _, p := range realTimeRegressions(hwm[c], false) {
			out = append(out, v.regression(NonmonotonicHighWatermark, "high-water mark", c, p, stale))
		}
		for _, p := range realTimeRegressions(start[c], false) {
			out = append(out, v.regression(NonmonotonicLogStart, "log start", c, p, stale))
		}
	}
	return out
}

func (v *partitionView) regression(kind AnomalyKind, what string, c ClientID, p [2]timed, warn bool) Anomaly {
	a := newAnomaly(kind, v.tp,
		fmt.Sprintf("client %d saw %s %d (op %d), then %d (op %d)", c, what, p[0].value, p[0].op, p[1].value, p[1].op),
		obs{offset: p[0].value, op: p[0].op}, obs{offset: p[1].value, op: p[1].op})
	a.Warning = warn
	return a
}

func sortAnomalies(as []Anomaly) {
	sort.SliceStable(as, func(i, j int) bool {
		a, b := as[i], as[j]
		if a.TP != b.TP {
			return a.TP.less(b.TP)
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if c := compareSlices(a.Offsets, b.Offsets); c != 0 {
			return c < 0
		}
		if c := compareSlices(a.Ops, b.Ops); c != 0 {
			return c < 0
		}
		if c := compareSlices(a.Values, b.Values); c != 0 {
			return c < 0
		}
		return a.Detail < b.Detail
	})
}

func compareSlices[T int64 | OpID | string](a, b []T) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return len(a) - len(b)
}

// Report is the outcome of Check: the anomalies and the model's verdict.
type Report struct {
	Ops          int       // operations in the history
	Anomalies    []Anomaly // errors and warnings, sorted
	Linearizable error     // nil when the models accepted the history
}

// Check runs CheckLog and CheckLinearizable over h.
func Check(h *History, opts Options) Report {
	return Report{Ops: h.Len(), Anomalies: CheckLog(h, opts), Linearizable: CheckLinearizable(h, opts)}
}

// Errors returns the anomalies that are not warnings.
func (r Report) Errors() []Anomaly {
	var out []Anomaly
	for _, a := range r.Anomalies {
		if !a.Warning {
			out = append(out, a)
		}
	}
	return out
}

// maxAnomaliesInError bounds the anomalies an error message lists.
const maxAnomaliesInError = 20

// Err is nil when the history passed: no error-level anomaly and the models
// accepted it (an inconclusive model check is an error). Otherwise it lists
// the first anomalies and the model's verdict.
func (r Report) Err() error {
	errs := r.Errors()
	if len(errs) == 0 && r.Linearizable == nil {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "linearizability: %d ops, %d anomalies", r.Ops, len(errs))
	for i, a := range errs {
		if i == maxAnomaliesInError {
			fmt.Fprintf(&b, "\n  … %d more", len(errs)-i)
			break
		}
		fmt.Fprintf(&b, "\n  %s", a)
	}
	if r.Linearizable != nil {
		fmt.Fprintf(&b, "\n  %v", r.Linearizable)
	}
	return &reportError{msg: b.String(), model: r.Linearizable}
}

// reportError carries the model's error so errors.Is(err, ErrInconclusive)
// and errors.As(err, **NotLinearizableError) see through a report.
type reportError struct {
	msg   string
	model error
}

func (e *reportError) Error() string { return e.msg }
func (e *reportError) Unwrap() error { return e.model }
