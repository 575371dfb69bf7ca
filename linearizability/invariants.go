package linearizability

import (
	"fmt"
	"hash/fnv"
)

// Invariants checks the cluster-internal safety properties the simulator
// observes at every step (issue 3, item 4), beside the client-visible ones
// the history checks cover:
//
//   - election safety: at most one leader per term per raft group;
//   - state machine safety: replicas that applied index i applied the same
//     entry (same term, same bytes);
//   - a replica's high-water mark never moves back while it runs (a restart
//     starts a new incarnation: it re-applies from its log).
//
// Groups are named by the caller (e.g. TopicPartition.String()); nodes by
// their raft id. Not safe for concurrent use: the simulator is one goroutine.
type Invariants struct {
	leaders    map[groupTerm]uint64          // (group, term) → leader node
	applied    map[string]map[uint64]applied // group → index → first entry applied there
	hwms       map[groupNode]int64
	violations []string
}

type groupTerm struct {
	group string
	term  uint64
}

type groupNode struct {
	group string
	node  uint64
}

type applied struct {
	node   uint64
	term   uint64
	digest uint64
}

// maxViolations bounds the violations kept; the first ones matter.
const maxViolations = 100

// NewInvariants returns a checker that has seen nothing.
func NewInvariants() *Invariants {
	return &Invariants{
		leaders: map[groupTerm]uint64{},
		applied: map[string]map[uint64]applied{},
		hwms:    map[groupNode]int64{},
	}
}

func (v *Invariants) fail(format string, args ...interface{}) error {
	err := fmt.Errorf("invariant: "+format, args...)
	if len(v.violations) < maxViolations {
		v.violations = append(v.violations, err.Error())
	}
	return err
}

// ObserveLeader records that node believes itself leader of group in term.
// It fails when another node claimed the same term.
func (v *Invariants) ObserveLeader(group string, term, node uint64) error {
	k := groupTerm{group, term}
	if prev, ok := v.leaders[k]; ok && prev != node {
		return v.fail("group %s term %d has two leaders: nodes %d and %d", group, term, prev, node)
	}
	v.leaders[k] = node
	return nil
}

// ObserveApplied records that node applied the entry (term, data) at index of
// group. It fails when another replica applied a different entry there. data
// is only hashed, not kept.
func (v *Invariants) ObserveApplied(group string, node, index, term uint64, data []byte) error {
	h := fnv.New64a()
	_, _ = h.Write(data)
	got := applied{node: node, term: term, digest: h.Sum64()}
	byIndex := v.applied[group]
	if byIndex == nil {
		byIndex = map[uint64]applied{}
		v.applied[group] = byIndex
	}
	prev, ok := byIndex[index]
	if !ok {
		byIndex[index] = got
		return nil
	}
	if prev.term != got.term || prev.digest != got.digest {
		return v.fail("group %s index %d: node %d applied term %d digest %016x, node %d applied term %d digest %016x",
			group, index, prev.node, prev.term, prev.digest, node, term, got.digest)
	}
	return nil
}

// ObserveHighWatermark records a replica's high-water mark; it fails when it
// is lower than the last one this incarnation of the replica reported.
func (v *Invariants) ObserveHighWatermark(group string, node uint64, hwm int64) error {
	k := groupNode{group, node}
	if prev, ok := v.hwms[k]; ok && hwm < prev {
		return v.fail("group %s node %d: high-water mark moved back from %d to %d", group, node, prev, hwm)
	}
	v.hwms[k] = hwm
	return nil
}

// NodeRestarted forgets node's high-water marks: a restarted replica rebuilds
// its state from its log, so it legitimately starts lower.
func (v *Invariants) NodeRestarted(node uint64) {
	var drop []groupNode
	for k := range v.hwms {
		if k.node == node {
			drop = append(drop, k)
		}
	}
	for _, k := range drop {
		delete(v.hwms, k)
	}
}

// Violations returns the violations seen so far (the first maxViolations),
// in the order they were found.
func (v *Invariants) Violations() []string {
	return append([]string(nil), v.violations...)
}

// Err returns nil when nothing was violated, else an error naming the first
// violations.
func (v *Invariants) Err() error {
	if len(v.violations) == 0 {
		return nil
	}
	shown := v.violations
	if len(shown) > 5 {
		shown = shown[:5]
	}
	return fmt.Errorf("%d invariant violations: %v", len(v.violations), shown)
}
