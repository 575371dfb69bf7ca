package simnet

import (
	"math/rand/v2"
	"time"

	"github.com/strandlog/strand/node"
)

// network models the links between nodes and between clients and nodes:
// a base latency per directed link drawn once per run, jitter per message
// (which reorders messages on one link), drops, duplicates, and cuts. A cut
// counts the faults holding a directed node link down, so overlapping
// partitions heal independently; a frame is lost when its link is cut at
// send or at arrival.
type network struct {
	rng       *rand.Rand
	nodeCount int
	// nodeLatency[from][to] and clientLatency[client][node] are the base
	// one-way latencies; client traffic uses the same value both ways.
	nodeLatency   [][]time.Duration
	clientLatency [][]time.Duration
	jitter        time.Duration
	dropRate      float64 // probability a message is lost
	dupRate       float64 // probability a node frame is delivered twice
	cut           [][]int // cut[from][to] > 0: from's frames to to are lost
	drops, dups   int64   // messages lost and frames duplicated, for coverage
	// nodeDrops counts node-to-node frames lost (not cut): the disk-stall
	// check tells a handover slowed by a lost vote from a stuck one.
	nodeDrops int64
	healedAll int // healAll calls so far (releaseCuts)
}

// newNetwork draws the base latencies of every link from rng.
func newNetwork(rng *rand.Rand, nodeCount, clientCount int, o *Options) *network {
	n := &network{rng: rng, nodeCount: nodeCount, jitter: o.Jitter, dropRate: o.DropRate, dupRate: o.DupRate}
	draw := func() time.Duration {
		return time.Duration(between(rng, int64(o.LatencyMin), int64(o.LatencyMax)))
	}
	n.nodeLatency = make([][]time.Duration, nodeCount)
	n.cut = make([][]int, nodeCount)
	for i := range n.nodeLatency {
		n.nodeLatency[i] = make([]time.Duration, nodeCount)
		n.cut[i] = make([]int, nodeCount)
		for j := range n.nodeLatency[i] {
			n.nodeLatency[i][j] = draw()
		}
	}
	n.clientLatency = make([][]time.Duration, clientCount)
	for i := range n.clientLatency {
		n.clientLatency[i] = make([]time.Duration, nodeCount)
		for j := range n.clientLatency[i] {
			n.clientLatency[i][j] = draw()
		}
	}
	return n
}

// nodeDelay draws the delivery delay of one frame from node from to node to.
func (n *network) nodeDelay(from, to int) time.Duration {
	return n.nodeLatency[from][to] + n.jitterDraw()
}

// clientDelay draws the delay of one client message either way.
func (n *network) clientDelay(client, nodeIndex int) time.Duration {
	return n.clientLatency[client][nodeIndex] + n.jitterDraw()
}

func (n *network) jitterDraw() time.Duration {
	if n.jitter <= 0 {
		return 0
	}
	return time.Duration(n.rng.Int64N(int64(n.jitter) + 1))
}

// lost draws whether one message is dropped.
func (n *network) lost() bool {
	if chance(n.rng, n.dropRate) {
		n.drops++
		return true
	}
	return false
}

// duplicated draws whether one node frame is delivered twice.
func (n *network) duplicated() bool {
	if chance(n.rng, n.dupRate) {
		n.dups++
		return true
	}
	return false
}

// isCut reports whether frames from node from to node to are lost.
// releaseCuts releases links cut (addCuts +1) when healAll had run
// healedAll times, unless it ran again since: healAll released them.
func (n *network) releaseCuts(links [][2]int, healedAll int) {
	if n.healedAll == healedAll {
		n.addCuts(links, -1)
	}
}

func (n *network) isCut(from, to int) bool { return n.cut[from][to] > 0 }

// addCuts holds every listed directed link down (delta +1) or releases it
// (delta -1).
func (n *network) addCuts(links [][2]int, delta int) {
	for _, l := range links {
		n.cut[l[0]][l[1]] += delta
		if n.cut[l[0]][l[1]] < 0 {
			panic("simnet: link healed more often than cut")
		}
	}
}

// healAll clears every cut, drop and duplicate (liveness mode's heal).
func (n *network) healAll() {
	n.clearCuts()
	n.dropRate = 0
	n.dupRate = 0
}

// clearCuts heals every cut link; the heals already scheduled then
// release nothing (releaseCuts).
func (n *network) clearCuts() {
	n.healedAll++
	for i := range n.cut {
		clear(n.cut[i])
	}
}

// Endpoint is one simulated node's network interface: Send schedules a
// delivery event on the world's queue, subject to the link's faults.
type Endpoint struct {
	w     *world
	index int // the sending node's index
}

var _ node.Network = (*Endpoint)(nil)

// Send implements node.Network. Frames to unknown nodes are dropped.
func (e *Endpoint) Send(to node.NodeID, frame []byte) {
	e.w.sendFrame(e.index, to, frame)
}
