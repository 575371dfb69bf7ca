package node

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
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

// The throttle's decisions are logged: a first line when it holds a
// catch-up back, then at most one per throttleLogEvery (10 s) per
// destination, counting the appends held and the bytes sent since; an
// unthrottled catch-up logs none.
func TestCatchUpThrottleLogsDecisions(t *testing.T) {
	for _, rate := range []int64{0, 256 << 10} {
		var buf bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&buf, nil))
		if _, caughtUp := catchUpRun(t, rate, func(cfg *Config) { cfg.Logger = logger }); !caughtUp {
			t.Fatalf("rate %d: the follower never caught up", rate)
		}
		lines := strings.Count(buf.String(), `msg="catch-up throttled"`)
		t.Logf("rate %d B/s: %d throttle lines", rate, lines)
		switch {
		case rate == 0 && lines != 0:
			t.Fatalf("unthrottled: %d throttle lines", lines)
		case rate > 0 && (lines == 0 || lines > 3): // 3 MiB at 256 KiB/s: ~12 s, so 2 lines
			t.Fatalf("throttled at %d B/s: %d throttle lines:\n%s", rate, lines, buf.String())
		case rate > 0 && !strings.Contains(buf.String(), "rate_bytes_per_sec=262144 held_appends="):
			t.Fatalf("throttle line lacks its fields:\n%s", buf.String())
		}
	}
}

// catchUpRun builds a 3 MiB backlog for a crashed follower, restarts it,
// and returns the bytes of frames it received in 200 ticks (2 s at 10 ms)
// and whether it caught up within 6000 ticks.
func catchUpRun(t *testing.T, rate int64, also ...func(*Config)) (int64, bool) {
	c := newMetaCluster(t, 41, 3, func(cfg *Config) {
		cfg.CatchUpBytesPerSec = rate
		for _, f := range also {
			f(cfg)
		}
	})
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
