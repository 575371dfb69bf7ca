package groupsvc

import (
	"github.com/strandlog/strand/proto/strandpb"
)

// sweepProposalsMax bounds the proposals of one sweep.
const sweepProposalsMax = 256

// Propose is how a sweep writes a command: the node proposes it to the
// coordinator's partition and calls done once with its outcome
// (node/groups.go: proposeGroup).
type Propose func(cmd *strandpb.GroupCommand, done func(Applied))

// Sweep proposes one liveness sweep's commands for a coordinator: at most
// one in flight per key, and at most sweepProposalsMax in one sweep.
type Sweep struct {
	co       *Coordinator
	propose  Propose
	warn     func(msg string, err error)
	proposed int // proposals made by this sweep
}

// NewSweep starts a sweep of co that writes through propose and logs
// through warn.
func (co *Coordinator) NewSweep(propose Propose, warn func(msg string, err error)) *Sweep {
	return &Sweep{co: co, propose: propose, warn: warn}
}

// Propose proposes cmd under key unless key is already in flight or the
// sweep has proposed its maximum. A snapshot that fails is tried again
// only after another interval (replaying the log stays correct); an
// expiry applied drops its member's timer.
func (s *Sweep) Propose(key string, cmd *strandpb.GroupCommand) {
	co := s.co
	if co.InFlight[key] || s.proposed >= sweepProposalsMax {
		return
	}
	co.InFlight[key] = true
	s.proposed++
	s.propose(cmd, func(res Applied) {
		delete(co.InFlight, key)
		if res.Err != nil && cmd.GetSnapshot() != nil {
			co.SinceSnapshot = 0
			s.warn("group snapshot not written", res.Err)
		}
		if res.Err == nil && cmd.GetExpire() != nil {
			delete(co.Live, key)
		}
	})
}

// Timers are what a sweep measures members against, from the node's
// clocks: Now in ticks (leader-local timers), NowMs the wall clock
// (groups' empty-since times are wall-clock stamps of their commands).
type Timers struct {
	Now       uint64
	NowMs     int64
	Session   uint64 // ticks a member may stay silent
	Rebalance uint64 // ticks a member may keep partitions it is asked to revoke
	// OffsetsRetentionMs: a group empty this long is forgotten.
	OffsetsRetentionMs int64
}

// SweepMembers proposes the expiry of every member silent past the session
// timeout or revoking past the rebalance timeout, starts the timers of
// members first seen and prunes those of members gone. It reports whether
// some group has been empty past the offsets retention.
func (s *Sweep) SweepMembers(t Timers) (expireEmpty bool) {
	co := s.co
	live := make(map[string]bool) // the members seen now, to prune the timers of the others
	for _, id := range co.State.GroupIDs() {
		v, _ := co.State.Describe(id)
		if len(v.Members) == 0 && t.NowMs-v.EmptySinceMs >= t.OffsetsRetentionMs {
			expireEmpty = true
		}
		for _, m := range v.Members {
			key := LiveKey(id, m.ID)
			live[key] = true
			if co.Heartbeating[key] > 0 {
				continue // its answer restarts the timer (TrackHeartbeat)
			}
			expire := &strandpb.GroupCommand{Body: &strandpb.GroupCommand_Expire{Expire: &strandpb.GroupExpireCommand{
				Group: id, MemberId: m.ID, MemberEpoch: m.Epoch,
			}}}
			if len(m.Revoking) == 0 {
				delete(co.RevokingSince, key)
			} else if since, ok := co.RevokingSince[key]; !ok {
				co.RevokingSince[key] = t.Now
			} else if t.Now-since > t.Rebalance {
				s.Propose(key, expire) // it never gave the partitions up
			}
			seen, ok := co.Live[key]
			if !ok {
				co.Live[key] = t.Now // first seen by this coordinator: its timer starts now
				continue
			}
			if t.Now-seen > t.Session {
				s.Propose(key, expire)
			}
		}
	}
	pruneTimers(co.Live, live)
	pruneTimers(co.RevokingSince, live)
	return expireEmpty
}

// pruneTimers drops the timers of members no longer in the state (left,
// expired, replaced by a static restart). Deleting while ranging over a
// map is safe, and nothing here depends on the order.
func pruneTimers(timers map[string]uint64, live map[string]bool) {
	for key := range timers {
		if !live[key] {
			delete(timers, key)
		}
	}
}
