package raftlog_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// modelEntry is one entry of the model log.
type modelEntry struct {
	term uint64
	data string
}

// logModel is the trivial in-memory model of a Log, plus what a crash may
// leave of it.
//
// What may survive a crash (memdisk.Crash keeps, per file, a prefix of the
// unsynced writes, the last possibly torn) — asserted exactly:
//   - the snapshot is the model's (CreateSnapshot and ApplySnapshot are
//     durable when they return);
//   - the entries are a prefix of the model's entries, ending at or after
//     stableLast: the last index made durable by Sync, by a truncation
//     (durable when Append returns), by CreateSnapshot (which syncs) or by
//     ApplySnapshot (the snapshot index). Never an entry the model does not
//     hold at that index: a replaced suffix never comes back;
//   - the hard state is one of hardAllowed: the one durable at the last
//     durable point, or one set after it (commit raised to the snapshot
//     index, as Open does).
type logModel struct {
	snapIndex, snapTerm uint64
	snapData            string
	ents                []modelEntry // index snapIndex+1+j
	hard                *raftpb.HardState
	stableLast          uint64
	hardAllowed         []*raftpb.HardState // nil element: no hard state
}

func (m *logModel) last() uint64 { return m.snapIndex + uint64(len(m.ents)) }

func (m *logModel) term(i uint64) uint64 {
	if i == m.snapIndex {
		return m.snapTerm
	}
	return m.ents[i-m.snapIndex-1].term
}

func (m *logModel) commit() uint64 { return max(m.hard.GetCommit(), m.snapIndex) }

func (m *logModel) markDurable() {
	m.stableLast = m.last()
	m.hardAllowed = []*raftpb.HardState{m.hard}
}

// crashMachine drives a Log on a memdisk against a logModel.
type crashMachine struct {
	disk   *memdisk.Disk
	faults *faultDisk // wraps disk; the Log runs on it
	opts   raftlog.Options
	log    *raftlog.Log
	model  *logModel
	// inFlight is set while an operation runs into a power cut: errors are
	// expected and the model moves to the post-operation state regardless.
	inFlight bool
	// truncatedAt is the start of the truncating Append in flight, or 0.
	truncatedAt uint64
}

// ok checks the error of a Log operation.
func (m *crashMachine) ok(rt *rapid.T, err error) {
	rt.Helper()
	if err != nil && !m.inFlight {
		rt.Fatal(err)
	}
}

// TestLogAgainstModelWithCrashes shows the Log behaves as the model across append (with conflicting suffixes), hard state, compaction, snapshots, sync, reopen and crashes that lose or tear unsynced writes.
func TestLogAgainstModelWithCrashes(t *testing.T) {
	crashStats = map[string]int{}
	defer func() { t.Logf("crash outcomes: %v", crashStats) }()
	rapid.Check(t, func(rt *rapid.T) {
		m := &crashMachine{disk: memdisk.New(), model: &logModel{hardAllowed: []*raftpb.HardState{nil}}}
		m.faults = &faultDisk{Disk: m.disk, budget: -1}
		m.opts = raftlog.Options{
			SegmentBytesMax:   rapid.Int64Range(60, 600).Draw(rt, "segmentBytesMax"),
			TailCacheBytesMax: rapid.SampledFrom([]int64{-1, 0, 200}).Draw(rt, "tailCacheBytesMax"),
		}
		var err error
		m.log, err = raftlog.Open(m.faults, "log", m.opts)
		mustRT(rt, err)
		defer func() {
			if m.log != nil {
				m.log.Close()
			}
		}()
		rt.Repeat(map[string]func(*rapid.T){
			"append":         m.append,
			"setHardState":   m.setHardState,
			"createSnapshot": m.createSnapshot,
			"applySnapshot":  m.applySnapshot,
			"sync":           m.sync,
			"reopen":         m.reopen,
			"crash":          m.crash,
			"crashDuringOp":  m.crashDuringOp,
			"":               m.check,
		})
	})
}

func (m *crashMachine) append(rt *rapid.T) {
	md := m.model
	start := rapid.Uint64Range(max(md.snapIndex+1, md.commit()+1), md.last()+1).Draw(rt, "start")
	term := md.term(start-1) + rapid.Uint64Range(0, 2).Draw(rt, "termBump")
	n := rapid.IntRange(1, 5).Draw(rt, "count")
	batch := make([]*raftpb.Entry, n)
	added := make([]modelEntry, n)
	for j := range batch {
		data := rapid.StringN(0, 150, -1).Draw(rt, "data")
		batch[j] = entry(start+uint64(j), term, data)
		added[j] = modelEntry{term: term, data: data}
	}
	m.ok(rt, m.log.Append(batch))
	if start <= md.last() { // truncation is durable when Append returns
		m.truncatedAt = start
		md.ents = md.ents[:start-md.snapIndex-1]
		md.markDurable()
	}
	md.ents = append(md.ents, added...)
}

func (m *crashMachine) setHardState(rt *rapid.T) {
	md := m.model
	hs := nextHardState(rt, md.hard, md.commit(), md.last())
	m.ok(rt, m.log.SetHardState(hs))
	md.hard = hs
	md.hardAllowed = append(md.hardAllowed, hs)
}

func (m *crashMachine) createSnapshot(rt *rapid.T) {
	md := m.model
	hi := min(md.commit(), md.last())
	if hi <= md.snapIndex {
		rt.Skip("nothing committed to snapshot")
	}
	i := rapid.Uint64Range(md.snapIndex+1, hi).Draw(rt, "snapIndex")
	data := fmt.Sprintf("state@%d", i)
	m.ok(rt, m.log.CreateSnapshot(i, &raftpb.ConfState{Voters: []uint64{1, 2, 3}}, []byte(data)))
	md.markDurable() // CreateSnapshot syncs the log first
	term := md.term(i)
	md.ents = md.ents[i-md.snapIndex:]
	md.snapIndex, md.snapTerm, md.snapData = i, term, data
}

func (m *crashMachine) applySnapshot(rt *rapid.T) {
	md := m.model
	i := rapid.Uint64Range(md.commit()+1, md.last()+4).Draw(rt, "applyIndex")
	term := md.term(md.last()) + 1 // the log does not hold (i, term): why raft applies it
	data := fmt.Sprintf("leader@%d", i)
	snap := &raftpb.Snapshot{Data: []byte(data), Metadata: &raftpb.SnapshotMetadata{
		Index: new(i), Term: new(term), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}}}}
	m.ok(rt, m.log.ApplySnapshot(snap))
	md.snapIndex, md.snapTerm, md.snapData, md.ents = i, term, data, nil
	md.markDurable()
	if rapid.Bool().Draw(rt, "commitSnapshot") {
		hs := hardState(md.hard.GetTerm(), md.hard.GetVote(), i)
		m.ok(rt, m.log.SetHardState(hs))
		md.hard = hs
		md.hardAllowed = append(md.hardAllowed, hs)
	}
}

func (m *crashMachine) sync(rt *rapid.T) {
	m.ok(rt, m.log.Sync())
	m.model.markDurable()
}

func (m *crashMachine) reopen(rt *rapid.T) {
	mustRT(rt, m.log.Close())
	var err error
	m.log, err = raftlog.Open(m.faults, "log", m.opts)
	mustRT(rt, err)
	hs, _, _ := m.log.InitialState()
	if !sameHard(hs, m.model.hard, m.model.snapIndex) {
		rt.Fatalf("after reopen hard state %v, model %v", hs, m.model.hard)
	}
	m.model.hard = hs // with the commit raised to the snapshot index
}

func (m *crashMachine) crash(rt *rapid.T) {
	m.crashAndCheck(rt, []*logModel{m.model}, m.model.stableLast)
}

// crashDuringOp cuts the power after a random number of disk mutations
// inside one operation, then checks recovery gives the state before the
// operation or after it, as a crash may leave either.
func (m *crashMachine) crashDuringOp(rt *rapid.T) {
	pre := m.model.clone()
	ops := []func(*rapid.T){m.append, m.setHardState, m.applySnapshot, m.sync}
	if min(pre.commit(), pre.last()) > pre.snapIndex {
		ops = append(ops, m.createSnapshot)
	}
	op := ops[rapid.IntRange(0, len(ops)-1).Draw(rt, "opInFlight")]
	m.faults.budget = rapid.IntRange(0, 12).Draw(rt, "mutationsBeforePowerCut")
	m.inFlight, m.truncatedAt = true, 0
	op(rt)
	m.inFlight, m.faults.budget = false, -1
	post := m.model
	post.hardAllowed = append(pre.hardAllowed, post.hardAllowed...)
	lowest := pre.stableLast
	if m.truncatedAt != 0 { // removals durable, cut not yet: a shorter prefix of pre
		lowest = min(lowest, m.truncatedAt-1)
	}
	m.crashAndCheck(rt, []*logModel{pre, post}, lowest)
}

// crashAndCheck crashes the disk, reopens the log and checks the recovered
// state is one of candidates' (see logModel for what may survive): entries
// a prefix of the candidate's ending at or after lowest (or the
// candidate's own stableLast).
func (m *crashMachine) crashAndCheck(rt *rapid.T, candidates []*logModel, lowest uint64) {
	m.log.Close()
	seed := rapid.Uint64().Draw(rt, "crashSeed")
	m.disk.Crash(rand.New(rand.NewPCG(seed, 0)))
	var err error
	m.log, err = raftlog.Open(m.faults, "log", m.opts)
	mustRT(rt, err)
	snap, _ := m.log.Snapshot()
	last, _ := m.log.LastIndex()
	hs, _, _ := m.log.InitialState()
	var md *logModel
	for _, c := range candidates {
		if c.snapIndex == snap.GetMetadata().GetIndex() && string(snap.GetData()) == c.snapData &&
			last >= min(lowest, c.stableLast) && last <= c.last() && c.prefixMatches(m.log, last) {
			md = c
		}
	}
	if md == nil {
		rt.Fatalf("after crash: snapshot %d, last index %d match no candidate state", snap.GetMetadata().GetIndex(), last)
	}
	switch {
	case md != candidates[len(candidates)-1]:
		crashStats["state before the operation in flight"]++
	case last < md.last():
		crashStats["unsynced entries lost"]++
	default:
		crashStats["all entries kept"]++
	}
	md.ents = md.ents[:last-md.snapIndex]
	checkSnapshot(rt, m.log, md)
	checkEntries(rt, m.log, md)
	found := false
	for _, h := range md.hardAllowed {
		found = found || sameHard(hs, h, md.snapIndex)
	}
	if !found {
		rt.Fatalf("after crash hard state %v, want one of %v", hs, md.hardAllowed)
	}
	md.hard = hs
	md.markDurable() // a crash leaves only durable state
	m.model = md
}

// prefixMatches reports whether the log's entries up to last are the
// model's.
func (md *logModel) prefixMatches(l *raftlog.Log, last uint64) bool {
	for i := md.snapIndex + 1; i <= last; i++ {
		ents, err := l.Entries(i, i+1, math.MaxUint64)
		want := md.ents[i-md.snapIndex-1]
		if err != nil || ents[0].GetTerm() != want.term || string(ents[0].GetData()) != want.data {
			return false
		}
	}
	return true
}

func (md *logModel) clone() *logModel {
	c := *md
	c.ents = append([]modelEntry(nil), md.ents...)
	c.hardAllowed = append([]*raftpb.HardState(nil), md.hardAllowed...)
	return &c
}

// sameHard compares hard states as Open returns them: commit at least the
// snapshot index.
func sameHard(got, want *raftpb.HardState, snapIndex uint64) bool {
	if want == nil {
		return got == nil
	}
	return got != nil && got.GetTerm() == want.GetTerm() && got.GetVote() == want.GetVote() &&
		got.GetCommit() == max(want.GetCommit(), snapIndex)
}

func (m *crashMachine) check(rt *rapid.T) {
	checkSnapshot(rt, m.log, m.model)
	checkEntries(rt, m.log, m.model)
	hs, _, _ := m.log.InitialState()
	if !sameHard(hs, m.model.hard, m.model.snapIndex) && !proto.Equal(hs, m.model.hard) {
		rt.Fatalf("hard state %v, model %v", hs, m.model.hard)
	}
}

func checkSnapshot(rt *rapid.T, l *raftlog.Log, md *logModel) {
	snap, _ := l.Snapshot()
	meta := snap.GetMetadata()
	if meta.GetIndex() != md.snapIndex || meta.GetTerm() != md.snapTerm || string(snap.GetData()) != md.snapData {
		rt.Fatalf("snapshot %d/%d %q, model %d/%d %q", meta.GetIndex(), meta.GetTerm(), snap.GetData(), md.snapIndex, md.snapTerm, md.snapData)
	}
}

func checkEntries(rt *rapid.T, l *raftlog.Log, md *logModel) {
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	if first != md.snapIndex+1 || last != md.last() {
		rt.Fatalf("first %d last %d, model %d %d", first, last, md.snapIndex+1, md.last())
	}
	for i := md.snapIndex; i <= last; i++ {
		if term, err := l.Term(i); err != nil || term != md.term(i) {
			rt.Fatalf("term(%d) = %d %v, model %d", i, term, err, md.term(i))
		}
	}
	if last < first {
		return
	}
	ents, err := l.Entries(first, last+1, math.MaxUint64)
	mustRT(rt, err)
	for j, e := range ents {
		want := md.ents[j]
		if e.GetIndex() != first+uint64(j) || e.GetTerm() != want.term || string(e.GetData()) != want.data {
			rt.Fatalf("entry %d = %d/%d %q, model %d %q", first+uint64(j), e.GetIndex(), e.GetTerm(), e.GetData(), want.term, want.data)
		}
	}
}

// crashStats counts crash outcomes, to show the test reaches them.
var crashStats map[string]int

// faultDisk cuts the power after budget mutating operations (budget -1:
// never): every later mutation fails, as if the machine had stopped.
type faultDisk struct {
	raftlog.Disk
	budget int
}

var errPowerCut = errors.New("test: power cut")

func (d *faultDisk) spend() error {
	if d.budget < 0 {
		return nil
	}
	if d.budget == 0 {
		return errPowerCut
	}
	d.budget--
	return nil
}

func (d *faultDisk) Open(name string) (raftlog.File, error) {
	f, err := d.Disk.Open(name)
	return &faultFile{File: f, disk: d}, err
}

func (d *faultDisk) Remove(name string) error {
	if err := d.spend(); err != nil {
		return err
	}
	return d.Disk.Remove(name)
}

func (d *faultDisk) SyncDir(dir string) error {
	if err := d.spend(); err != nil {
		return err
	}
	return d.Disk.SyncDir(dir)
}

type faultFile struct {
	raftlog.File
	disk *faultDisk
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.disk.spend(); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.disk.spend(); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *faultFile) Sync() error {
	if err := f.disk.spend(); err != nil {
		return err
	}
	return f.File.Sync()
}
