package txn

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/strandlog/strand/proto/strandpb"
)

// modelID is the reference model of one transactional id: what a
// protocol-following client and an observer know.
type modelID struct {
	// cur is the ids the newest InitProducerId or EndTxn answer handed
	// out: the only producer allowed to act (after a fence or a timeout
	// abort, the abort's epoch, which no client holds).
	cur     Producer
	hasCur  bool
	open    bool             // a transaction is open
	start   int64            // when it opened
	timeout int32            // transaction.timeout.ms
	parts   []TopicPartition // the open transaction's (a group as topic "\x00group NAME")
	// unmarked: the decided transaction's targets whose marker is not yet
	// reported, sorted.
	unmarked []TopicPartition
	// deciding: the decided transaction's markers are being written.
	deciding, commit bool
	handles          []Producer // every producer ever handed out for the id
}

// modelRun is one rapid run: the state under test, a second state restored
// from a snapshot at a random point and fed the same commands, the log of
// encoded commands, and the model.
type modelRun struct {
	rt        *rapid.T
	s         *State
	restored  *State
	log       [][]byte
	now       int64
	ids       map[string]*modelID
	committed int // transactions whose commit completed
}

// apply encodes cmd, applies it to both states through DecodeCommand and
// Apply, and checks that both answer alike and stay equal and valid.
func (m *modelRun) apply(cmd *strandpb.TxnCommand) Result {
	cmd.NowMs = m.now
	b, err := EncodeCommand(cmd)
	if err != nil {
		m.rt.Fatal(err)
	}
	m.log = append(m.log, b)
	dec, err := DecodeCommand(b)
	if err != nil {
		m.rt.Fatalf("decode own command: %v", err)
	}
	r := m.s.Apply(dec)
	if err := m.s.Check(); err != nil {
		m.rt.Fatalf("Check after %v: %v", cmd, err)
	}
	if m.restored != nil {
		r2 := m.restored.Apply(dec)
		if strandpb.CodeOf(r2.Err) != strandpb.CodeOf(r.Err) || r2.Producer != r.Producer || m.restored.Digest() != m.s.Digest() {
			m.rt.Fatalf("restored state diverged at %v: %+v vs %+v", cmd, r2, r)
		}
	}
	return r
}

// decide notes that md's open transaction was decided: every target
// awaits its marker.
func (md *modelID) decide(commit bool) {
	md.open, md.deciding, md.commit = false, true, commit
	md.unmarked = slices.SortedFunc(slices.Values(md.parts), compareTP)
}

// groupTarget is the model's stand-in for a group among partitions.
func groupTarget(g string) TopicPartition { return TopicPartition{Topic: "\x00group " + g} }

func wireP(p Producer) *strandpb.TxnProducer { return producerToWire(p) }

// pickHandle draws a producer of id: usually the current one, sometimes a
// zombie (an older one) or a made-up epoch.
func (m *modelRun) pickHandle(md *modelID) Producer {
	if md.hasCur && rapid.IntRange(0, 7).Draw(m.rt, "current") > 0 {
		return md.cur
	}
	if len(md.handles) > 0 && rapid.Bool().Draw(m.rt, "zombie") {
		return rapid.SampledFrom(md.handles).Draw(m.rt, "handle")
	}
	base := Producer{ID: 1}
	if len(md.handles) > 0 {
		base = md.handles[len(md.handles)-1]
	}
	return Producer{ID: base.ID, Epoch: base.Epoch + int16(rapid.IntRange(-1, 3).Draw(m.rt, "epoch"))}
}

// isCurrent reports whether p is the model's one live producer of md.
func isCurrent(md *modelID, p Producer) bool { return md.hasCur && md.cur == p }

func (m *modelRun) init(id string) {
	md := m.ids[id]
	timeout := int32(rapid.IntRange(1, 300).Draw(m.rt, "timeout"))
	r := m.apply(&strandpb.TxnCommand{Body: &strandpb.TxnCommand_InitProducerId{InitProducerId: &strandpb.TxnInitProducerId{
		TransactionalId: id, TimeoutMs: timeout, MaxTimeoutMs: 250}}})
	switch {
	case timeout > 250:
		if !errors.Is(r.Err, ErrInvalidTimeout) {
			m.rt.Fatalf("timeout %d above max: %v", timeout, r.Err)
		}
	case md.deciding:
		if !errors.Is(r.Err, ErrConcurrentTransactions) || r.Fenced {
			m.rt.Fatalf("init while deciding: %+v", r)
		}
	case md.open:
		if !r.Fenced || !errors.Is(r.Err, ErrConcurrentTransactions) {
			m.rt.Fatalf("init on an open transaction did not fence: %+v", r)
		}
		// The fence's epoch, never handed out: held by no client.
		md.decide(false)
		md.cur.Epoch++
	case r.Err != nil:
		if !errors.Is(r.Err, ErrProducerIDsNeeded) {
			m.rt.Fatalf("init refused: %v", r.Err)
		}
	default:
		for _, h := range md.handles {
			if h == r.Producer || h.ID == r.Producer.ID && h.Epoch >= r.Producer.Epoch {
				m.rt.Fatalf("init answered %+v, not newer than %+v", r.Producer, h)
			}
		}
		md.cur, md.hasCur, md.timeout = r.Producer, true, timeout
		md.handles = append(md.handles, r.Producer)
	}
}

// add is AddPartitions of one partition or, sometimes, AddOffsets of a
// group; before it, Verify of the partition must agree with the model.
func (m *modelRun) add(id string) {
	md := m.ids[id]
	p := m.pickHandle(md)
	tp := TopicPartition{Topic: "t", Partition: int32(rapid.IntRange(0, 3).Draw(m.rt, "partition"))}
	inTxn := isCurrent(md, p) && md.open && !md.deciding && slices.Contains(md.parts, tp)
	if verr := m.s.Verify(id, p, []TopicPartition{tp})[0]; (verr == nil) != inTxn {
		m.rt.Fatalf("Verify %s %+v by %+v: %v, model in transaction %v", id, tp, p, verr, inTxn)
	}
	var r Result
	if rapid.IntRange(0, 4).Draw(m.rt, "offsets") == 0 {
		r = m.apply(&strandpb.TxnCommand{Body: &strandpb.TxnCommand_AddOffsets{AddOffsets: &strandpb.TxnAddOffsets{
			TransactionalId: id, Producer: wireP(p), Group: "g"}}})
		tp = groupTarget("g")
	} else {
		r = m.apply(&strandpb.TxnCommand{Body: &strandpb.TxnCommand_AddPartitions{AddPartitions: &strandpb.TxnAddPartitions{
			TransactionalId: id, Producer: wireP(p), Topics: []*strandpb.TxnPartitions{{Topic: "t", Partitions: []int32{tp.Partition}}}}}})
	}
	ok := isCurrent(md, p) && !md.deciding
	if (r.Err == nil) != ok {
		m.rt.Fatalf("add by %+v (current %+v %v, deciding %v): %v", p, md.cur, md.hasCur, md.deciding, r.Err)
	}
	if !ok {
		return
	}
	if !md.open {
		md.open, md.start, md.parts = true, m.now, nil
	}
	if !slices.Contains(md.parts, tp) {
		md.parts = append(md.parts, tp)
	}
}

func (m *modelRun) end(id string) {
	md := m.ids[id]
	p := m.pickHandle(md)
	commit := rapid.IntRange(0, 3).Draw(m.rt, "commit") > 0
	keep := rapid.IntRange(0, 3).Draw(m.rt, "keep epoch (transactions v1)") == 0
	before := m.s.Digest()
	r := m.apply(&strandpb.TxnCommand{Body: &strandpb.TxnCommand_EndTxn{EndTxn: &strandpb.TxnEnd{
		TransactionalId: id, Producer: wireP(p), Commit: commit, KeepEpoch: keep}}})
	if !isCurrent(md, p) || !md.open {
		// Only a resend of an earlier decision may succeed, changing nothing.
		if r.Err == nil && (r.Prepared || m.s.Digest() != before) {
			m.rt.Fatalf("EndTxn by %+v (current %+v %v, open %v) decided: %+v", p, md.cur, md.hasCur, md.open, r)
		}
		return
	}
	if r.Err != nil {
		if errors.Is(r.Err, ErrProducerIDsNeeded) {
			return
		}
		m.rt.Fatalf("EndTxn by the current producer refused: %v", r.Err)
	}
	bumped := r.Producer.ID == p.ID && r.Producer.Epoch == p.Epoch+1 || r.Producer.ID != p.ID && r.Producer.Epoch == 0
	if keep && r.Producer != p || !keep && !bumped {
		m.rt.Fatalf("EndTxn (keep epoch %v) by %+v answered %+v", keep, p, r.Producer)
	}
	md.decide(commit)
	md.cur = r.Producer
	md.handles = append(md.handles, r.Producer)
}

// adminAbort is an operator's abort (strand txn abort): it decides an
// open transaction's abort at the next epoch (held by no client), answers
// a transaction being aborted again without changing anything, and
// refuses anything else, changing nothing.
func (m *modelRun) adminAbort(id string) {
	md := m.ids[id]
	before := m.s.Digest()
	r := m.apply(&strandpb.TxnCommand{Body: &strandpb.TxnCommand_AdminAbort{AdminAbort: &strandpb.TxnAdminAbort{TransactionalId: id}}})
	switch {
	case md.open:
		want := Producer{ID: md.cur.ID, Epoch: md.cur.Epoch + 1}
		if r.Err != nil || !r.Prepared || r.Producer != want {
			m.rt.Fatalf("operator's abort of an open transaction of %+v: %+v", md.cur, r)
		}
		md.decide(false)
		md.cur = want
	case md.deciding && !md.commit:
		if r.Err != nil || r.Prepared || m.s.Digest() != before {
			m.rt.Fatalf("operator's abort while aborting: %+v", r)
		}
	case r.Err == nil || m.s.Digest() != before:
		m.rt.Fatalf("operator's abort without a transaction open (deciding %v): %+v", md.deciding, r)
	}
}

// marker reports one pending marker (sometimes a stale one), or every
// marker of one prepared transaction, which must complete it.
func (m *modelRun) marker() {
	pend := m.s.Pending()
	if len(pend) == 0 {
		return
	}
	p := rapid.SampledFrom(pend).Draw(m.rt, "prepared")
	md := m.ids[p.ID]
	targets := slices.Clone(p.Partitions)
	for _, g := range p.Groups {
		targets = append(targets, groupTarget(g))
	}
	slices.SortFunc(targets, compareTP)
	if !md.deciding || p.Commit != md.commit || !slices.Equal(targets, md.unmarked) {
		m.rt.Fatalf("pending %+v, model deciding %v commit %v unmarked %v", p, md.deciding, md.commit, md.unmarked)
	}
	var r Result
	switch rapid.IntRange(0, 5).Draw(m.rt, "marker kind") {
	case 0:
		stale := Producer{ID: p.Marker.ID, Epoch: p.Marker.Epoch - 1}
		if r = m.reportMarker(p, stale, 0); !errors.Is(r.Err, ErrStale) {
			m.rt.Fatalf("stale marker accepted: %+v", r)
		}
		return
	case 1, 2:
		for i := range len(p.Partitions) + len(p.Groups) {
			r = m.reportMarker(p, p.Marker, i)
		}
		if !r.Completed {
			m.rt.Fatalf("every marker of %+v reported, not completed", p)
		}
	default:
		r = m.reportMarker(p, p.Marker, rapid.IntRange(0, len(p.Partitions)+len(p.Groups)-1).Draw(m.rt, "which"))
	}
	if r.Err != nil {
		m.rt.Fatalf("marker of %+v refused: %v", p, r.Err)
	}
	if r.Completed != (len(md.unmarked) == 0) {
		m.rt.Fatalf("completed %v with %v unmarked", r.Completed, md.unmarked)
	}
	if r.Completed {
		md.deciding = false
		if md.commit {
			m.committed++
		}
	}
}

// reportMarker reports p's i-th target (partitions, then groups) written
// with marker.
func (m *modelRun) reportMarker(p Prepared, marker Producer, i int) Result {
	mw := &strandpb.TxnMarkerWritten{TransactionalId: p.ID, Marker: wireP(marker)}
	target := groupTarget("")
	if i < len(p.Partitions) {
		mw.Topic, mw.Partition = p.Partitions[i].Topic, p.Partitions[i].Partition
		target = p.Partitions[i]
	} else {
		mw.Group = p.Groups[i-len(p.Partitions)]
		target = groupTarget(mw.Group)
	}
	r := m.apply(&strandpb.TxnCommand{Body: &strandpb.TxnCommand_MarkerWritten{MarkerWritten: mw}})
	if md := m.ids[p.ID]; r.Err == nil {
		md.unmarked = slices.DeleteFunc(md.unmarked, func(x TopicPartition) bool { return x == target })
	}
	return r
}

// tick moves time on and aborts what Expired lists.
func (m *modelRun) tick() {
	m.now += int64(rapid.IntRange(1, 40).Draw(m.rt, "ms"))
	exp := m.s.Expired(m.now)
	var want []string
	for _, id := range sortedKeys(m.ids) {
		if md := m.ids[id]; md.open && m.now-md.start > int64(md.timeout) {
			want = append(want, id)
		}
	}
	var got []string
	for _, e := range exp {
		got = append(got, e.ID)
	}
	if !slices.Equal(got, want) {
		m.rt.Fatalf("at %d expired %v, want %v", m.now, got, want)
	}
	for _, e := range exp {
		r := m.apply(&strandpb.TxnCommand{Body: &strandpb.TxnCommand_TimeoutAbort{TimeoutAbort: &strandpb.TxnTimeoutAbort{
			TransactionalId: e.ID, Producer: wireP(e.Producer)}}})
		if r.Err != nil || !r.Prepared {
			m.rt.Fatalf("timeout abort of %s: %+v", e.ID, r)
		}
		md := m.ids[e.ID]
		md.decide(false)
		md.cur = Producer{ID: e.Producer.ID, Epoch: e.Producer.Epoch + 1} // the abort's epoch, held by no client
	}
}

func sortedKeys(m map[string]*modelID) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestModel runs random InitProducerIds (some fencing an open
// transaction), AddPartitions and EndTxns by current, zombie and made-up
// producers, marker reports (some stale), time passing with timeout aborts,
// producer-id grants, operators' aborts and fail-overs (a second state
// restored from a snapshot), against the reference model: only the current
// producer may add or decide, so a zombie never commits; timeouts are
// listed exactly and abort; Check holds after every command. The state
// restored from the newest snapshot stays equal to the first (same answers,
// same digest); a replay of the whole log gives the same digest.
func TestModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := &modelRun{rt: rt, s: New(), ids: map[string]*modelID{}}
		ids := []string{"a", "b"}
		for _, id := range ids {
			m.ids[id] = &modelID{}
		}
		m.apply(&strandpb.TxnCommand{Body: &strandpb.TxnCommand_GrantProducerIds{GrantProducerIds: &strandpb.TxnProducerIdBlock{First: 1, Count: 4}}})
		for step := range rapid.IntRange(40, 300).Draw(rt, "steps") {
			id := rapid.SampledFrom(ids).Draw(rt, "id")
			switch rapid.IntRange(0, 13).Draw(rt, "op") {
			case 13: // a fail-over: the follower restores the newest snapshot
				r, err := Restore(m.s.Snapshot(int64(step)))
				if err != nil {
					rt.Fatalf("restore: %v", err)
				}
				m.restored = r
			case 0, 1:
				m.init(id)
			case 2, 3, 4, 5:
				m.add(id)
			case 6, 7:
				m.end(id)
			case 8, 9, 10:
				m.marker()
			case 11:
				if rapid.IntRange(0, 3).Draw(rt, "operator abort") == 0 {
					m.adminAbort(id)
				} else {
					m.tick()
				}
			case 12:
				m.apply(&strandpb.TxnCommand{Body: &strandpb.TxnCommand_GrantProducerIds{GrantProducerIds: &strandpb.TxnProducerIdBlock{
					First: m.s.grantedEnd + int64(rapid.IntRange(0, 3).Draw(rt, "gap")), Count: 2}}})
			}
		}
		testModelCommitted += m.committed
		testModelRuns++
		replay := New()
		for _, b := range m.log {
			cmd, err := DecodeCommand(b)
			if err != nil {
				rt.Fatal(err)
			}
			replay.Apply(cmd)
		}
		if replay.Digest() != m.s.Digest() {
			rt.Fatal("replaying the log gave another state")
		}
	})
}

// testModelCommitted counts the transactions TestModel saw commit, and
// testModelRuns its runs, so a test can show the runs reach commits at all.
var testModelCommitted, testModelRuns int

// TestModelReachesCommits shows the random runs are not vacuous: they
// complete commits, at least one in two runs on average (100 runs made
// 114-159; -short's 20 runs made 26, which a fixed floor of 50 refused).
func TestModelReachesCommits(t *testing.T) {
	testModelCommitted, testModelRuns = 0, 0
	TestModel(t)
	if testModelRuns == 0 || 2*testModelCommitted < testModelRuns {
		t.Fatalf("%d commits in TestModel's %d runs, want at least one in two", testModelCommitted, testModelRuns)
	}
	t.Logf("%d commits in %d runs", testModelCommitted, testModelRuns)
}

// TestModelCatchesSkippedFence shows the model has teeth: with the epoch
// check of authorize skipped, a zombie's EndTxn decides a transaction and
// the model fails.
func TestModelCatchesSkippedFence(t *testing.T) {
	s := New()
	s.GrantProducerIDs(1, 4)
	old := s.InitProducerID(InitProducerID{ID: "a", TimeoutMs: 5, MaxTimeoutMs: 5}).Producer
	cur := s.InitProducerID(InitProducerID{ID: "a", TimeoutMs: 5, MaxTimeoutMs: 5}).Producer
	if r := s.AddPartitions(AddPartitions{ID: "a", Producer: cur, Partitions: []TopicPartition{{"t", 0}}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := s.EndTxn(EndTxn{ID: "a", Producer: old, Commit: true}); !errors.Is(r.Err, ErrProducerFenced) {
		t.Fatalf("zombie EndTxn: %+v", r)
	}
	if fmt.Sprint(s.Pending()) != "[]" {
		t.Fatalf("zombie decided: %v", s.Pending())
	}
}
