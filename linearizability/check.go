package linearizability

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// DefaultTimeout bounds one Porcupine check when Options.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// Options tune the checks.
type Options struct {
	// FinalDrain says the history ends with a complete read of every
	// partition it touches (History.MarkDrained says it of one partition): after faults healed and every other operation
	// returned or was abandoned, each partition was fetched from its log start
	// up to its high-water mark. It enables the unseen check, and lets the
	// linearizability check drop indefinite produces that no read saw (they
	// cannot have taken effect before the drain, and any later effect is
	// unobservable), which prunes Porcupine's search.
	FinalDrain bool
	// StaleFetch accepts reads served from an older state (a deposed leader
	// without ReadIndex, a follower): the model then requires only
	// hwm <= len(log), and a client seeing the high-water mark or log start
	// move back is a warning rather than an error. Off by default: Strand
	// serves fetch through raft's ReadIndex, so reads are linearizable.
	StaleFetch bool
	// Timeout bounds each Porcupine check (0: DefaultTimeout; negative: none).
	// A check that runs out of time fails with ErrInconclusive, never passes.
	Timeout time.Duration
	// VizPath is where a failing check writes Porcupine's HTML visualization
	// of the log model ("" writes none). The group-offsets model, when it
	// fails, writes beside it with "-offsets" before the extension.
	VizPath string
}

func (o Options) timeout() time.Duration {
	switch {
	case o.Timeout == 0:
		return DefaultTimeout
	case o.Timeout < 0:
		return 0 // porcupine: unlimited
	}
	return o.Timeout
}

// ErrInconclusive is returned (wrapped) when Porcupine ran out of time: the
// history is neither accepted nor refused. Re-run with a longer timeout or a
// smaller history; never count it as a pass.
var ErrInconclusive = errors.New("linearizability: check inconclusive (timed out); re-run")

// NotLinearizableError says a model refused the history.
type NotLinearizableError struct {
	Model      string   // "log" or "group-offsets"
	Partitions []string // the refusing pieces: "topic/partition" or "group topic/partition", sorted
	VizPath    string   // the HTML visualization, or "" if none was written
	VizErr     error    // why writing it failed, if it did
}

func (e *NotLinearizableError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "linearizability: %s history is not linearizable", e.Model)
	if len(e.Partitions) > 0 {
		fmt.Fprintf(&b, " (partitions %s)", strings.Join(e.Partitions, ", "))
	}
	if e.VizPath != "" {
		fmt.Fprintf(&b, "; visualization: %s", e.VizPath)
	}
	if e.VizErr != nil {
		fmt.Fprintf(&b, "; visualization not written: %v", e.VizErr)
	}
	return b.String()
}

// clientIDs maps clients to Porcupine's dense zero-based ClientIds and hands
// every indefinite operation a fresh one, so its open-ended bar does not hide
// its client's later operations in the visualization.
type clientIDs struct {
	dense map[ClientID]int
	next  int
}

func newClientIDs(ops []Op) *clientIDs {
	var ids []int
	seen := make(map[ClientID]bool)
	for i := range ops {
		if !seen[ops[i].Client] {
			seen[ops[i].Client] = true
			ids = append(ids, int(ops[i].Client))
		}
	}
	sort.Ints(ids)
	c := &clientIDs{dense: make(map[ClientID]int, len(ids))}
	for i, id := range ids {
		c.dense[ClientID(id)] = i
	}
	c.next = len(ids)
	return c
}

// porcupineOp converts op; an open-ended op returns at MaxInt64.
func porcupineOp(op *Op, in, out interface{}, openEnded bool, clients *clientIDs) porcupine.Operation {
	pop := porcupine.Operation{
		ClientId: clients.dense[op.Client],
		Input:    in,
		Call:     op.Call,
		Output:   out,
		Return:   op.Return,
		Metadata: fmt.Sprintf("op %d client %d", op.ID, op.Client),
	}
	if openEnded {
		pop.ClientId = clients.next
		clients.next++
		pop.Return = math.MaxInt64
	}
	return pop
}

// logOperations turns the log operations of ops into Porcupine's form,
// rewriting indefinite produces as logmodel.go describes: one a read saw is
// pinned where it was read, and the ones nobody saw become one step per gap
// of the partition's layout.
func logOperations(ops []Op, drained func(TopicPartition) bool, stale bool, clients *clientIDs) []porcupine.Operation {
	seen, limit := readFacts(ops, drained)
	inferred := make(map[OpID]int64)
	unseen := make(map[TopicPartition][]*Op)
	for i := range ops {
		if op := &ops[i]; op.Kind == KindProduce && op.indefinite() {
			if base, ok := inferredBase(op, seen); ok {
				inferred[op.ID] = base
			} else {
				unseen[op.TP] = append(unseen[op.TP], op)
			}
		}
	}
	layouts := newLayouts(ops, inferred, stale)
	var out []porcupine.Operation
	for i := range ops {
		op := &ops[i]
		in := logInput{op: op.ID, tp: op.TP, kind: op.Kind, offset: op.FetchOffset, maxRecords: op.MaxRecords, alone: op.Alone, spec: op.Spec}
		var res logOutput
		switch {
		case op.Kind == KindProduce && op.Outcome == OutcomeOK:
			in.values, res.produce, res.offset = sentValues(op), produceAcked, op.Offset
		case op.Kind == KindProduce && op.indefinite():
			base, ok := inferred[op.ID]
			if !ok {
				continue // in a fill, or beyond every observation
			}
			in.values, res.produce, res.offset = sentValues(op), produceInferred, base
			pop := porcupineOp(op, in, res, true, clients)
			if by := layouts[op.TP].needBy(base); by >= op.Call && by != math.MaxInt64 {
				// It holds position base, so it took effect before
				// any operation that saw the log longer than that.
				pop.Return = by
			}
			out = append(out, pop)
			continue
		case op.Kind == KindFetch && op.Outcome == OutcomeOK:
			res.records, res.hwm, res.start = op.Received, op.HighWatermark, op.LogStart
		case op.Kind == KindFetch && op.Outcome == OutcomeOutOfRange:
			res.outOfRange, res.hwm, res.start = true, op.HighWatermark, op.LogStart
		case op.Kind == KindListOffsets && op.Outcome == OutcomeOK:
			res.offset = op.Offset
		default:
			continue
		}
		out = append(out, porcupineOp(op, in, res, false, clients))
	}
	return append(out, fillOperations(layouts, unseen, drained, limit, clients)...)
}

// readFacts returns the first offset a read saw each value at, and per
// drained partition the largest log start reported: the drain read every
// position from there up, so gaps may only lie below it.
func readFacts(ops []Op, drained func(TopicPartition) bool) (seen map[string]int64, limit map[TopicPartition]int64) {
	seen = make(map[string]int64)
	limit = make(map[TopicPartition]int64)
	for i := range ops {
		op := &ops[i]
		if op.Kind == KindFetch && op.Outcome == OutcomeOK {
			for _, r := range op.Received {
				if _, ok := seen[r.Value]; !ok {
					seen[r.Value] = r.Offset
				}
			}
		}
		if !drained(op.TP) {
			continue
		}
		if op.Kind == KindFetch && (op.Outcome == OutcomeOK || op.Outcome == OutcomeOutOfRange) {
			limit[op.TP] = max(limit[op.TP], op.LogStart)
		}
		if op.Kind == KindListOffsets && op.Outcome == OutcomeOK && op.Spec == OffsetEarliest {
			limit[op.TP] = max(limit[op.TP], op.Offset)
		}
	}
	return seen, limit
}

// fillOperations returns each partition's gap fills (layout.fills) as
// produces of anonymous records, in partition order; on a drained partition
// only below its limit.
func fillOperations(layouts map[TopicPartition]*layout, unseen map[TopicPartition][]*Op,
	drained func(TopicPartition) bool, limit map[TopicPartition]int64, clients *clientIDs) []porcupine.Operation {
	tps := make([]TopicPartition, 0, len(layouts))
	for tp := range layouts {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool { return tps[i].less(tps[j]) })
	var out []porcupine.Operation
	for _, tp := range tps {
		us := unseen[tp]
		sort.SliceStable(us, func(i, j int) bool { return us[i].Call < us[j].Call })
		below := int64(math.MaxInt64)
		if drained(tp) {
			below = limit[tp]
		}
		for _, f := range layouts[tp].fills(us, below) {
			in := logInput{op: -1, tp: tp, kind: KindProduce, values: make([]string, f.to-f.from)}
			out = append(out, porcupine.Operation{
				ClientId: clients.next,
				Input:    in,
				Call:     f.call,
				Output:   logOutput{produce: produceFill, offset: f.from},
				Return:   f.ret,
				Metadata: fmt.Sprintf("unseen produces fill [%d, %d)", f.from, f.to),
			})
			clients.next++
		}
	}
	return out
}

func sentValues(op *Op) []string {
	vs := make([]string, len(op.Sent))
	for i, r := range op.Sent {
		vs[i] = r.Value
	}
	return vs
}

// inferredBase is the base offset of an indefinite produce that a read saw,
// from the first of its values seen. Were its values seen at offsets that do
// not fit one batch, the model refuses the history either way.
func inferredBase(op *Op, seen map[string]int64) (int64, bool) {
	for i, r := range op.Sent {
		if o, ok := seen[r.Value]; ok {
			return o - int64(i), true
		}
	}
	return 0, false
}

// CheckLinearizable checks the log operations of h against the partition-log
// model (per topic-partition) and the group-offset operations against the
// committed-offsets model (per group and partition). It returns nil when
// both accept, an error wrapping ErrInconclusive when Porcupine ran out of
// time, and otherwise a *NotLinearizableError (both joined if both models
// refuse), having written the visualization to opts.VizPath.
func CheckLinearizable(h *History, opts Options) error {
	ops := h.Ops()
	clients := newClientIDs(ops)
	logHistory := logOperations(ops, h.drainedFunc(opts), opts.StaleFetch, clients)
	offsetHistory := offsetOperations(ops, clients)
	model := logModel{stale: opts.StaleFetch}.porcupineModel()
	errLog := checkModel("log", model, logHistory, opts.timeout(), opts.VizPath)
	errOffsets := checkModel("group-offsets", offsetsPorcupineModel(), offsetHistory, opts.timeout(), offsetsVizPath(opts.VizPath))
	return errors.Join(errLog, errOffsets)
}

func offsetsVizPath(p string) string {
	if p == "" {
		return ""
	}
	ext := filepath.Ext(p)
	return strings.TrimSuffix(p, ext) + "-offsets" + ext
}

// checkModel runs Porcupine on history; on refusal it names the refusing
// pieces and writes the visualization.
func checkModel(name string, model porcupine.Model, history []porcupine.Operation, timeout time.Duration, vizPath string) error {
	if len(history) == 0 {
		return nil
	}
	res, info := porcupine.CheckOperationsVerbose(model, history, timeout)
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return fmt.Errorf("%s model after %v: %w", name, timeout, ErrInconclusive)
	}
	e := &NotLinearizableError{Model: name}
	for _, piece := range model.Partition(history) {
		if porcupine.CheckOperationsTimeout(model, piece, timeout) != porcupine.Ok {
			e.Partitions = append(e.Partitions, pieceName(piece[0].Input))
		}
	}
	if vizPath != "" {
		if err := os.MkdirAll(filepath.Dir(vizPath), 0o755); err != nil {
			e.VizErr = err
		} else if err := porcupine.VisualizePath(model, info, vizPath); err != nil {
			e.VizErr = err
		} else {
			e.VizPath = vizPath
		}
	}
	return e
}

func pieceName(input interface{}) string {
	switch in := input.(type) {
	case logInput:
		return in.tp.String()
	case offsetInput:
		return in.group + " " + in.tp.String()
	}
	return "?"
}
