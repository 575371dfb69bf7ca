package node

import (
	"testing"

	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/proto/strandpb"
)

func txnOffsetCommitReq(id string, p txn.Producer, member string, epoch int32, offset int64) *strandpb.Request {
	return &strandpb.Request{CorrelationId: 6, Body: &strandpb.Request_TxnOffsetCommit{TxnOffsetCommit: &strandpb.TxnOffsetCommitRequest{
		TransactionalId: id, Producer: wireProducer(p), Commit: &strandpb.OffsetCommitRequest{Group: "g", MemberId: member, MemberEpoch: epoch,
			Offsets: []*strandpb.OffsetCommitPartition{{Topic: "t", Partition: 0, Offset: offset}}}}}}
}

// fetchGroupOffset is g's committed offset of t/0 (-1: none) and whether
// an OffsetFetch with require_stable names t/0 unstable.
func (c *cluster) fetchGroupOffset() (int64, bool) {
	c.t.Helper()
	r := c.groupCall("g", &strandpb.Request{CorrelationId: 7, Body: &strandpb.Request_OffsetFetch{OffsetFetch: &strandpb.OffsetFetchRequest{
		Group: "g", RequireStable: true}}})
	if r.GetError() != nil {
		c.t.Fatalf("offset fetch: %v", r.GetError())
	}
	off := int64(-1)
	for _, o := range r.GetOffsetFetch().GetOffsets() {
		if o.GetTopic() == "t" && o.GetPartition() == 0 {
			off = o.GetOffset()
		}
	}
	return off, countPartitions(r.GetOffsetFetch().GetUnstable()) > 0
}

// txnOffsetsCluster is a 3-node cluster with the real marker writer, the
// group's coordinator on another node than the transactional id's (so
// verification and group markers travel node to node), and app's
// producer.
func txnOffsetsCluster(t *testing.T, seed uint64) (*cluster, txn.Producer, NodeID) {
	c := newCluster(t, seed, 3, replicated(3, "t", 2), txnTestConfig(PartitionMarkers{}))
	p := c.initTxn("app")
	coord := c.findTxnCoordinator("app")
	c.findCoordinator("g") // creates the offsets topic
	other := c.ids[0]
	if other == coord {
		other = c.ids[1]
	}
	c.placeLeader(TopicPartition{OffsetsTopic, 0}, other)
	return c, p, other
}

// endAndWait ends app's transaction and waits for its completion; it
// returns the next transaction's producer.
func (c *cluster) endAndWait(p txn.Producer, commit bool) txn.Producer {
	c.t.Helper()
	r := c.txnCall("app", endTxnReq("app", p, commit))
	if r.GetError() != nil {
		c.t.Fatalf("end: %v", r.GetError())
	}
	want := "CompleteAbort"
	if commit {
		want = "CompleteCommit"
	}
	c.waitTxnState("app", want)
	return txn.Producer{ID: r.GetEndTxn().GetProducerId(), Epoch: int16(r.GetEndTxn().GetProducerEpoch())}
}

// TestTxnOffsetsVisibleWithTheCommit shows KIP-447's offsets in a
// transaction end to end: a TxnOffsetCommit needs the group added to the
// open transaction (verified with the transaction coordinator on another
// node); its offset is invisible (and unstable for require_stable) until
// EndTxn(commit)'s group marker, then committed; an aborted one never
// shows; a fenced producer epoch is refused. Checked to fail: with the
// group marker completing at once (as before), the committed offset never
// appears; with the verification skipped, the commit outside AddOffsets is
// taken.
func TestTxnOffsetsVisibleWithTheCommit(t *testing.T) {
	c, p, _ := txnOffsetsCluster(t, 51)
	wantCode(t, "commit before AddOffsets", c.groupCall("g", txnOffsetCommitReq("app", p, "", -1, 42)), strandpb.ErrorCode_ERROR_CODE_INVALID_TXN_STATE)
	if r := c.txnCall("app", addOffsetsReq("app", p, "g")); r.GetError() != nil {
		t.Fatalf("add offsets: %v", r.GetError())
	}
	if r := c.groupCall("g", txnOffsetCommitReq("app", p, "", -1, 42)); r.GetError() != nil {
		t.Fatalf("txn offset commit: %v", r.GetError())
	}
	if off, unstable := c.fetchGroupOffset(); off != -1 || !unstable {
		t.Fatalf("before EndTxn: offset %d unstable %v, want none and unstable", off, unstable)
	}
	next := c.endAndWait(p, true)
	if off, unstable := c.fetchGroupOffset(); off != 42 || unstable {
		t.Fatalf("after the commit: offset %d unstable %v, want 42 and stable", off, unstable)
	}
	wantCode(t, "commit of the ended transaction's epoch", c.groupCall("g", txnOffsetCommitReq("app", p, "", -1, 43)),
		strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED)
	if r := c.txnCall("app", addOffsetsReq("app", next, "g")); r.GetError() != nil {
		t.Fatalf("add offsets: %v", r.GetError())
	}
	if r := c.groupCall("g", txnOffsetCommitReq("app", next, "", -1, 50)); r.GetError() != nil {
		t.Fatalf("txn offset commit: %v", r.GetError())
	}
	c.endAndWait(next, false)
	if off, unstable := c.fetchGroupOffset(); off != 42 || unstable {
		t.Fatalf("after the abort: offset %d unstable %v, want 42 and stable", off, unstable)
	}
}

// TestTxnOffsetsFenceStaleGeneration shows KIP-447's group fencing: a
// member's transactional commit at an older epoch, of an unknown member,
// or under another member's instance id is refused like an OffsetCommit.
func TestTxnOffsetsFenceStaleGeneration(t *testing.T) {
	c, p, _ := txnOffsetsCluster(t, 52)
	hb := c.groupCall("g", heartbeatReq("a", 0, 1, nil)).GetGroupHeartbeat()
	hb = c.groupCall("g", heartbeatReq("a", hb.GetMemberEpoch(), 2, hb.GetAssigned())).GetGroupHeartbeat()
	if r := c.txnCall("app", addOffsetsReq("app", p, "g")); r.GetError() != nil {
		t.Fatalf("add offsets: %v", r.GetError())
	}
	wantCode(t, "stale generation", c.groupCall("g", txnOffsetCommitReq("app", p, "a", hb.GetMemberEpoch()-1, 5)),
		strandpb.ErrorCode_ERROR_CODE_STALE_MEMBER_EPOCH)
	wantCode(t, "unknown member", c.groupCall("g", txnOffsetCommitReq("app", p, "zz", 1, 5)), strandpb.ErrorCode_ERROR_CODE_UNKNOWN_MEMBER_ID)
	if r := c.groupCall("g", txnOffsetCommitReq("app", p, "a", hb.GetMemberEpoch(), 5)); r.GetError() != nil {
		t.Fatalf("current member: %v", r.GetError())
	}
	c.endAndWait(p, true)
	if off, _ := c.fetchGroupOffset(); off != 5 {
		t.Fatalf("committed %d, want 5", off)
	}
}

// TestTxnOffsetsSurviveCoordinatorCrash crashes the group coordinator's
// node between the TxnOffsetCommit and EndTxn: the pending offsets are in
// the group's log, the new coordinator rebuilds them, and the marker the
// transaction coordinator retries commits them there.
func TestTxnOffsetsSurviveCoordinatorCrash(t *testing.T) {
	c, p, groupNode := txnOffsetsCluster(t, 53)
	if r := c.txnCall("app", addOffsetsReq("app", p, "g")); r.GetError() != nil {
		t.Fatalf("add offsets: %v", r.GetError())
	}
	if r := c.groupCall("g", txnOffsetCommitReq("app", p, "", -1, 77)); r.GetError() != nil {
		t.Fatalf("txn offset commit: %v", r.GetError())
	}
	c.crash(groupNode)
	if off, unstable := c.fetchGroupOffset(); off != -1 || !unstable {
		t.Fatalf("on the new coordinator before EndTxn: offset %d unstable %v", off, unstable)
	}
	c.endAndWait(p, true)
	if off, unstable := c.fetchGroupOffset(); off != 77 || unstable {
		t.Fatalf("after the commit: offset %d unstable %v, want 77 and stable", off, unstable)
	}
}

// TestTxnOffsetsKeptEpochCommit runs a transactions v1 client (EndTxn
// keeping its epoch, Kafka's EndTxn v0-v4): its group marker carries the
// transaction's own epoch, which must commit the offsets pending at that
// epoch, and the next transaction at the same epoch commits again.
func TestTxnOffsetsKeptEpochCommit(t *testing.T) {
	c, p, _ := txnOffsetsCluster(t, 54)
	for i, offset := range []int64{10, 20} {
		if r := c.txnCall("app", addOffsetsReq("app", p, "g")); r.GetError() != nil {
			t.Fatalf("add offsets %d: %v", i, r.GetError())
		}
		if r := c.groupCall("g", txnOffsetCommitReq("app", p, "", -1, offset)); r.GetError() != nil {
			t.Fatalf("txn offset commit %d: %v", i, r.GetError())
		}
		end := endTxnReq("app", p, true)
		end.GetEndTxn().KeepEpoch = true
		if r := c.txnCall("app", end); r.GetError() != nil {
			t.Fatalf("end %d: %v", i, r.GetError())
		}
		c.waitTxnState("app", "CompleteCommit")
		if off, unstable := c.fetchGroupOffset(); off != offset || unstable {
			t.Fatalf("transaction %d: offset %d unstable %v, want %d and stable", i, off, unstable, offset)
		}
	}
}

// TestTxnOffsetsMarkerSurvivesCoordinatorCrash crashes the group
// coordinator's node right after EndTxn is answered, with the group
// marker in flight: the transaction coordinator asks again (the new group
// coordinator, or the same marker twice: idempotent) and the offset is
// committed exactly once.
func TestTxnOffsetsMarkerSurvivesCoordinatorCrash(t *testing.T) {
	c, p, groupNode := txnOffsetsCluster(t, 55)
	if r := c.txnCall("app", addOffsetsReq("app", p, "g")); r.GetError() != nil {
		t.Fatalf("add offsets: %v", r.GetError())
	}
	if r := c.groupCall("g", txnOffsetCommitReq("app", p, "", -1, 88)); r.GetError() != nil {
		t.Fatalf("txn offset commit: %v", r.GetError())
	}
	if r := c.txnCall("app", endTxnReq("app", p, true)); r.GetError() != nil {
		t.Fatalf("end: %v", r.GetError())
	}
	c.crash(groupNode)
	c.waitTxnState("app", "CompleteCommit")
	if off, unstable := c.fetchGroupOffset(); off != 88 || unstable {
		t.Fatalf("after the commit: offset %d unstable %v, want 88 and stable", off, unstable)
	}
}
