package node

import (
	"slices"
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/raftlog"
)

// TestRestartRemovesReplicaItNoLongerHosts: a node that stopped after the
// metadata entry deleting a topic was durable but before it removed its
// replica (here: the replica's files put back on its disk while it is
// down, as such a crash leaves them) comes back with a replayed state that
// never places the replica, so nothing used to remove the files; it now
// removes them once its metadata replay is done, and keeps the replica of
// a topic created after its last metadata checkpoint (a sweep at Open,
// before the replay, would have taken that one too).
func TestRestartRemovesReplicaItNoLongerHosts(t *testing.T) {
	c := newCluster(t, 3, 3, replicated(3, "gone", 1), nil)
	produceThree(c, TopicPartition{Topic: "gone"})
	gone := c.replicaDir(3, TopicPartition{Topic: "gone"})
	saved := saveFiles(t, c.disks[3], gone)
	resp, _ := c.handle(1, &strandpb.Request{CorrelationId: 9, Body: &strandpb.Request_DeleteTopics{DeleteTopics: &strandpb.DeleteTopicsRequest{Names: []string{"gone"}}}})
	if resp.GetError() != nil {
		t.Fatalf("delete: %v", resp)
	}
	c.tick(20)
	if logFiles(t, c.disks[3], gone) != 0 {
		t.Fatalf("node 3 kept %s after the delete", gone)
	}
	// Node 3's metadata checkpoint now follows the delete, so its replay
	// at restart never passes through a state that places gone here; the
	// topic kept comes after the checkpoint.
	if err := c.cores[3].checkpointNow(c.cores[3].meta.group); err != nil {
		t.Fatal(err)
	}
	c.createSpecs(replicated(3, "kept", 1))
	produceThree(c, TopicPartition{Topic: "kept"})
	kept := c.replicaDir(3, TopicPartition{Topic: "kept"})
	c.crash(3)
	restoreFiles(t, c.disks[3], gone, saved)
	c.start(3)
	c.tick(50)
	if n := logFiles(t, c.disks[3], gone); n != 0 {
		t.Fatalf("node 3 still holds %d log files of the deleted topic's replica %s after its restart", n, gone)
	}
	if !deletedHere(c.cores[3].cfg, gone) {
		t.Fatalf("no tombstone in %s", gone)
	}
	if logFiles(t, c.disks[3], kept) == 0 || !slices.Contains(c.hosted(3), TopicPartition{Topic: "kept"}) {
		t.Fatalf("node 3 lost its replica of kept (hosted %v)", c.hosted(3))
	}
	for _, st := range c.cores[3].Status() {
		if st.Topic == "kept" && st.HighWatermark != 3 {
			t.Fatalf("node 3's replica of kept after the restart: high watermark %d, want 3", st.HighWatermark)
		}
	}
}

// produceThree writes a batch of three records to tp, acks=all.
func produceThree(c *cluster, tp TopicPartition) {
	c.t.Helper()
	req := ProduceRequest{TopicPartition: tp, Batch: testBatch(c.t, tp.Topic, 3), Acks: AcksAll, ProducerID: -1}
	if r := c.produce(c.leader(tp), req); r.Err != nil {
		c.t.Fatalf("produce %v: %v", tp, r.Err)
	}
	c.tick(20)
}

// saveFiles reads every file of a replica directory's subdirectories.
func saveFiles(t *testing.T, disk raftlog.Disk, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, sub := range replicaSubdirs {
		names, err := disk.List(dir + sub)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			data, err := readFile(disk, dir+sub+"/"+n)
			if err != nil {
				t.Fatal(err)
			}
			out[dir+sub+"/"+n] = data
		}
	}
	if len(out) == 0 {
		t.Fatalf("no files in %s", dir)
	}
	return out
}

// restoreFiles writes files back durably, removing dir's tombstone.
func restoreFiles(t *testing.T, disk raftlog.Disk, dir string, files map[string][]byte) {
	t.Helper()
	if err := disk.Remove(dir + "/" + deletedName); err != nil {
		t.Fatal(err)
	}
	if err := disk.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := writeFile(disk, n, files[n]); err != nil {
			t.Fatal(err)
		}
	}
}

// logFiles counts the files of dir's raft log.
func logFiles(t *testing.T, disk raftlog.Disk, dir string) int {
	t.Helper()
	names, err := disk.List(dir + "/log")
	if err != nil {
		t.Fatal(err)
	}
	return len(names)
}
