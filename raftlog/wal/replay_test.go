package wal_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
	"github.com/strandlog/strand/raftlog/wal"
	"go.etcd.io/raft/v3/raftpb"
	"pgregory.net/rapid"
)

// state is a log's entries (their terms, index i at i-1) and hard state.
type state struct {
	terms              []uint64
	term, vote, commit uint64
}

func (s state) String() string {
	return fmt.Sprintf("terms %v hs %d/%d/%d", s.terms, s.term, s.vote, s.commit)
}

// node is a log written the way a node in write-ahead mode writes it.
type node struct {
	disk *memdisk.Disk
	w    *wal.WAL
	l    *raftlog.Log
}

const dir = "p/t@1/0/log"

func (n *node) open(t *rapid.T) {
	w, recs, err := wal.Open(n.disk, "wal")
	must(t, err)
	l, err := raftlog.Open(n.disk, dir, raftlog.Options{SegmentBytesMax: 400, BeforeSync: w.Sync})
	must(t, err)
	if debugReplay {
		st := n.readLog(t, l)
		t.Logf("before replay: %v\nrecords:\n%s", st, describe(wal.ByDir(recs)[dir]))
	}
	must(t, wal.Replay(l, wal.ByDir(recs)[dir]))
	n.w, n.l = w, l
}

var debugReplay = false

func (n *node) read(t *rapid.T) state { return n.readLog(t, n.l) }

func (n *node) readLog(t *rapid.T, l *raftlog.Log) state {
	n.l, l = l, n.l
	defer func() { n.l = l }()
	var s state
	hs, _, err := n.l.InitialState()
	must(t, err)
	s.term, s.vote, s.commit = hs.GetTerm(), hs.GetVote(), hs.GetCommit()
	last, _ := n.l.LastIndex()
	for i := uint64(1); i <= last; i++ {
		term, err := n.l.Term(i)
		must(t, err)
		s.terms = append(s.terms, term)
	}
	return s
}

// save writes one round's append: the record to the write-ahead log, then
// the log (without a sync), as the node does.
func (n *node) save(t *rapid.T, entries []*raftpb.Entry, hs *raftpb.HardState) {
	must(t, n.w.Append(wal.Prepare(n.l, entries, hs)))
	must(t, n.l.Save(entries, hs))
}

// TestReplayModel drives one log in write-ahead mode (appends, conflicting
// truncations, hard-state changes, syncs of the write-ahead log only,
// rotations whose log fsync runs while writes go on, log syncs of a
// checkpoint) with power
// losses anywhere between operations. After every recovery (wal.Open,
// raftlog.Open, wal.Replay) the log must be a state the log really had at or
// after its last promise (the last write-ahead sync), and hold every
// promised term and vote.
func TestReplayModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := &node{disk: memdisk.New()}
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 2))
		n.open(t)
		cur := n.read(t)
		history := []state{cur} // states since the last promise, the promise first
		var flush func() error  // a rotation's log fsync in flight (raftlog.Log.Flush)
		for range rapid.IntRange(1, 80).Draw(t, "ops") {
			switch op := rapid.IntRange(0, 11).Draw(t, "op"); op {
			case 0, 1, 2, 3, 4: // append, maybe truncating an uncommitted suffix
				from := uint64(len(cur.terms)) + 1
				term := max(cur.term, 1)
				if op == 4 && from-1 > cur.commit {
					from = rapid.Uint64Range(cur.commit+1, from-1).Draw(t, "cut")
					term = cur.term + 1
				}
				var ents []*raftpb.Entry
				next := slices.Clone(cur.terms[:from-1])
				for i := range rapid.IntRange(1, 4).Draw(t, "count") {
					ents = append(ents, entry(from+uint64(i), term, rapid.StringN(0, 60, -1).Draw(t, "data")))
					next = append(next, term)
				}
				hs := hard(term, cur.vote, rapid.Uint64Range(cur.commit, from-1).Draw(t, "commit"))
				if term != cur.term {
					hs.Vote = ptr(uint64(0))
				}
				n.save(t, ents, hs)
				cur = state{terms: next, term: hs.GetTerm(), vote: hs.GetVote(), commit: hs.GetCommit()}
			case 5: // a vote in a new term
				hs := hard(cur.term+1, rapid.Uint64Range(1, 3).Draw(t, "vote"), cur.commit)
				n.save(t, nil, hs)
				cur = state{terms: cur.terms, term: hs.GetTerm(), vote: hs.GetVote(), commit: hs.GetCommit()}
			case 6, 7: // the round's fsync: a promise
				if rapid.Bool().Draw(t, "split") {
					run := n.w.StartSync()
					must(t, n.w.FinishSync(run()))
				} else {
					must(t, n.w.Sync())
				}
				history = history[:0]
			case 8: // a rotation: roll, fsync the log through its own handles
				// while writes go on, then drop the old segments
				if flush == nil {
					must(t, n.w.Roll())
					flush = n.l.Flush()
				} else {
					must(t, flush())
					flush = nil
					must(t, n.w.RemoveOld())
				}
			case 9: // a checkpoint syncs the log
				must(t, n.l.Sync())
			case 10, 11:
				must(t, n.l.Close())
				must(t, n.w.Close())
				n.disk.Crash(rng)
				flush = nil
				n.open(t)
				got := n.read(t)
				history = append(history, cur)
				checkRecovered(t, got, history)
				cur = got
				history = []state{cur}
				continue
			}
			history = append(history, cur)
		}
	})
}

// checkRecovered fails unless got's entries are a prefix of a state in
// history (history[0] the promised one) at least as long as every state on
// the way there (a later write not synced may survive in part, never less
// than what was promised or written since), and its hard state keeps the
// promised term and vote.
func checkRecovered(t *rapid.T, got state, history []state) {
	p := history[0]
	if got.term < p.term || (got.term == p.term && p.vote != 0 && got.vote != p.vote) {
		t.Fatalf("recovered %v lost the promised hard state of %v", got, p)
	}
	if got.commit > uint64(len(got.terms)) {
		t.Fatalf("recovered %v: commit past the last entry", got)
	}
	shortest := len(p.terms)
	for _, h := range history {
		shortest = min(shortest, len(h.terms))
		if len(got.terms) >= shortest && len(got.terms) <= len(h.terms) && slices.Equal(h.terms[:len(got.terms)], got.terms) {
			return
		}
	}
	t.Fatalf("recovered %v, a log the node never had since its promise; states since:\n%v", got, history)
}

var _ testing.TB = (*testing.T)(nil)

// TestForDirIsByDir shows that ForDir returns ByDir's records for each
// directory, resets included, and nothing for a directory without any.
func TestForDirIsByDir(t *testing.T) {
	recs := append(sampleRecords(), wal.Record{Dir: "p/a/0/log", Reset: true},
		wal.Record{Dir: "p/a/0/log", Entries: []*raftpb.Entry{entry(1, 4, "again")}})
	byDir := wal.ByDir(recs)
	for _, dir := range []string{"p/a/0/log", "p/b/3/log", "p/none/log"} {
		if got, want := describe(wal.ForDir(recs, dir)), describe(byDir[dir]); got != want {
			t.Errorf("%s: ForDir\n%s\nByDir\n%s", dir, got, want)
		}
	}
}
