package simnet

import "strings"

// Crashes inside compaction passes (issue 24: "a crash at any step of a
// compaction leaves either the old or the new segment set"). A pass's
// write and commit run as storage jobs, each whole at one event
// (storage.go), so the pipeline's crash points land before or after them,
// never between their disk operations, and a round's cut (cutRound) lands
// in one only by chance. In a seed that runs the compacted-topic workload
// with crash faults, the planner therefore arms, at one compaction
// decision in compactionCutOneIn (as the reference replay applies it, so
// every replica's pass of it is still ahead) while at most one node is
// down, a drawn replica's disk to stop inside its next pass
// (cutCompaction): one time in three a few operations after the pass
// creates its first segment file (the write), else at one of the
// operations from its new manifest on (manifest.tmp written and synced,
// the rename, the directory sync, the old generation's removal); half of
// them power cuts (the disk keeps what was synced, memdisk's crash tears
// the rest), half kills (the page cache survives). The seed's power-cut
// faults draw the same cut one time in two. Coverage:
// fault/power-cut-compaction, fault/kill-compaction, and
// fault/cut-in-compaction for any cut (a round's too) that struck a
// compacted prefix's file or directory. The recovery is checked by
// prefixes.go: what a power loss would keep of every replica's prefix
// opens whole, at one generation, with the outcome every other replica has
// for it.
const compactionCutOneIn = 2

// compactionDecided draws a compaction cut for a decision just applied.
func (p *planner) compactionDecided() {
	f := p.w.opts.Faults
	if !p.active || !p.w.opts.Compacted || f.Crash+f.Kill+f.PowerCut+f.PowerCutRound == 0 {
		return
	}
	if p.w.rngFault.IntN(compactionCutOneIn) != 0 {
		return
	}
	down := 0
	var replicas []*simNode
	for _, n := range p.w.nodes {
		switch {
		case !n.up:
			down++
		case n.cut.armed == 0 && hostsKV(n):
			replicas = append(replicas, n)
		}
	}
	if down <= 1 && len(replicas) > 0 {
		p.armCompactionCut(replicas[p.w.rngFault.IntN(len(replicas))])
	}
}

// hostsKV reports whether n's disk holds a file of the compacted topic's
// replica (wire_kv.go).
func hostsKV(n *simNode) bool {
	for _, name := range n.disk.Files() {
		if strings.HasPrefix(name, "p/"+topicKV+"@") {
			return true
		}
	}
	return false
}

// armCompactionCut arms n's disk to stop inside its next compaction pass.
func (p *planner) armCompactionCut(n *simNode) {
	r := p.w.rngFault
	atSwitch := r.IntN(3) != 0
	after := r.IntN(4)
	if atSwitch {
		after = r.IntN(8)
	}
	n.cut.arm(cutCompaction, after)
	n.cut.atSwitch, n.cut.kill = atSwitch, r.IntN(2) == 0
	p.w.coverage.Inc("fault/compaction-cut-armed")
	p.w.traceNote(kindFault, n.index, uint64(faultPowerCut), uint64(cutCompaction))
}
