// Package audit checks durability promises against memdisk's crash model:
// whenever a node promises that something of its raft log is durable (an
// append response, a vote, a produce acknowledged at acks=1 or all), a
// checker asks whether a power loss at that very instant would keep it, by
// recovering the log with raftlog.Open from a projection of the disk that
// drops every unsynced byte and every name SyncDir did not cover.
//
// A Ready-ordering or fsync bug then shows at the first promise it breaks,
// instead of only in the rare run where a crash lands inside the window.
//
// Rejected: checking byte ranges of the live files (raftlog's layout would
// leak into the checker, and a promise made before anything was written at
// all would pass); crashing a clone of the whole disk (copies every group's
// files for a question about one).
package audit

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
	"github.com/strandlog/strand/raftlog/wal"
)

// ErrBroken is wrapped by every error Check returns: a power loss now would
// undo the promise (or leave a log that does not open).
var ErrBroken = errors.New("audit: promise would not survive a power loss now")

// Promise is what a node told a peer or a client about one raft log. The
// zero value promises nothing.
type Promise struct {
	// Index: the log holds every entry up to Index (0: no entry promised).
	Index uint64
	// Term: entry Index has this term (0: any term).
	Term uint64
	// HardTerm: the hard state's term is at least HardTerm.
	HardTerm uint64
	// Vote: the node voted for Vote in HardTerm, so the hard state either
	// has a greater term or HardTerm with this vote (0: no vote promised).
	Vote uint64
}

func (p Promise) String() string {
	return fmt.Sprintf("index=%d term=%d hard-term=%d vote=%d", p.Index, p.Term, p.HardTerm, p.Vote)
}

// Auditor checks the promises made about the raft logs of one disk. It
// recovers a directory's projected log once per durable generation of that
// directory (memdisk.DurableGeneration) and, with UseWAL, per change of
// the write-ahead log's records for it, and answers every promise about it
// from that, so checks between two syncs cost a lookup.
type Auditor struct {
	disk  *memdisk.Disk
	views map[string]*view
	// Opens counts the recoveries run (cache misses), for cost figures.
	Opens int
	// walDir, when set (UseWAL), is the node-wide write-ahead log's
	// directory: a projected log is recovered as the node does, with the
	// write-ahead log replayed over it. walGen and walRecs cache its
	// projected records, per segment, by the directory's durable
	// generation, and walCache the records of its segments (a sync appends
	// to one: only the appended records are decoded).
	walDir   string
	walGen   uint64
	walRecs  [][]wal.Record
	walErr   error
	walCache wal.Cache // segments decoded by earlier recoveries
}

// UseWAL makes the auditor recover logs as a node running with the
// node-wide write-ahead log in dir does (raftlog/wal): a promise holds when
// the log, or the write-ahead log replayed over it, keeps it durably.
func (a *Auditor) UseWAL(dir string) {
	a.walDir, a.walGen, a.walRecs, a.walCache = dir, 0, nil, wal.Cache{}
	clear(a.views)
}

// walRecords returns the records a power loss now would leave in the
// write-ahead log, per segment, with the log's durable generation.
func (a *Auditor) walRecords() ([][]wal.Record, uint64, error) {
	gen := a.disk.DurableGeneration(a.walDir)
	if a.walGen == gen && (a.walRecs != nil || a.walErr != nil) {
		return a.walRecs, gen, a.walErr
	}
	w, recs, err := wal.OpenCachedSegments(a.disk.ProjectCrash(a.walDir), a.walDir, &a.walCache)
	if err == nil {
		_ = w.Close()
		if recs == nil {
			recs = [][]wal.Record{} // cached: not nil
		}
	}
	a.walGen, a.walRecs, a.walErr = gen, recs, err
	return recs, gen, err
}

// view is the recovered projection of one directory at one generation of
// the directory (and, with UseWAL, of the write-ahead log).
type view struct {
	generation uint64
	walGen     uint64
	// walRecs are the write-ahead log's records replayed over the log.
	walRecs    []wal.Record
	log        *raftlog.Log // nil when Open failed
	err        error
	term, vote uint64
}

// New returns an Auditor of disk.
func New(disk *memdisk.Disk) *Auditor {
	return &Auditor{disk: disk, views: map[string]*view{}}
}

// Check returns nil when a power loss now would keep promise p about the
// raft log in dir, and otherwise an error wrapping ErrBroken that says
// what would be lost. The live disk is not disturbed.
func (a *Auditor) Check(dir string, p Promise) error {
	v := a.view(dir)
	if v.err != nil {
		return fmt.Errorf("%w: %s: promised %v, but the log would not open: %v", ErrBroken, dir, p, v.err)
	}
	if p.HardTerm > v.term {
		return fmt.Errorf("%w: %s: promised %v, but the hard state would have term %d", ErrBroken, dir, p, v.term)
	}
	if p.Vote != 0 && p.HardTerm == v.term && v.vote != p.Vote {
		return fmt.Errorf("%w: %s: promised %v, but the hard state would vote for %d in term %d",
			ErrBroken, dir, p, v.vote, v.term)
	}
	if p.Index == 0 {
		return nil
	}
	last, _ := v.log.LastIndex()
	if p.Index > last {
		return fmt.Errorf("%w: %s: promised %v, but the log would end at index %d", ErrBroken, dir, p, last)
	}
	term, err := v.log.Term(p.Index)
	if errors.Is(err, raft.ErrCompacted) {
		return nil // inside the snapshot: held
	}
	if err != nil {
		return fmt.Errorf("%w: %s: promised %v, but the term would not read: %v", ErrBroken, dir, p, err)
	}
	if p.Term != 0 && term != p.Term {
		return fmt.Errorf("%w: %s: promised %v, but entry %d would have term %d", ErrBroken, dir, p, p.Index, term)
	}
	return nil
}

// view returns the recovered projection of dir, recovering it again when
// its durable generation moved. With UseWAL, a sync of the write-ahead log
// moves its generation, but the view depends only on the directory's own
// projection and the write-ahead log's records for it (ForDir): when
// neither changed (a sync of other groups' writes), the view stands.
func (a *Auditor) view(dir string) *view {
	gen := a.disk.DurableGeneration(dir)
	v := a.views[dir]
	if a.walDir == "" {
		if v != nil && v.generation == gen {
			return v
		}
		return a.recover(dir, gen, 0, nil, nil)
	}
	walGen := a.disk.DurableGeneration(a.walDir)
	if v != nil && v.generation == gen && v.walGen == walGen {
		return v
	}
	all, walGen, err := a.walRecords()
	if err != nil {
		return a.recover(dir, gen, walGen, nil, err)
	}
	if v != nil && v.generation == gen && v.walRecs != nil && sameForDir(v.walRecs, all, dir) {
		v.walGen = walGen
		return v
	}
	return a.recover(dir, gen, walGen, wal.ForDirSegments(all, dir), nil)
}

// recover recovers the projection of dir at durable generation gen, with
// the write-ahead log's records recs for it replayed (walErr: the
// write-ahead log would not open), and caches it.
func (a *Auditor) recover(dir string, gen, walGen uint64, recs []wal.Record, walErr error) *view {
	if old := a.views[dir]; old != nil && old.log != nil {
		_ = old.log.Close()
	}
	a.Opens++
	v := &view{generation: gen, walGen: walGen}
	v.log, v.err = raftlog.Open(a.disk.ProjectCrash(dir), dir, raftlog.Options{TailCacheBytesMax: -1})
	if v.err == nil && a.walDir != "" {
		v.err = walErr
		if v.err == nil {
			v.err = wal.Replay(v.log, recs)
			v.walRecs = recs // view's own (ForDir's new list); not nil: replayed
			if v.walRecs == nil {
				v.walRecs = []wal.Record{}
			}
		}
	}
	if v.err == nil {
		// Open reads only the seals of sealed segments; the audit checks
		// every byte it relies on, as a read of those entries would.
		v.err = v.log.VerifyFrom(0)
	}
	if v.err == nil {
		hs, _, err := v.log.InitialState()
		if err != nil {
			v.err = err
		} else if hs != nil {
			v.term, v.vote = hs.GetTerm(), hs.GetVote()
		}
	}
	a.views[dir] = v
	return v
}

// sameForDir is sameRecords(prev, wal.ForDirSegments(segs, dir)) without building
// the filtered list: most syncs of the write-ahead log leave one
// directory's records as they were, and the audit asks at every one.
func sameForDir(prev []wal.Record, segs [][]wal.Record, dir string) bool {
	fromSeg, from := 0, 0 // ForDir keeps dir's records from its last reset on
	for s, all := range segs {
		for i := range all {
			if all[i].Reset && all[i].Dir == dir {
				fromSeg, from = s, i
			}
		}
	}
	j := 0
	for s := fromSeg; s < len(segs); s++ {
		all := segs[s]
		i := 0
		if s == fromSeg {
			i = from
		}
		for ; i < len(all); i++ {
			if all[i].Dir != dir {
				continue
			}
			if j >= len(prev) || !sameRecords(prev[j:j+1], all[i:i+1]) {
				return false
			}
			j++
		}
	}
	return j == len(prev)
}

// sameRecords reports whether two lists of write-ahead log records write
// the same: directory, reset, hard state, the term before, and entries
// (index, term, type, data).
func sameRecords(a, b []wal.Record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Dir != y.Dir || x.Reset != y.Reset || x.PrevTerm != y.PrevTerm || len(x.Entries) != len(y.Entries) ||
			!sameHardState(x.Hard, y.Hard) {
			return false
		}
		for j, e := range x.Entries {
			f := y.Entries[j]
			if e != f && (e.GetIndex() != f.GetIndex() || e.GetTerm() != f.GetTerm() || e.GetType() != f.GetType() ||
				!bytes.Equal(e.GetData(), f.GetData())) {
				return false
			}
		}
	}
	return true
}

// sameHardState reports whether two hard states (nil: none) are equal.
func sameHardState(a, b *raftpb.HardState) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.GetTerm() == b.GetTerm() && a.GetVote() == b.GetVote() && a.GetCommit() == b.GetCommit()
}

// Find reports whether a power loss now would keep, in the log in dir, an
// entry for which match returns true, looking back from the last entry
// over at most limit entries (a produce acknowledged a moment ago sits near
// the end). It returns the entry's index and term, or an error wrapping
// ErrBroken when no kept entry matches.
func (a *Auditor) Find(dir string, limit int, match func(e *raftpb.Entry) bool) (index, term uint64, err error) {
	v := a.view(dir)
	if v.err != nil {
		return 0, 0, fmt.Errorf("%w: %s: the log would not open: %v", ErrBroken, dir, v.err)
	}
	first, _ := v.log.FirstIndex()
	last, _ := v.log.LastIndex()
	const chunk = 16
	looked := limit
	for hi := last + 1; hi > first && limit > 0; {
		lo, step := first, min(chunk, uint64(limit))
		if hi-first > step {
			lo = hi - step
		}
		entries, err := v.log.Entries(lo, hi, math.MaxUint64)
		if err != nil {
			return 0, 0, fmt.Errorf("%w: %s: entries %d..%d would not read: %v", ErrBroken, dir, lo, hi, err)
		}
		for i := len(entries) - 1; i >= 0; i-- {
			if match(entries[i]) {
				return entries[i].GetIndex(), entries[i].GetTerm(), nil
			}
		}
		limit -= int(hi - lo)
		hi = lo
	}
	return 0, 0, fmt.Errorf("%w: %s: no matching entry among the last %d kept (log would end at %d)",
		ErrBroken, dir, looked, last)
}
