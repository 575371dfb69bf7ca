package simnet

import (
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/raftlog/compacted"
)

// Every replica's compacted prefix, checked as the checkpoints are
// (digests.go): whenever what a power loss would keep of a replica's
// compacted directory changes (a pass's commit, the old generation's
// removal, a crash), the world opens that durable view with
// raftlog/compacted's Open and Verify, as the node's restart would, and
// requires:
//
//   - it opens and verifies: exactly one whole generation, never a
//     manifest naming files that are gone or damaged (a crash at any step
//     of a pass leaves the old or the new generation: issue 24);
//   - a generation g > 0 ends at or below decision g's cleanable end (the
//     reference replay's COMPACT entries): a pass never cleans what its
//     decision left out (the open raft segment, the records past the
//     leader's checkpoint, past min.compaction.lag.ms, past the LSO), and
//     holds no batch wholly below decision g's log start (engine/compact's
//     rule 8: compact,delete retention and a trim cut every replica's
//     next generation at the log start);
//   - every replica's generation g, and the engine's record of g (the
//     first COMPACT_DONE the reference applied for it), have one end and
//     one digest: passes are deterministic, so replicas that ran the same
//     decisions over the same log hold byte-identical prefixes, and any
//     of them could hand its prefix to another.
//
// Nodes with a disk fault injected (bit flips, failed reads) are skipped,
// as for checkpoints. Coverage: check/prefix-compared (a generation
// compared with another replica's or the record), check/prefix-opened.
//
// Rejected: comparing the replicas' key → latest value maps read through
// fetch (the kv reader does that for the partition as a client sees it,
// wire_kv.go; a map equal on every replica still hides a replica whose
// prefix ends elsewhere or keeps other tombstones, which the digests
// tell); recomputing each generation in the world with engine/compact
// (the digests of the replicas and the record already pin one outcome
// per generation; a planted bug in the pure pass is caught by the reads).

// prefixOutcome is one generation's end and digest, as first seen.
type prefixOutcome struct {
	end    int64
	digest [sha256.Size]byte
	who    string
}

// notePrefix holds a generation's outcome (a replica's or the record's)
// to the first one seen for slot g.
func (d *digests) notePrefix(g int, gen uint64, o prefixOutcome) {
	if d.prefixes == nil {
		d.prefixes = map[int]map[uint64]prefixOutcome{}
	}
	byGen := d.prefixes[g]
	if byGen == nil {
		byGen = map[uint64]prefixOutcome{}
		d.prefixes[g] = byGen
	}
	first, ok := byGen[gen]
	if !ok {
		byGen[gen] = o
		return
	}
	d.w.coverage.Inc("check/prefix-compared")
	if first.end != o.end || first.digest != o.digest {
		d.w.fail("compaction: group %s generation %d: %s's prefix ends at %d digest %x, %s's at %d digest %x",
			d.w.incarnations.label(g), gen, o.who, o.end, o.digest[:8], first.who, first.end, first.digest[:8])
	}
}

// noteDecisions records the reference's compaction decisions and outcomes
// after it applied an entry of group g.
func (d *digests) noteDecisions(g int, r *reference) {
	st := r.part.Compaction()
	if gen := st.Decision.Generation; gen > 0 && gen == uint64(len(r.decisions))+1 {
		r.decisions = append(r.decisions, st.Decision)
		d.w.coverage.Inc("event/compaction-decided")
		d.w.planner.compactionDecided() // compaction_cuts.go
	}
	if gen := st.DoneGeneration; gen > r.reported {
		r.reported = gen
		d.notePrefix(g, gen, prefixOutcome{end: st.CleanedTo, digest: st.Digest, who: "the record"})
	}
}

// prefixStep checks n's compacted prefix in dir after a disk operation
// changed what a power loss would keep of it, in the middle of a pass's
// job: the durable view at every step of a switch.
func (d *digests) prefixStep(n *simNode, dir string) {
	if n.hasFaults() || n.flipped || d.disks[n.index] != n.disk {
		return // as afterProcess: a damaged disk, or a new one not seen yet
	}
	d.w.coverage.Inc("check/prefix-step")
	d.comparePrefix(n, dir)
}

// firstBatchLast is the last offset of s's first batch; false for an
// empty prefix or one whose first batch does not read (Verify judged it).
func firstBatchLast(s *compacted.Store) (int64, bool) {
	for b, err := range s.Batches() {
		if err != nil {
			return 0, false
		}
		h, err := compact.DecodeHeader(b)
		return h.LastOffset(), err == nil
	}
	return 0, false
}

// comparePrefix checks what a power loss now would keep of n's compacted
// prefix in dir.
func (d *digests) comparePrefix(n *simNode, dir string) {
	if !d.w.opts.Compacted {
		return
	}
	seen := checkedHeader{name: "prefix", dir: n.disk.DurableGeneration(dir)}
	if d.checked[n.index][dir] == seen {
		return
	}
	d.checked[n.index][dir] = seen
	g, ok := d.groupOfDir(strings.TrimSuffix(dir, "/compacted") + "/checkpoint")
	if !ok {
		return
	}
	s, err := compacted.Open(n.disk.ProjectCrash(dir), dir, compacted.Options{})
	if err == nil {
		defer s.Close()
		err = s.Verify()
	}
	if err != nil {
		d.w.fail("compaction: node %d's compacted prefix %s would not open whole after a power loss now: %v", n.id, dir, err)
		return
	}
	d.w.coverage.Inc("check/prefix-opened")
	gen := s.Generation()
	if gen == 0 {
		d.w.held.notePrefix(n, dir, 0) // prefixheld.go
		return
	}
	d.w.held.notePrefix(n, dir, s.End())
	if r := d.ref(g); r.part != nil && gen <= uint64(len(r.decisions)) {
		if dec := r.decisions[gen-1]; s.End() > dec.CleanableEnd {
			d.w.fail("compaction: node %d's prefix of generation %d ends at %d, past its decision's cleanable end %d",
				n.id, gen, s.End(), dec.CleanableEnd)
		} else if last, ok := firstBatchLast(s); ok && last < dec.LogStart {
			d.w.fail("compaction: node %d's prefix of generation %d holds a batch ending at %d, wholly below its decision's log start %d",
				n.id, gen, last, dec.LogStart)
		}
	}
	d.notePrefix(g, gen, prefixOutcome{end: s.End(), digest: s.Digest(), who: fmt.Sprintf("node %d", n.id)})
}
