//go:build simbugs

package node

import "testing"

// WALAckBeforeFsync: acks=1 is answered once the record is written to the
// write-ahead log, before its fsync; a power loss then loses the
// acknowledged batch (TestWALPowerLossKeepsAcknowledged: kept without it).
func TestBugWALAckBeforeFsyncLosesAcknowledgedWrite(t *testing.T) {
	c := walSingleNode(t, 2, true, func(cfg *Config) { cfg.Bugs.WALAckBeforeFsync = true })
	core := c.cores[1]
	answers, jobs := produceEach(t, core, 2, "lost")
	if len(jobs) != 1 {
		t.Fatalf("%d sync jobs", len(jobs))
	}
	for p, a := range answers {
		if a == nil || a.Err != nil {
			t.Fatalf("partition %d not answered before the fsync with the bug: %+v", p, a)
		}
	}
	_ = core.Close()
	c.cores[1] = nil
	c.disks[1].Crash(nil)
	c.start(1)
	tp := TopicPartition{Topic: "orders", Partition: 0}
	c.leader(tp)
	if batches, _ := c.fetchAll(1, tp); holdsTag(t, batches, "lost-0") {
		t.Fatal("the batch acknowledged before the fsync survived a power loss that kept nothing unsynced")
	}
}
