package node

import (
	"log/slog"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"golang.org/x/time/rate"
)

// The catch-up throttle (issue 9 item 3). A follower far behind (back from
// a long outage, or rebuilding after a wiped disk or a repair) is sent its
// catch-up at the link's full speed, competing with the producers' own
// replication for the leader's disk reads, the network and the follower's
// fsyncs. Config.CatchUpBytesPerSec bounds the bytes of appends a node
// sends to each catching-up follower node: a token bucket per destination
// node, filling as the node ticks. An append made only of entries already
// committed (the follower lacks what a majority holds: catch-up) spends
// its entry bytes from the bucket; when the bucket is empty the append is
// not sent and raft is told the follower is unreachable (it goes back to
// probing and resends after the next heartbeat answer). Appends carrying
// uncommitted entries are never throttled, so no commit waits on the
// bucket and producers keep the followers they need.
//
// Rejected: raft's MaxInflightBytes alone (a window, not a rate: on a fast
// link the window refills at once); throttling in the transport (it cannot
// tell catch-up from live replication, and dropping there makes raft wait
// for a timeout instead of reprobing).

// throttle is the per-destination token buckets, in bytes: x/time/rate
// limiters driven by throttleNow, the ticks so far (never their own
// time.Now methods: engine/purity_test.go refuses those in the core).
type throttle struct {
	limiters map[NodeID]*rate.Limiter // lookup only
	// logs is, per destination, the throttle's decisions since it last
	// logged them (lookup only).
	logs map[NodeID]throttleLog
}

// throttleLog counts one destination's held appends and sent catch-up
// bytes since the last log line about it.
type throttleLog struct {
	at        uint64 // tick of the last line (0: none yet)
	held      uint64
	sentBytes int64
}

// throttleLogEvery is how often (in real time, through TickDuration) the
// throttle logs about one destination while it holds appends back.
const throttleLogEvery = 10e9 // 10 s in nanoseconds

// noteThrottle records a decision for an append of g to node to: held
// back, or sent with bytes of catch-up. A hold logs (info) the first time
// and then at most every throttleLogEvery per destination, with the holds
// and bytes since the previous line, so an operator sees that and how
// hard a move or a catch-up is throttled without a line per append.
func (c *Core) noteThrottle(g *group, to NodeID, held bool, bytes int64) {
	if c.throttle.logs == nil {
		c.throttle.logs = make(map[NodeID]throttleLog)
	}
	l := c.throttle.logs[to]
	l.sentBytes += bytes
	if !held {
		c.throttle.logs[to] = l
		return
	}
	l.held++
	every := uint64(1000)
	if c.cfg.TickDuration > 0 {
		every = max(1, uint64(throttleLogEvery/int64(c.cfg.TickDuration)))
	}
	if l.at != 0 && c.ticks-l.at < every {
		c.throttle.logs[to] = l
		return
	}
	c.log.log(slog.LevelInfo, "catch-up throttled", slog.Uint64("to", uint64(to)), slog.String("topic", g.tp.Topic),
		slog.Int("partition", int(g.tp.Partition)), slog.Int64("rate_bytes_per_sec", c.cfg.CatchUpBytesPerSec),
		slog.Uint64("held_appends", l.held), slog.Int64("sent_bytes", l.sentBytes))
	c.throttle.logs[to] = throttleLog{at: max(c.ticks, 1)}
}

// throttleBurst is a bucket's capacity: a tenth of a second's worth. An
// append goes out whenever the bucket is not empty, even past it (the
// bucket goes into debt), so one message of any size always passes
// eventually.
func (c *Core) throttleBurst() int64 { return max(c.cfg.CatchUpBytesPerSec/10, 4096) }

// throttleNow is the throttle's time: the ticks so far, in TickDuration,
// from a fixed origin. The core reads no clock for its timeouts; a node
// that does not tick (paused, starved) fills its buckets no faster than it
// ticks, as its other timeouts run.
func (c *Core) throttleNow() time.Time {
	return time.Unix(0, 0).Add(time.Duration(c.ticks) * c.cfg.TickDuration)
}

// throttleAllows tells whether append m of g may go out now, spending its
// bytes when it goes to a catching-up follower.
func (c *Core) throttleAllows(g *group, m *raftpb.Message) bool {
	if c.cfg.CatchUpBytesPerSec <= 0 || m.GetType() != raftpb.MsgApp || len(m.GetEntries()) == 0 {
		return true
	}
	to := NodeID(m.GetTo())
	last := m.GetIndex() + uint64(len(m.GetEntries()))
	if last > g.raw.BasicStatus().GetCommit() {
		return true // carries entries a commit may wait for
	}
	if c.throttle.limiters == nil {
		c.throttle.limiters = make(map[NodeID]*rate.Limiter)
	}
	limiter := c.throttle.limiters[to]
	if limiter == nil { // starts full
		limiter = rate.NewLimiter(rate.Limit(c.cfg.CatchUpBytesPerSec), int(c.throttleBurst()))
		c.throttle.limiters[to] = limiter
	}
	now := c.throttleNow()
	if limiter.TokensAt(now) <= 0 {
		c.stats.CatchUpThrottled++
		c.noteThrottle(g, to, true, 0)
		c.markReady(g) // ready.go
		g.raw.ReportUnreachable(uint64(to))
		return false
	}
	var bytes int64
	for _, e := range m.GetEntries() {
		bytes += int64(len(e.GetData()))
	}
	// A reservation holds at most the burst: a larger append goes into
	// debt a burst at a time (at most raftMessageBytesMax/4096 steps).
	for left := int(bytes); left > 0; {
		step := min(left, limiter.Burst())
		limiter.ReserveN(now, step)
		left -= step
	}
	c.stats.CatchUpBytes += uint64(bytes)
	c.noteThrottle(g, to, false, bytes)
	return true
}
