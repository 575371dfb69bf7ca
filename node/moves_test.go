package node

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// moveReq asks to move tp to replicas.
func moveReq(corr uint64, tp TopicPartition, replicas ...uint64) *strandpb.Request {
	return &strandpb.Request{CorrelationId: corr, Body: &strandpb.Request_MovePartitions{MovePartitions: &strandpb.MovePartitionsRequest{
		Moves: []*strandpb.MovePartitionsRequest_Move{{Topic: tp.Topic, Partition: tp.Partition, Replicas: replicas}},
	}}}
}

// moveFixture is 4 nodes with topic m of one partition on 3 of them and
// some records in it; it returns the cluster, the partition, its replicas
// and the node outside them.
func moveFixture(t *testing.T, seed uint64) (*cluster, TopicPartition, []uint64, uint64) {
	c := newMetaCluster(t, seed, 4, nil)
	tp := TopicPartition{Topic: "m", Partition: 0}
	c.createTopic(c.metaLeaderOf(), "m", 1, 3)
	lead := c.leader(tp)
	for i := range 5 {
		if res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "a", i+1)}); res.Err != nil {
			t.Fatalf("produce: %v", res.Err)
		}
	}
	current, err := c.cores[lead].meta.meta.Assignment("m", 0)
	if err != nil {
		t.Fatal(err)
	}
	var spare uint64
	for id := uint64(1); id <= 4; id++ {
		if !slices.Contains(current, id) {
			spare = id
		}
	}
	return c, tp, current, spare
}

// waitMoved ticks until every live node's metadata says tp's replicas are
// want with no move in progress, and the nodes outside want host nothing.
func (c *cluster) waitMoved(tp TopicPartition, want []uint64) {
	c.t.Helper()
	for range 2000 {
		done := true
		for _, id := range c.ids {
			core := c.cores[id]
			if core == nil {
				continue
			}
			r, _ := core.meta.meta.Assignment(tp.Topic, tp.Partition)
			_, moving := core.meta.meta.MoveOf(tp.Topic, tp.Partition)
			hosts := core.byTP[tp] != nil
			done = done && !moving && slices.Equal(r, want) && hosts == slices.Contains(want, uint64(id))
		}
		if done {
			return
		}
		c.tick(1)
	}
	c.t.Fatalf("move of %v to %v did not finish", tp, want)
}

// checkMovedGroup fails unless tp's raft configuration on its leader is
// exactly want (no learners, not joint) and every record is still there.
func checkMovedGroup(t *testing.T, c *cluster, tp TopicPartition, want []uint64, records int) {
	t.Helper()
	lead := c.leader(tp)
	if !slices.Contains(want, uint64(lead)) {
		t.Fatalf("leader %d outside the target %v", lead, want)
	}
	cs := c.cores[lead].byTP[tp].confState
	voters := slices.Clone(cs.GetVoters())
	slices.Sort(voters)
	sorted := slices.Clone(want)
	slices.Sort(sorted)
	if !slices.Equal(voters, sorted) || len(cs.GetLearners()) != 0 || len(cs.GetVotersOutgoing()) != 0 {
		t.Fatalf("conf state %v, want voters %v", cs, sorted)
	}
	batches, hw := c.fetchAll(lead, tp)
	n := 0
	for _, b := range batches {
		n += int(batchRecordCount(b.Batch))
	}
	if n != records || hw != int64(records) {
		t.Fatalf("%d records up to %d after the move, want %d", n, hw, records)
	}
}

// TestMovePartitionReplacesFollower moves a partition off one follower
// onto a new node: learner, joint change, completion; the removed node
// stops and deletes its replica, and every record survives.
func TestMovePartitionReplacesFollower(t *testing.T) {
	c, tp, current, spare := moveFixture(t, 41)
	lead := uint64(c.leader(tp))
	var target []uint64
	for _, id := range current {
		if id == lead || len(target) < 1 {
			target = append(target, id)
		}
	}
	for _, id := range current {
		if len(target) < 2 && !slices.Contains(target, id) {
			target = append(target, id)
		}
	}
	target = append(target, spare)
	resp, _ := c.handle(NodeID(lead), moveReq(9, tp, target...))
	if m := resp.GetMovePartitions().GetMoves(); len(m) != 1 || m[0].GetError() != nil || !slices.Equal(m[0].GetTargetReplicas(), target) {
		t.Fatalf("move answered %v", resp)
	}
	c.waitMoved(tp, target)
	checkMovedGroup(t, c, tp, target, 15)
	var removed uint64
	for _, id := range current {
		if !slices.Contains(target, id) {
			removed = id
		}
	}
	dir := managedDir("m", c.cores[NodeID(lead)].byTP[tp].topicID, 0)
	if !deletedHere(c.cores[NodeID(removed)].cfg, dir) {
		t.Fatalf("node %d left no tombstone in %s", removed, dir)
	}
}

// TestMovePartitionRemovesLeader moves a partition to a set without its
// leader: the leader hands leadership on and the move completes.
func TestMovePartitionRemovesLeader(t *testing.T) {
	c, tp, current, spare := moveFixture(t, 43)
	lead := uint64(c.leader(tp))
	target := []uint64{spare}
	for _, id := range current {
		if id != lead {
			target = append(target, id)
		}
	}
	resp, _ := c.handle(NodeID(lead), moveReq(9, tp, target...))
	if m := resp.GetMovePartitions().GetMoves(); len(m) != 1 || m[0].GetError() != nil {
		t.Fatalf("move answered %v", resp)
	}
	c.waitMoved(tp, target)
	checkMovedGroup(t, c, tp, target, 15)
	if res := c.produce(c.leader(tp), ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "b", 2)}); res.Err != nil {
		t.Fatalf("produce after the move: %v", res.Err)
	}
}

// TestMovePartitionsRefused shows refusals: a repeated node before
// proposing, an unknown node and a second move from the metadata group.
func TestMovePartitionsRefused(t *testing.T) {
	c, tp, current, spare := moveFixture(t, 47)
	cases := []struct {
		replicas []uint64
		want     strandpb.ErrorCode
	}{
		{[]uint64{1, 1, 2}, strandpb.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT},
		{nil, strandpb.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT},
		{[]uint64{1, 2, 9}, strandpb.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT},
	}
	for i, tc := range cases {
		resp, _ := c.handle(1, moveReq(uint64(10+i), tp, tc.replicas...))
		if got := resp.GetMovePartitions().GetMoves()[0].GetError().GetCode(); got != tc.want {
			t.Fatalf("move to %v: %v, want %v", tc.replicas, got, tc.want)
		}
	}
	target := append([]uint64{spare}, current[1:]...)
	// Hold the move: drop every frame to the spare node, so it cannot
	// catch up and the move stays in progress.
	c.drop = func(e envelope) bool { return e.to == NodeID(spare) || e.from == NodeID(spare) }
	if resp, _ := c.handle(1, moveReq(20, tp, target...)); resp.GetMovePartitions().GetMoves()[0].GetError() != nil {
		t.Fatalf("move: %v", resp)
	}
	resp, _ := c.handle(1, moveReq(21, tp, current...))
	if got := resp.GetMovePartitions().GetMoves()[0].GetError().GetCode(); got != strandpb.ErrorCode_ERROR_CODE_REASSIGNMENT_IN_PROGRESS {
		t.Fatalf("second move: %v, want reassignment_in_progress", got)
	}
	c.drop = nil
	c.waitMoved(tp, target)
}

// A move that names fewer (or more) replicas than the partition has is
// refused unless it sets allow_replication_change: a client that skips
// the CLI's check cannot silently drop the replication factor (`strand
// partition move T/0 --replicas 1` took a partition from 3 replicas to 1
// with no warning). With the flag set, the same move goes through.
func TestMoveChangingReplicationFactorRefused(t *testing.T) {
	c, tp, current, _ := moveFixture(t, 53)
	resp, _ := c.handle(1, moveReq(9, tp, current[0]))
	e := resp.GetMovePartitions().GetMoves()[0].GetError()
	if e.GetCode() != strandpb.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT || !bytes.Contains([]byte(e.GetMessage()), []byte("--allow-rf-change")) {
		t.Fatalf("move of 3 replicas to 1: %v, want invalid_replica_assignment naming --allow-rf-change", e)
	}
	if _, moving := c.cores[1].meta.meta.MoveOf(tp.Topic, tp.Partition); moving {
		t.Fatal("the refused move was recorded")
	}
	req := moveReq(10, tp, current[0])
	req.GetMovePartitions().GetMoves()[0].AllowReplicationChange = true
	if resp, _ := c.handle(1, req); resp.GetMovePartitions().GetMoves()[0].GetError() != nil {
		t.Fatalf("allowed move: %v", resp)
	}
	c.waitMoved(tp, current[:1])
}

// compactedMoveFixture is 4 nodes with topic r (retention.bytes 12 KiB,
// 4 KiB segments) on 3 of them, filled so that its log was trimmed and
// compacted behind a raft snapshot; it returns the partition, its
// replicas and the node outside them.
func compactedMoveFixture(t *testing.T, seed uint64) (*cluster, TopicPartition, []uint64, uint64) {
	c := newMetaCluster(t, seed, 4, retentionConfig)
	c.createTopicWith(c.metaLeaderOf(), "r", 1, 3, map[string]string{
		"segment.bytes": "4096", "retention.bytes": "12288", "retention.ms": "-1",
	})
	tp := TopicPartition{Topic: "r", Partition: 0}
	c.fillPartition(tp, 200)
	c.tick(30)
	lead := c.leader(tp)
	if c.cores[lead].Stats().Compactions == 0 {
		t.Fatalf("nothing compacted: %+v", c.cores[lead].Stats())
	}
	current, _ := c.cores[lead].meta.meta.Assignment("r", 0)
	var spare uint64
	for id := uint64(1); id <= 4; id++ {
		if !slices.Contains(current, id) {
			spare = id
		}
	}
	return c, tp, current, spare
}

// A node a move adds to a partition whose log was compacted catches up
// from the leader's raft snapshot, although that snapshot predates its
// AddLearnerNode (raft refuses a snapshot whose configuration lacks the
// installer: before snapshotForLearner the leader sent it forever and the
// move never finished).
func TestMoveLearnerCatchesUpFromSnapshot(t *testing.T) {
	c, tp, current, spare := compactedMoveFixture(t, 51)
	target := append([]uint64{spare}, current[1:]...)
	if resp, _ := c.handle(1, moveReq(9, tp, target...)); resp.GetMovePartitions().GetMoves()[0].GetError() != nil {
		t.Fatalf("move: %v", resp)
	}
	c.waitMoved(tp, target)
	if c.cores[NodeID(spare)].Stats().SnapshotsInstalled == 0 {
		t.Fatalf("the added node installed no snapshot: %+v", c.cores[NodeID(spare)].Stats())
	}
	c.fillPartition(tp, 10)
	c.tick(30)
	var ref GroupStatus
	for _, id := range target {
		st := statusOf(c.cores[NodeID(id)], tp)
		if ref.AppliedIndex == 0 {
			ref = st
		}
		if st.AppliedIndex != ref.AppliedIndex || st.HighWatermark != ref.HighWatermark || st.Digest != ref.Digest {
			t.Fatalf("node %d: %+v, differs from %+v", id, st, ref)
		}
	}
}

// A compaction snapshot carries the raft configuration as of its own
// index, not the one applied when it was written: after a move, a trim
// to a point before the move's conf changes compacts behind a snapshot
// whose voters are the old replicas (before the compactor tracked the
// configuration, they were the new ones, and an installer applied the
// move's changes a second time: "can't leave a non-joint config").
func TestCompactionSnapshotKeepsItsConfiguration(t *testing.T) {
	c, tp, current, spare := compactedMoveFixture(t, 53)
	lead := c.leader(tp)
	pre := statusOf(c.cores[lead], tp).HighWatermark
	target := append([]uint64{spare}, current[1:]...)
	if resp, _ := c.handle(1, moveReq(9, tp, target...)); resp.GetMovePartitions().GetMoves()[0].GetError() != nil {
		t.Fatalf("move: %v", resp)
	}
	c.waitMoved(tp, target)
	moveIndex := c.moveConfIndex(c.leader(tp), tp)
	c.fillPartition(tp, 30) // a segment more: retention trims and compacts again
	c.tick(30)
	lead = c.leader(tp)
	snap, err := c.cores[lead].byTP[tp].log.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	voters := slices.Clone(snap.GetMetadata().GetConfState().GetVoters())
	slices.Sort(voters)
	idx := snap.GetMetadata().GetIndex()
	t.Logf("snapshot at %d (high-water mark before the move %d, move at %d), voters %v, before %v", idx, pre, moveIndex, voters, current)
	cfg, _ := c.cores[lead].PartitionConfig(tp)
	var want []uint64
	for _, v := range cfg.Voters {
		want = append(want, uint64(v))
	}
	if idx < moveIndex {
		sortedCurrent := slices.Clone(current)
		slices.Sort(sortedCurrent)
		want = sortedCurrent
	}
	if !slices.Equal(voters, want) {
		t.Fatalf("snapshot at %d (move's first conf change at %d) names voters %v, want %v", idx, moveIndex, voters, want)
	}
}

// moveConfIndex is the raft index of the first ConfChangeV2 entry in node
// id's log of tp (a move's first step).
func (c *cluster) moveConfIndex(id NodeID, tp TopicPartition) uint64 {
	c.t.Helper()
	l := c.cores[id].byTP[tp].log
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	ents, err := l.Entries(first, last+1, 1<<30)
	if err != nil {
		c.t.Fatalf("entries %d..%d: %v", first, last, err)
	}
	for _, e := range ents {
		if e.GetType() == raftpb.EntryConfChangeV2 {
			return e.GetIndex()
		}
	}
	c.t.Fatalf("no ConfChangeV2 in %d..%d", first, last)
	return 0
}

// A node a move removed and a later move adds back starts the replica
// afresh (its tombstone carries the metadata version that removed it) and
// recovered with a vote floor: it votes only in terms above the highest
// term its removed replica had, so it can never vote twice in one term,
// and it needs no peer's answer to start voting.
func TestMoveBackToRemovedNode(t *testing.T) {
	c, tp, current, spare := moveFixture(t, 59)
	removed := current[0]
	target := append([]uint64{spare}, current[1:]...)
	if resp, _ := c.handle(1, moveReq(9, tp, target...)); resp.GetMovePartitions().GetMoves()[0].GetError() != nil {
		t.Fatalf("move: %v", resp)
	}
	c.waitMoved(tp, target)
	var termAway uint64
	for _, id := range target {
		termAway = max(termAway, statusOf(c.cores[NodeID(id)], tp).Term)
	}
	if resp, _ := c.handle(1, moveReq(10, tp, current...)); resp.GetMovePartitions().GetMoves()[0].GetError() != nil {
		t.Fatalf("move back: %v", resp)
	}
	c.waitMoved(tp, current)
	g := c.cores[NodeID(removed)].byTP[tp]
	if g == nil || g.rejoin == nil || g.rejoin.phase != rejoinDone {
		t.Fatalf("node %d re-hosted the replica without a vote floor: %+v", removed, g.rejoin)
	}
	if g.rejoin.floor == 0 || g.rejoin.floor > termAway {
		t.Fatalf("node %d's vote floor %d: want the removed replica's term (>0, <= %d)", removed, g.rejoin.floor, termAway)
	}
	checkMovedGroup(t, c, tp, current, 15)
}

// A tombstone a crash cut short (created, its bytes never written: a kill
// inside markDeleted, the empty file then made durable) still lets a
// later move place the replica here again: it is read as a delete at an
// unknown version with an unknown vote floor, and the replica is rebuilt
// by probing its peers, as after an old version-only tombstone. Before,
// the node read it as "deleted after the metadata it has" forever, never
// hosted the replica, and the move back never ended (the simulator's seed
// 167: a decommission's move onto the node stuck for 40 s).
func TestMoveBackOverTornTombstone(t *testing.T) {
	c, tp, current, spare := moveFixture(t, 59)
	removed := current[0]
	target := append([]uint64{spare}, current[1:]...)
	if resp, _ := c.handle(1, moveReq(9, tp, target...)); resp.GetMovePartitions().GetMoves()[0].GetError() != nil {
		t.Fatalf("move: %v", resp)
	}
	c.waitMoved(tp, target)
	dir := managedDir("m", c.cores[NodeID(target[1])].byTP[tp].topicID, 0)
	cfg := c.cores[NodeID(removed)].cfg
	if !deletedHere(cfg, dir) {
		t.Fatalf("node %d left no tombstone in %s", removed, dir)
	}
	if err := writeFile(cfg.Disk, dir+"/"+deletedName, nil); err != nil {
		t.Fatal(err)
	}
	if resp, _ := c.handle(1, moveReq(10, tp, current...)); resp.GetMovePartitions().GetMoves()[0].GetError() != nil {
		t.Fatalf("move back: %v", resp)
	}
	c.waitMoved(tp, current)
	if g := c.cores[NodeID(removed)].byTP[tp]; g == nil {
		t.Fatalf("node %d does not host %v after the move back", removed, tp)
	}
	checkMovedGroup(t, c, tp, current, 15)
}

// A replica moved back while another replica of its group rebuilds after
// a disk loss: the moved-back one votes at once (above its floor), so
// when the leader restarts the group elects again and the wiped replica
// finishes its recovery. When a moved-back replica probed its peers like
// a wiped one, each of the two waited for the other's trusted answer and
// the group stayed leaderless for good (the moves simulator's seed 5).
func TestMovedBackAndWipedReplicasElect(t *testing.T) {
	c, tp, current, spare := moveFixture(t, 63)
	removed := current[0]
	target := append([]uint64{spare}, current[1:]...)
	if resp, _ := c.handle(1, moveReq(9, tp, target...)); resp.GetMovePartitions().GetMoves()[0].GetError() != nil {
		t.Fatalf("move: %v", resp)
	}
	c.waitMoved(tp, target)
	// The moved-back replica hears no probe answer until the wipe: it is
	// still asking when the second replica loses its state.
	c.drop = func(e envelope) bool {
		f := &strandpb.RaftFrame{}
		return e.to == NodeID(removed) && proto.Unmarshal(e.frame, f) == nil && len(f.GetRejoinAnswers()) > 0
	}
	if resp, _ := c.handle(1, moveReq(10, tp, current...)); resp.GetMovePartitions().GetMoves()[0].GetError() != nil {
		t.Fatalf("move back: %v", resp)
	}
	c.waitMoved(tp, current)
	lead := c.leader(tp)
	var wiped NodeID
	for _, id := range current {
		if NodeID(id) != lead && id != removed {
			wiped = NodeID(id)
		}
	}
	if wiped == 0 {
		t.Fatalf("precondition: the moved-back node %d leads; pick another seed", removed)
	}
	c.wipe(wiped)
	c.crash(lead)
	c.start(lead)
	c.drop = nil
	for i := 0; i < 1000 && (len(c.cores[wiped].rejoining) > 0 || !c.hasLeader(tp)); i++ {
		c.tick(1)
	}
	if !c.hasLeader(tp) {
		t.Fatalf("%v has no leader after the restart: moved-back node %d and wiped node %d wait for each other", tp, removed, wiped)
	}
	if n := len(c.cores[wiped].rejoining); n > 0 {
		t.Fatalf("wiped node %d still recovering %d replicas", wiped, n)
	}
}

// A learner's catch-up goes through the catch-up throttle
// (Config.CatchUpBytesPerSec), as any lagging follower's: the appends of
// committed entries to it are held to the rate, and the move still ends.
func TestMoveLearnerIsThrottled(t *testing.T) {
	c := newMetaCluster(t, 61, 4, func(cfg *Config) { cfg.CatchUpBytesPerSec = 1 << 20 })
	c.createTopic(c.metaLeaderOf(), "m", 1, 3)
	tp := TopicPartition{Topic: "m", Partition: 0}
	lead := c.leader(tp)
	for i := range 40 { // 2.5 MiB: more than one append of 1 MiB
		records := []recordbatch.Record{{TimestampMs: 1000, Value: bytes.Repeat([]byte{'v'}, 64<<10)}}
		batch, err := recordbatch.Encode(nil, records)
		if err != nil {
			t.Fatal(err)
		}
		if res := c.produce(c.leader(tp), ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: batch}); res.Err != nil {
			t.Fatalf("produce %d: %v", i, res.Err)
		}
	}
	current, _ := c.cores[lead].meta.meta.Assignment("m", 0)
	var spare uint64
	for id := uint64(1); id <= 4; id++ {
		if !slices.Contains(current, id) {
			spare = id
		}
	}
	target := append([]uint64{spare}, current[1:]...)
	if resp, _ := c.handle(1, moveReq(9, tp, target...)); resp.GetMovePartitions().GetMoves()[0].GetError() != nil {
		t.Fatalf("move: %v", resp)
	}
	c.waitMoved(tp, target)
	var throttled, sent uint64
	for _, id := range c.ids {
		throttled += c.cores[id].Stats().CatchUpThrottled
		sent += c.cores[id].Stats().CatchUpBytes
	}
	if throttled == 0 || sent < 2<<20 {
		t.Fatalf("catch-up bytes %d, throttled appends %d: the learner's catch-up was not throttled", sent, throttled)
	}
}

// A node a move made a voter of a compacted partition, whose disk is then
// wiped, rebuilds from the leader's snapshot although the snapshot predates
// its joining (seed 19 of TestSimMoves stormed: raft refused the snapshot,
// which named only the old voters, and the leader resent it forever).
func TestMovedInVoterRebuildsFromSnapshot(t *testing.T) {
	c, tp, current, spare := compactedMoveFixture(t, 67)
	target := append([]uint64{spare}, current[1:]...)
	if resp, _ := c.handle(1, moveReq(9, tp, target...)); resp.GetMovePartitions().GetMoves()[0].GetError() != nil {
		t.Fatalf("move: %v", resp)
	}
	c.waitMoved(tp, target)
	id := NodeID(spare)
	c.crash(id)
	c.disks[id] = memdisk.New()
	c.start(id)
	c.fillPartition(tp, 5)
	for range 300 {
		lead := c.leader(tp)
		if st := statusOf(c.cores[id], tp); st.AppliedIndex > 0 && st.AppliedIndex == statusOf(c.cores[lead], tp).AppliedIndex {
			return
		}
		c.tick(1)
	}
	t.Fatalf("wiped node %d did not catch up: %+v", id, statusOf(c.cores[id], tp))
}

// A move whose new node cannot be reached is cancelled (redirected to the
// current replicas): the learner is removed, the cancel completes, and the
// node holds nothing.
func TestCancelMove(t *testing.T) {
	c, tp, current, spare := moveFixture(t, 71)
	c.drop = func(e envelope) bool { return e.to == NodeID(spare) || e.from == NodeID(spare) }
	target := append([]uint64{spare}, current[1:]...)
	if resp, _ := c.handle(1, moveReq(9, tp, target...)); resp.GetMovePartitions().GetMoves()[0].GetError() != nil {
		t.Fatalf("move: %v", resp)
	}
	c.tick(20) // the learner is added and never catches up
	steps := uint64(0)
	for _, id := range c.ids {
		steps += c.cores[id].Stats().MoveSteps
	}
	if steps == 0 {
		t.Fatal("no learner added before the cancel")
	}
	cancel := moveReq(10, tp, current...)
	cancel.GetMovePartitions().GetMoves()[0].Redirect = true
	if resp, _ := c.handle(1, cancel); resp.GetMovePartitions().GetMoves()[0].GetError() != nil {
		t.Fatalf("cancel: %v", resp)
	}
	c.drop = nil
	c.waitMoved(tp, current)
	checkMovedGroup(t, c, tp, current, 15)
}

// A leader acting on stale metadata adds a learner for a move since
// cancelled and completed; once its metadata shows no move in progress it
// removes that learner, so the partition ends as a cancel leaves it:
// voters = replicas, no learners (simulator seed 52 on issue 21's producer
// branch: node 1 restarted, replayed its metadata log up to before the
// cancel, won the lead of sim/5 and added node 3 as a learner, which
// stayed for good).
func TestStaleMoveLearnerRemoved(t *testing.T) {
	c, tp, current, spare := moveFixture(t, 71)
	lead := c.leader(tp)
	g := c.cores[lead].byTP[tp]
	stale := append([]uint64{spare}, current[1:]...)
	var cur, tgt []NodeID
	for _, id := range current {
		cur = append(cur, NodeID(id))
	}
	for _, id := range stale {
		tgt = append(tgt, NodeID(id))
	}
	g.setPlacement(PartitionSpec{TopicPartition: tp, Replicas: cur, Target: tgt}) // the stale metadata's placement
	c.cores[lead].stepMove(g)
	for i := 0; i < 100 && !slices.Contains(g.confState.GetLearners(), spare); i++ {
		c.tick(1)
	}
	if !slices.Contains(g.confState.GetLearners(), spare) {
		t.Fatalf("the stale step added no learner: %v", g.confState)
	}
	g.setPlacement(PartitionSpec{TopicPartition: tp, Replicas: cur}) // the metadata caught up: no move
	for i := 0; i < 500 && len(g.confState.GetLearners()) > 0; i++ {
		c.tick(1)
	}
	checkMovedGroup(t, c, tp, current, 15)
}

// hasLeader reports whether a live node leads tp.
func (c *cluster) hasLeader(tp TopicPartition) bool {
	for _, id := range c.ids {
		if core := c.cores[id]; core != nil && statusOf(core, tp).IsLeader {
			return true
		}
	}
	return false
}

// A node of the bootstrap set moved back does not vote before its
// applied configuration stops naming it a voter: its fresh log starts with
// the bootstrap configuration, which does, and two such nodes moved back
// together elected each other on that log and wrote over committed
// entries (the moves simulator's seed 16 on issue 21's branch). Right
// after it hosts the replica again it is catching up (no votes); once the
// move back completed it votes above its floor.
func TestMovedBackBootstrapNodeWaitsToLeaveBootstrap(t *testing.T) {
	c, tp, current, spare := moveFixture(t, 71)
	removed := NodeID(current[0])
	target := append([]uint64{spare}, current[1:]...)
	if resp, _ := c.handle(1, moveReq(9, tp, target...)); resp.GetMovePartitions().GetMoves()[0].GetError() != nil {
		t.Fatalf("move: %v", resp)
	}
	c.waitMoved(tp, target)
	if resp, _ := c.handle(1, moveReq(10, tp, current...)); resp.GetMovePartitions().GetMoves()[0].GetError() != nil {
		t.Fatalf("move back: %v", resp)
	}
	for i := 0; i < 1000 && c.cores[removed].byTP[tp] == nil; i++ {
		c.tick(1)
	}
	g := c.cores[removed].byTP[tp]
	if g == nil {
		t.Fatalf("node %d never re-hosted %v", removed, tp)
	}
	if g.rejoin == nil || g.rejoin.phase == rejoinDone || !namesVoter(g.confState, removed) {
		t.Fatalf("bootstrap node %d moved back: rejoin %+v, configuration %v; want not done while its bootstrap configuration names it a voter",
			removed, g.rejoin, g.confState)
	}
	c.waitMoved(tp, current)
	for i := 0; i < 1000 && g.rejoin.phase != rejoinDone; i++ {
		c.tick(1)
	}
	if g.rejoin.phase != rejoinDone || g.rejoin.floor == 0 {
		t.Fatalf("node %d after the move back completed: rejoin %+v, want done with its floor", removed, g.rejoin)
	}
}

// A leader reports a move completed (which lets the leavers delete their
// replicas) only once it knows durably that the configuration without them
// committed. A commit-only hard state is written without a sync, so a
// leader that reported at once and then lost power came back at a commit
// index short of the leave: in the joint configuration again, needing the
// votes of replicas already deleted (simulator seed 59: one new replica
// then wiped, and the partition never elected again).
func TestMoveCompletedOnlyOnceLeaveIsDurable(t *testing.T) {
	c, _, _, lead, g, leave := moveOneReplicaKeepingLeader(t)
	_ = c.cores[lead].Close() // a power loss: nothing unsynced survives
	c.cores[lead] = nil
	c.disks[lead].Crash(nil)
	l, err := raftlog.Open(c.disks[lead], g.dir+"/log", raftlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if hs, _, err := l.InitialState(); err != nil || hs.GetCommit() < leave {
		t.Fatalf("the leader reported the move completed, then lost power: durable commit %d, the leave at %d (%v); it would restart in the joint configuration",
			hs.GetCommit(), leave, err)
	}
}

// A leader reports a move completed only once a majority of the target
// knows durably that the configuration without the leavers committed,
// not only itself: a follower that acknowledged the leave but never heard
// it committed restarts in the joint configuration, needing the deleted
// leavers' votes, so with the leader lost for good the survivors never
// elect (simulator seed 22 of the standard sample). The leader commits an
// empty entry after the leave first; every follower that acknowledged it
// persisted a commit index past the leave with it. Without that entry
// only the leader's log had the leave's commit durable (1 of 3).
func TestMoveCompletedOnlyOnceMajorityKnowsLeave(t *testing.T) {
	if *walFlag {
		// The check reads each replica's own log as a power loss leaves
		// it; with the node-wide WAL the hard state is recovered by
		// replaying the WAL at Open, which this test does not do. The fix
		// (an empty entry committed past the leave before the report) is
		// the same in both modes.
		t.Skip("reads the replicas' logs directly; with the write-ahead log the hard state is the WAL's")
	}
	c, tp, target, _, _, leave := moveOneReplicaKeepingLeader(t)
	var knows []uint64 // target members whose log a power loss now restarts past the leave
	for _, id := range target {
		core := c.cores[NodeID(id)]
		l, err := raftlog.Open(c.disks[NodeID(id)].ProjectCrash(""), core.byTP[tp].dir+"/log", raftlog.Options{})
		if err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
		hs, _, err := l.InitialState()
		_ = l.Close()
		if err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
		if hs.GetCommit() >= leave {
			knows = append(knows, id)
		}
	}
	if len(knows) < len(target)/2+1 {
		t.Fatalf("the move was reported completed while only nodes %v of the target %v would restart past the leave at %d: the others would restart in the joint configuration",
			knows, target, leave)
	}
}

// moveOneReplicaKeepingLeader moves a partition of moveFixture's cluster
// from its replicas to the leader, one other current replica and the
// spare, waits until the move is reported done, and returns the cluster,
// partition, target, leader, the leader's group and the raft index of the
// move's last configuration change (the joint configuration's leave).
func moveOneReplicaKeepingLeader(t *testing.T) (*cluster, TopicPartition, []uint64, NodeID, *group, uint64) {
	t.Helper()
	c, tp, current, spare := moveFixture(t, 41)
	lead := c.leader(tp)
	target := []uint64{uint64(lead)}
	for _, id := range current {
		if len(target) < 2 && id != uint64(lead) {
			target = append(target, id)
		}
	}
	target = append(target, spare)
	resp, _ := c.handle(lead, moveReq(9, tp, target...))
	if m := resp.GetMovePartitions().GetMoves(); len(m) != 1 || m[0].GetError() != nil {
		t.Fatalf("move answered %v", resp)
	}
	c.waitMoved(tp, target)
	g := c.cores[lead].byTP[tp]
	first, _ := g.log.FirstIndex()
	last, _ := g.log.LastIndex()
	ents, err := g.log.Entries(first, last+1, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	var leave uint64 // the last configuration change: the joint one's leave
	for _, e := range ents {
		if e.GetType() == raftpb.EntryConfChangeV2 {
			leave = e.GetIndex()
		}
	}
	if leave == 0 {
		t.Fatal("no configuration change in the leader's log")
	}
	return c, tp, target, lead, g, leave
}

// renameCutDisk is cutDisk with Rename counted among the operations its
// power cut stops.
type renameCutDisk struct{ *cutDisk }

func (d renameCutDisk) Rename(from, to string) error {
	if err := d.op(); err != nil {
		return err
	}
	return d.Disk.Rename(from, to)
}

// TestTombstoneWrittenAtomically stops markDeleted after each of its disk
// operations in turn and looks at what a process kill (the page cache
// kept) and a power loss (only what was synced) leave: no tombstone, or
// the whole one, never a torn one. Written in place (created, then
// written) a kill after the creation left an empty tombstone, which
// deletedBefore has to read as torn (TestMoveBackOverTornTombstone: the
// replica is then rebuilt by probing its peers, its vote floor lost).
func TestTombstoneWrittenAtomically(t *testing.T) {
	const dir = "p/m@9/0"
	want := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 7), 3)
	for budget := 0; ; budget++ {
		if budget > 20 {
			t.Fatal("markDeleted never completed within 20 operations")
		}
		mem := memdisk.New()
		if err := writeFile(mem, dir+"/log/00000001.seg", []byte("entries")); err != nil {
			t.Fatal(err)
		}
		if err := mem.SyncDir(dir + "/log"); err != nil {
			t.Fatal(err)
		}
		err := markDeleted(Config{Disk: renameCutDisk{&cutDisk{Disk: mem, budget: budget}}}, dir, 7, 3)
		for _, view := range []struct {
			name string
			disk *memdisk.Disk
		}{{"process kill", mem}, {"power loss", mem.ProjectCrash(dir)}} {
			if !deletedHere(Config{Disk: view.disk}, dir) {
				if err == nil {
					t.Fatalf("after %d operations, markDeleted done: %s leaves no tombstone", budget, view.name)
				}
				continue
			}
			got, ok := view.disk.ReadFile(dir + "/" + deletedName)
			if !ok || !bytes.Equal(got, want) {
				t.Errorf("cut after %d operations (markDeleted: %v): %s leaves tombstone %x, want %x or none", budget, err, view.name, got, want)
			}
		}
		if err == nil {
			return
		}
	}
}
