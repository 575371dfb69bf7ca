package linearizability

import (
	"fmt"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The Porcupine model of committed consumer-group offsets (R21: committed
// offsets are replicated and linearizable), with member epochs (KIP-848's
// fencing). One register per (group, partition), -1 until the first
// commit, and per member the highest epoch a heartbeat gave it:
//
//	member-epoch(m) → e     fence[m] = max(fence[m], e)
//	commit(x) as m at e ok  e >= fence[m]; state = x
//	commit(x) indefinite    state = x (only if e >= fence[m]), or unchanged
//	fetch-committed → x     x == state
//
// A member's epochs only grow (a rejoin gets the group's newer epoch), and
// the coordinator takes a commit only in the member's current epoch, so a
// commit that lands in an epoch older than one the member was already
// given is a zombie's that fencing should have refused. Commits without a
// member (an empty group's, a reset) are not fenced. Kafka lets a group
// commit any offset, backwards included, so there is no monotonicity
// requirement on offsets.

type offsetInput struct {
	op     OpID
	group  string
	tp     TopicPartition
	commit bool
	offset int64 // commit: the offset stored
	member string
	epoch  int32 // commit: the epoch it was made in; member-epoch: the epoch given
	grant  bool  // a member-epoch op
}

type offsetOutput struct {
	maybe  bool  // commit: indefinite
	offset int64 // fetch-committed: the offset read
}

// offsetState is the register and the members' fences, sorted by member;
// never modified once built.
type offsetState struct {
	offset int64
	fences []memberFence
}

type memberFence struct {
	member string
	epoch  int32
}

func (s offsetState) fence(member string) int32 {
	i := sort.Search(len(s.fences), func(i int) bool { return s.fences[i].member >= member })
	if i < len(s.fences) && s.fences[i].member == member {
		return s.fences[i].epoch
	}
	return 0
}

// withFence returns s with member's fence raised to at least epoch.
func (s offsetState) withFence(member string, epoch int32) offsetState {
	if s.fence(member) >= epoch {
		return s
	}
	out := offsetState{offset: s.offset}
	i := sort.Search(len(s.fences), func(i int) bool { return s.fences[i].member >= member })
	out.fences = append(out.fences, s.fences[:i]...)
	out.fences = append(out.fences, memberFence{member, epoch})
	if i < len(s.fences) && s.fences[i].member == member {
		i++
	}
	out.fences = append(out.fences, s.fences[i:]...)
	return out
}

func (s offsetState) equal(o offsetState) bool {
	if s.offset != o.offset || len(s.fences) != len(o.fences) {
		return false
	}
	for i := range s.fences {
		if s.fences[i] != o.fences[i] {
			return false
		}
	}
	return true
}

func offsetStep(state, input, output interface{}) []interface{} {
	s := state.(offsetState)
	in := input.(offsetInput)
	out := output.(offsetOutput)
	switch {
	case in.grant:
		return []interface{}{s.withFence(in.member, in.epoch)}
	case in.commit:
		fenced := in.member != "" && in.epoch < s.fence(in.member)
		next := offsetState{offset: in.offset, fences: s.fences}
		switch {
		case out.maybe && fenced:
			return []interface{}{s}
		case out.maybe:
			return []interface{}{s, next}
		case fenced:
			return nil
		}
		return []interface{}{next}
	}
	if out.offset != s.offset {
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
		Init:  func() []interface{} { return []interface{}{offsetState{offset: -1}} },
		Step:  offsetStep,
		Equal: func(a, b interface{}) bool { return a.(offsetState).equal(b.(offsetState)) },
		Hash: func(st interface{}) uint64 {
			s := st.(offsetState)
			h := uint64(s.offset)
			for _, f := range s.fences {
				h = h*1099511628211 ^ uint64(f.epoch)
			}
			return h
		},
		DescribeOperation: func(input, output interface{}) string {
			in, out := input.(offsetInput), output.(offsetOutput)
			switch {
			case in.grant:
				return fmt.Sprintf("member-epoch(%s %s) → %d", in.group, in.member, in.epoch)
			case !in.commit:
				return fmt.Sprintf("fetch-committed(%s %s) → %d", in.group, in.tp, out.offset)
			case out.maybe:
				return fmt.Sprintf("commit(%s %s %d as %q@%d) → ?", in.group, in.tp, in.offset, in.member, in.epoch)
			}
			return fmt.Sprintf("commit(%s %s %d as %q@%d) → ok", in.group, in.tp, in.offset, in.member, in.epoch)
		},
		DescribeState: func(state interface{}) string {
			s := state.(offsetState)
			var b strings.Builder
			fmt.Fprintf(&b, "committed=%d", s.offset)
			for _, f := range s.fences {
				fmt.Fprintf(&b, " %s≥%d", f.member, f.epoch)
			}
			return b.String()
		},
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
// commits may take effect any time after their call. A member-epoch op
// applies to every partition of its group, so it is copied into each
// (group, partition) piece the history has.
func offsetOperations(ops []Op, clients *clientIDs) []porcupine.Operation {
	var out []porcupine.Operation
	tpsOf := make(map[string][]TopicPartition) // group → its partitions, in first-seen order
	seen := make(map[string]bool)
	for i := range ops {
		op := &ops[i]
		if (op.Kind == KindCommitOffset || op.Kind == KindFetchCommitted) && !seen[op.Group+"\x00"+tpKey(op.TP)] {
			seen[op.Group+"\x00"+tpKey(op.TP)] = true
			tpsOf[op.Group] = append(tpsOf[op.Group], op.TP)
		}
	}
	for i := range ops {
		op := &ops[i]
		in := offsetInput{op: op.ID, group: op.Group, tp: op.TP, member: op.Member, epoch: op.MemberEpoch}
		var res offsetOutput
		switch {
		case op.Kind == KindMemberEpoch && op.Outcome == OutcomeOK:
			in.grant = true
			for _, tp := range tpsOf[op.Group] {
				in.tp = tp
				out = append(out, porcupineOp(op, in, res, false, clients))
			}
			continue
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
