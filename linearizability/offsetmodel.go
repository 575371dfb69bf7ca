package linearizability

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// The Porcupine model of committed consumer-group offsets (R21: committed
// offsets are replicated and linearizable). One register per (group,
// partition), -1 until the first commit:
//
//	commit(x) ok           state = x
//	commit(x) indefinite   state = x, or unchanged
//	fetch-committed → x    x == state
//
// Kafka lets a group commit any offset, backwards included, so there is no
// monotonicity requirement here.

type offsetInput struct {
	op     OpID
	group  string
	tp     TopicPartition
	commit bool
	offset int64 // commit: the offset stored
}

type offsetOutput struct {
	maybe  bool  // commit: indefinite
	offset int64 // fetch-committed: the offset read
}

func offsetStep(state, input, output interface{}) []interface{} {
	s := state.(int64)
	in := input.(offsetInput)
	out := output.(offsetOutput)
	if in.commit {
		if out.maybe {
			return []interface{}{s, in.offset}
		}
		return []interface{}{in.offset}
	}
	if out.offset != s {
		return nil
	}
	return []interface{}{s}
}

func offsetsPorcupineModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: partitionBy(func(in interface{}) string {
			i := in.(offsetInput)
			return i.group + "\x00" + tpKey(i.tp)
		}),
		Init:  func() []interface{} { return []interface{}{int64(-1)} },
		Step:  offsetStep,
		Equal: func(a, b interface{}) bool { return a.(int64) == b.(int64) },
		Hash:  func(s interface{}) uint64 { return uint64(s.(int64)) },
		DescribeOperation: func(input, output interface{}) string {
			in, out := input.(offsetInput), output.(offsetOutput)
			switch {
			case !in.commit:
				return fmt.Sprintf("fetch-committed(%s %s) → %d", in.group, in.tp, out.offset)
			case out.maybe:
				return fmt.Sprintf("commit(%s %s %d) → ?", in.group, in.tp, in.offset)
			}
			return fmt.Sprintf("commit(%s %s %d) → ok", in.group, in.tp, in.offset)
		},
		DescribeState: func(state interface{}) string { return fmt.Sprintf("committed=%d", state.(int64)) },
		DescribeOperationMetadata: func(info interface{}) string {
			if info == nil {
				return ""
			}
			return fmt.Sprint(info)
		},
	}
	return nm.ToModel()
}

// offsetOperations turns the group-offset operations of ops into Porcupine's
// form. Failed operations and unanswered reads are left out; indefinite
// commits may take effect any time after their call.
func offsetOperations(ops []Op, clients *clientIDs) []porcupine.Operation {
	var out []porcupine.Operation
	for i := range ops {
		op := &ops[i]
		in := offsetInput{op: op.ID, group: op.Group, tp: op.TP}
		var res offsetOutput
		switch {
		case op.Kind == KindCommitOffset && op.Outcome == OutcomeOK:
			in.commit, in.offset = true, op.CommitOffset
		case op.Kind == KindCommitOffset && op.indefinite():
			in.commit, in.offset, res.maybe = true, op.CommitOffset, true
		case op.Kind == KindFetchCommitted && op.Outcome == OutcomeOK:
			res.offset = op.Offset
		default:
			continue
		}
		out = append(out, porcupineOp(op, in, res, res.maybe, clients))
	}
	return out
}
