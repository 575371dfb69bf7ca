package node

import (
	"errors"
	"testing"
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
	if !c.cores[lead].DiskFull() {
		t.Fatal("leader not reporting a full disk")
	}
	_, hwm := c.fetchAll(lead, tp)
	if hwm < want {
		t.Fatalf("reads on the full disk: high-water mark %d, want at least %d", hwm, want)
	}
	for _, id := range c.ids {
		c.disks[id].SetCapacity(0)
	}
	c.tick(2 * spaceCheckTicks)
	var res ProduceResult
	for i := 0; i < 20; i++ {
		res = c.produce(c.leader(tp), ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "back", 2)})
		if res.Err == nil {
			break
		}
		c.tick(spaceCheckTicks)
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
	c.tick(2 * spaceCheckTicks)
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
	c.tick(2 * spaceCheckTicks)
	if res := c.produce(c.leader(tp), ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "y", 2)}); res.Err != nil {
		t.Fatalf("produce once space returned: %v", res.Err)
	}
}
