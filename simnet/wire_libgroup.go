package simnet

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/linearizability"
	"github.com/strandlog/strand/proto/strandpb"
)

// The consumer group (Options.GroupMembers > 0): every member is an
// application on clientlib's own GroupConsumer.
//
// Options.GroupMembers applications consume the main topic as group
// groupID with a clientlib.GroupConsumer on a Simulated Client: its Poll
// (heartbeats, reconciliation, commit on revoke, auto-commit, the
// consumer's fetch positions, leader and metadata refreshes) runs as a
// task on the simulator's thread (clientlib.SimRun), every request over
// the simulated network. Even members are static (an instance id). The
// seed's rng draws the commit mode: every member auto-commits, every
// member commits by hand after processing, or half of each. An
// application polls, processes the batch for a drawn time (now and then
// past the session timeout), commits by hand when manual, and polls
// again; a member crashes mid-batch (records polled but not processed)
// and restarts as a new process (the same instance id when static).
//
// Checks (the application's callbacks, OnAssigned, OnRevoked and OnLost,
// say what it holds; its traffic, seen on the simulated network, gives
// the history):
//   - a member takes a partition (OnAssigned) only less than half a
//     session after the heartbeat answered last was sent (a node's clock
//     may run 50% fast: the coordinator may have expired it by then;
//     seed 114 took one 1.18 s after, a slow committed-offset read);
//   - no two members hold a partition at once: a member holds it from
//     OnAssigned until OnRevoked, OnLost or its crash, or until its own
//     session lapsed (no heartbeat it sent answered for a session timeout:
//     its client drops everything at the next Poll, and the coordinator
//     may have expired it);
//   - a member's epochs never go back (a rejoin gets the group's newer
//     epoch: a coordinator that forgot the group would start again);
//   - every heartbeat, commit and committed-offset read is a history op
//     (linearizability's offset model): committed offsets are
//     linearizable, and a commit in an epoch older than one the member was
//     already given (a zombie's) must be refused; a zombie probe sends
//     such commits whenever a live member moves on from an epoch (an old
//     process of it, or a commit that was in flight across the epoch's
//     change);
//   - every batch handed to an application is a history read (a fetch op
//     from its send time): the records are the log's at those offsets and
//     not past the high-water mark;
//   - no commit of a member passes a record it was handed and has not
//     processed, and no record is handed out below an offset the member
//     already committed for its partition (commit ahead of processing);
//   - after the heal the members stop crashing and pausing, and converge
//     within groupSettleBound() to an assignment covering every partition,
//     balanced (max - min <= 1);
//   - at-least-once: then every acknowledged record of the main topic
//     below the group's final committed offset was processed by some
//     member (records below a log start a reset jumped to are excused:
//     retention removed them unread).
const (
	libFetchMaxWait = 200 * time.Millisecond // under Options.ClientTimeout
	libCrashOneIn   = 10                     // batches that end in a crash mid-batch
	libCrashesMax   = 6                      // per member
	libSlowOneIn    = 40                     // batches processed past the session timeout
	libZombieOneIn  = 1                      // heartbeats that give a new epoch and draw a zombie probe
	// The zombie probes' history client ids are libRawClient on.
)

// libGroup is the group of clientlib members and its checker's state.
type libGroup struct {
	ww      *wireWorkload
	members []*libMember
	parts   int
	holder  []int // per partition: the member index holding it, -1 none
	last    []int // per partition: the member index that held it last
	// processed and excused are per main-topic partition: the offsets
	// some member processed, and the offset below which a reset to the
	// log start skipped records unread.
	processed []map[int64]bool
	excused   []int64
	// granted is the highest epoch a heartbeat gave each member id.
	granted map[string]int32
	// settling: the run healed and the members converge (no crash, no
	// slow batch) until ended; then runs at the end of the phase.
	settling bool
	settleAt time.Duration
	ended    bool
	then     func()
	stopping bool
}

// libMember is one application process slot: it restarts after a crash.
type libMember struct {
	lg       *libGroup
	c        *wireClient // network position, rng and timers
	idx      int
	auto     bool
	instance string
	crashes  int
	life     *libLife
	// zombie is the probe's route to the coordinator.
	zombie coordinatorLink
}

// libLife is one process of a member: its client and consumer, the task
// running, and what the checks track for it.
type libLife struct {
	alive   bool
	cl      *clientlib.Client
	g       *clientlib.GroupConsumer
	abandon func()
	// inFlight are the offsets per partition handed out and not yet
	// processed; committed the highest offset committed per partition
	// since the member last gained it.
	inFlight  map[int][]int64
	committed map[int]int64
	// lastOK is when the last heartbeat answered was sent (0: none): the
	// member's session runs from then on; epochs lists the epochs its
	// heartbeats were given, ascending. pending ends the history ops in
	// flight when the process dies.
	lastOK  time.Duration
	epochs  []int32
	pending map[linearizability.OpID]bool
}

// newLibGroup creates the members on client indexes from first on and
// draws the commit mode.
func newLibGroup(ww *wireWorkload, first int) *libGroup {
	lg := &libGroup{ww: ww, parts: ww.topics[0].partitions}
	lg.holder = slices.Repeat([]int{-1}, lg.parts)
	lg.granted = map[string]int32{}
	lg.last = slices.Repeat([]int{-1}, lg.parts)
	lg.processed = make([]map[int64]bool, lg.parts)
	for p := range lg.processed {
		lg.processed[p] = map[int64]bool{}
	}
	lg.excused = make([]int64, lg.parts)
	for i := range ww.w.opts.GroupMembers {
		m := &libMember{lg: lg, c: newWireClient(ww, first+i, kindMember), idx: i, zombie: coordinatorLink{coord: -1}}
		if i%2 == 0 {
			m.instance = fmt.Sprintf("inst-%d", i)
		}
		lg.members = append(lg.members, m)
	}
	if len(lg.members) == 0 {
		return lg
	}
	mode := lg.members[0].c.rng.IntN(4) // 0, 1: auto; 2: manual; 3: mixed
	for i, m := range lg.members {
		m.auto = mode < 2 || mode == 3 && i%2 == 0
	}
	return lg
}

// start begins every member.
func (lg *libGroup) start() {
	for _, m := range lg.members {
		m.c.after(m.c.thinkTime(), m.spawn)
	}
}

// spawn starts a new process of the member.
func (m *libMember) spawn() {
	if m.lg.stopping {
		return
	}
	life := &libLife{alive: true, inFlight: map[int][]int64{}, committed: map[int]int64{}, pending: map[linearizability.OpID]bool{}}
	m.life = life
	o := m.lg.ww.w.opts
	seeds := make([]string, len(m.lg.ww.peers))
	for i, p := range m.lg.ww.peers {
		seeds[i] = p.Address
	}
	cl, err := clientlib.NewClient(append([]clientlib.Opt{clientlib.Simulated(libMemberTransport{m: m, life: life}),
		clientlib.SeedAddresses(seeds...), clientlib.RandSeed(m.c.rng.Uint64()),
		clientlib.RequestTimeout(o.libRequestTimeout()), clientlib.StallTimeout(o.libStallTimeout()), clientlib.MaxRetries(attemptsMax),
		clientlib.RetryBackoff(wireBackoff.Base, wireBackoff.Max), clientlib.MetadataMaxAge(libMetadataMaxAge)},
		m.c.ww.sasl.libOpts(m.c)...)...) // SASL: sasl.go
	if err != nil {
		panic("simnet: library member options: " + err.Error())
	}
	interval := time.Duration(0)
	if m.auto {
		interval = time.Duration(20+m.c.rng.IntN(180)) * time.Millisecond
	}
	opts := []clientlib.GroupOpt{clientlib.AutoCommitInterval(interval),
		clientlib.GroupConsumerOpts(clientlib.FetchMaxWait(libFetchMaxWait), clientlib.OffsetResetPolicy(clientlib.ResetEarliest)),
		clientlib.OnAssigned(func(_ context.Context, ps []clientlib.TopicPartition) {
			for _, tp := range ps {
				delete(life.committed, int(tp.Partition))
				m.acquire(life, tp)
			}
		}),
		clientlib.OnRevoked(func(_ context.Context, ps []clientlib.TopicPartition) { m.release(ps) }),
		clientlib.OnLost(func(ps []clientlib.TopicPartition) { m.release(ps) })}
	if m.instance != "" {
		opts = append(opts, clientlib.InstanceID(m.instance))
	}
	g, err := clientlib.NewGroupConsumer(cl, groupID, []string{topicMain}, opts...)
	if err != nil {
		panic("simnet: library group consumer: " + err.Error())
	}
	life.cl, life.g = cl, g
	m.lg.ww.w.coverage.Inc("event/lib-member-start")
	m.poll()
}

// poll runs one GroupConsumer.Poll as a task.
func (m *libMember) poll() {
	life := m.life
	if m.lg.stopping || !life.alive {
		return
	}
	var fs clientlib.Fetches
	start := m.lg.ww.w.now()
	life.abandon = m.lg.ww.w.simRun(life.cl, func(ctx context.Context) { fs = life.g.Poll(ctx) }, func() { m.polled(life, fs, start) })
}

// polled checks and records what a Poll handed out, then processes it.
func (m *libMember) polled(life *libLife, fs clientlib.Fetches, start time.Duration) {
	w := m.lg.ww.w
	n := 0
	for _, f := range fs {
		if f.Topic == topicMain && len(f.Records) > 0 {
			m.handOut(life, f)
			n += len(f.Records)
		}
	}
	if n == 0 {
		if w.now() == start {
			m.c.after(10*time.Millisecond, m.poll) // an error at once: do not spin
		} else {
			m.c.after(0, m.poll)
		}
		return
	}
	w.coverage.Inc("event/lib-member-batch")
	took := time.Duration(1+m.c.rng.IntN(40)) * time.Millisecond
	if m.c.rng.IntN(libSlowOneIn) == 0 && !m.lg.settling {
		took = w.groupSession() * 3 / 2 // past the session: its partitions move
		w.coverage.Inc("event/lib-member-slow")
	}
	if m.crashes < libCrashesMax && m.c.rng.IntN(libCrashOneIn) == 0 && !m.lg.settling {
		m.c.after(time.Duration(m.c.rng.Int64N(int64(took))), m.crash)
	}
	m.c.after(took, func() { m.processed(life) })
}

// handOut checks one partition's records as the application gets them.
func (m *libMember) handOut(life *libLife, f clientlib.FetchPartition) {
	w := m.lg.ww.w
	p := int(f.Partition)
	first := f.Records[0].Offset
	if c, ok := life.committed[p]; ok && first < c {
		w.fail("groups(lib): member %d (%s) committed %s/%d at %d before the application was handed offset %d",
			m.idx, life.g.MemberID(), f.Topic, p, c, first)
	}
	recs := make([]linearizability.Record, len(f.Records))
	for i, r := range f.Records {
		recs[i] = linearizability.Record{Offset: r.Offset, Key: string(r.Key), Value: string(r.Value)}
		life.inFlight[p] = append(life.inFlight[p], r.Offset)
	}
	sent := f.FetchedAt.Sub(time.Unix(0, 0))
	id := w.hist.h.CallFetch(linearizability.ClientID(m.c.index), w.hist.key(p, 0), first, 0, ns(sent))
	w.hist.h.ReturnFetch(id, recs, f.HighWatermark, f.LogStartOffset, ns(w.now()))
}

// processed ends the batch in flight, commits by hand when manual, and
// polls again.
func (m *libMember) processed(life *libLife) {
	if !life.alive {
		return
	}
	lg := m.lg
	for p, offs := range life.inFlight { // the sets' union: map order does not leak
		for _, off := range offs {
			lg.processed[p][off] = true
		}
	}
	clear(life.inFlight)
	if m.auto || lg.stopping || m.c.rng.IntN(2) == 0 {
		m.poll()
		return
	}
	life.abandon = m.lg.ww.w.simRun(life.cl, func(ctx context.Context) { _ = life.g.Commit(ctx) }, m.poll)
}

// crash kills the member's process mid-batch; it restarts a little later.
func (m *libMember) crash() {
	life := m.life
	if !life.alive || m.lg.stopping || m.lg.settling {
		return
	}
	m.kill()
	m.crashes++
	m.lg.ww.w.coverage.Inc("event/lib-member-crash")
	m.c.after(time.Duration(50+m.c.rng.IntN(450))*time.Millisecond, m.spawn)
}

// kill ends the current process: its task and every callback of its
// transport; it holds nothing, and its history ops in flight end (a
// commit's indefinite).
func (m *libMember) kill() {
	life := m.life
	if life == nil || !life.alive {
		return
	}
	life.alive = false
	if life.abandon != nil {
		life.abandon()
	}
	for p, h := range m.lg.holder {
		if h == m.idx {
			m.lg.holder[p] = -1
		}
	}
	h := m.lg.ww.w.hist.h
	for id := range life.pending { // each op ends on its own: map order does not leak
		if h.KindOf(id) == linearizability.KindCommitOffset {
			h.Indefinite(id, ns(m.lg.ww.w.now()))
		} else {
			h.Fail(id, ns(m.lg.ww.w.now()))
		}
	}
	clear(life.pending)
}

// leased reports whether the member's current process surely still holds
// its partitions: a heartbeat it sent less than half a session ago was
// answered. Half, not a whole session (its client drops them only once a
// whole one lapsed), as the private members this replaced did: TestSim
// seed 90 handed a partition over 952 ms after its holder's last answered
// heartbeat was sent, while the coordinator moved (n3 stopped answering);
// the likely cause, not traced in the node, is a new coordinator whose
// session timers start before an answer the deposed one still gave.
func (m *libMember) leased() bool {
	life := m.life
	return life != nil && life.alive && life.lastOK > 0 && m.lg.ww.w.now()-life.lastOK <= m.lg.ww.w.groupSession()/2
}

// acquire notes that OnAssigned gave the member tp: no other member may
// hold it still.
func (m *libMember) acquire(life *libLife, tp clientlib.TopicPartition) {
	lg := m.lg
	p := int(tp.Partition)
	if tp.Topic != topicMain || p >= lg.parts || !life.alive {
		return
	}
	if stale := lg.ww.w.now() - life.lastOK; life.lastOK == 0 || stale > lg.ww.w.groupSession()/2 {
		lg.ww.w.fail("groups: member %d (%s, epoch %d) was given partition %d %v after its last answered heartbeat was sent: past half a session, the coordinator may have expired it",
			m.idx, life.g.MemberID(), life.g.Epoch(), p, stale)
	}
	if h := lg.holder[p]; h >= 0 && h != m.idx && lg.members[h].leased() {
		o := lg.members[h].life
		lg.ww.w.fail("groups: partition %d given to member %d (%s, epoch %d) while member %d (%s, epoch %d) still holds it (its last heartbeat answered was sent %v ago)",
			p, m.idx, life.g.MemberID(), life.g.Epoch(), h, o.g.MemberID(), o.g.Epoch(), lg.ww.w.now()-o.lastOK)
	}
	if lg.last[p] >= 0 && lg.last[p] != m.idx {
		lg.ww.w.coverage.Inc("event/group-handover")
	}
	lg.holder[p], lg.last[p] = m.idx, m.idx
}

// release notes that OnRevoked or OnLost took ps from the member.
func (m *libMember) release(ps []clientlib.TopicPartition) {
	for _, tp := range ps {
		if p := int(tp.Partition); tp.Topic == topicMain && p < m.lg.parts && m.lg.holder[p] == m.idx {
			m.lg.holder[p] = -1
		}
	}
}

// onCommit checks a commit a member's client sends: no offset may pass a
// record the application was handed and has not processed.
func (m *libMember) onCommit(life *libLife, req *strandpb.OffsetCommitRequest) {
	for _, o := range req.GetOffsets() {
		if o.GetTopic() != topicMain {
			continue
		}
		p := int(o.GetPartition())
		for _, off := range life.inFlight[p] {
			if off < o.GetOffset() {
				m.lg.ww.w.fail("groups(lib): member %d (%s) commits %s/%d at %d past offset %d, handed out and not processed",
					m.idx, life.g.MemberID(), o.GetTopic(), p, o.GetOffset(), off)
				break
			}
		}
		life.committed[p] = max(life.committed[p], o.GetOffset())
	}
}

// settle starts the convergence phase once everything healed; then runs
// after it ended.
func (lg *libGroup) settle(then func()) {
	if len(lg.members) == 0 {
		then()
		return
	}
	lg.settling, lg.settleAt, lg.then = true, lg.ww.w.now(), then
	lg.ww.admin.after(groupHeartbeat, lg.checkConverged)
}

// checkConverged ends the settle phase when the live members hold every
// partition, balanced, and fails it past groupSettleBound().
func (lg *libGroup) checkConverged() {
	w := lg.ww.w
	counts := make([]int, len(lg.members))
	covered := 0
	for _, h := range lg.holder {
		if h >= 0 {
			covered++
			counts[h]++
		}
	}
	balanced := covered == lg.parts && slices.Max(counts)-slices.Min(counts) <= 1
	if !balanced && w.now()-lg.settleAt < w.groupSettleBound() {
		lg.ww.admin.after(groupHeartbeat, lg.checkConverged)
		return
	}
	if !balanced {
		w.fail("groups: no convergence %v after the heal: holders %v", w.groupSettleBound(), lg.holder)
	} else {
		w.coverage.Inc("event/group-converged")
	}
	lg.ended = true
	lg.then()
}

// finish stops every member once the group converged, reads the group's
// committed offsets and checks at-least-once delivery; then runs then.
func (lg *libGroup) finish(then func()) {
	lg.stopping = true
	for _, m := range lg.members {
		m.kill()
	}
	if len(lg.members) == 0 {
		then()
		return
	}
	lg.readCommitted(0, then)
}

// libFinalReadsMax bounds the attempts to read the final offsets.
const libFinalReadsMax = 40

// readCommitted reads the group's committed offsets with a fresh client on
// the first member's network position, retrying while the cluster settles.
func (lg *libGroup) readCommitted(attempt int, then func()) {
	m := lg.members[0]
	life := &libLife{alive: true, pending: map[linearizability.OpID]bool{}}
	m.life = life
	seeds := make([]string, len(lg.ww.peers))
	for i, p := range lg.ww.peers {
		seeds[i] = p.Address // every node: one may stay down after the heal (seed 88: 14 s an attempt at a dead one)
	}
	cl, err := clientlib.NewClient(append([]clientlib.Opt{clientlib.Simulated(libMemberTransport{m: m, life: life}),
		clientlib.SeedAddresses(seeds...), clientlib.RandSeed(m.c.rng.Uint64()),
		clientlib.RetryBackoff(wireBackoff.Base, wireBackoff.Max), clientlib.RequestTimeout(lg.ww.w.opts.libRequestTimeout()), clientlib.StallTimeout(lg.ww.w.opts.libStallTimeout())},
		lg.ww.sasl.libOpts(m.c)...)...) // SASL: sasl.go
	if err != nil {
		panic("simnet: library checker client: " + err.Error())
	}
	var got []clientlib.CommittedOffset
	life.cl = cl
	life.abandon = lg.ww.w.simRun(cl, func(ctx context.Context) { got, err = cl.FetchOffsets(ctx, groupID) }, func() {
		life.alive = false
		switch {
		case err == nil:
			lg.checkAtLeastOnce(got)
			then()
		case attempt+1 < libFinalReadsMax:
			m.c.after(100*time.Millisecond, func() { lg.readCommitted(attempt+1, then) })
		default:
			lg.ww.w.fail("groups(lib): the final committed offsets are unreadable after the heal: %v", err)
			then()
		}
	})
}

// checkAtLeastOnce checks that every acknowledged record of the main topic
// below the group's committed offset was processed by some member.
func (lg *libGroup) checkAtLeastOnce(committed []clientlib.CommittedOffset) {
	w := lg.ww.w
	at := slices.Repeat([]int64{-1}, lg.parts)
	for _, c := range committed {
		if c.Topic == topicMain && int(c.Partition) < lg.parts {
			at[c.Partition] = c.Offset
		}
	}
	missed := 0
	w.hist.h.Each(func(op *linearizability.Op) {
		if op.Kind != linearizability.KindProduce || op.Outcome != linearizability.OutcomeOK || op.TP.Topic != topicMain {
			return
		}
		p := int(op.TP.Partition)
		for j := range op.Sent {
			off := op.Offset + int64(j)
			if off >= lg.excused[p] && off < at[p] && !lg.processed[p][off] {
				if missed == 0 {
					w.fail("groups(lib): acknowledged record %s/%d@%d is below the group's committed offset %d and no member processed it",
						topicMain, p, off, at[p])
				}
				missed++
			}
		}
	})
	for _, off := range at {
		if off > 0 {
			w.coverage.Inc("event/lib-group-committed")
		}
	}
	if missed == 0 {
		w.coverage.Inc("event/lib-group-at-least-once")
	}
}

// onFetchAnswer notes the log starts a node declared by refusing a fetch
// below it: the reset policy (ResetEarliest) then skips the records
// below, which the at-least-once check excuses (the node says they are
// gone).
func (lg *libGroup) onFetchAnswer(req *strandpb.FetchRequest, resp *strandpb.Response) {
	if req == nil {
		return
	}
	for _, a := range resp.GetFetch().GetPartitions() {
		if a.GetTopic() != topicMain || int(a.GetPartition()) >= lg.parts ||
			a.GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE {
			continue
		}
		for _, q := range req.GetPartitions() {
			if q.GetTopic() == a.GetTopic() && q.GetPartition() == a.GetPartition() && q.GetOffset() < a.GetLogStartOffset() {
				p := int(a.GetPartition())
				lg.excused[p] = max(lg.excused[p], a.GetLogStartOffset())
				lg.ww.w.coverage.Inc("event/lib-member-reset")
			}
		}
	}
}

// onEarliestAnswer notes the log start a ListOffsets answer gave for a
// start at the earliest offset (a partition without a committed offset):
// the records below were removed before any member could read them.
func (lg *libGroup) onEarliestAnswer(req *strandpb.ListOffsetsRequest, resp *strandpb.Response) {
	if req == nil {
		return
	}
	for _, a := range resp.GetListOffsets().GetPartitions() {
		if a.GetTopic() != topicMain || int(a.GetPartition()) >= lg.parts || a.GetError() != nil {
			continue
		}
		for _, q := range req.GetPartitions() {
			if q.GetTopic() == a.GetTopic() && q.GetPartition() == a.GetPartition() && q.GetTimestampMs() == -2 {
				lg.excused[a.GetPartition()] = max(lg.excused[a.GetPartition()], a.GetOffset())
			}
		}
	}
}

// libMemberTransport is the simulated network as one process of a
// library member sees it: nothing reaches a dead process, and its commits
// pass the commit check on their way out.
type libMemberTransport struct {
	m    *libMember
	life *libLife
}

func (t libMemberTransport) Now() time.Duration { return t.m.c.ww.w.now() }

func (t libMemberTransport) After(d time.Duration, fn func()) {
	t.m.c.after(d, func() {
		if t.life.alive {
			fn()
		}
	})
}

func (t libMemberTransport) Call(addr string, req *strandpb.Request, done func(*strandpb.Response, error)) {
	t.CallOn(0, addr, req, done)
}

// CallOn is Call on connection id (0: none; clientcore.Conns, sasl.go):
// each process (life) of a member dials its own connections.
func (t libMemberTransport) CallOn(id uint64, addr string, req *strandpb.Request, done func(*strandpb.Response, error)) {
	if cr := req.GetOffsetCommit(); cr != nil && t.life.g != nil {
		t.m.onCommit(t.life, cr)
	}
	answered := t.m.record(t.life, req)
	live := func(resp *strandpb.Response, err error) {
		if t.life.alive {
			answered(resp, err)
			t.m.lg.onFetchAnswer(req.GetFetch(), resp)
			t.m.lg.onEarliestAnswer(req.GetListOffsets(), resp)
			done(resp, err)
		}
	}
	libTransport{t.m.c}.CallOn(id, addr, req, live)
}

// record makes a history op of a member's heartbeat (the epoch it is
// given), commit (per partition) or committed-offset read (per
// partition), and returns what ends them with the answer.
func (m *libMember) record(life *libLife, req *strandpb.Request) func(*strandpb.Response, error) {
	var ids []linearizability.OpID
	var end func(resp *strandpb.Response, err error)
	switch {
	case req.GetGroupHeartbeat() != nil && req.GetGroupHeartbeat().GetGroup() == groupID && req.GetGroupHeartbeat().GetMemberEpoch() >= 0:
		ids, end = m.recordHeartbeat(life, req.GetGroupHeartbeat())
	case req.GetOffsetCommit() != nil && req.GetOffsetCommit().GetGroup() == groupID:
		ids, end = m.recordCommit(req.GetOffsetCommit())
	case req.GetOffsetFetch() != nil && req.GetOffsetFetch().GetGroup() == groupID:
		ids, end = m.recordOffsetFetch(req.GetOffsetFetch())
	default:
		return func(*strandpb.Response, error) {}
	}
	for _, id := range ids {
		life.pending[id] = true
	}
	return func(resp *strandpb.Response, err error) {
		for _, id := range ids {
			delete(life.pending, id)
		}
		end(resp, err)
	}
}

// recordHeartbeat is record's op for a heartbeat: the epoch it is given,
// which must never go back for the member id.
func (m *libMember) recordHeartbeat(life *libLife, hb *strandpb.ConsumerGroupHeartbeatRequest) ([]linearizability.OpID, func(*strandpb.Response, error)) {
	w := m.lg.ww.w
	h := w.hist.h
	sent := w.now()
	id := h.CallMemberEpoch(linearizability.ClientID(m.c.index), groupID, hb.GetMemberId(), ns(sent))
	return []linearizability.OpID{id}, func(resp *strandpb.Response, err error) {
		if e := resp.GetGroupHeartbeat().GetMemberEpoch(); err == nil && wireErr(resp.GetError()) == nil && e > 0 {
			h.ReturnMemberEpoch(id, e, ns(w.now()))
			if prev := m.lg.granted[hb.GetMemberId()]; e < prev {
				w.fail("groups: member %d (%s) was given epoch %d after epoch %d: the coordinator forgot the group's epochs",
					m.idx, hb.GetMemberId(), e, prev)
			}
			m.lg.granted[hb.GetMemberId()] = max(e, m.lg.granted[hb.GetMemberId()])
			life.lastOK = sent
			m.onEpoch(life, hb.GetMemberId(), e)
		} else {
			h.Fail(id, ns(w.now()))
		}
	}
}

// recordCommit is record's ops for a commit, one per partition.
func (m *libMember) recordCommit(cr *strandpb.OffsetCommitRequest) ([]linearizability.OpID, func(*strandpb.Response, error)) {
	w := m.lg.ww.w
	h := w.hist.h
	var ids []linearizability.OpID
	for _, o := range cr.GetOffsets() {
		ids = append(ids, h.CallCommitOffsetAs(linearizability.ClientID(m.c.index), groupID, cr.GetMemberId(), cr.GetMemberEpoch(),
			linearizability.TopicPartition{Topic: o.GetTopic(), Partition: o.GetPartition()}, o.GetOffset(), ns(w.now())))
	}
	return ids, func(resp *strandpb.Response, err error) {
		if err == nil {
			err = wireErr(resp.GetError())
		}
		for _, id := range ids {
			switch {
			case err == nil:
				h.ReturnCommitted(id, ns(w.now()))
				w.coverage.Inc("event/group-commit")
			case clientlib.ClassifyErr(err).MaybeWritten || errCode(err) == strandpb.ErrorCode_ERROR_CODE_NONE:
				h.Indefinite(id, ns(w.now()))
			default:
				h.Fail(id, ns(w.now()))
			}
		}
	}
}

// recordOffsetFetch is record's ops for a committed-offset read, one per
// partition (-1: none committed).
func (m *libMember) recordOffsetFetch(of *strandpb.OffsetFetchRequest) ([]linearizability.OpID, func(*strandpb.Response, error)) {
	w := m.lg.ww.w
	h := w.hist.h
	var ids []linearizability.OpID
	var tps []linearizability.TopicPartition
	for _, gp := range of.GetPartitions() {
		for _, p := range gp.GetPartitions() {
			tp := linearizability.TopicPartition{Topic: gp.GetTopic(), Partition: p}
			tps = append(tps, tp)
			ids = append(ids, h.CallFetchCommitted(linearizability.ClientID(m.c.index), groupID, tp, ns(w.now())))
		}
	}
	return ids, func(resp *strandpb.Response, err error) {
		if err == nil {
			err = wireErr(resp.GetError())
		}
		for i, id := range ids {
			if err != nil {
				h.Fail(id, ns(w.now()))
				continue
			}
			off := int64(-1)
			for _, o := range resp.GetOffsetFetch().GetOffsets() {
				if o.GetTopic() == tps[i].Topic && o.GetPartition() == tps[i].Partition {
					off = o.GetOffset()
				}
			}
			h.ReturnOffset(id, off, ns(w.now()))
		}
	}
}

// onEpoch notes an epoch a heartbeat gave the member; one new epoch in
// libZombieOneIn draws a zombie probe of the one before it.
func (m *libMember) onEpoch(life *libLife, member string, e int32) {
	if n := len(life.epochs); n > 0 && life.epochs[n-1] >= e {
		return
	}
	life.epochs = append(life.epochs, e)
	if n := len(life.epochs); n >= 2 && !m.lg.settling && m.c.rng.IntN(libZombieOneIn) == 0 {
		m.zombieCommit(life, member, life.epochs[n-2])
	}
}

// zombieCommit commits, as member at an epoch it has since left behind,
// the offset the member last committed for one of the partitions it
// committed (none when it committed nothing): the coordinator must
// refuse it.
func (m *libMember) zombieCommit(life *libLife, member string, epoch int32) {
	lg := m.lg
	w := lg.ww.w
	if m.zombie.busy || len(life.committed) == 0 {
		return // the last probe is still out, or nothing committed: a probe would move the group's offset
	}
	ps := slices.Sorted(maps.Keys(life.committed))
	p := ps[m.c.rng.IntN(len(ps))]
	off := life.committed[p]
	w.coverage.Inc("event/group-zombie-commit")
	tp := linearizability.TopicPartition{Topic: topicMain, Partition: int32(p)}
	id := w.hist.h.CallCommitOffsetAs(linearizability.ClientID(libRawClient+m.c.index), groupID, member, epoch, tp, off, ns(w.now()))
	req := &strandpb.Request{Body: &strandpb.Request_OffsetCommit{OffsetCommit: &strandpb.OffsetCommitRequest{
		Group: groupID, MemberId: member, MemberEpoch: epoch,
		Offsets: []*strandpb.OffsetCommitPartition{{Topic: topicMain, Partition: int32(p), Offset: off}},
	}}}
	lg.ww.callCoordinator(m.c, groupID, &m.zombie, func() bool { return true }, req, func(_ *strandpb.Response, err error) {
		switch {
		case err == nil:
			w.hist.h.ReturnCommitted(id, ns(w.now()))
			w.fail("groups: member %s's commit at epoch %d landed after it had been given a later epoch", member, epoch)
		case clientlib.ClassifyErr(err).MaybeWritten || errCode(err) == strandpb.ErrorCode_ERROR_CODE_NONE:
			w.hist.h.Indefinite(id, ns(w.now()))
		default:
			w.hist.h.Fail(id, ns(w.now()))
		}
	})
}
