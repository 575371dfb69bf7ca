package node

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/quorum"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// stallWorld runs a cluster on the pipelined storage path where one node's
// storage jobs never return until released: its fsyncs hang.
type stallWorld struct {
	t       *testing.T
	c       *cluster
	stalled NodeID
	held    []SyncJob // the stalled node's jobs, not run
}

// newStallWorld starts a 3-node cluster of one partition (tp0) whose
// leader's disk stalls from now on; logs go to logs when not nil.
func newStallWorld(t *testing.T, seed uint64, logs *bytes.Buffer, config func(*Config)) *stallWorld {
	c := newCluster(t, seed, 3, replicated(3, "orders", 1), func(cfg *Config) {
		if logs != nil {
			cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
		}
		if config != nil {
			config(cfg)
		}
	})
	lead := c.leader(tp0)
	c.settle()
	return &stallWorld{t: t, c: c, stalled: lead}
}

// run processes every node, runs the healthy nodes' jobs and holds the
// stalled node's, and delivers frames, until nothing moves (bounded).
func (w *stallWorld) run() {
	w.t.Helper()
	c := w.c
	for range 200 {
		moved := false
		for _, id := range c.ids {
			core := c.cores[id]
			if err := core.Process(); err != nil {
				w.t.Fatalf("node %d: process: %v", id, err)
			}
			jobs := core.TakeSyncJobs(nil)
			if id == w.stalled {
				w.held = append(w.held, jobs...)
				continue
			}
			for _, j := range jobs {
				core.SyncDone(j.Token, j.Run())
				moved = true
			}
		}
		queue := c.queue
		c.queue = nil
		for _, e := range queue {
			if c.drop == nil || !c.drop(e) {
				c.cores[e.to].Receive(e.frame)
			}
		}
		if !moved && len(queue) == 0 {
			return
		}
	}
	w.t.Fatal("stall world did not settle")
}

// tick ticks every node once and runs.
func (w *stallWorld) tick() {
	for _, id := range w.c.ids {
		w.c.cores[id].Tick()
	}
	w.run()
}

// leaderOf is the node leading tp in the highest term, 0 when none.
func (w *stallWorld) leaderOf(tp TopicPartition) NodeID {
	var lead NodeID
	var term uint64
	for _, id := range w.c.ids {
		for _, st := range w.c.cores[id].Status() {
			if st.TopicPartition == tp && st.IsLeader && st.Term >= term {
				lead, term = id, st.Term
			}
		}
	}
	return lead
}

// release runs the stalled node's held jobs: its disk answers again.
func (w *stallWorld) release() {
	core := w.c.cores[w.stalled]
	for len(w.held) > 0 {
		held := w.held
		w.held = nil
		for _, j := range held {
			core.SyncDone(j.Token, j.Run())
		}
		w.stalled = 0
		w.run()
	}
	w.stalled = 0
}

// A leader whose fsync hangs turns stalled after DiskStallAfter (one
// election timeout by default), refuses produce with ErrDiskStalled and
// hands its leadership to a healthy replica, which then takes writes while
// the stalled disk still hangs; the produce waiting on the hung fsync is
// answered as maybe written. Once the disk answers the node leaves the
// state. Before the watchdog the leader kept its partition and every
// acks=all produce hung (TestBugStalledLeaderKeepsLeading shows it); and
// the transfer never completed while a write waited behind the hung sync
// (the followers' acknowledgements of it were dropped as insane).
func TestStalledLeaderHandsOffLeadership(t *testing.T) {
	var logs bytes.Buffer
	w := newStallWorld(t, 41, &logs, nil)
	stalled := w.stalled
	core := w.c.cores[stalled]
	var hung *ProduceResult
	core.produceNow(ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "hung", 1)},
		func(r ProduceResult) { hung = &r })
	w.run()
	if len(w.held) == 0 {
		t.Fatal("the produce started no sync on the leader")
	}
	// A second write comes while the first sync hangs: the leader sends it
	// to the followers at once but queues its own write behind the sync,
	// so the followers acknowledge an index its log does not hold yet.
	core.produceNow(ProduceRequest{TopicPartition: tp0, Acks: AcksLeader, ProducerID: -1, Batch: testBatch(t, "queued", 1)},
		func(ProduceResult) {})
	w.run()
	limit := int(core.diskStallTicks()) + 3*core.cfg.ElectionTicks
	var refused error
	asked, moved := false, 0
	for i := 0; i < limit && moved == 0; i++ {
		for _, id := range w.c.ids {
			w.c.cores[id].Tick()
		}
		if core.diskStalled() && !asked { // it has just started its hand-off: still leading
			asked = true
			core.produceNow(ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "x", 1)},
				func(r ProduceResult) { refused = r.Err })
		}
		w.run()
		if lead := w.leaderOf(tp0); lead != 0 && lead != stalled {
			moved = i + 1
		}
	}
	if moved == 0 {
		t.Fatalf("node %d still leads %v %d ticks into a stalled fsync", stalled, tp0, limit)
	}
	if !core.diskStalled() || core.Stats().StallHandOffs == 0 {
		t.Fatalf("stalled %v, hand-offs %d", core.diskStalled(), core.Stats().StallHandOffs)
	}
	if !errors.Is(refused, ErrDiskStalled) {
		t.Fatalf("produce on the stalled leader: %v, want ErrDiskStalled", refused)
	}
	if hung == nil || !errors.Is(hung.Err, ErrLeadershipLost) {
		t.Fatalf("the produce waiting on the hung fsync: %+v, want ErrLeadershipLost (maybe written)", hung)
	}
	t.Logf("leadership moved %d ticks into the stall (threshold %d)", moved, core.diskStallTicks())
	lead := w.leaderOf(tp0)
	var res *ProduceResult
	w.c.cores[lead].produceNow(ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "new", 1)},
		func(r ProduceResult) { res = &r })
	for i := 0; i < 20 && res == nil; i++ {
		w.tick()
	}
	if res == nil || res.Err != nil {
		t.Fatalf("produce on the new leader %d while node %d is stalled: %+v", lead, stalled, res)
	}
	if w.leaderOf(tp0) == stalled {
		t.Fatal("the stalled node took its leadership back")
	}
	file := "/log" // the partition's segment; with the node-wide WAL its sync names the WAL
	if *walFlag {
		file = "file=wal"
	}
	if !strings.Contains(logs.String(), "slow storage job") || !strings.Contains(logs.String(), file) ||
		!strings.Contains(logs.String(), "disk stalled") {
		t.Fatalf("no slow-job and stall log lines naming the file:\n%s", logs.String())
	}
	w.release()
	for range 3 {
		w.tick()
	}
	if core.diskStalled() {
		t.Fatal("node still stalled after its disk answered")
	}
}

// The thresholds are configurable and counted in ticks: with
// DiskStallAfter at 50 ticks the node is not stalled at 49 and is at 50.
func TestDiskStallAfterIsConfigurable(t *testing.T) {
	w := newStallWorld(t, 42, nil, func(cfg *Config) { cfg.DiskStallAfter = 50 * tickDurationDefault })
	core := w.c.cores[w.stalled]
	core.produceNow(ProduceRequest{TopicPartition: tp0, Acks: AcksLeader, ProducerID: -1, Batch: testBatch(t, "a", 1)},
		func(ProduceResult) {})
	w.run()
	if len(w.held) == 0 {
		t.Fatal("no sync started")
	}
	for i := 1; i < 50; i++ {
		w.tick()
		if core.diskStalled() {
			t.Fatalf("stalled after %d ticks, want 50", i)
		}
	}
	w.tick()
	if !core.diskStalled() {
		age, file := core.oldestStorageJob()
		t.Fatalf("not stalled after 50 ticks (oldest job %v, %s)", age, file)
	}
	if v := core.AdminView(); !v.DiskStalled || v.OldestStorageJob < 50*tickDurationDefault || v.OldestStorageJobFile == "" {
		t.Fatalf("admin view: stalled %v oldest %v %q", v.DiskStalled, v.OldestStorageJob, v.OldestStorageJobFile)
	}
	for _, id := range w.c.ids {
		if id == w.stalled {
			continue
		}
		for _, pl := range w.c.cores[id].livenessView() {
			if pl.Node == w.stalled && !pl.DiskStalled {
				t.Fatalf("node %d does not see node %d stalled: %+v", id, w.stalled, pl)
			}
		}
	}
}

// ask sends req to node id and ticks until it is answered (bounded).
func (w *stallWorld) ask(id NodeID, req *strandpb.Request) *strandpb.Response {
	w.t.Helper()
	var resp *strandpb.Response
	w.c.cores[id].handleAnonymous(req, func(r *strandpb.Response) { resp = r })
	for range 50 {
		w.run()
		if resp != nil {
			return resp
		}
		w.tick()
	}
	w.t.Fatalf("node %d never answered %v", id, req)
	return nil
}

// A stalled node is named stalled to clients, not only to its peers and
// its own admin listener: in the stalled node's own metadata entry and in
// the members list of every node (the answer `strand cluster` prints).
// Before, the wire carried only disk_full, so `strand cluster` showed a
// stalled node as healthy.
func TestStalledNodeShownToClients(t *testing.T) {
	w := newStallWorld(t, 43, nil, nil)
	core := w.c.cores[w.stalled]
	core.produceNow(ProduceRequest{TopicPartition: tp0, Acks: AcksLeader, ProducerID: -1, Batch: testBatch(t, "a", 1)},
		func(ProduceResult) {})
	w.run()
	for i := 0; !core.diskStalled(); i++ {
		if i > int(core.diskStallTicks())+1 {
			t.Fatalf("not stalled %d ticks into a hung fsync", i)
		}
		w.tick()
	}
	meta := w.ask(w.stalled, &strandpb.Request{CorrelationId: 1, Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}})
	for _, n := range meta.GetMetadata().GetNodes() {
		if got, want := n.GetDiskStalled(), NodeID(n.GetId()) == w.stalled; got != want {
			t.Errorf("metadata from node %d: node %d disk_stalled %v, want %v", w.stalled, n.GetId(), got, want)
		}
	}
	for _, id := range w.c.ids {
		members := w.ask(id, &strandpb.Request{CorrelationId: 2, Body: &strandpb.Request_ClusterMembers{ClusterMembers: &strandpb.ClusterMembersRequest{}}})
		if len(members.GetClusterMembers().GetMembers()) == 0 {
			t.Fatalf("node %d lists no members: %v", id, members)
		}
		for _, m := range members.GetClusterMembers().GetMembers() {
			if got, want := m.GetDiskStalled(), NodeID(m.GetId()) == w.stalled; got != want {
				t.Errorf("members from node %d: node %d disk_stalled %v, want %v", id, m.GetId(), got, want)
			}
		}
	}
}

// carriesTimeoutNow reports whether a raft frame carries a MsgTimeoutNow.
func carriesTimeoutNow(frame []byte) bool {
	return frameCarries(frame, raftpb.MessageType_MsgTimeoutNow)
}

// frameCarries reports whether a raft frame carries a message of type typ.
func frameCarries(frame []byte, typ raftpb.MessageType) bool {
	_, msgs, ok := parseRaftFrame(frame, nil, nil)
	for _, rm := range msgs {
		var m raftpb.Message
		if ok && proto.Unmarshal(rm.message, &m) == nil && m.GetType() == typ {
			return true
		}
	}
	return false
}

// stallUntilStalled makes the stalled node's disk hang under a write and
// ticks until its watchdog says so.
func (w *stallWorld) stallUntilStalled() {
	w.t.Helper()
	core := w.c.cores[w.stalled]
	core.produceNow(ProduceRequest{TopicPartition: tp0, Acks: AcksLeader, ProducerID: -1, Batch: testBatch(w.t, "a", 1)},
		func(ProduceResult) {})
	w.run()
	for i := 0; !core.diskStalled(); i++ {
		if i > int(core.diskStallTicks())+1 {
			w.t.Fatalf("not stalled %d ticks into a hung fsync", i)
		}
		w.tick()
	}
}

// A stalled leader whose hand-off target never takes the leadership (it
// restarted, or calls itself unpromotable, and the MsgTimeoutNow is void)
// hands it to another replica once raft aborted the transfer. Before, it
// picked the same best-matching replica on every attempt and kept its
// leaderships for as long as that replica failed (simnet seed 68 with
// production's ticks: 5 s).
func TestStalledLeaderRotatesFailedHandOff(t *testing.T) {
	w := newStallWorld(t, 44, nil, nil)
	var deaf NodeID // the first target: it never acts on a MsgTimeoutNow
	w.c.drop = func(e envelope) bool {
		if e.from != w.stalled || !carriesTimeoutNow(e.frame) {
			return false
		}
		if deaf == 0 {
			deaf = e.to
		}
		return e.to == deaf
	}
	w.stallUntilStalled()
	core := w.c.cores[w.stalled]
	limit := 3 * core.cfg.ElectionTicks * core.cfg.TicksPerRaftTick
	for i := 0; i < limit; i++ {
		if lead := w.leaderOf(tp0); lead != 0 && lead != w.stalled {
			if lead == deaf {
				t.Fatalf("node %d leads, but it never got a MsgTimeoutNow", lead)
			}
			t.Logf("node %d leads %d ticks into the stall (hand-off to node %d lost, %d hand-offs)", lead, i, deaf,
				core.Stats().StallHandOffs)
			return
		}
		w.tick()
	}
	t.Fatalf("stalled node %d still leads %v %d ticks into the stall: every hand-off went to node %d (%d hand-offs)",
		w.stalled, tp0, limit, deaf, core.Stats().StallHandOffs)
}

// In a joint configuration a stalled leader hands its leadership to a
// voter of the incoming configuration, never to an outgoing-only voter
// (a move's leaver): the leaver may have applied the leave the stalled
// leader cannot apply, and then ignores the MsgTimeoutNow as
// unpromotable. Before, the leaver was the pick whenever its match was the
// highest (simnet seed 68 with production's ticks: node 2, leaving sim/0,
// picked on every attempt).
func TestHandOffTargetSkipsOutgoingVoters(t *testing.T) {
	w := newStallWorld(t, 45, nil, nil)
	core := w.c.cores[w.stalled] // leading tp0
	var g *group
	for _, pg := range core.partitionGroups() {
		if pg.tp == tp0 {
			g = pg
		}
	}
	st := g.raw.Status()
	first := core.handOffTarget(g, st)
	if first == 0 {
		t.Fatalf("no hand-off target in the plain configuration %v", st.Config.Voters)
	}
	// The same status in a joint configuration that drops first: it is
	// a voter of the outgoing configuration only.
	joint := st
	joint.Config.Voters[1] = quorum.MajorityConfig{}
	joint.Config.Voters[0] = quorum.MajorityConfig{}
	for id := range st.Config.Voters[0] {
		joint.Config.Voters[1][id] = struct{}{}
		if NodeID(id) != first {
			joint.Config.Voters[0][id] = struct{}{}
		}
	}
	if got := core.handOffTarget(g, joint); got == first || got == 0 {
		t.Fatalf("in the joint configuration %v the target is %d, want a voter of the incoming one", joint.Config.Voters, got)
	}
}

// A stalled leader still in a joint configuration (it applies nothing
// while its fsyncs hang) hands its leadership to a voter of the incoming
// configuration, never to one of the outgoing one alone: the followers
// may have applied the leave, so that voter is out of the group there and
// refuses to campaign. Before, the leader picked the outgoing voter for
// its highest match and retried it for as long as the stall lasted (the
// simulator's seed 157 on 6870bec: node 3 led partition 1 1.3 s into its
// stall, its MsgTimeoutNow to node 2 answered "unpromotable" every time).
func TestStalledJointLeaderHandsOffToIncomingVoter(t *testing.T) {
	c := &Core{cfg: Config{ID: 3}}
	g := &group{tp: TopicPartition{Topic: "t", Partition: 1}}
	var st raft.Status
	st.Config.Voters = quorum.JointConfig{
		quorum.MajorityConfig{1: {}, 3: {}, 4: {}}, // incoming
		quorum.MajorityConfig{1: {}, 2: {}, 3: {}}, // outgoing
	}
	st.Progress = map[uint64]tracker.Progress{
		1: {Match: 150}, 2: {Match: 170}, 3: {Match: 170}, 4: {Match: 160},
	}
	if to := c.handOffTarget(g, st); to != 4 {
		t.Fatalf("hand-off target %d, want 4 (the incoming voter with the highest match)", to)
	}
	// With no incoming voter but itself left, there is none: an outgoing
	// one may already be out of the group.
	st.Config.Voters[0] = quorum.MajorityConfig{3: {}}
	if to := c.handOffTarget(g, st); to != 0 {
		t.Fatalf("hand-off target %d with no other incoming voter, want none", to)
	}
}
