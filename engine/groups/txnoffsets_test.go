package groups

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"
)

// txnCommit builds a memberless transactional commit of one offset of t/0.
func txnCommit(pid int64, epoch int32, offset int64) TxnCommit {
	return TxnCommit{Commit: Commit{Group: "g", Offsets: []OffsetCommit{{Partition: TopicPartition{Topic: "t", Partition: 0}, Offset: offset}}},
		ProducerID: pid, ProducerEpoch: epoch}
}

// fetched is the group's committed offset of t/0 (-1: none).
func fetched(s *State) int64 {
	for _, c := range s.Fetch("g", tps("t", 0)) {
		return c.Offset
	}
	return -1
}

func TestTxnOffsetsVisibleOnlyAtCommitMarker(t *testing.T) {
	s := New()
	if err := s.TxnCommit(txnCommit(7, 3, 42)); err != nil {
		t.Fatal(err)
	}
	if got := fetched(s); got != -1 {
		t.Fatalf("pending offset visible before the marker: %d", got)
	}
	if u := s.Unstable("g", nil); len(u) != 1 || u[0] != (TopicPartition{Topic: "t", Partition: 0}) {
		t.Fatalf("unstable = %v, want t/0", u)
	}
	if err := s.TxnMarker(TxnMarker{Group: "g", ProducerID: 7, ProducerEpoch: 4, Commit: true}); err != nil {
		t.Fatal(err)
	}
	if got := fetched(s); got != 42 {
		t.Fatalf("after the commit marker: offset %d, want 42", got)
	}
	if u := s.Unstable("g", nil); len(u) != 0 {
		t.Fatalf("unstable after the marker: %v", u)
	}
	// A duplicate marker changes nothing; a late TxnCommit of the ended
	// transaction (epoch 3, marker 4) is fenced.
	if err := s.TxnMarker(TxnMarker{Group: "g", ProducerID: 7, ProducerEpoch: 4, Commit: false}); err != nil || fetched(s) != 42 {
		t.Fatalf("duplicate marker: %v, offset %d", err, fetched(s))
	}
	if err := s.TxnCommit(txnCommit(7, 3, 50)); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("late commit of the ended transaction: %v, want ErrProducerFenced", err)
	}
}

func TestTxnOffsetsAbortAndStaleProducer(t *testing.T) {
	s := New()
	_ = s.Commit(Commit{Group: "g", Offsets: []OffsetCommit{{Partition: TopicPartition{Topic: "t", Partition: 0}, Offset: 5}}})
	if err := s.TxnCommit(txnCommit(7, 3, 42)); err != nil {
		t.Fatal(err)
	}
	if err := s.TxnMarker(TxnMarker{Group: "g", ProducerID: 7, ProducerEpoch: 4}); err != nil || fetched(s) != 5 {
		t.Fatalf("abort marker: %v, offset %d, want 5", err, fetched(s))
	}
	// Pending offsets of an epoch older than the marker's transaction (a
	// zombie's) are dropped even by a commit marker.
	s2 := New()
	_ = s2.TxnCommit(txnCommit(7, 1, 42))
	if err := s2.TxnMarker(TxnMarker{Group: "g", ProducerID: 7, ProducerEpoch: 4, Commit: true}); err != nil || fetched(s2) != -1 {
		t.Fatalf("zombie's pending committed: %v, offset %d", err, fetched(s2))
	}
	// A kept-epoch (v1) commit marker commits its own epoch's offsets.
	s3 := New()
	_ = s3.TxnCommit(txnCommit(7, 2, 9))
	if err := s3.TxnMarker(TxnMarker{Group: "g", ProducerID: 7, ProducerEpoch: 2, Commit: true, KeptEpoch: true}); err != nil || fetched(s3) != 9 {
		t.Fatalf("kept-epoch commit: %v, offset %d, want 9", err, fetched(s3))
	}
	// A late duplicate marker of the previous transaction leaves the next
	// transaction's pending offsets alone.
	_ = s.TxnCommit(txnCommit(7, 4, 60))
	if err := s.TxnMarker(TxnMarker{Group: "g", ProducerID: 7, ProducerEpoch: 4, Commit: true}); err != nil || len(s.Unstable("g", nil)) != 1 {
		t.Fatalf("late duplicate marker: %v, unstable %v", err, s.Unstable("g", nil))
	}
	if err := s.TxnMarker(TxnMarker{Group: "g", ProducerID: 7, ProducerEpoch: 5, Commit: true}); err != nil || fetched(s) != 60 {
		t.Fatalf("next transaction's commit: %v, offset %d, want 60", err, fetched(s))
	}
}

func TestTxnOffsetsMemberFencing(t *testing.T) {
	s := New()
	a := &client{id: "a", instance: "ia"}
	if _, err := a.beat(t, s, TopicInfo{Name: "t", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	c := txnCommit(7, 0, 1)
	c.MemberID, c.MemberEpoch, c.InstanceID = "a", a.epoch, "ia"
	if err := s.TxnCommit(c); err != nil {
		t.Fatalf("current member: %v", err)
	}
	stale := c
	stale.MemberEpoch = a.epoch - 1
	if err := s.TxnCommit(stale); !errors.Is(err, ErrStaleMemberEpoch) {
		t.Fatalf("stale generation: %v, want ErrStaleMemberEpoch", err)
	}
	unknown := c
	unknown.MemberID, unknown.InstanceID = "zz", ""
	if err := s.TxnCommit(unknown); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("unknown member: %v, want ErrUnknownMember", err)
	}
	other := c
	other.MemberID = "b"
	if err := s.TxnCommit(other); !errors.Is(err, ErrFencedInstanceID) {
		t.Fatalf("another member with a's instance id: %v, want ErrFencedInstanceID", err)
	}
	// A memberless transactional commit (a pre-KIP-447 producer) is not
	// checked against the members.
	if err := s.TxnCommit(txnCommit(8, 0, 3)); err != nil {
		t.Fatalf("memberless: %v", err)
	}
}

func TestTxnOffsetsSnapshotRoundTrip(t *testing.T) {
	s := New()
	_ = s.TxnCommit(txnCommit(7, 3, 42))
	_ = s.TxnCommit(txnCommit(2, 0, 8))
	_ = s.TxnMarker(TxnMarker{Group: "g", ProducerID: 9, ProducerEpoch: 5, Commit: true})
	snap := s.Snapshot(10)
	r, err := Restore(snap)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(r.Snapshot(10), snap) {
		t.Fatalf("restored snapshot differs:\n%v\n%v", r.Snapshot(10), snap)
	}
	if len(snap.GetGroups()[0].GetPending()) != 3 {
		t.Fatalf("pending in the snapshot: %v", snap.GetGroups()[0].GetPending())
	}
	_ = r.TxnMarker(TxnMarker{Group: "g", ProducerID: 7, ProducerEpoch: 4, Commit: true})
	if fetched(r) != 42 {
		t.Fatalf("restored pending offset not committed by its marker: %d", fetched(r))
	}
	if err := r.TxnCommit(txnCommit(9, 4, 1)); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("restored fence: %v, want ErrProducerFenced", err)
	}
	bad := s.Snapshot(10)
	bad.Groups[0].Pending[0], bad.Groups[0].Pending[1] = bad.Groups[0].Pending[1], bad.Groups[0].Pending[0]
	if _, err := Restore(bad); err == nil {
		t.Fatal("a snapshot with unsorted producers restored")
	}
}

// A fence without pending offsets is forgotten an offsets retention after
// its last marker (a group of fences only stays); at ProducersMax the
// oldest such fence makes room for a new producer, and a group whose
// producers all have pending offsets refuses one more.
func TestTxnFencesExpireAndEvict(t *testing.T) {
	s := New()
	_ = s.TxnCommit(txnCommit(1, 0, 5))
	_ = s.TxnMarker(TxnMarker{Group: "g", ProducerID: 2, ProducerEpoch: 3, NowMs: 10})
	s.ExpireOffsets(10+100, 100)
	snap := s.Snapshot(0).GetGroups()
	if len(snap) != 1 || len(snap[0].GetPending()) != 1 || snap[0].GetPending()[0].GetProducerId() != 1 {
		t.Fatalf("after expiry: %v", snap)
	}
	if err := s.TxnCommit(txnCommit(2, 0, 1)); err != nil {
		t.Fatalf("producer 2's forgotten fence still refuses: %v", err)
	}
	full := New()
	for pid := range int64(ProducersMax) {
		_ = full.TxnMarker(TxnMarker{Group: "g", ProducerID: pid, ProducerEpoch: 1, NowMs: 1000 - pid%7})
	}
	if err := full.TxnCommit(txnCommit(ProducersMax, 0, 1)); err != nil {
		t.Fatalf("commit at ProducersMax fences: %v", err)
	}
	if err := full.TxnCommit(txnCommit(6, 0, 1)); err != nil {
		t.Fatalf("the evicted fence (producer 6, oldest) still refuses: %v", err)
	}
	busy := New()
	for pid := range int64(ProducersMax) {
		_ = busy.TxnCommit(txnCommit(pid, 0, 1))
	}
	if err := busy.TxnCommit(txnCommit(ProducersMax, 0, 1)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("one producer more than ProducersMax with pending offsets: %v", err)
	}
}

// txnModelProducer is one transactional producer in TestTxnModel: the
// epoch of its open transaction and what it committed in it.
type txnModelProducer struct {
	epoch   int32
	pending map[TopicPartition]int64
}

// TestTxnModel runs random transactional commits, commit and abort
// markers (KIP-890: the transaction's epoch + 1), producer restarts
// (an abort at a bumped epoch), zombie commits of older epochs and late
// duplicates of old markers, and checks after every step that the
// committed offsets are exactly those of committed transactions (a map),
// that every offset still pending is reported unstable, that a plain
// commit made after a transactional one wins, and at the end
// that a replay through a snapshot at a random point gives the same state.
func TestTxnModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := New()
		var ops []func(*State)
		apply := func(op func(*State)) { ops = append(ops, op); op(s) }
		producers := make([]*txnModelProducer, rapid.IntRange(1, 3).Draw(rt, "producers"))
		for i := range producers {
			producers[i] = &txnModelProducer{pending: make(map[TopicPartition]int64)}
		}
		committed := make(map[TopicPartition]int64)
		var sent []TxnMarker
		marker := func(pid int, p *txnModelProducer, commit bool) {
			m := TxnMarker{Group: "g", ProducerID: int64(pid), ProducerEpoch: p.epoch + 1, Commit: commit}
			var err error
			apply(func(s *State) { err = s.TxnMarker(m) })
			if err != nil {
				rt.Fatalf("marker %+v: %v", m, err)
			}
			sent = append(sent, m)
			if commit {
				for tp, o := range p.pending {
					committed[tp] = o
				}
			}
			p.pending = make(map[TopicPartition]int64)
		}
		for step := range rapid.IntRange(1, 100).Draw(rt, "steps") {
			pid := rapid.IntRange(0, len(producers)-1).Draw(rt, "producer")
			p := producers[pid]
			tp := TopicPartition{Topic: "t", Partition: int32(rapid.IntRange(0, 3).Draw(rt, "partition"))}
			o := int64(rapid.IntRange(0, 1000).Draw(rt, "offset"))
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1, 2:
				c := TxnCommit{Commit: Commit{Group: "g", Offsets: []OffsetCommit{{Partition: tp, Offset: o}}, NowMs: int64(step)},
					ProducerID: int64(pid), ProducerEpoch: p.epoch}
				var err error
				apply(func(s *State) { err = s.TxnCommit(c) })
				if err != nil {
					rt.Fatalf("step %d: commit in the open transaction: %v", step, err)
				}
				p.pending[tp] = o
			case 3: // a zombie of an older epoch: never visible, whatever it is answered
				if p.epoch > 0 {
					c := TxnCommit{Commit: Commit{Group: "g", Offsets: []OffsetCommit{{Partition: tp, Offset: 2000 + o}}},
						ProducerID: int64(pid), ProducerEpoch: int32(rapid.IntRange(0, int(p.epoch)-1).Draw(rt, "zombieEpoch"))}
					apply(func(s *State) { _ = s.TxnCommit(c) })
				}
			case 4, 5:
				marker(pid, p, true)
				p.epoch++
			case 6:
				marker(pid, p, false)
				p.epoch++
			case 7: // restart: InitProducerId aborts the open transaction at a bumped epoch
				p.epoch++
				marker(pid, p, false)
				p.epoch++
			case 9: // a plain (memberless) commit: it wins over pending offsets of the partition
				c := Commit{Group: "g", Offsets: []OffsetCommit{{Partition: tp, Offset: 5000 + o}}, NowMs: int64(step)}
				var err error
				apply(func(s *State) { err = s.Commit(c) })
				if err != nil {
					rt.Fatalf("step %d: plain commit: %v", step, err)
				}
				committed[tp] = 5000 + o
				for _, q := range producers {
					delete(q.pending, tp)
				}
			case 8: // a late duplicate of an old marker
				if len(sent) > 0 {
					m := sent[rapid.IntRange(0, len(sent)-1).Draw(rt, "old")]
					apply(func(s *State) { _ = s.TxnMarker(m) })
				}
			}
			if err := s.Check(); err != nil {
				rt.Fatalf("step %d: %v", step, err)
			}
			got := s.Fetch("g", nil)
			if len(got) != len(committed) {
				rt.Fatalf("step %d: committed %v, model %v", step, got, committed)
			}
			for _, c := range got {
				if want, ok := committed[c.Partition]; !ok || want != c.Offset {
					rt.Fatalf("step %d: committed %v, model %v", step, got, committed)
				}
			}
			unstable := s.Unstable("g", nil)
			for _, p := range producers {
				for tp := range p.pending {
					if !contains(unstable, tp) {
						rt.Fatalf("step %d: %v pending but not unstable (%v)", step, tp, unstable)
					}
				}
			}
		}
		cut := rapid.IntRange(0, len(ops)).Draw(rt, "snapshotAt")
		restored := New()
		for i, op := range ops {
			if i == cut {
				var err error
				if restored, err = Restore(restored.Snapshot(int64(i))); err != nil {
					rt.Fatalf("restore at op %d: %v", i, err)
				}
			}
			op(restored)
		}
		if want, got := s.Snapshot(0), restored.Snapshot(0); !proto.Equal(want, got) {
			rt.Fatalf("replay through a snapshot at op %d differs:\n%v\n%v", cut, want, got)
		}
	})
}
