package simnet

import (
	"fmt"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
)

// The consumer group's settings and the coordinator route of the classic
// members (wire_classic.go). The group's members are clientlib
// GroupConsumers (wire_libgroup.go).
const (
	groupID           = "simgroup"
	groupHeartbeat    = 100 * time.Millisecond // node Config.Groups.HeartbeatInterval
	groupOpsPerMember = 60                     // actions of a classic member before the settle phase
	groupSettleBase   = 10 * time.Second       // convergence after the heal, plus two sessions
)

// groupSessionMin is the group session of runs with the simulator's fast
// elections (100 ms); see world.groupSession.
const groupSessionMin = time.Second

// groupSession is the coordinators' session timeout in this run (node
// Config.Groups.SessionTimeout): a second, or three of the drawn election
// timeouts when those are slower. A coordinator's fail-over (an election
// timeout of one to two, then the new leader's replay of the offsets
// partition) then fits in one session, as it does in production (45 s
// sessions against 1 s elections). With a fixed second, the seeds that
// draw production's 1 s elections expired members through every
// fail-over, which hid a coordinator that forgets its members (planted
// GroupClassicForgotten) behind expiries that were legitimate.
func (w *world) groupSession() time.Duration {
	return max(groupSessionMin, 3*w.opts.Knobs.electionTimeout(w.opts))
}

// groupSettleBound is how long after the heal the group may take to
// converge: groupSettleBase and two sessions (a member crashed just
// before the heal holds its partitions for one).
func (w *world) groupSettleBound() time.Duration { return groupSettleBase + 2*w.groupSession() }

// groupOffsetsPartitions is the partition count of __strand_offsets in a
// run (0 without the group workload): groups Partitions+1 on in the checks.
func groupOffsetsPartitions(o Options) int {
	if o.GroupMembers == 0 {
		return operatorOffsetsPartitions(o)
	}
	return 2
}

// kindMember is a group member's transport client.
const kindMember clientKind = 100

// configureGroups sets the coordinators' timers for the simulated run.
func (ww *wireWorkload) configureGroups(cfg *node.Config) {
	cfg.Groups = node.GroupsConfig{OffsetsPartitions: int32(groupOffsetsPartitions(ww.w.opts)), SessionTimeout: ww.w.groupSession(),
		HeartbeatInterval: groupHeartbeat, SnapshotEvery: coordinatorSnapshotEvery(ww.w.opts, 20), // snapshots, and restores from them, within a run
		OffsetsTopicConfig: coordinatorTopicConfig(ww.w.opts)}
}

// coordinatorSnapshotEvery is a coordinator's SnapshotEvery in a run: 10
// with Options.CompactCoordinators (snapshot batches and their tombstones
// for the passes to work on), else otherwise.
func coordinatorSnapshotEvery(o Options, otherwise int) int {
	if o.CompactCoordinators {
		return 10
	}
	return otherwise
}

// coordinatorTopicConfig makes passes over the coordinators' compacted
// logs within a run when o.CompactCoordinators: segments roll each
// second, any dirt is worth a pass.
func coordinatorTopicConfig(o Options) []metadata.ConfigEntry {
	if !o.CompactCoordinators {
		return nil
	}
	return []metadata.ConfigEntry{{Name: metadata.ConfigSegmentMs, Value: "1000"},
		{Name: metadata.ConfigMinCleanableDirtyRatio, Value: "0.01"}}
}

// coordinatorLink is a simulated group member's route to its coordinator:
// the node it last found (-1: unknown) and whether a call is in flight.
type coordinatorLink struct {
	coord int
	busy  bool
}

// callCoordinator sends req from c to group's coordinator, asking a random
// node's FindCoordinator first when link knows none, and hands the answer
// or error to done. live reports whether the calling member's process is
// still the one that sent (a crash since drops the answer); an error that
// asks for fresh metadata, or a lost answer, forgets the coordinator.
func (ww *wireWorkload) callCoordinator(c *wireClient, group string, link *coordinatorLink, live func() bool,
	req *strandpb.Request, done func(*strandpb.Response, error)) {
	link.busy = true
	finish := func(resp *strandpb.Response, err error) {
		if !live() {
			return
		}
		link.busy = false
		if err == nil {
			err = wireErr(resp.GetError())
		}
		if err != nil {
			if a := clientlib.ClassifyErr(err); a.RefreshMetadata || errCode(err) == strandpb.ErrorCode_ERROR_CODE_NONE {
				link.coord = -1
			}
		}
		done(resp, err)
	}
	if link.coord >= 0 {
		ww.call(c, link.coord, req, finish)
		return
	}
	find := &strandpb.Request{Body: &strandpb.Request_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorRequest{Group: group}}}
	ww.call(c, c.randomNode(), find, func(resp *strandpb.Response, err error) {
		if !live() {
			return
		}
		if err == nil {
			err = wireErr(resp.GetError())
		}
		i, ok := ww.indexOf[resp.GetFindCoordinator().GetAddress()]
		if err != nil || !ok {
			link.busy = false
			done(nil, fmt.Errorf("find coordinator: %w", err))
			return
		}
		link.coord = i
		ww.call(c, i, req, finish)
	})
}
