package node

import (
	"bytes"
	"slices"
	"testing"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/frame"
)

// A follower back from a crash is sent its catch-up (20 MiB here) in
// frames no larger than frame.PeerFrameBytesTarget plus one message, all
// under the limit a peer reads with, and catches up. One frame per round
// used to carry the whole catch-up, which a real peer refused.
func TestCatchUpFramesStayUnderTheLimit(t *testing.T) {
	c := newMetaCluster(t, 5, 3, nil)
	c.createTopic(c.metaLeaderOf(), "big", 1, 3)
	tp := TopicPartition{Topic: "big", Partition: 0}
	lead := c.leader(tp)
	follower := c.ids[(slices.Index(c.ids, lead)+1)%len(c.ids)]
	c.crash(follower)
	value := bytes.Repeat([]byte{'v'}, 512<<10)
	for i := range 40 {
		batch, err := recordbatch.Encode(nil, []recordbatch.Record{{TimestampMs: 1000, Value: value}})
		if err != nil {
			t.Fatal(err)
		}
		if res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: batch}); res.Err != nil {
			t.Fatalf("produce %d: %v", i, res.Err)
		}
	}
	largest, frames := 0, 0
	c.drop = func(e envelope) bool {
		if e.to == follower {
			largest, frames = max(largest, len(e.frame)), frames+1
		}
		return false
	}
	c.start(follower)
	leaderApplied := statusOf(c.cores[lead], tp).AppliedIndex
	for range 300 {
		if core := c.cores[follower]; len(core.Status()) == 1 && statusOf(core, tp).AppliedIndex >= leaderApplied {
			break
		}
		c.tick(1)
	}
	if got := statusOf(c.cores[follower], tp).AppliedIndex; got < leaderApplied {
		t.Fatalf("follower applied %d, leader %d: no catch-up", got, leaderApplied)
	}
	// One message is at most raft's 1 MiB of entries or one entry of one
	// record batch.
	if limit := frame.PeerFrameBytesTarget + recordbatch.BatchBytesMax + 4<<10; largest > limit || largest > frame.BytesMaxDefault {
		t.Fatalf("largest frame to the follower %d bytes, want at most %d (read limit %d)", largest, limit, frame.BytesMaxDefault)
	}
	t.Logf("catch-up in %d frames, the largest %d bytes", frames, largest)
}

// statusOf is core's status of tp (zero when it does not host it).
func statusOf(core *Core, tp TopicPartition) GroupStatus {
	for _, st := range core.Status() {
		if st.TopicPartition == tp {
			return st
		}
	}
	return GroupStatus{}
}
