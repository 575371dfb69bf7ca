package simnet

import (
	"fmt"
	"slices"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/linearizability"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
)

// The group workload (Options.GroupMembers > 0): members of one consumer
// group subscribed to the main topic join, heartbeat, commit, fetch their
// committed offsets, crash and restart (static members keep their
// instance id), pause past the session timeout and leave, while the nodes
// suffer the run's faults. Checks:
//   - no two members hold a partition at once, from each member's own
//     record (it holds a partition from the answer that gave it until it
//     decides to give it up, crashes, or its own session timer lapses);
//   - a commit in an epoch older than one the member was already given
//     (a zombie's) is refused;
//   - committed offsets are linearizable (the history's commit and
//     fetch-committed operations, linearizability's offset model);
//   - after the heal, the live members converge within groupSettleBound to
//     an assignment covering every partition, balanced (max - min <= 1).
const (
	groupID           = "simgroup"
	groupSession      = time.Second            // node Config.Groups.SessionTimeout
	groupHeartbeat    = 100 * time.Millisecond // node Config.Groups.HeartbeatInterval
	groupOpsPerMember = 60                     // actions of a member before the settle phase
	groupSettleBound  = 10 * time.Second       // convergence after the heal
)

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

// groupSim is the group workload.
type groupSim struct {
	ww       *wireWorkload
	members  []*groupMember
	parts    int   // partitions of the main topic
	holder   []int // per partition: the member index holding it, -1 none
	last     []int // per partition: the member index that held it last
	nextOff  int64 // committed values are unique and increasing
	settling bool
	settleAt time.Duration
	then     func() // run once the settle phase ended
	ended    bool
}

// groupMember is one member process of the group.
type groupMember struct {
	gs              *groupSim
	c               *wireClient // transport, stream and timers
	idx             int
	instance        string // "" for a dynamic member
	incarn          int
	id              string
	epoch           int32
	oldEpoch        int32 // an epoch before the current one, for the zombie commit
	seq             uint64
	owned           []int // sorted partitions
	lastOK          time.Duration
	coordinatorLink     // the coordinator found and a call in flight
	fetchedFrom     int // the coordinator whose committed offsets it read last (-1: none)
	paused          bool
	ops             int
	gen             int // bumped on crash: timers of an older process do nothing
	// pending ends the history op in flight as indefinite at a crash.
	pending func()
}

// newGroupSim creates the members on client indexes from first on.
func newGroupSim(ww *wireWorkload, first int) *groupSim {
	o := ww.w.opts
	gs := &groupSim{ww: ww, parts: ww.topics[0].partitions}
	gs.holder = slices.Repeat([]int{-1}, gs.parts)
	gs.last = slices.Repeat([]int{-1}, gs.parts)
	for i := 0; i < o.GroupMembers; i++ {
		m := &groupMember{gs: gs, c: newWireClient(ww, first+i, kindMember), idx: i, coordinatorLink: coordinatorLink{coord: -1},
			fetchedFrom: -1}
		if i%2 == 0 {
			m.instance = fmt.Sprintf("inst-%d", i)
		}
		m.id = fmt.Sprintf("m%d.0", i)
		gs.members = append(gs.members, m)
	}
	return gs
}

// configure sets the coordinators' timers for the simulated run.
func (gs *groupSim) configure(cfg *node.Config) {
	cfg.Groups = node.GroupsConfig{OffsetsPartitions: int32(groupOffsetsPartitions(gs.ww.w.opts)), SessionTimeout: groupSession,
		HeartbeatInterval: groupHeartbeat, SnapshotEvery: 20} // snapshots, and restores from them, within a run
}

// start begins every member.
func (gs *groupSim) start() {
	for _, m := range gs.members {
		m.schedule(m.c.thinkTime())
	}
}

// settle starts the convergence phase once everything healed; then runs
// after it ended.
func (gs *groupSim) settle(then func()) {
	gs.settling, gs.settleAt, gs.then = true, gs.ww.w.now(), then
	for _, m := range gs.members {
		if m.paused {
			m.paused = false
			m.schedule(0)
		}
	}
	gs.ww.admin.after(groupHeartbeat, gs.checkConverged)
}

// checkConverged ends the settle phase when the live members own every
// partition, balanced, and fails it past groupSettleBound.
func (gs *groupSim) checkConverged() {
	w := gs.ww.w
	counts := make([]int, len(gs.members))
	covered := 0
	for _, h := range gs.holder {
		if h >= 0 {
			covered++
			counts[h]++
		}
	}
	balanced := covered == gs.parts && slices.Max(counts)-slices.Min(counts) <= 1
	if !balanced && w.now()-gs.settleAt < groupSettleBound {
		gs.ww.admin.after(groupHeartbeat, gs.checkConverged)
		return
	}
	if !balanced {
		w.fail("groups: no convergence %v after the heal: holders %v", groupSettleBound, gs.holder)
	} else {
		w.coverage.Inc("event/group-converged")
	}
	gs.ended = true
	gs.then()
}

// schedule runs the member's next step after d, unless it crashed since.
func (m *groupMember) schedule(d time.Duration) {
	gen := m.gen
	m.c.after(d, func() {
		if gen == m.gen && !m.paused {
			m.step()
		}
	})
}

// step is one action of the member.
func (m *groupMember) step() {
	gs, w := m.gs, m.gs.ww.w
	if gs.ended {
		return
	}
	next := groupHeartbeat/2 + time.Duration(m.c.rng.Int64N(int64(groupHeartbeat)))
	defer func() { m.schedule(next) }()
	if m.busy {
		return
	}
	if len(m.owned) > 0 && m.lastOK > 0 && w.now()-m.lastOK > groupSession/2 {
		m.releaseAll("session lapsed") // the coordinator may expire it any moment now
		m.epoch = 0
	}
	if m.coord >= 0 && m.coord != m.fetchedFrom {
		// A consumer reads its committed offsets from every coordinator
		// it finds (a Kafka consumer does on the assignment that follows
		// a rediscovery), here every partition's in one OffsetFetch: a new
		// coordinator's restored state (a fail-over, a move of its
		// partition) meets the history at once, whatever it lost.
		m.fetchedFrom = m.coord
		all := make([]int, gs.parts)
		for p := range all {
			all[p] = p
		}
		m.fetchOffsets(all)
		return
	}
	if gs.settling || m.ops >= groupOpsPerMember {
		m.heartbeat(m.epoch)
		return
	}
	m.ops++
	switch r := m.c.rng.IntN(100); {
	case r < 2:
		m.crash()
	case r < 4 && m.epoch > 0:
		m.pause()
		next = 0
	case r < 5 && m.epoch > 0:
		m.releaseAll("leave")
		m.heartbeat(-1) // leave, then rejoin as the same process
	case r < 40 && len(m.owned) > 0:
		m.commit()
	case r < 50:
		m.fetchCommitted()
	case r < 54 && m.oldEpoch > 0:
		m.zombieCommit()
	default:
		m.heartbeat(m.epoch)
	}
}

// crash kills the process: it holds nothing; the restart is a new process
// with a new member id (and the same instance id when static).
func (m *groupMember) crash() {
	m.releaseAll("crash")
	if m.pending != nil {
		m.pending()
		m.pending = nil
	}
	m.gen++
	m.incarn++
	m.id = fmt.Sprintf("m%d.%d", m.idx, m.incarn)
	m.epoch, m.oldEpoch, m.seq, m.lastOK, m.coord, m.busy = 0, 0, 0, 0, -1, false
	m.gs.ww.w.coverage.Inc("event/group-member-crash")
}

// pause stops the member for longer than the session timeout; its own
// timer drops its partitions on resume.
func (m *groupMember) pause() {
	m.paused = true
	m.gs.ww.w.coverage.Inc("event/group-member-pause")
	gen := m.gen
	m.c.after(groupSession*3/2, func() {
		if gen == m.gen && m.paused {
			m.paused = false
			m.schedule(0)
		}
	})
}

// releaseAll gives up every partition.
func (m *groupMember) releaseAll(why string) {
	for _, p := range m.owned {
		m.release(p)
	}
	m.owned = nil
	_ = why
}

// leased reports whether the member's own session timer still runs: a
// paused member holds its partitions only until it lapses.
func (m *groupMember) leased() bool {
	return m.lastOK > 0 && m.gs.ww.w.now()-m.lastOK <= groupSession/2
}

func (m *groupMember) release(p int) {
	if m.gs.holder[p] == m.idx {
		m.gs.holder[p] = -1
	}
}

func (m *groupMember) acquire(p int) {
	gs := m.gs
	if h := gs.holder[p]; h >= 0 && h != m.idx && gs.members[h].leased() {
		gs.ww.w.fail("groups: partition %d given to member %d (%s, epoch %d) while member %d still holds it",
			p, m.idx, m.id, m.epoch, h)
	}
	if gs.last[p] >= 0 && gs.last[p] != m.idx {
		gs.ww.w.coverage.Inc("event/group-handover")
	}
	gs.holder[p], gs.last[p] = m.idx, m.idx
}

// call sends req to the coordinator (finding it first) and hands the
// answer or error to done; the member is busy meanwhile.
func (m *groupMember) call(req *strandpb.Request, done func(*strandpb.Response, error)) {
	gen := m.gen
	m.gs.ww.callCoordinator(m.c, groupID, &m.coordinatorLink, func() bool { return gen == m.gen }, req, done)
}

// heartbeat sends one heartbeat at epoch and reconciles with the answer.
func (m *groupMember) heartbeat(epoch int32) {
	m.seq++
	owned := make([]int32, len(m.owned))
	for i, p := range m.owned {
		owned[i] = int32(p)
	}
	topic := m.gs.ww.topics[0].name
	req := &strandpb.Request{Body: &strandpb.Request_GroupHeartbeat{GroupHeartbeat: &strandpb.ConsumerGroupHeartbeatRequest{
		Group: groupID, MemberId: m.id, InstanceId: m.instance, MemberEpoch: epoch, Seq: m.seq,
		Subscriptions: []string{topic}, Owned: []*strandpb.GroupTopicPartitions{{Topic: topic, Partitions: owned}},
	}}}
	w := m.gs.ww.w
	sent := w.now()
	// The epoch a heartbeat gives fences the member's older epochs: a
	// history op, so the offset model checks commits against it.
	grant := w.hist.h.CallMemberEpoch(linearizability.ClientID(m.c.index), groupID, m.id, ns(sent))
	m.call(req, func(resp *strandpb.Response, err error) {
		if e := resp.GetGroupHeartbeat().GetMemberEpoch(); err == nil && e > 0 {
			w.hist.h.ReturnMemberEpoch(grant, e, ns(w.now()))
		} else {
			w.hist.h.Fail(grant, ns(w.now()))
		}
		switch {
		case err == nil && epoch < 0:
			m.epoch, m.oldEpoch = 0, 0
		case err == nil:
			m.onAssignment(resp.GetGroupHeartbeat(), sent)
		case errCode(err) == strandpb.ErrorCode_ERROR_CODE_FENCED_MEMBER_EPOCH ||
			errCode(err) == strandpb.ErrorCode_ERROR_CODE_UNKNOWN_MEMBER_ID:
			m.releaseAll("fenced")
			if m.epoch > 0 {
				m.oldEpoch = m.epoch
			}
			m.epoch = 0
			m.gs.ww.w.coverage.Inc("event/group-fenced")
		}
	})
}

// onAssignment makes the member's partitions the assigned ones: first it
// gives up what it lost, then it takes what it got.
func (m *groupMember) onAssignment(hb *strandpb.ConsumerGroupHeartbeatResponse, sent time.Duration) {
	var assigned []int
	for _, tp := range hb.GetAssigned() {
		for _, p := range tp.GetPartitions() {
			assigned = append(assigned, int(p))
		}
	}
	slices.Sort(assigned)
	if e := hb.GetMemberEpoch(); e > m.epoch {
		if m.epoch > 0 {
			m.oldEpoch = m.epoch
		}
		m.epoch = e
	}
	m.lastOK = sent
	for _, p := range m.owned {
		if !slices.Contains(assigned, p) {
			m.release(p)
		}
	}
	for _, p := range assigned {
		if !slices.Contains(m.owned, p) {
			m.acquire(p)
		}
	}
	m.owned = assigned
}

// commit commits a fresh value for one owned partition in the member's epoch.
func (m *groupMember) commit() {
	p := m.owned[m.c.rng.IntN(len(m.owned))]
	m.commitAs(p, m.epoch, false)
}

// zombieCommit commits with an epoch the member has already left behind:
// the coordinator must refuse it.
func (m *groupMember) zombieCommit() {
	m.commitAs(m.c.rng.IntN(m.gs.parts), m.oldEpoch, true)
	m.gs.ww.w.coverage.Inc("event/group-zombie-commit")
}

// commitAs sends one commit of partition p at epoch, recorded in the history.
func (m *groupMember) commitAs(p int, epoch int32, zombie bool) {
	gs, w := m.gs, m.gs.ww.w
	gs.nextOff++
	off := gs.nextOff
	tp := node.TopicPartition{Topic: gs.ww.topics[0].name, Partition: int32(p)}
	id := w.hist.h.CallCommitOffsetAs(linearizability.ClientID(m.c.index), groupID, m.id, epoch,
		linearizability.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}, off, ns(w.now()))
	req := &strandpb.Request{Body: &strandpb.Request_OffsetCommit{OffsetCommit: &strandpb.OffsetCommitRequest{
		Group: groupID, MemberId: m.id, MemberEpoch: epoch,
		Offsets: []*strandpb.OffsetCommitPartition{{Topic: tp.Topic, Partition: tp.Partition, Offset: off}},
	}}}
	m.pending = func() { w.hist.h.Indefinite(id, ns(w.now())) }
	m.call(req, func(_ *strandpb.Response, err error) {
		m.pending = nil
		switch {
		case err == nil:
			w.hist.h.ReturnCommitted(id, ns(w.now()))
			w.coverage.Inc("event/group-commit")
			if zombie {
				w.fail("groups: member %s's commit at epoch %d landed after it had been given a later epoch", m.id, epoch)
			}
		case clientlib.ClassifyErr(err).MaybeWritten || errCode(err) == strandpb.ErrorCode_ERROR_CODE_NONE:
			w.hist.h.Indefinite(id, ns(w.now()))
		default:
			w.hist.h.Fail(id, ns(w.now()))
		}
	})
}

// fetchCommitted reads one partition's committed offset (a history op).
func (m *groupMember) fetchCommitted() {
	m.fetchOffsets([]int{m.c.rng.IntN(m.gs.parts)})
}

// fetchOffsets reads the committed offsets of parts in one OffsetFetch, a
// history op per partition.
func (m *groupMember) fetchOffsets(parts []int) {
	gs, w := m.gs, m.gs.ww.w
	topic := gs.ww.topics[0].name
	ids := make([]linearizability.OpID, len(parts))
	ps := make([]int32, len(parts))
	for i, p := range parts {
		tp := linearizability.TopicPartition{Topic: topic, Partition: int32(p)}
		ids[i] = w.hist.h.CallFetchCommitted(linearizability.ClientID(m.c.index), groupID, tp, ns(w.now()))
		ps[i] = int32(p)
	}
	fail := func() {
		for _, id := range ids {
			w.hist.h.Fail(id, ns(w.now()))
		}
	}
	req := &strandpb.Request{Body: &strandpb.Request_OffsetFetch{OffsetFetch: &strandpb.OffsetFetchRequest{
		Group: groupID, Partitions: []*strandpb.GroupTopicPartitions{{Topic: topic, Partitions: ps}},
	}}}
	m.pending = fail
	m.call(req, func(resp *strandpb.Response, err error) {
		m.pending = nil
		if err != nil {
			fail()
			return
		}
		for i, p := range parts {
			off := int64(-1)
			for _, o := range resp.GetOffsetFetch().GetOffsets() {
				if o.GetTopic() == topic && o.GetPartition() == int32(p) {
					off = o.GetOffset()
				}
			}
			w.hist.h.ReturnOffset(ids[i], off, ns(w.now()))
		}
	})
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
