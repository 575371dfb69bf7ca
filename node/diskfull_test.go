package node

import (
	"errors"
	"fmt"
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

// A node whose disk fills up refuses produce with ErrNotEnoughSpace (no
// crash, nothing acknowledged lost), keeps serving reads, and takes writes
// again once space returns. The capacity is set on every node, so a write
// hits ENOSPC whichever replica writes first. Before, the failed raft log
// write stopped the node.
func TestFullDiskRefusesProduceThenRecovers(t *testing.T) {
	c := newMetaCluster(t, 31, 3, nil)
	c.createTopic(c.metaLeaderOf(), "t", 1, 3)
	tp := TopicPartition{Topic: "t", Partition: 0}
	want := c.produceN(tp, 10)
	for _, id := range c.ids {
		d := c.disks[id]
		d.SetCapacity(d.UsedBytes() + 16<<10)
	}
	var refused error
	for i := 0; i < 40 && refused == nil; i++ {
		lead := c.leader(tp)
		res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "full", 400)})
		switch {
		case res.Err == nil:
			want += 400
		case errors.Is(res.Err, ErrNotEnoughSpace):
			refused = res.Err
		case errors.Is(res.Err, ErrTimeout):
			// maybe written: the write that hit the full disk
		default:
			t.Fatalf("produce: %v", res.Err)
		}
	}
	if refused == nil {
		t.Fatal("no produce refused with ErrNotEnoughSpace on full disks")
	}
	lead := c.leader(tp)
	if !c.cores[lead].diskFull() {
		t.Fatal("leader not reporting a full disk")
	}
	_, hwm := c.fetchAll(lead, tp)
	if hwm < want {
		t.Fatalf("reads on the full disk: high-water mark %d, want at least %d", hwm, want)
	}
	for _, id := range c.ids {
		c.disks[id].SetCapacity(0)
	}
	c.tick(2 * SpaceCheckTicks)
	var res ProduceResult
	for i := 0; i < 20; i++ {
		res = c.produce(c.leader(tp), ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "back", 2)})
		if res.Err == nil {
			break
		}
		c.tick(SpaceCheckTicks)
	}
	if res.Err != nil {
		t.Fatalf("produce after space returned: %v", res.Err)
	}
}

// The free-space floor is checked through the Disk: below it the node
// refuses produce before writing anything.
func TestFreeSpaceFloorRefusesProduce(t *testing.T) {
	c := newMetaCluster(t, 32, 3, func(cfg *Config) { cfg.MinFreeBytes = 1 << 20 })
	c.createTopic(c.metaLeaderOf(), "t", 1, 3)
	tp := TopicPartition{Topic: "t", Partition: 0}
	want := c.produceN(tp, 3)
	for _, id := range c.ids {
		d := c.disks[id]
		d.SetCapacity(d.UsedBytes() + 512<<10) // free 512 KiB: below the floor
	}
	c.tick(2 * SpaceCheckTicks)
	lead := c.leader(tp)
	used := c.disks[lead].UsedBytes()
	res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "x", 2)})
	if !errors.Is(res.Err, ErrNotEnoughSpace) {
		t.Fatalf("produce below the floor: %v, want ErrNotEnoughSpace", res.Err)
	}
	if _, hwm := c.fetchAll(lead, tp); hwm != want {
		t.Fatalf("high-water mark %d, want %d", hwm, want)
	}
	if got := c.disks[lead].UsedBytes(); got > used+4096 {
		t.Fatalf("the refused produce wrote %d bytes", got-used)
	}
	for _, id := range c.ids {
		c.disks[id].SetCapacity(0)
	}
	c.tick(2 * SpaceCheckTicks)
	if res := c.produce(c.leader(tp), ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "y", 2)}); res.Err != nil {
		t.Fatalf("produce once space returned: %v", res.Err)
	}
}

// A leader whose disk turns full hands its partitions' leaderships to
// replicas with space and does not take them back while full, so writes
// go on; once its space returns it accepts a leadership again (issue 19
// item 3). Before, it kept leading and every produce was refused with
// NOT_ENOUGH_SPACE although both other replicas had space.
func TestFullLeaderHandsOffLeadership(t *testing.T) {
	c := newMetaCluster(t, 33, 3, func(cfg *Config) { cfg.MinFreeBytes = 1 << 20 })
	c.createTopic(c.metaLeaderOf(), "t", 1, 3)
	tp := TopicPartition{Topic: "t", Partition: 0}
	want := c.produceN(tp, 5)
	full := c.leader(tp)
	d := c.disks[full]
	d.SetCapacity(d.UsedBytes() + 512<<10) // below the floor, only there
	c.tick(3 * SpaceCheckTicks)
	if !c.cores[full].diskFull() {
		t.Fatal("node below its floor not full")
	}
	lead := c.leader(tp)
	if lead == full {
		t.Fatalf("node %d still leads %v on a full disk", full, tp)
	}
	if c.cores[full].Stats().SpaceHandOffs == 0 {
		t.Fatal("no hand-off counted")
	}
	// While full it takes no leadership back, though its log is caught up
	// (nothing written since): not by a transfer, nor by campaigning.
	c.transferLeader(tp, lead, full)
	for i := range 100 {
		if _, _, leading := c.cores[full].byTP[tp].leadership(); leading {
			t.Fatalf("full node %d took the leadership back (tick %d)", full, i)
		}
		c.tick(1)
	}
	lead = c.leader(tp)
	if res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "moved", 2)}); res.Err != nil {
		t.Fatalf("produce on the new leader %d: %v", lead, res.Err)
	}
	want += 2
	if _, hwm := c.fetchAll(c.leader(tp), tp); hwm != want {
		t.Fatalf("high-water mark %d, want %d", hwm, want)
	}
	d.SetCapacity(0)
	c.tick(3 * SpaceCheckTicks)
	if c.cores[full].diskFull() {
		t.Fatal("still full once space returned")
	}
	for i := 0; i < 10 && c.leader(tp) != full; i++ {
		lead = c.leader(tp)
		c.transferLeader(tp, lead, full)
		c.tick(20)
	}
	if got := c.leader(tp); got != full {
		t.Fatalf("node %d with space again does not accept the leadership (leader %d)", full, got)
	}
}

// transferLeader asks the leader lead of tp to hand its leadership to to.
func (c *cluster) transferLeader(tp TopicPartition, lead, to NodeID) {
	g := c.cores[lead].byTP[tp]
	c.cores[lead].touch(g)
	g.raw.TransferLeader(uint64(to))
	c.settle()
}

// A metadata-group write that fails on a full disk does not stop the node,
// and a node restarted on a full disk comes up (issue 19 item 4): its
// metadata replica stops appending and steps down, the others go on, it
// keeps answering from what it applied, and it catches up once space
// returns. Before, the failed write made Process fail (the node exited),
// and Open failed again on the boot count's write.
func TestMetaWriteOnFullDiskKeepsNode(t *testing.T) {
	c := newMetaCluster(t, 34, 3, nil)
	full := c.metaLeaderOf()
	other := c.ids[0]
	if other == full {
		other = c.ids[1]
	}
	d := c.disks[full]
	d.SetCapacity(d.UsedBytes() + 1) // every write fails there
	c.createTopic(other, "t", 1, 3)  // settles: a Process error fails the test
	c.tick(50)
	if !c.cores[full].diskFull() {
		t.Fatal("a failed metadata write did not turn the node full")
	}
	if st, _ := c.cores[full].MetadataStatus(); st.IsLeader {
		t.Fatal("the full node still leads the metadata group")
	}
	if resp, _ := c.handle(full, &strandpb.Request{CorrelationId: 5, Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}}); resp.GetMetadata() == nil {
		t.Fatalf("full node does not answer metadata: %v", resp)
	}

	d.SetCapacity(0)
	c.tick(100)
	if _, topics := c.cores[full].MetadataNodes(); len(topics) != 1 || topics[0].Name != "t" {
		t.Fatalf("node %d with space again did not catch up the metadata: %v", full, topics)
	}
	c.createTopic(other, "u", 1, 3)
	if *walFlag {
		// Known gap: Open replays the write-ahead log into the logs,
		// which needs space (node doc.go, full disks).
		t.Log("WAL mode: restart on a full disk not checked")
		return
	}

	c.crash(full)
	d.SetCapacity(d.UsedBytes() + 1)
	c.start(full) // fails the test when Open fails
	c.tick(100)
	if _, topics := c.cores[full].MetadataNodes(); len(topics) != 2 {
		t.Fatalf("restarted on a full disk: %d topics replayed, want 2", len(topics))
	}
	// With no byte free it cannot even record a new term: it answers
	// from what it applied while the others lead and take writes.
	tp := TopicPartition{Topic: "t", Partition: 0}
	lead := NodeID(0)
	for i := 0; i < 200 && lead == 0; i++ {
		if g := c.cores[other].byTP[tp]; g != nil {
			if l, _, _ := g.leadership(); l != full {
				lead = l
			}
		}
		c.tick(1)
	}
	if lead == 0 {
		t.Fatalf("no leader of %v besides the full node", tp)
	}
	for i := range 3 {
		if res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, fmt.Sprint(i), 1)}); res.Err != nil {
			t.Fatalf("produce while node %d is full: %v", full, res.Err)
		}
	}
	if resp, _ := c.handle(full, &strandpb.Request{CorrelationId: 6, Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}}); len(resp.GetMetadata().GetTopics()) != 2 {
		t.Fatalf("full restarted node's metadata answer: %v", resp)
	}
	d.SetCapacity(0)
	c.tick(100)
	if _, hwm := c.fetchAll(c.leader(tp), tp); hwm != 3 {
		t.Fatalf("high-water mark %d, want 3", hwm)
	}
	if _, topics := c.cores[full].MetadataNodes(); len(topics) != 2 {
		t.Fatalf("restarted node has %d topics once space returned, want 2", len(topics))
	}
}

// A full node that alone holds a partition's newest entry leads it when no
// other replica can: with the third replica down and the replica with
// space behind (it lacks an entry only the full node appended), raft's
// vote rule lets only the full node win, so holding off for the replica
// with space left the partition without a leader until space returned
// (the simulator, its full-disk episode restarting the full leader). It
// waits a bounded time for another leader, then campaigns, and hands the
// leadership on to the replica with space once that one caught up.
func TestFullNodeWithNewestLogLeadsWhenNoOtherCan(t *testing.T) {
	c, tp, want, full, behind, down := floorCluster(t)
	c.crash(down)
	c.drop = func(e envelope) bool { return e.from == full && e.to == behind }
	if res := c.produce(full, ProduceRequest{TopicPartition: tp, Acks: AcksLeader, ProducerID: -1, Batch: testBatch(t, "newest", 1)}); res.Err != nil {
		t.Fatalf("produce acks=1 on leader %d: %v", full, res.Err)
	}
	want++
	c.crash(full)
	c.drop = nil
	d := c.disks[full]
	d.SetCapacity(d.UsedBytes() + 512<<10) // below the floor
	c.start(full)
	c.tick(3 * SpaceCheckTicks)
	if !c.cores[full].diskFull() {
		t.Fatal("node below its floor not full")
	}
	led := false // the full node took the leadership at some tick
	for range 600 {
		c.tick(1)
		if _, _, leading := c.cores[full].byTP[tp].leadership(); leading {
			led = true
		}
		if g := c.cores[behind].byTP[tp]; g != nil {
			if _, _, leading := g.leadership(); leading && led {
				break
			}
		}
	}
	if !led {
		t.Fatalf("the full node %d, alone holding the newest entry, never led %v: no replica could", full, tp)
	}
	if lead := c.leader(tp); lead != behind {
		t.Fatalf("leader %d; want node %d, with space, once it caught up", lead, behind)
	}
	if _, hwm := c.fetchAll(behind, tp); hwm != want {
		t.Fatalf("high-water mark %d, want %d (the entry only the full node held)", hwm, want)
	}
}

// A follower on a full disk does not keep its dead leader's lease: when
// the leader's node goes, the third replica must win its vote. Not
// ticking while it held off, it counted the lease as running forever and
// refused every pre-vote, so the partition had no leader though a
// replica with space could lead (the simulator's seed 19 with the
// full-disk restart). It ticks again once no leader was heard from for
// an election timeout past its hold-off.
func TestFullFollowerLetsOthersElect(t *testing.T) {
	c, tp, want, lead, full, other := floorCluster(t)
	d := c.disks[full]
	d.SetCapacity(d.UsedBytes() + 512<<10) // below the floor
	c.tick(3 * SpaceCheckTicks)
	if !c.cores[full].diskFull() {
		t.Fatal("node below its floor not full")
	}
	c.crash(lead)
	for range 600 {
		c.tick(1)
		if g := c.cores[other].byTP[tp]; g != nil {
			if _, _, leading := g.leadership(); leading {
				break
			}
		}
	}
	if got := c.leader(tp); got != other {
		t.Fatalf("leader %d; want node %d, the only replica with space left", got, other)
	}
	if _, hwm := c.fetchAll(other, tp); hwm != want {
		t.Fatalf("high-water mark %d, want %d", hwm, want)
	}
}

// floorCluster is three nodes with a 1 MiB free-space floor and topic t
// of one partition on all three, five records produced; it returns the
// partition, its high-water mark, its leader and the two followers.
func floorCluster(t *testing.T) (c *cluster, tp TopicPartition, hwm int64, lead, a, b NodeID) {
	t.Helper()
	c = newMetaCluster(t, 33, 3, func(cfg *Config) { cfg.MinFreeBytes = 1 << 20 })
	c.createTopic(c.metaLeaderOf(), "t", 1, 3)
	tp = TopicPartition{Topic: "t", Partition: 0}
	hwm = c.produceN(tp, 5)
	lead = c.leader(tp)
	a, b = c.othersThan(lead)
	return c, tp, hwm, lead, a, b
}
