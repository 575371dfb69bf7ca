package node

import (
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/raftlog"
)

// Cold fetch reads off the loop (issue 22). A fetch whose batches the
// log's tail cache holds is served on the loop as before, with no I/O. One
// that needs older entries used to read them on the loop (ReadAt, and for
// a sealed segment not yet indexed the whole segment, with every record's
// CRC checked), stalling every partition of the node for as long. Now:
//
//  1. the fetch is served as far as the log read (readNow with a
//     coldRead): raftlog's StartRead copies what the read needs (files,
//     offsets, term runs) and the read becomes a storage job like a log's
//     sync (SyncJob, run by the host off the loop, timed by the watchdog);
//     the fetch waits with nothing of the Core held but the coldRead;
//  2. the job reads and CRC-checks the entries (raftlog Read.Run);
//  3. its completion (SyncDone, on the loop) ends the read (FinishRead,
//     which installs the segment indexes it built) and serves the fetch
//     again from the state now, with the entries read standing in for the
//     log read that starts at the same raft index. The state may have
//     moved meanwhile (more applied, the log start moved, the leadership
//     lost): the fetch is served from the state at the completion, which
//     is at or past the read index raft confirmed for it, so it stays
//     linearizable; committed entries never change at an index, so the
//     bytes read are the ones the log holds there now.
//
// The segments a job reads may leave the log meanwhile (retention retires
// them): their files close, the job fails and FinishRead says
// raft.ErrCompacted, never corruption; the fetch is then served again from
// scratch (out of range now, or a new job). A raft snapshot installed
// meanwhile (only a deposed leader still has reads) answers the fetch
// ErrNotLeader whatever its job did: the snapshot's state is one the log
// never had until a later TRIM applies (restoreFromSnapshot).
// Damage the job finds (ErrCorrupt) is what it was on the loop: a storage
// failure (repair or fail-stop, storageFailed). A replica stopped meanwhile
// answers UNKNOWN_TOPIC_OR_PARTITION, one reopened (a repair, a full
// disk's reopen) REPLICA_RECOVERING, both retriable (coldGone). Close
// answers every cold read in flight with ErrStopped.
//
// Bounds: at most coldReadsMax jobs in flight per node, later cold reads
// queue in order and start as jobs end; a fetch starts at most
// coldReadTriesMax jobs, then reads on the loop (only a log changing under
// every one of its jobs gets there). A job that hangs (a stalled disk)
// holds its fetch until it returns: the request's timeout no longer
// covers that wait (the client's does), and the disk watchdog hands the
// node's leaderships on meanwhile (stall.go), as for a hung fsync.
//
// Still on the loop: the group coordinators' loads of __strand_offsets
// and __strand_transactions (groups.go, txn.go), ListOffsets by timestamp
// (admin.go), reads of a compacted prefix (compaction_fetch.go), and raft's
// own reads (entries to apply past the tail cache, a lagging follower's
// MsgApps).

const (
	// coldReadsMax bounds the cold read jobs in flight on a node.
	coldReadsMax = 64
	// coldReadTriesMax bounds the jobs one fetch starts.
	coldReadTriesMax = 3
)

// errReadPending says a fetch's log read became a storage job: the fetch
// is served at its completion.
var errReadPending = errors.New("node: log read running as a storage job")

// coldRead is a fetch served with its log reads as storage jobs.
type coldRead struct {
	g    *group
	log  *raftlog.Log // g's log when the job started
	req  FetchRequest
	done func(FetchResult)
	// read is the job's read, lo the raft index it starts at; pre the
	// entries it read, for the next serve.
	read  *raftlog.Read
	lo    uint64
	pre   []*raftpb.Entry
	tries int
	token uint64 // the job in flight (0: none)
	// remote is the fetch's remote read (tier_read.go), when its job is
	// one.
	remote *tierRead
	// replaced: g installed a raft snapshot while f waited (restoreFromSnapshot);
	// f is answered ErrNotLeader, never served from that state.
	replaced bool
}

// readAsync serves req from g's applied state like read, running a log
// read the tail cache cannot serve as a storage job; done gets the result,
// at once or at the job's completion.
func (c *Core) readAsync(g *group, req FetchRequest, done func(FetchResult)) {
	c.serveCold(&coldRead{g: g, log: g.log, req: req, done: done})
}

// serveCold serves f from g's state now, or leaves it waiting for a job.
func (c *Core) serveCold(f *coldRead) {
	if f.replaced {
		lead, _, _ := f.g.leadership()
		f.done(FetchResult{Err: ErrNotLeader, HighWatermark: -1, LogStartOffset: -1, Leader: lead})
		return
	}
	res := c.readNow(f.g, f.req, f)
	if errors.Is(res.Err, errReadPending) {
		return
	}
	c.chargeFetch(&res)
	f.done(res)
}

// coldEntries is the log read of a fetch served with f (nil: on the loop):
// the entries f's job read when it started at lo, else the tail cache's,
// else a job is started (or f queued for one) and errReadPending returned.
func (c *Core) coldEntries(g *group, f *coldRead, lo, hi, limit uint64) ([]*raftpb.Entry, error) {
	if f == nil {
		return g.log.Entries(lo, hi, limit)
	}
	if pre := f.pre; pre != nil {
		f.pre = nil
		if f.lo == lo && len(pre) > 0 {
			return pre[:min(uint64(len(pre)), hi-lo)], nil
		}
	}
	if f.tries >= coldReadTriesMax {
		return g.log.Entries(lo, hi, limit) // the log changed under every job: on the loop
	}
	ents, rd, err := g.log.StartRead(lo, hi, limit)
	if rd == nil || err != nil {
		return ents, err
	}
	if len(c.coldReads) >= coldReadsMax {
		c.coldWaiting = append(c.coldWaiting, f)
		return nil, errReadPending
	}
	f.tries++
	f.log, f.read, f.lo = g.log, rd, lo
	f.token = c.queueJob(syncJob{g: g, run: rd.Run, cold: f})
	c.coldReads = append(c.coldReads, f)
	c.stats.ColdReads++
	return nil, errReadPending
}

// finishColdRead ends f's read job: it serves f again with the entries
// read (see above), and starts the cold reads waiting for a slot.
func (c *Core) finishColdRead(f *coldRead) {
	if f.remote != nil && f.read == nil {
		c.finishTierRead(f) // tier_read.go
		return
	}
	c.dropColdRead(f)
	defer c.startWaitingColdReads()
	g := f.g
	if !c.hosted(g) || g.log != f.log {
		c.coldGone(f)
		return
	}
	ents, err := g.log.FinishRead(f.read)
	f.read = nil
	switch {
	case err == nil:
		f.pre = ents
	case errors.Is(err, raft.ErrCompacted):
		// A segment read left the log: serve again from the state now.
	default:
		err = c.storageFailed(g, fmt.Errorf("%w: %s/%d entries from %d: %w", ErrStorage, g.tp.Topic, g.tp.Partition, f.lo, err))
		f.done(FetchResult{Err: err, HighWatermark: g.part.HighWatermark(), LogStartOffset: g.part.LogStartOffset(), Leader: c.cfg.ID})
		return
	}
	c.serveCold(f)
}

// dropColdRead forgets f's job.
func (c *Core) dropColdRead(f *coldRead) {
	f.token = 0
	if i := slices.Index(c.coldReads, f); i >= 0 {
		c.coldReads = slices.Delete(c.coldReads, i, i+1)
	}
}

// startWaitingColdReads serves the cold reads queued for a job slot, in
// order, while slots are free.
func (c *Core) startWaitingColdReads() {
	for len(c.coldWaiting) > 0 && len(c.coldReads) < coldReadsMax && !c.closed && c.fatal == nil {
		f := c.coldWaiting[0]
		c.coldWaiting[0] = nil
		c.coldWaiting = c.coldWaiting[1:]
		if !c.hosted(f.g) || f.g.log != f.log {
			c.coldGone(f)
			continue
		}
		c.serveCold(f)
	}
}

// coldGone answers a cold read whose replica stopped or was replaced
// meanwhile: UNKNOWN_TOPIC_OR_PARTITION when the node hosts the partition
// no more, else REPLICA_RECOVERING (a repair or a full disk reopened it:
// its state restarts, and an answer from it, out of range at an empty
// engine say, could move the reader).
func (c *Core) coldGone(f *coldRead) {
	err := ErrUnknownTopicPartition
	if c.byTP[f.g.tp] != nil {
		err = ErrReplicaRecovering
	}
	f.done(FetchResult{Err: err, HighWatermark: -1, LogStartOffset: -1})
}

// stopColdReads answers every cold read in flight or waiting with
// ErrStopped (Close).
func (c *Core) stopColdReads() {
	for _, f := range append(c.coldReads, c.coldWaiting...) {
		f.done(FetchResult{Err: ErrStopped, HighWatermark: -1, LogStartOffset: -1})
	}
	c.coldReads, c.coldWaiting = nil, nil
}
