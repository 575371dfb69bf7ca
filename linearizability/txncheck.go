package linearizability

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// TxnAnomalyKind names a transactional anomaly, after Elle and Jepsen's
// Kafka transaction checks.
type TxnAnomalyKind string

// The anomalies CheckTxn reports.
const (
	// TxnAbortedRead (G1a): a read_committed read returned a value an
	// aborted transaction wrote.
	TxnAbortedRead TxnAnomalyKind = "G1a"
	// TxnIntermediateRead (G1b): a read_committed read returned a value of
	// a transaction before it committed (the read returned before the
	// transaction's EndTxn was called): an intermediate state.
	TxnIntermediateRead TxnAnomalyKind = "G1b"
	// TxnWriteCycle (G0): committed transactions whose writes are ordered
	// one way in one partition and the other way in another.
	TxnWriteCycle TxnAnomalyKind = "G0"
	// TxnCircularFlow (G1c): a cycle of write-write and write-read
	// dependencies with at least one read (T2 consumed T1's output, T1
	// consumed T2's or wrote after it).
	TxnCircularFlow TxnAnomalyKind = "G1c"
	// TxnWriteCycleRealtime (G0-realtime): a committed transaction's write
	// lies after a write of a transaction that began only once the first
	// one's EndTxn had returned, in a partition both wrote: a cycle of a
	// real-time edge and a write-write edge (Elle's G0-realtime). Unlike a
	// write cycle through overlapping transactions, Kafka's protocol
	// forbids it: a transaction's records are appended before its EndTxn
	// returns. Always checked.
	TxnWriteCycleRealtime TxnAnomalyKind = "G0-realtime"
	// TxnNonAtomic: a read_committed reader saw part of a transaction: a
	// read spanning a write's offset skipped it, or (on drained
	// partitions) some of the transaction's writes were read and others
	// never were.
	TxnNonAtomic TxnAnomalyKind = "non-atomic"
	// TxnLostWrite: a write of a transaction acknowledged as committed, on
	// a drained partition, was never read.
	TxnLostWrite TxnAnomalyKind = "lost-committed-write"
	// TxnDuplicate: one value at two offsets, or written by two
	// transactions.
	TxnDuplicate TxnAnomalyKind = "duplicate"
	// TxnInconsistentOffsets: two observations disagree about the value at
	// an offset.
	TxnInconsistentOffsets TxnAnomalyKind = "inconsistent-offsets"
	// TxnZombieWrite: a write of a fenced producer became visible: its
	// transaction's EndTxn was called after an InitProducerId of a newer
	// epoch of the same transactional id had returned.
	TxnZombieWrite TxnAnomalyKind = "zombie-write"
)

// TxnOutcome is how a transaction's EndTxn was answered.
type TxnOutcome uint8

// Transaction outcomes.
const (
	// TxnIndefinite: no answer, or one that does not say (a timeout).
	TxnIndefinite TxnOutcome = iota
	// TxnCommitted: EndTxn(commit) answered ok.
	TxnCommitted
	// TxnAborted: aborted for certain (EndTxn(abort) answered ok, or the
	// producer learnt it was fenced before committing).
	TxnAborted
)

// TxnProducerEpoch is a transactional producer's id and epoch.
type TxnProducerEpoch struct {
	ID    int64
	Epoch int16
}

// newer reports whether p is a later incarnation than o: a higher epoch of
// the same id, or a higher id (a transactional id moves only to a producer
// id allocated later, and Strand allocates them ascending).
func (p TxnProducerEpoch) newer(o TxnProducerEpoch) bool {
	return p.ID > o.ID || p.ID == o.ID && p.Epoch > o.Epoch
}

// TxnWrite is one record a transaction produced. Offset is -1 when no
// answer gave it.
type TxnWrite struct {
	TP     TopicPartition
	Value  string
	Offset int64
}

// Txn is one transaction of a transactional producer: its writes, the
// records it consumed (consume-transform-produce, read_committed), and
// its outcome. Values written are unique in a history.
type Txn struct {
	Client          ClientID
	TransactionalID string
	Producer        TxnProducerEpoch
	Writes          []TxnWrite
	Reads           []TxnRead
	Outcome         TxnOutcome
	Begin           int64 // the first write's call
	EndCall         int64 // EndTxn's call (the last virtual time of the transaction if never called)
	EndReturn       int64
}

// TxnRead is one record a reader returned.
type TxnRead struct {
	TP     TopicPartition
	Offset int64
	Value  string
}

// TxnPoll is one poll of a consumer outside transactions.
type TxnPoll struct {
	Client        ClientID
	TP            TopicPartition
	ReadCommitted bool
	Records       []TxnRead // ascending offsets
	Call, Return  int64
}

// TxnFence is an InitProducerId answered ok: Producer is the new epoch of
// the transactional id, so older epochs are fenced from Return on.
type TxnFence struct {
	TransactionalID string
	Producer        TxnProducerEpoch
	Return          int64
}

// TxnHistory is a recorded run of transactional producers and consumers.
type TxnHistory struct {
	Txns    []Txn
	Polls   []TxnPoll
	Fences  []TxnFence
	Drained []TopicPartition // read from the log start to the end after the run
}

// TxnAnomaly is one violation with its evidence: the transactions (indexes
// into TxnHistory.Txns), the partition, the values.
type TxnAnomaly struct {
	Kind   TxnAnomalyKind
	Txns   []int
	TP     TopicPartition
	Values []string
	Detail string
}

// String renders the anomaly on one line.
func (a TxnAnomaly) String() string {
	return fmt.Sprintf("%s %s txns=%v values=%v: %s", a.Kind, a.TP, a.Txns, a.Values, a.Detail)
}

// txnView indexes a history for the checks.
type txnView struct {
	h       *TxnHistory
	writer  map[string]int   // value → index of the transaction that wrote it
	offsets map[string]int64 // value → the offset observed (acks and reads)
	atOff   map[TopicPartition]map[int64]string
	seen    map[string]bool // values some read returned
	reads   []readObs       // every read_committed read, in history order
	drained map[TopicPartition]bool
	opts    TxnOptions
	out     []TxnAnomaly
}

// readObs is one read_committed record read, with who read it and when.
type readObs struct {
	rec    TxnRead
	reader int // transaction index, -1 for a poll
	ret    int64
}

// TxnOptions selects the optional checks.
type TxnOptions struct {
	// WriteCycles turns on G0 and G1c cycles through write-write edges.
	// Kafka's protocol orders no two overlapping transactions across
	// partitions (Jepsen found write cycles in Kafka itself), so only a
	// workload whose transactions on a common partition never overlap in
	// time may ask for it. Cycles of write-read edges alone (G1c) are
	// always checked: read_committed forbids them.
	WriteCycles bool
}

// CheckTxn checks a transactional history and returns its anomalies,
// sorted by kind, partition and values: empty for a clean history.
// Exact and deterministic.
func CheckTxn(h *TxnHistory, opts TxnOptions) []TxnAnomaly {
	v := newTxnView(h)
	v.opts = opts
	v.abortedAndIntermediate()
	v.zombies()
	v.nonAtomic()
	v.lostWrites()
	v.cycles()
	v.realtimeWriteOrder()
	slices.SortFunc(v.out, func(a, b TxnAnomaly) int {
		if c := strings.Compare(string(a.Kind), string(b.Kind)); c != 0 {
			return c
		}
		if c := compareTP(a.TP, b.TP); c != 0 {
			return c
		}
		if c := slices.Compare(a.Values, b.Values); c != 0 {
			return c
		}
		if c := slices.Compare(a.Txns, b.Txns); c != 0 {
			return c
		}
		return strings.Compare(a.Detail, b.Detail)
	})
	return v.out
}

func compareTP(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

func (v *txnView) report(kind TxnAnomalyKind, tp TopicPartition, txns []int, values []string, format string, args ...any) {
	txns = slices.Compact(slices.Sorted(slices.Values(txns)))
	values = slices.Compact(slices.Sorted(slices.Values(values)))
	v.out = append(v.out, TxnAnomaly{Kind: kind, TP: tp, Txns: txns, Values: values, Detail: fmt.Sprintf(format, args...)})
}

// newTxnView indexes writers, offsets and reads, reporting duplicates and
// inconsistent offsets on the way.
func newTxnView(h *TxnHistory) *txnView {
	v := &txnView{h: h, writer: map[string]int{}, offsets: map[string]int64{}, atOff: map[TopicPartition]map[int64]string{},
		seen: map[string]bool{}, drained: map[TopicPartition]bool{}}
	for _, tp := range h.Drained {
		v.drained[tp] = true
	}
	for i, t := range h.Txns {
		for _, w := range t.Writes {
			if j, dup := v.writer[w.Value]; dup {
				v.report(TxnDuplicate, w.TP, []int{j, i}, []string{w.Value}, "value written by two transactions")
				continue
			}
			v.writer[w.Value] = i
			if w.Offset >= 0 {
				v.observe(w.TP, w.Offset, w.Value)
			}
		}
	}
	for i, t := range h.Txns {
		for _, r := range t.Reads {
			v.read(r, i, t.EndCall, true)
		}
	}
	for _, p := range h.Polls {
		for _, r := range p.Records {
			v.read(r, -1, p.Return, p.ReadCommitted)
		}
	}
	return v
}

// read notes one record a reader returned.
func (v *txnView) read(r TxnRead, reader int, ret int64, committed bool) {
	v.observe(r.TP, r.Offset, r.Value)
	if committed {
		v.seen[r.Value] = true
		v.reads = append(v.reads, readObs{rec: r, reader: reader, ret: ret})
	}
}

// observe records value at offset, reporting a value at two offsets or
// two values at one offset.
func (v *txnView) observe(tp TopicPartition, offset int64, value string) {
	if o, ok := v.offsets[value]; ok && o != offset {
		v.report(TxnDuplicate, tp, nil, []string{value}, "value at offsets %d and %d", o, offset)
	} else {
		v.offsets[value] = offset
	}
	m := v.atOff[tp]
	if m == nil {
		m = map[int64]string{}
		v.atOff[tp] = m
	}
	if other, ok := m[offset]; ok && other != value {
		v.report(TxnInconsistentOffsets, tp, nil, []string{value, other}, "two values at offset %d", offset)
	} else {
		m[offset] = value
	}
}

// abortedAndIntermediate reports read_committed reads of aborted
// transactions (G1a) and of transactions not yet committing (G1b).
func (v *txnView) abortedAndIntermediate() {
	for _, r := range v.reads {
		w, ok := v.writer[r.rec.Value]
		if !ok || w == r.reader {
			continue
		}
		t := v.h.Txns[w]
		switch {
		case t.Outcome == TxnAborted:
			v.report(TxnAbortedRead, r.rec.TP, []int{w}, []string{r.rec.Value}, "read_committed read of an aborted write at offset %d", r.rec.Offset)
		case r.ret < t.EndCall:
			v.report(TxnIntermediateRead, r.rec.TP, []int{w}, []string{r.rec.Value}, "read returned at %d, before the transaction's EndTxn was called at %d", r.ret, t.EndCall)
		}
	}
}

// zombies reports visible writes of transactions whose EndTxn was called
// after a newer epoch of their transactional id had been handed out.
func (v *txnView) zombies() {
	for i, t := range v.h.Txns {
		fence, fenced := v.fencedBefore(t)
		if !fenced {
			continue
		}
		for _, w := range t.Writes {
			if v.seen[w.Value] || t.Outcome == TxnCommitted {
				v.report(TxnZombieWrite, w.TP, []int{i}, []string{w.Value}, "producer %+v fenced by %+v at %d, EndTxn called at %d", t.Producer, fence.Producer, fence.Return, t.EndCall)
			}
		}
	}
}

// fencedBefore finds a fence of t's transactional id by a newer epoch that
// returned before t's EndTxn was called.
func (v *txnView) fencedBefore(t Txn) (TxnFence, bool) {
	for _, f := range v.h.Fences {
		if f.TransactionalID == t.TransactionalID && f.Producer.newer(t.Producer) && f.Return < t.EndCall {
			return f, true
		}
	}
	return TxnFence{}, false
}

// visible reports whether transaction i's writes should be seen by
// read_committed readers: acknowledged committed, or any write was read.
func (v *txnView) visible(i int) bool {
	t := v.h.Txns[i]
	if t.Outcome == TxnAborted {
		return false
	}
	if t.Outcome == TxnCommitted {
		return true
	}
	return slices.ContainsFunc(t.Writes, func(w TxnWrite) bool { return v.seen[w.Value] })
}

// nonAtomic reports partial visibility: a poll spanning a visible write's
// offset that skipped it, and a visible transaction with a write on a
// drained partition no one read.
func (v *txnView) nonAtomic() {
	known := v.visibleOffsets()
	for _, p := range v.h.Polls {
		if p.ReadCommitted && len(p.Records) > 1 {
			v.pollSkips(p, known[p.TP])
		}
	}
	for i, t := range v.h.Txns {
		if !v.visible(i) || !slices.ContainsFunc(t.Writes, func(w TxnWrite) bool { return v.seen[w.Value] }) {
			continue
		}
		for _, w := range t.Writes {
			if v.drained[w.TP] && !v.seen[w.Value] {
				v.report(TxnNonAtomic, w.TP, []int{i}, []string{w.Value}, "the transaction's other writes were read; this one never was")
			}
		}
	}
}

// offsetWrite is a visible write at a known offset.
type offsetWrite struct {
	offset int64
	txn    int
	value  string
}

// visibleOffsets lists, per partition and sorted by offset, the visible
// writes whose offset some answer gave.
func (v *txnView) visibleOffsets() map[TopicPartition][]offsetWrite {
	out := map[TopicPartition][]offsetWrite{}
	for i, t := range v.h.Txns {
		if !v.visible(i) {
			continue
		}
		for _, w := range t.Writes {
			if o, ok := v.offsets[w.Value]; ok {
				out[w.TP] = append(out[w.TP], offsetWrite{o, i, w.Value})
			}
		}
	}
	for _, ws := range out { // each list sorted on its own: map order does not matter
		slices.SortFunc(ws, func(a, b offsetWrite) int { return cmp.Compare(a.offset, b.offset) })
	}
	return out
}

// pollSkips reports visible writes (known, sorted by offset) whose offset
// lies inside p's records but that p did not return.
func (v *txnView) pollSkips(p TxnPoll, known []offsetWrite) {
	lo, hi := p.Records[0].Offset, p.Records[len(p.Records)-1].Offset
	returned := map[int64]bool{}
	for _, r := range p.Records {
		returned[r.Offset] = true
	}
	i, _ := slices.BinarySearchFunc(known, lo+1, func(w offsetWrite, o int64) int { return cmp.Compare(w.offset, o) })
	for ; i < len(known) && known[i].offset < hi; i++ {
		if w := known[i]; !returned[w.offset] {
			v.report(TxnNonAtomic, p.TP, []int{w.txn}, []string{w.value}, "a read_committed poll of offsets %d..%d skipped offset %d", lo, hi, w.offset)
		}
	}
}

// lostWrites reports writes of committed transactions, on drained
// partitions, that no read returned.
func (v *txnView) lostWrites() {
	for i, t := range v.h.Txns {
		if t.Outcome != TxnCommitted {
			continue
		}
		for _, w := range t.Writes {
			if v.drained[w.TP] && !v.seen[w.Value] {
				v.report(TxnLostWrite, w.TP, []int{i}, []string{w.Value}, "committed, never read from the drained partition")
			}
		}
	}
}

// txnEdge is a dependency between transactions.
type txnEdge struct {
	to   int
	read bool // write-read (to read from); else write-write (to wrote next)
}

// cycles builds the dependency graph of visible transactions and reports
// each strongly connected component of more than one transaction: G1c when
// made of write-read edges alone (always), else (WriteCycles) G0 when it
// holds no write-read edge and G1c when it does.
func (v *txnView) cycles() {
	n := len(v.h.Txns)
	readOnly := make([][]txnEdge, n)
	all := make([][]txnEdge, n)
	for _, r := range v.reads {
		if w, ok := v.writer[r.rec.Value]; ok && r.reader >= 0 && w != r.reader && v.visible(w) {
			readOnly[w] = append(readOnly[w], txnEdge{to: r.reader, read: true})
			all[w] = append(all[w], txnEdge{to: r.reader, read: true})
		}
	}
	for _, scc := range tarjan(readOnly) {
		v.report(TxnCircularFlow, TopicPartition{}, scc, nil, "each transaction consumed another's output")
	}
	if !v.opts.WriteCycles {
		return
	}
	v.writeEdges(all)
	for _, scc := range tarjan(all) {
		kind, what := TxnWriteCycle, "write-write cycle"
		if v.anyReadEdge(all, scc) {
			kind, what = TxnCircularFlow, "cycle of write-write and write-read dependencies"
		}
		if kind == TxnCircularFlow && len(tarjanWithin(readOnly, scc)) > 0 {
			continue // reported above
		}
		v.report(kind, TopicPartition{}, scc, nil, "%s", what)
	}
}

// writeEdges adds, per partition, an edge from each visible transaction's
// write to the next visible write of another transaction in offset order.
func (v *txnView) writeEdges(adj [][]txnEdge) {
	for _, ws := range v.visibleOffsets() { // edges are sets: map order does not matter
		for k := 1; k < len(ws); k++ {
			if ws[k-1].txn != ws[k].txn {
				adj[ws[k-1].txn] = append(adj[ws[k-1].txn], txnEdge{to: ws[k].txn})
			}
		}
	}
}

// realtimeWriteOrder reports G0-realtime: per partition, in offset order,
// a committed transaction's write placed after the write of a
// transaction that began after the committed one's EndTxn returned (the
// latest Begin among the writes before it is enough to find one).
func (v *txnView) realtimeWriteOrder() {
	for tp, ws := range v.visibleOffsets() { // reports are sorted: map order does not matter
		latest := -1 // the write before with the latest Begin
		for i, w := range ws {
			t := v.h.Txns[w.txn]
			if latest >= 0 && t.Outcome == TxnCommitted && t.EndReturn >= t.EndCall { // EndReturn recorded
				if l := ws[latest]; v.h.Txns[l.txn].Begin > t.EndReturn {
					v.report(TxnWriteCycleRealtime, tp, []int{w.txn, l.txn}, []string{w.value, l.value},
						"offset %d written by a transaction that began at %d, after the EndTxn of the one writing offset %d returned at %d",
						l.offset, v.h.Txns[l.txn].Begin, w.offset, t.EndReturn)
				}
			}
			if latest < 0 || t.Begin > v.h.Txns[ws[latest].txn].Begin {
				latest = i
			}
		}
	}
}

// anyReadEdge reports whether a write-read edge joins two members of scc.
func (v *txnView) anyReadEdge(adj [][]txnEdge, scc []int) bool {
	for _, a := range scc {
		for _, e := range adj[a] {
			if e.read && slices.Contains(scc, e.to) {
				return true
			}
		}
	}
	return false
}

// tarjanWithin returns the cycles of adj restricted to the nodes of scc.
func tarjanWithin(adj [][]txnEdge, scc []int) [][]int {
	sub := make([][]txnEdge, len(adj))
	for _, a := range scc {
		for _, e := range adj[a] {
			if slices.Contains(scc, e.to) {
				sub[a] = append(sub[a], e)
			}
		}
	}
	return tarjan(sub)
}

// tarjan returns the strongly connected components of more than one node,
// each sorted, in order of their least node: deterministic.
func tarjan(adj [][]txnEdge) [][]int {
	n := len(adj)
	index, low := make([]int, n), make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var out [][]int
	next := 0
	var visit func(u int)
	visit = func(u int) {
		index[u], low[u] = next, next
		next++
		stack = append(stack, u)
		onStack[u] = true
		for _, e := range adj[u] {
			if index[e.to] < 0 {
				visit(e.to)
				low[u] = min(low[u], low[e.to])
			} else if onStack[e.to] {
				low[u] = min(low[u], index[e.to])
			}
		}
		if low[u] != index[u] {
			return
		}
		var scc []int
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			scc = append(scc, w)
			if w == u {
				break
			}
		}
		if len(scc) > 1 {
			slices.Sort(scc)
			out = append(out, scc)
		}
	}
	for u := range n {
		if index[u] < 0 {
			visit(u)
		}
	}
	slices.SortFunc(out, func(a, b []int) int { return a[0] - b[0] })
	return out
}
