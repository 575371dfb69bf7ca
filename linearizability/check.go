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
	// UndrainedBestEffort checks partitions that were never drained (a
	// deleted topic's incarnations: nothing reads them at the end) apart
	// from the others, and lets Porcupine run out of time on them without
	// failing: Report.UndrainedInconclusive says it did. A refusal still
	// fails, and the log checks run on them as on any partition; the
	// check gets a tenth of Timeout. Their
	// unseen indefinite produces stay open to the end, which can make the
	// search explode where a drain would have pinned them.
	UndrainedBestEffort bool
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

// logOperations turns the log operations of ops into Porcupine's form.
func logOperations(ops []Op, drained func(TopicPartition) bool, clients *clientIDs) []porcupine.Operation {
	seen := make(map[string]int64) // value → first offset a read saw it at
	startMax := make(map[TopicPartition]int64)
	lastReturn := make(map[TopicPartition]int64) // latest return of an op that observes the log
	for i := range ops {
		op := &ops[i]
		if observes(op) {
			lastReturn[op.TP] = max(lastReturn[op.TP], op.Return)
		}
		if op.Kind == KindFetch && op.Outcome == OutcomeOK {
			for _, r := range op.Received {
				if _, ok := seen[r.Value]; !ok {
					seen[r.Value] = r.Offset
				}
			}
		}
		if op.Kind == KindFetch && (op.Outcome == OutcomeOK || op.Outcome == OutcomeOutOfRange) {
			startMax[op.TP] = max(startMax[op.TP], op.LogStart)
		}
		if op.Kind == KindListOffsets && op.Outcome == OutcomeOK && op.Spec == OffsetEarliest {
			startMax[op.TP] = max(startMax[op.TP], op.Offset)
		}
	}
	lengths := newKnownLengths(ops)
	var out []porcupine.Operation
	for i := range ops {
		op := &ops[i]
		in := logInput{op: op.ID, tp: op.TP, kind: op.Kind, offset: op.FetchOffset, maxRecords: op.MaxRecords, spec: op.Spec}
		var res logOutput
		open := false
		switch {
		case op.Kind == KindProduce && op.Outcome == OutcomeOK:
			in.values, res.produce, res.offset = sentValues(op), produceAcked, op.Offset
		case op.Kind == KindProduce && op.indefinite():
			in.values = sentValues(op)
			if base, ok := inferredBase(op, seen); ok {
				res.produce, res.offset, open = produceInferred, base, true
			} else if drained(op.TP) && (startMax[op.TP] == 0 || lengths.before(op.TP, op.Call) >= startMax[op.TP]) {
				// Drained, and nothing of it was read: it took effect
				// after the drain, or below the log start a trim
				// moved — impossible when the log was already that
				// long before its call.
				continue
			} else if op.Call > lastReturn[op.TP] {
				// Called after every observation of the log returned:
				// nothing can have seen its effect (a read that saw
				// another indefinite produce pins that one before
				// itself), so leaving it out is exact. A partition never
				// drained (a deleted topic) would otherwise keep many
				// such credits open to the end.
				continue
			} else {
				// An instant at the call that adds a credit (see logmodel.go).
				res.produce = produceUnseen
				if drained(op.TP) {
					in.spendBelow = startMax[op.TP]
				}
				out = append(out, porcupineOp(op, in, res, false, clients))
				out[len(out)-1].Return = op.Call
				continue
			}
		case op.Kind == KindFetch && op.Outcome == OutcomeOK:
			res.records, res.hwm, res.start = op.Received, op.HighWatermark, op.LogStart
		case op.Kind == KindFetch && op.Outcome == OutcomeOutOfRange:
			res.outOfRange, res.hwm, res.start = true, op.HighWatermark, op.LogStart
		case op.Kind == KindListOffsets && op.Outcome == OutcomeOK:
			res.offset = op.Offset
		default:
			continue
		}
		out = append(out, porcupineOp(op, in, res, open, clients))
	}
	return out
}

// observes reports whether op's outcome says something about the log's
// contents or length: an acknowledged produce (its offset), a read that
// returned, a ListOffsets answer.
func observes(op *Op) bool {
	switch {
	case op.Kind == KindProduce:
		return op.Outcome == OutcomeOK
	case op.Kind == KindFetch:
		return op.Outcome == OutcomeOK || op.Outcome == OutcomeOutOfRange
	case op.Kind == KindListOffsets:
		return op.Outcome == OutcomeOK
	}
	return false
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
	err, _ := checkLinearizable(h, opts)
	return err
}

// checkLinearizable is CheckLinearizable; inconclusive reports that the
// undrained partitions' check ran out of time (Options.UndrainedBestEffort).
func checkLinearizable(h *History, opts Options) (err error, inconclusive bool) {
	ops := h.Ops()
	clients := newClientIDs(ops)
	drained := h.drainedFunc(opts)
	logHistory := logOperations(ops, drained, clients)
	offsetHistory := offsetOperations(ops, clients)
	model := logModel{stale: opts.StaleFetch}.porcupineModel()
	var errUndrained error
	if opts.UndrainedBestEffort {
		var rest []porcupine.Operation
		logHistory, rest = splitDrained(logHistory, drained)
		errUndrained = checkModel("log (undrained)", model, rest, opts.timeout()/undrainedTimeoutShare, opts.VizPath)
		if errors.Is(errUndrained, ErrInconclusive) {
			errUndrained, inconclusive = nil, true
		}
	}
	errLog := checkModel("log", model, logHistory, opts.timeout(), opts.VizPath)
	errOffsets := checkModel("group-offsets", offsetsPorcupineModel(), offsetHistory, opts.timeout(), offsetsVizPath(opts.VizPath))
	return errors.Join(errLog, errUndrained, errOffsets), inconclusive
}

// undrainedTimeoutShare: the undrained partitions' best-effort check gets
// this fraction of the timeout (it may not conclude anyway).
const undrainedTimeoutShare = 10

// splitDrained separates the operations of drained partitions from the
// others, keeping the order of each.
func splitDrained(ops []porcupine.Operation, drained func(TopicPartition) bool) (in, out []porcupine.Operation) {
	for _, op := range ops {
		if drained(op.Input.(logInput).tp) {
			in = append(in, op)
		} else {
			out = append(out, op)
		}
	}
	return in, out
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

// knownLengths answers, per partition, the least length the log certainly
// had before a time: the largest high-water mark, or end of an acknowledged
// produce, of the operations that returned before it.
type knownLengths map[TopicPartition][]lengthAt

// lengthAt is a running maximum: by ret, the log was at least length long.
type lengthAt struct {
	ret, length int64
}

func newKnownLengths(ops []Op) knownLengths {
	k := knownLengths{}
	for i := range ops {
		op := &ops[i]
		var n int64
		switch {
		case op.Kind == KindFetch && (op.Outcome == OutcomeOK || op.Outcome == OutcomeOutOfRange):
			n = op.HighWatermark
		case op.Kind == KindProduce && op.Outcome == OutcomeOK:
			n = op.Offset + int64(len(op.Sent))
		default:
			continue
		}
		k[op.TP] = append(k[op.TP], lengthAt{ret: op.Return, length: n})
	}
	for tp, ls := range k {
		sort.Slice(ls, func(i, j int) bool { return ls[i].ret < ls[j].ret })
		for i := 1; i < len(ls); i++ {
			ls[i].length = max(ls[i].length, ls[i-1].length)
		}
		k[tp] = ls
	}
	return k
}

// before is the length tp's log certainly had at time t.
func (k knownLengths) before(tp TopicPartition, t int64) int64 {
	ls := k[tp]
	i := sort.Search(len(ls), func(i int) bool { return ls[i].ret >= t })
	if i == 0 {
		return 0
	}
	return ls[i-1].length
}
