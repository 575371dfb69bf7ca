package simnet

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/proto/strandpb"
)

// The classic group workload (Options.ClassicMembers > 0, beside the group
// workload, whose coordinator settings it shares): members of a second
// group speak Kafka's classic protocol. JoinGroup, SyncGroup and Heartbeat
// travel as Kafka requests through kafkaproto's encoder and the listener's
// own handlers (EncodeRequest, TranslateSeq); OffsetCommit in the member's
// generation and OffsetFetch go natively (a Kafka OffsetCommit needs a
// second node round trip for its partition checks, which a translation
// cannot make). Members join, sync, heartbeat, rejoin when told, commit,
// read commits back, crash and pause past their session, while
// coordinators fail over under the run's faults. Checks:
//   - no two members hold a partition at once (each member's own record,
//     as the group workload keeps it);
//   - a member heartbeating within its session is not expelled: an
//     UNKNOWN_MEMBER_ID to a request sent within half a session of the
//     member's last answered join, sync or heartbeat fails the run when
//     every such answer since its first join was within half a session of
//     the one before (or that unbroken chain has lasted two sessions, so no
//     expiry proposed before it can still be pending). The coordinator's
//     sweep proposes an expiry only after a whole session of silence, and
//     a new coordinator restarts every timer: only a fail-over that lost
//     the member expels it then;
//   - a generation answered to a member never goes back;
//   - a committed offset is never lost: a fetch returns at least the
//     highest value acknowledged before it began, or a value whose commit
//     may have landed after that one's; once the group workload settled
//     after the final heal, one final fetch of every partition holds the
//     run's acknowledged commits to this (finish), so a commit lost late
//     (a fail-over after the members' last fetch) is seen too.
const (
	classicGroupID  = "simclassic"
	classicProtocol = "range"
)

// kindClassic is a classic member's transport client.
const kindClassic clientKind = 101

// classicSim is the classic group workload.
type classicSim struct {
	ww      *wireWorkload
	members []*classicMember
	parts   int
	holder  []int // per partition: the member index holding it, -1 none
	nextOff int64 // committed values are unique and increasing
	commits []map[int64]*classicCommit
	acked   []int64 // per partition: the highest value acknowledged (0: none)
	// final is the final fetch's route to the coordinator (finish).
	final coordinatorLink
}

// classicCommit is one commit's life: sent, then answered (resolved); a
// commit whose outcome is unknown stays unresolved (it may land any time).
type classicCommit struct {
	sent, resolved time.Duration
}

// classicMember is one classic member process.
type classicMember struct {
	cs         *classicSim
	c          *wireClient
	idx        int
	incarn     int
	id         string
	generation int32 // 0: (re)join next
	maxGen     int32 // the highest generation answered to id
	owned      []int
	lastOK     time.Duration // send time of the last answered join, sync or heartbeat
	// chainStart is the send time of the first answer of the current
	// chain (answers each within half a session of the one before);
	// chainFresh: the chain began at the first join of this member id.
	chainStart      time.Duration
	chainFresh      bool
	coordinatorLink // the coordinator found and a call in flight
	paused          bool
	ops             int
	gen             int // bumped on crash: timers of an older process do nothing
}

// newClassicSim creates the members on client indexes from first on.
func newClassicSim(ww *wireWorkload, first int) *classicSim {
	cs := &classicSim{ww: ww, parts: ww.topics[0].partitions, final: coordinatorLink{coord: -1}}
	cs.holder = slices.Repeat([]int{-1}, cs.parts)
	cs.acked = make([]int64, cs.parts)
	for range cs.parts {
		cs.commits = append(cs.commits, map[int64]*classicCommit{})
	}
	for i := range ww.w.opts.ClassicMembers {
		m := &classicMember{cs: cs, c: newWireClient(ww, first+i, kindClassic), idx: i, coordinatorLink: coordinatorLink{coord: -1}}
		m.id = fmt.Sprintf("c%d.0", i)
		cs.members = append(cs.members, m)
	}
	return cs
}

// start begins every member.
func (cs *classicSim) start() {
	for _, m := range cs.members {
		m.schedule(m.c.thinkTime())
	}
}

// schedule runs the member's next step after d, unless it crashed since.
func (m *classicMember) schedule(d time.Duration) {
	gen := m.gen
	m.c.after(d, func() {
		if gen == m.gen && !m.paused {
			m.step()
		}
	})
}

// step is one action of the member; it stops once the group workload
// ended its settle phase.
func (m *classicMember) step() {
	cs, w := m.cs, m.cs.ww.w
	if lg := cs.ww.libGroup; lg == nil || lg.ended {
		return
	}
	next := groupHeartbeat/2 + time.Duration(m.c.rng.Int64N(int64(groupHeartbeat)))
	defer func() { m.schedule(next) }()
	if m.busy {
		return
	}
	if m.lastOK > 0 && w.now()-m.lastOK > w.groupSession()/2 {
		m.releaseAll() // its session may lapse any moment: rejoin owning nothing
		m.generation, m.lastOK = 0, 0
	}
	if m.generation == 0 {
		m.join()
		return
	}
	if cs.ww.libGroup.settling || m.ops >= groupOpsPerMember {
		m.heartbeat()
		return
	}
	m.ops++
	switch r := m.c.rng.IntN(100); {
	case r < 2:
		m.crash()
	case r < 4:
		m.pause()
		next = 0
	case r < 40 && len(m.owned) > 0:
		m.commit()
	case r < 50:
		m.fetchCommitted()
	default:
		m.heartbeat()
	}
}

// crash kills the process: it holds nothing; the restart is a new member.
func (m *classicMember) crash() {
	m.releaseAll()
	m.gen++
	m.incarn++
	m.id = fmt.Sprintf("c%d.%d", m.idx, m.incarn)
	m.generation, m.maxGen, m.lastOK, m.coord, m.busy = 0, 0, 0, -1, false
	m.cs.ww.w.coverage.Inc("event/classic-member-crash")
}

// pause stops the member past its session; it rejoins on resume.
func (m *classicMember) pause() {
	m.paused = true
	gen := m.gen
	m.c.after(m.cs.ww.w.groupSession()*3/2, func() {
		if gen == m.gen && m.paused {
			m.paused = false
			m.schedule(0)
		}
	})
}

func (m *classicMember) releaseAll() {
	for _, p := range m.owned {
		if m.cs.holder[p] == m.idx {
			m.cs.holder[p] = -1
		}
	}
	m.owned = nil
}

// leased reports whether the member's own session timer still runs.
func (m *classicMember) leased() bool {
	return m.lastOK > 0 && m.cs.ww.w.now()-m.lastOK <= m.cs.ww.w.groupSession()/2
}

// ok records an answered join, sync or heartbeat sent at sent (what
// refreshes the coordinator's timer; commits do not).
func (m *classicMember) ok(sent time.Duration) {
	if sent <= m.lastOK {
		return
	}
	if m.lastOK == 0 || sent-m.lastOK >= m.cs.ww.w.groupSession()/2 {
		m.chainStart, m.chainFresh = sent, false
	}
	m.lastOK = sent
}

// expelled handles UNKNOWN_MEMBER_ID to a request sent at sent: the member
// starts over, and the run fails when it was heartbeating within its
// session.
func (m *classicMember) expelled(sent time.Duration, what string) {
	w := m.cs.ww.w
	if m.lastOK > 0 && sent-m.lastOK < w.groupSession()/2 && (m.chainFresh || m.lastOK-m.chainStart >= 2*w.groupSession()) {
		w.fail("classic: member %s (generation %d) expelled at its %s sent at %v, answered without a gap since %v, last at %v: a fail-over lost it",
			m.id, m.generation, what, sent, m.chainStart, m.lastOK)
	}
	w.coverage.Inc("event/classic-expelled")
	m.releaseAll()
	m.generation, m.lastOK = 0, 0
}

// call sends req to the coordinator (finding it first); the member is busy
// meanwhile.
func (m *classicMember) call(req *strandpb.Request, done func(*strandpb.Response, error)) {
	gen := m.gen
	m.cs.ww.callCoordinator(m.c, classicGroupID, &m.coordinatorLink, func() bool { return gen == m.gen }, req, done)
}

// classicStep is a classic step request for the member.
func (m *classicMember) classicStep(step strandpb.ClassicStep) *strandpb.Request {
	hb := &strandpb.ConsumerGroupHeartbeatRequest{Group: classicGroupID, MemberId: m.id,
		Classic: &strandpb.ClassicGroupStep{Step: step, Generation: m.generation, Protocol: classicProtocol}}
	if step == strandpb.ClassicStep_CLASSIC_STEP_JOIN {
		topic := m.cs.ww.topics[0].name
		owned := make([]int32, len(m.owned))
		for i, p := range m.owned {
			owned[i] = int32(p)
		}
		hb.Subscriptions = []string{topic}
		if len(owned) > 0 {
			hb.Owned = []*strandpb.GroupTopicPartitions{{Topic: topic, Partitions: owned}}
		}
	}
	return &strandpb.Request{Body: &strandpb.Request_GroupHeartbeat{GroupHeartbeat: hb}}
}

// join (re)joins, reporting what the member owns, then syncs.
func (m *classicMember) join() {
	w := m.cs.ww.w
	sent := w.now()
	m.call(m.classicStep(strandpb.ClassicStep_CLASSIC_STEP_JOIN), func(resp *strandpb.Response, err error) {
		switch code := errCode(err); {
		case err == nil && !resp.GetGroupHeartbeat().GetRejoin():
			g := resp.GetGroupHeartbeat().GetGeneration()
			if g < m.maxGen {
				w.fail("classic: member %s joined in generation %d after generation %d", m.id, g, m.maxGen)
			}
			first := m.maxGen == 0 && m.lastOK == 0
			m.maxGen, m.generation = max(m.maxGen, g), g
			m.ok(sent)
			if first {
				m.chainStart, m.chainFresh = sent, true // no expiry of this id can be pending
			}
			w.coverage.Inc("event/classic-join")
			m.sync()
		case code == strandpb.ErrorCode_ERROR_CODE_UNKNOWN_MEMBER_ID || code == strandpb.ErrorCode_ERROR_CODE_FENCED_MEMBER_EPOCH:
			m.releaseAll()
		}
	})
}

// sync takes the assignment the join recorded: it gives up what it lost,
// then takes what it got.
func (m *classicMember) sync() {
	w := m.cs.ww.w
	sent := w.now()
	m.call(m.classicStep(strandpb.ClassicStep_CLASSIC_STEP_SYNC), func(resp *strandpb.Response, err error) {
		a := resp.GetGroupHeartbeat()
		switch code := errCode(err); {
		case err == nil && !a.GetRejoin():
			m.ok(sent)
			m.onAssignment(a.GetAssigned())
		case code == strandpb.ErrorCode_ERROR_CODE_UNKNOWN_MEMBER_ID:
			m.expelled(sent, "sync")
		default:
			m.generation = 0 // rejoin (told to, fenced, or the answer was lost)
		}
	})
}

// onAssignment makes the member's partitions the assigned ones.
func (m *classicMember) onAssignment(tps []*strandpb.GroupTopicPartitions) {
	var assigned []int
	for _, tp := range tps {
		for _, p := range tp.GetPartitions() {
			assigned = append(assigned, int(p))
		}
	}
	slices.Sort(assigned)
	for _, p := range m.owned {
		if !slices.Contains(assigned, p) && m.cs.holder[p] == m.idx {
			m.cs.holder[p] = -1
		}
	}
	for _, p := range assigned {
		if !slices.Contains(m.owned, p) {
			m.acquire(p)
		}
	}
	m.owned = assigned
}

func (m *classicMember) acquire(p int) {
	cs := m.cs
	if h := cs.holder[p]; h >= 0 && h != m.idx && cs.members[h].leased() {
		cs.ww.w.fail("classic: partition %d given to member %s (generation %d) while member %s still holds it",
			p, m.id, m.generation, cs.members[h].id)
	}
	cs.holder[p] = m.idx
}

// heartbeat keeps the member in; a rejoin is asked for, or the member
// starts over when fenced or expelled.
func (m *classicMember) heartbeat() {
	w := m.cs.ww.w
	sent := w.now()
	m.call(m.classicStep(strandpb.ClassicStep_CLASSIC_STEP_HEARTBEAT), func(resp *strandpb.Response, err error) {
		switch code := errCode(err); {
		case err == nil:
			m.ok(sent)
			if resp.GetGroupHeartbeat().GetRejoin() {
				m.generation = 0
				w.coverage.Inc("event/classic-rejoin")
			}
		case code == strandpb.ErrorCode_ERROR_CODE_UNKNOWN_MEMBER_ID:
			m.expelled(sent, "heartbeat")
		case code == strandpb.ErrorCode_ERROR_CODE_FENCED_MEMBER_EPOCH:
			m.releaseAll()
			m.generation = 0
		}
	})
}

// commit commits a fresh value for one owned partition in the member's
// generation.
func (m *classicMember) commit() {
	cs, w := m.cs, m.cs.ww.w
	p := m.owned[m.c.rng.IntN(len(m.owned))]
	cs.nextOff++
	off, sent := cs.nextOff, w.now()
	c := &classicCommit{sent: sent, resolved: math.MaxInt64}
	cs.commits[p][off] = c
	req := &strandpb.Request{Body: &strandpb.Request_OffsetCommit{OffsetCommit: &strandpb.OffsetCommitRequest{
		Group: classicGroupID, MemberId: m.id, MemberEpoch: m.generation, ClassicGeneration: true,
		Offsets: []*strandpb.OffsetCommitPartition{{Topic: cs.ww.topics[0].name, Partition: int32(p), Offset: off}},
	}}}
	m.call(req, func(_ *strandpb.Response, err error) {
		switch code := errCode(err); {
		case err == nil:
			c.resolved = w.now()
			cs.acked[p] = max(cs.acked[p], off)
			w.coverage.Inc("event/classic-commit")
		case clientlib.ClassifyErr(err).MaybeWritten || code == strandpb.ErrorCode_ERROR_CODE_NONE:
			// unknown outcome: it may still land
		case code == strandpb.ErrorCode_ERROR_CODE_UNKNOWN_MEMBER_ID:
			c.resolved = w.now()
			m.expelled(sent, "commit")
		default:
			c.resolved = w.now()
		}
	})
}

// classicFinalReadsMax bounds the attempts of the final fetch.
const classicFinalReadsMax = 40

// finish fetches every partition's committed offset once the members
// stopped (the group workload settled after the final heal) and checks
// that no acknowledged commit was lost; then runs then (at once without
// classic members).
func (cs *classicSim) finish(attempt int, then func()) {
	if cs == nil {
		then()
		return
	}
	w, c := cs.ww.w, cs.members[0].c
	topic := cs.ww.topics[0].name
	parts := make([]int32, cs.parts)
	for p := range parts {
		parts[p] = int32(p)
	}
	req := &strandpb.Request{Body: &strandpb.Request_OffsetFetch{OffsetFetch: &strandpb.OffsetFetchRequest{
		Group: classicGroupID, Partitions: []*strandpb.GroupTopicPartitions{{Topic: topic, Partitions: parts}},
	}}}
	floors := slices.Clone(cs.acked) // a commit acknowledged meanwhile may land after the read
	cs.ww.callCoordinator(c, classicGroupID, &cs.final, func() bool { return true }, req, func(resp *strandpb.Response, err error) {
		switch {
		case err == nil:
			got := slices.Repeat([]int64{-1}, cs.parts)
			for _, o := range resp.GetOffsetFetch().GetOffsets() {
				if o.GetTopic() == topic && int(o.GetPartition()) < cs.parts {
					got[o.GetPartition()] = o.GetOffset()
				}
			}
			for p := range cs.parts {
				cs.checkCommitted(p, floors[p], got[p], " finally")
			}
			w.coverage.Inc("check/classic-final-offsets")
			then()
		case attempt+1 < classicFinalReadsMax:
			c.after(100*time.Millisecond, func() { cs.finish(attempt+1, then) })
		default:
			w.fail("classic: the final committed offsets are unreadable after the heal: %v", err)
			then()
		}
	})
}

// checkCommitted fails the run when partition p's committed offset read
// back as got, by a fetch that began when floor was the highest value
// acknowledged, lost an acknowledged commit: got is below floor and is no
// value whose commit may have landed after floor's.
func (cs *classicSim) checkCommitted(p int, floor, got int64, when string) {
	if floor == 0 {
		return
	}
	var floorSent time.Duration
	if c := cs.commits[p][floor]; c != nil {
		floorSent = c.sent
	}
	if c := cs.commits[p][got]; got < floor && (c == nil || c.resolved < floorSent) {
		cs.ww.w.fail("classic: partition %d's committed offset %d read back%s as %d: an acknowledged commit was lost", p, floor, when, got)
	}
}

// fetchCommitted reads one partition's committed offset and checks no
// acknowledged commit was lost.
func (m *classicMember) fetchCommitted() {
	cs, w := m.cs, m.cs.ww.w
	p := m.c.rng.IntN(cs.parts)
	floor := cs.acked[p]
	topic := cs.ww.topics[0].name
	req := &strandpb.Request{Body: &strandpb.Request_OffsetFetch{OffsetFetch: &strandpb.OffsetFetchRequest{
		Group: classicGroupID, Partitions: []*strandpb.GroupTopicPartitions{{Topic: topic, Partitions: []int32{int32(p)}}},
	}}}
	m.call(req, func(resp *strandpb.Response, err error) {
		if err != nil || floor == 0 {
			return
		}
		got := int64(-1)
		for _, o := range resp.GetOffsetFetch().GetOffsets() {
			if o.GetTopic() == topic && o.GetPartition() == int32(p) {
				got = o.GetOffset()
			}
		}
		cs.checkCommitted(p, floor, got, "")
		w.coverage.Inc("event/classic-fetch-checked")
	})
}
