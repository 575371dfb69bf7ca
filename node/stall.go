package node

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// The disk watchdog (issue 22; issue 21 item 6). Pebble's disk-health
// checker and CockroachDB's max_sync_duration are the models. Every
// storage job (SyncJob: a log's fsync, a
// write-ahead log sync, a flush, an unlink of compacted segments, a
// checkpoint's writes and the removal of older ones, a compaction's
// snapshot, a compaction pass and its commit) runs off
// the loop, so a device that hangs in fsync leaves the loop, its raft
// heartbeats and its followers' acknowledgements all healthy: a leader
// whose own fsync never returns keeps its leaderships (followers see
// heartbeats, CheckQuorum passes) while it can neither apply what commits
// (raft applies only entries stable on the leader) nor answer a produce.
// No election will ever fix that. So the core watches its jobs:
//
//   - each job is stamped with the tick the host took it (TakeSyncJobs);
//     every raft tick the core looks at the jobs in flight, except a
//     compaction pass's write job (compaction_replica.go: CPU over the
//     live set and writes without fsync; its commit job, which syncs, is
//     timed);
//   - a job in flight longer than Config.DiskSlowAfter (default half an
//     election timeout) is logged once, at warn, naming its file; at most
//     slowJobsLoggedMax per check, the others counted;
//   - while a job is in flight longer than Config.DiskStallAfter (default
//     one election timeout: what the followers would give a silent
//     leader), the node is *stalled*, and for leadership purposes it is a
//     node that cannot write (diskfull.go, one mechanism for both): each
//     group it leads, the metadata group too, transfers its leadership to
//     a voter (of the incoming configuration, in a move) that is up, whose
//     disk is neither full nor stalled and that holds the most of the log,
//     a voter whose transfer raft aborted tried last (diskfull.go
//     handOffTarget); its followers do not campaign and it
//     drops transfers to itself while such a voter exists; its liveness
//     frames say so, so peers neither hand it a leadership nor pick it as
//     a target; produce is refused with ErrDiskStalled (retriable; Kafka's
//     KAFKA_STORAGE_ERROR). Reads of what it applied go on.
//   - once no job is older than DiskStallAfter, the node leaves the state
//     and takes leaderships again (`strand cluster leaders --balance`
//     restores the preferred ones).
//
// Ages count Core ticks, not Clock time: a paused or starved process
// does not tick, so it never takes its own pause for a stalled disk, and a
// loop that misses ticks under load sees a stall late, never early.
// Only jobs handed to the host count: without AsyncSyncs the loop runs the
// fsyncs itself, and a hung one stops the loop, its heartbeats with it, so
// the followers elect another leader anyway.
//
// Stop leading, not fail-stop: the node hands its leaderships on and
// stays up. Rejected: fail-stop past the threshold (CockroachDB's fatal
// max_sync_duration): a process stuck in an uninterruptible fsync may not
// even exit, a restart meets the same device, and the reads and the
// metadata it still serves would go with it; a supervisor can act on
// /readyz, which says not ready while stalled. A sync that returns an
// error stays fatal (fsyncgate, pipeline.go).

// ErrDiskStalled: a storage job of this node has not returned for longer
// than Config.DiskStallAfter; nothing was written. Retriable: the
// partition's leadership is moving to a replica with a healthy disk.
// On the wire it is NOT_ENOUGH_SPACE (the disk takes no writes), which
// Kafka clients get as KAFKA_STORAGE_ERROR.
var ErrDiskStalled = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_NOT_ENOUGH_SPACE,
	"node: disk stalled: a storage job has not returned")

// slowJobsLoggedMax bounds the slow jobs one check logs one by one (a
// stalled disk holds one job per log: thousands).
const slowJobsLoggedMax = 8

// stallState is the watchdog's view of the storage jobs in flight.
type stallState struct {
	stalled bool
	// oldestTicks is the age, in ticks, of the oldest job in flight at the
	// last check (0: none).
	oldestTicks uint64
	// oldestJob names the oldest job's file at the last check.
	oldestJob string
}

// diskStalled reports whether a storage job has been in flight longer
// than Config.DiskStallAfter, so the node does not lead.
func (c *Core) diskStalled() bool { return c.stall.stalled }

// oldestStorageJob is how long the oldest storage job in flight had been
// running at the last check (0: none), and its file.
func (c *Core) oldestStorageJob() (time.Duration, string) {
	return time.Duration(c.stall.oldestTicks) * c.cfg.TickDuration, c.stall.oldestJob
}

// diskSlowTicks and diskStallTicks are the watchdog's thresholds in ticks
// (Config.DiskSlowAfter, Config.DiskStallAfter), at least one.
func (c *Core) diskSlowTicks() uint64 {
	if c.cfg.DiskSlowAfter > 0 {
		return max(1, uint64(c.cfg.DiskSlowAfter/c.cfg.TickDuration))
	}
	return max(1, c.diskStallTicks()/2)
}

func (c *Core) diskStallTicks() uint64 {
	if c.cfg.DiskStallAfter > 0 {
		return max(1, uint64(c.cfg.DiskStallAfter/c.cfg.TickDuration))
	}
	return uint64(c.cfg.ElectionTicks * c.cfg.TicksPerRaftTick)
}

// checkStall runs the watchdog on every raft tick: it logs the jobs newly
// slow, enters or leaves the stalled state, and while stalled hands the
// leaderships on.
func (c *Core) checkStall() {
	if len(c.syncsInFlight) == 0 && !c.stall.stalled {
		c.stall.oldestTicks, c.stall.oldestJob = 0, ""
		return
	}
	var slow []uint64
	oldest, oldestToken := c.ticks, uint64(0)
	for token, job := range c.syncsInFlight { // order does not leak: ties broken by token, slow sorted
		if !job.handed || job.untimed {
			continue // a pass's write does no fsync (compaction_replica.go)
		}
		if job.handedAt < oldest || job.handedAt == oldest && token < oldestToken {
			oldest, oldestToken = job.handedAt, token
		}
		if !job.slowLogged && c.ticks-job.handedAt >= c.diskSlowTicks() {
			slow = append(slow, token)
		}
	}
	slices.Sort(slow)
	c.logSlowJobs(slow)
	c.stall.oldestTicks, c.stall.oldestJob = c.ticks-oldest, ""
	if oldestToken != 0 {
		c.stall.oldestJob = c.syncsInFlight[oldestToken].file()
	}
	c.setStalled(c.stall.oldestTicks >= c.diskStallTicks() && !c.bugIgnoreStall())
	c.handOffLeaderships()
}

// logSlowJobs logs the jobs of tokens (sorted) as slow, each once.
func (c *Core) logSlowJobs(tokens []uint64) {
	for i, token := range tokens {
		job := c.syncsInFlight[token]
		job.slowLogged = true
		c.syncsInFlight[token] = job
		c.stats.StorageJobsSlow++
		if i < slowJobsLoggedMax {
			age := time.Duration(c.ticks-job.handedAt) * c.cfg.TickDuration
			c.log.log(slog.LevelWarn, "slow storage job: not returned yet", slog.String("file", job.file()),
				slog.String("job", job.kind()), slog.Duration("running_for", age))
		}
	}
	if len(tokens) > slowJobsLoggedMax {
		c.log.log(slog.LevelWarn, "more slow storage jobs", slog.Int("count", len(tokens)-slowJobsLoggedMax))
	}
}

// setStalled enters or leaves the stalled state, logging the change.
func (c *Core) setStalled(stalled bool) {
	if stalled == c.stall.stalled {
		return
	}
	c.stall.stalled = stalled
	age := time.Duration(c.stall.oldestTicks) * c.cfg.TickDuration
	if stalled {
		c.stats.DiskStallsEntered++
		c.log.log(slog.LevelError, "disk stalled: handing leaderships to replicas on healthy disks and refusing produce",
			slog.String("file", c.stall.oldestJob), slog.Duration("running_for", age),
			slog.Duration("stall_after", time.Duration(c.diskStallTicks())*c.cfg.TickDuration))
		return
	}
	c.log.log(slog.LevelInfo, "disk responsive again: taking leaderships and writes again")
}

// cannotWrite reports whether the node takes no writes and should not
// lead: its disk is full (diskfull.go) or stalled.
func (c *Core) cannotWrite() bool { return c.space.full || c.stall.stalled }

// diskState is the disk state this node's liveness frames carry.
func (c *Core) diskState() uint64 {
	switch {
	case c.stall.stalled:
		return diskStateStalled
	case c.space.full:
		return diskStateFull
	}
	return diskStateOK
}

// file names the file (or directory) a storage job syncs, for logs.
func (j syncJob) file() string {
	switch {
	case j.walRemove, j.g == nil:
		return "wal"
	case j.ckWrite != nil:
		return j.ckWrite.dir
	case j.pass != nil:
		return j.g.dir + compactedDir
	}
	return j.g.dir + "/log"
}

// kind names what a storage job does, for logs.
func (j syncJob) kind() string {
	switch {
	case j.walRemove:
		return "remove old write-ahead log segments"
	case j.g == nil:
		return fmt.Sprintf("write-ahead log sync (%d logs)", len(j.groups))
	case j.pass != nil && j.pass.commit:
		return "compaction pass commit"
	case j.pass != nil:
		return "compaction pass write"
	case j.trash:
		return "unlink compacted segments"
	case j.ckTrim:
		return "remove older checkpoints"
	case j.ckWrite != nil:
		return "checkpoint write"
	case j.snapshot != 0:
		return "compaction snapshot write"
	case j.flush:
		return "log flush"
	}
	return "log sync"
}
