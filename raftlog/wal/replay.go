package wal

import (
	"fmt"

	"github.com/strandlog/strand/raftlog"
	"go.etcd.io/raft/v3/raftpb"
)

// ByDir groups recs by log directory, in order, keeping for each directory
// only the records from its last reset on (a reset voids what came before:
// the log was removed, rebuilt or replaced by a snapshot, durably, when the
// reset was written). The map is only looked up, never ranged over for
// output.
func ByDir(recs []Record) map[string][]Record {
	m := make(map[string][]Record)
	for _, r := range recs {
		if r.Reset {
			m[r.Dir] = m[r.Dir][:0]
		}
		m[r.Dir] = append(m[r.Dir], r)
	}
	return m
}

// ForDir returns ByDir(recs)[dir] without building the map: a caller
// that recovers one log directory at a time (the durability audit) pays
// for that directory's records only.
func ForDir(recs []Record, dir string) []Record {
	return ForDirSegments([][]Record{recs}, dir)
}

// ForDirSegments is ForDir over the records of segments in order (as
// OpenCachedSegments returns them), without joining them first.
func ForDirSegments(segs [][]Record, dir string) []Record {
	var out []Record
	for _, recs := range segs {
		for _, r := range recs {
			if r.Dir != dir {
				continue
			}
			if r.Reset {
				out = out[:0]
			}
			out = append(out, r)
		}
	}
	return out
}

// Replay brings the recovered log l up to date with recs, the write-ahead
// log's records for l's directory (ByDir), then syncs it.
//
// The records are first folded into the suffix of the log they describe
// (each record's entries replace everything from their first index on, as
// raftlog.Log.Save), attached to the log at the index before it with the
// term the first record there saw. That suffix is applied in one Save:
// entries l already holds with the same term are skipped, the first that
// differs cuts l's suffix there. Applying the whole net effect at once,
// never record by record, matters: l may hold a state later than the
// write-ahead log's (unsynced writes that survived in the page cache), and
// replaying an old record over it would cut entries a later record does
// not give back. A later state never conflicts with the suffix: every
// write that replaces entries makes the write-ahead log durable first
// (raftlog Options.BeforeSync), its own record included.
//
// The hard state only grows (term, then the vote in that term, commit),
// and its commit is cut to the last index if it ends above.
func Replay(l *raftlog.Log, recs []Record) error {
	entries, prevTerm, hs := fold(recs)
	entries, err := missing(l, entries, prevTerm)
	if err != nil {
		return err
	}
	hs, err = merged(l, hs)
	if err != nil {
		return err
	}
	if len(entries) > 0 || hs != nil {
		if err := l.Save(entries, hs); err != nil {
			return err
		}
	}
	cur, _, err := l.InitialState()
	if err != nil {
		return err
	}
	if last, _ := l.LastIndex(); cur.GetCommit() > last {
		hs := &raftpb.HardState{Term: ptr(cur.GetTerm()), Vote: ptr(cur.GetVote()), Commit: ptr(last)}
		if err := l.SetHardState(hs); err != nil {
			return err
		}
	}
	return l.Sync()
}

// fold returns the suffix recs leave (its entries, and the term before its
// first) and their newest hard state: as newest folds them, in scalars, so
// that only the result is allocated (a hard state per record was most of a
// recovery's allocations in the simulator's durability audit).
func fold(recs []Record) (entries []*raftpb.Entry, prevTerm uint64, hs *raftpb.HardState) {
	var term, vote, commit uint64
	hards := 0
	for _, r := range recs {
		if h := r.Hard; h != nil {
			switch {
			case hards == 0:
				hs, term, vote, commit = h, h.GetTerm(), h.GetVote(), h.GetCommit()
			case h.GetTerm() > term:
				term, vote = h.GetTerm(), h.GetVote()
			case h.GetTerm() == term && vote == 0:
				vote = h.GetVote()
			}
			commit = max(commit, h.GetCommit())
			hards++
		}
		if len(r.Entries) == 0 {
			continue
		}
		first := r.Entries[0].GetIndex()
		switch {
		case len(entries) == 0 || first <= entries[0].GetIndex():
			entries, prevTerm = nil, r.PrevTerm
		case first <= entries[len(entries)-1].GetIndex()+1:
			entries = entries[:first-entries[0].GetIndex()]
		default:
			// A gap: the write attached to entries no record holds
			// (written before the oldest segment). Start over from it.
			entries, prevTerm = nil, r.PrevTerm
		}
		entries = append(entries, r.Entries...)
	}
	if hards > 1 {
		hs = &raftpb.HardState{Term: ptr(term), Vote: ptr(vote), Commit: ptr(commit)}
	}
	return entries, prevTerm, hs
}

// newest returns the newer of two hard states (a may be nil).
func newest(a, b *raftpb.HardState) *raftpb.HardState {
	if a == nil {
		return b
	}
	term, vote := a.GetTerm(), a.GetVote()
	switch {
	case b.GetTerm() > term:
		term, vote = b.GetTerm(), b.GetVote()
	case b.GetTerm() == term && vote == 0:
		vote = b.GetVote()
	}
	return &raftpb.HardState{Term: ptr(term), Vote: ptr(vote), Commit: ptr(max(a.GetCommit(), b.GetCommit()))}
}

// missing returns the part of the suffix entries (attached after prevTerm)
// that l does not hold yet. A suffix that does not attach to l (the entry
// before it missing or of another term) is ErrCorrupt: l lost entries its
// write-ahead log relied on.
func missing(l *raftlog.Log, entries []*raftpb.Entry, prevTerm uint64) ([]*raftpb.Entry, error) {
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	for len(entries) > 0 && entries[0].GetIndex() < first {
		prevTerm = entries[0].GetTerm()
		entries = entries[1:]
	}
	if len(entries) == 0 {
		return nil, nil
	}
	at := entries[0].GetIndex()
	if at > last+1 {
		return nil, fmt.Errorf("%w: %s: the write-ahead log continues at %d, the log ends at %d", ErrCorrupt, l.Dir(), at, last)
	}
	if t, err := l.Term(at - 1); err != nil || t != prevTerm {
		return nil, fmt.Errorf("%w: %s: the write-ahead log continues after term %d at %d, the log has %d (%v)",
			ErrCorrupt, l.Dir(), prevTerm, at-1, t, err)
	}
	for len(entries) > 0 && entries[0].GetIndex() <= last {
		t, err := l.Term(entries[0].GetIndex())
		if err != nil {
			return nil, err
		}
		if t != entries[0].GetTerm() {
			break
		}
		entries = entries[1:]
	}
	return entries, nil
}

// merged returns the hard state l should have after hs, or nil when l's is
// already as new.
func merged(l *raftlog.Log, hs *raftpb.HardState) (*raftpb.HardState, error) {
	if hs == nil {
		return nil, nil
	}
	cur, _, err := l.InitialState()
	if err != nil {
		return nil, err
	}
	m := newest(cur, hs)
	if m.GetTerm() == cur.GetTerm() && m.GetVote() == cur.GetVote() && m.GetCommit() == cur.GetCommit() {
		return nil, nil
	}
	return m, nil
}
