package node

import (
	"bytes"
	"slices"
	"testing"

	"github.com/strandlog/strand/engine/recordbatch"
)

// A follower back from an outage is sent its catch-up at no more than
// CatchUpBytesPerSec (on average, plus one message and the burst), and
// still catches up. Without the throttle the whole backlog goes out in a
// few ticks.
func TestCatchUpThrottleBoundsBytes(t *testing.T) {
	for _, rate := range []int64{0, 256 << 10} {
		sent, caughtUp := catchUpRun(t, rate)
		const backlog = 3 << 20
		switch {
		case rate == 0 && sent < backlog:
			t.Fatalf("unthrottled: %d bytes in 2 s, want the whole backlog", sent)
		case rate > 0 && sent > 2*rate+raftMessageBytesMax+rate/10+64<<10:
			t.Fatalf("throttled at %d B/s: %d bytes in 2 s", rate, sent)
		case !caughtUp:
			t.Fatalf("rate %d: the follower never caught up", rate)
		}
		t.Logf("rate %d B/s: %d bytes to the follower in its first 2 s back", rate, sent)
	}
}

// catchUpRun builds a 3 MiB backlog for a crashed follower, restarts it,
// and returns the bytes of frames it received in 200 ticks (2 s at 10 ms)
// and whether it caught up within 6000 ticks.
func catchUpRun(t *testing.T, rate int64) (int64, bool) {
	c := newMetaCluster(t, 41, 3, func(cfg *Config) { cfg.CatchUpBytesPerSec = rate })
	c.createTopic(c.metaLeaderOf(), "t", 1, 3)
	tp := TopicPartition{Topic: "t", Partition: 0}
	lead := c.leader(tp)
	follower := c.ids[(slices.Index(c.ids, lead)+1)%len(c.ids)]
	c.crash(follower)
	value := bytes.Repeat([]byte{'v'}, 32<<10)
	for range 96 {
		batch, err := recordbatch.Encode(nil, []recordbatch.Record{{TimestampMs: 1000, Value: value}})
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		if res := c.produce(c.leader(tp), ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: batch}); res.Err != nil {
			t.Fatalf("produce: %v", res.Err)
		}
	}
	var sent int64
	c.drop = func(e envelope) bool {
		if e.to == follower {
			sent += int64(len(e.frame))
		}
		return false
	}
	c.start(follower)
	c.tick(200)
	got := sent
	want := statusOf(c.cores[c.leader(tp)], tp).AppliedIndex
	for i := 0; i < 6000 && statusOf(c.cores[follower], tp).AppliedIndex < want; i += 20 {
		c.tick(20)
	}
	return got, statusOf(c.cores[follower], tp).AppliedIndex >= want
}
