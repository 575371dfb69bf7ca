package txn

import (
	"fmt"
	"slices"
)

// Check verifies the state's invariants: ids sorted and distinct; each id
// in a known state with the lists that state allows; every epoch in
// 0..MaxInt16; no producer id held by two ids or still in the pool; the
// pool ascending, disjoint and below grantedEnd. Restore runs it; the
// tests run it after every command.
func (s *State) Check() error {
	if len(s.ids) != len(s.names) || !slices.IsSorted(s.names) || len(slices.Compact(slices.Clone(s.names))) != len(s.names) {
		return fmt.Errorf("%d ids, %d names, or names unsorted", len(s.ids), len(s.names))
	}
	held := make(map[int64]string, len(s.names))
	for _, id := range s.names {
		t := s.ids[id]
		if t == nil || t.id != id {
			return fmt.Errorf("id %q missing", id)
		}
		if err := t.check(); err != nil {
			return fmt.Errorf("id %q: %v", id, err)
		}
		for _, pid := range []int64{t.producer.ID, t.nextProducerID} {
			if pid == 0 {
				continue
			}
			if other, dup := held[pid]; dup {
				return fmt.Errorf("producer id %d held by %q and %q", pid, other, id)
			}
			if pid >= s.grantedEnd || s.inPool(pid) {
				return fmt.Errorf("id %q holds producer id %d not handed out", id, pid)
			}
			held[pid] = id
		}
	}
	return s.checkPool()
}

// checkPool verifies the pool's blocks: ascending, disjoint, non-empty,
// below grantedEnd.
func (s *State) checkPool() error {
	if s.grantedEnd < 1 || len(s.pool) > ProducerIDBlocksMax {
		return fmt.Errorf("granted end %d, %d blocks", s.grantedEnd, len(s.pool))
	}
	prev := int64(0)
	for _, r := range s.pool {
		if r.first < 1 || r.first >= r.end || r.first < prev || r.end > s.grantedEnd {
			return fmt.Errorf("producer id block [%d, %d) after %d, granted end %d", r.first, r.end, prev, s.grantedEnd)
		}
		prev = r.end
	}
	return nil
}

// inPool reports whether pid is still unused.
func (s *State) inPool(pid int64) bool {
	for _, r := range s.pool {
		if pid >= r.first && pid < r.end {
			return true
		}
	}
	return false
}

// check verifies one id's record against its state.
func (t *txnID) check() error {
	if !validName(t.id) || t.producer.ID < 1 || t.producer.Epoch < 0 || t.timeoutMs < 1 {
		return fmt.Errorf("producer %+v, timeout %d", t.producer, t.timeoutMs)
	}
	if !sortedDistinct(t.partitions, compareTP) || !sortedDistinct(t.pendingParts, compareTP) ||
		!sortedDistinct(t.groups, compareString) || !sortedDistinct(t.pendingGroups, compareString) {
		return fmt.Errorf("lists unsorted or repeated")
	}
	if len(t.partitions) > PartitionsMax || len(t.groups) > GroupsMax {
		return fmt.Errorf("%d partitions, %d groups", len(t.partitions), len(t.groups))
	}
	for _, p := range t.partitions {
		if !validName(p.Topic) || p.Partition < 0 {
			return fmt.Errorf("partition %s/%d", p.Topic, p.Partition)
		}
	}
	for _, g := range t.groups {
		if !validName(g) {
			return fmt.Errorf("group %q", g)
		}
	}
	return t.checkState()
}

// checkState verifies what each state allows.
func (t *txnID) checkState() error {
	open := len(t.partitions) > 0 || len(t.groups) > 0
	pending := len(t.pendingParts) > 0 || len(t.pendingGroups) > 0
	switch {
	case t.state == Ongoing:
		if !open || pending || t.nextProducerID != 0 || t.endedBy != noProducer || t.producer.Epoch > EpochExhausted {
			return fmt.Errorf("ongoing: open %v, pending %v, next %d, ended by %+v, epoch %d", open, pending, t.nextProducerID, t.endedBy, t.producer.Epoch)
		}
	case t.state.prepared():
		if !pending || !subset(t.pendingParts, t.partitions, compareTP) || !subset(t.pendingGroups, t.groups, compareString) {
			return fmt.Errorf("%v: pending markers not a non-empty part of the transaction", t.state)
		}
		if t.producer.Epoch < 0 || t.nextProducerID < 0 || t.nextProducerID == t.producer.ID {
			return fmt.Errorf("%v: epoch %d, next producer id %d", t.state, t.producer.Epoch, t.nextProducerID)
		}
	case t.state.idle():
		if open || pending || t.nextProducerID != 0 {
			return fmt.Errorf("%v with a transaction", t.state)
		}
	default:
		return fmt.Errorf("state %d", t.state)
	}
	if t.state != Empty && t.beforeInit != noProducer {
		return fmt.Errorf("%v remembers an InitProducerId", t.state)
	}
	return nil
}

// compareString orders strings.
func compareString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sortedDistinct reports whether xs is strictly ascending.
func sortedDistinct[T any](xs []T, cmp func(a, b T) int) bool {
	for i := 1; i < len(xs); i++ {
		if cmp(xs[i-1], xs[i]) >= 0 {
			return false
		}
	}
	return true
}

// subset reports whether sorted a is within sorted b.
func subset[T any](a, b []T, cmp func(a, b T) int) bool {
	for _, x := range a {
		if _, ok := slices.BinarySearchFunc(b, x, cmp); !ok {
			return false
		}
	}
	return true
}
