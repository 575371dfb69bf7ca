package simnet

import (
	"testing"
	"time"

	"github.com/strandlog/strand/raftlog/memdisk"
)

// A node rebuilding a wiped disk is not a healthy peer: its replicas vote
// for nobody until they caught up, so starving or stalling another node
// leaves the groups without a majority. The overloads and the disk stalls
// picked their victim while one was (TestSimGroups seed 5 with
// authorization, at ec4d389: node 1 overloaded, then its disk stalled,
// while node 3 rebuilt; no metadata leader from 10 s to 22.7 s).
func TestPeerRebuildingIsNotHealthy(t *testing.T) {
	o := Choose(Standard(1, Liveness))
	w := newWorld(o)
	for _, n := range w.nodes {
		w.startNode(n)
	}
	runUntil(w, 5*time.Second)
	if !w.planner.peersHealthy(0) {
		t.Fatal("before the wipe: node 1's peers are not healthy")
	}
	victim := w.nodes[2]
	w.crashNode(victim, "test wipe")
	victim.disk = memdisk.New()
	victim.cut.d = victim.disk
	victim.wiped = true
	w.startNode(victim)
	runUntil(w, w.now()+o.TickInterval)
	if st, ok := victim.core.MetadataStatus(); !ok || !st.Rejoining {
		t.Fatalf("node 3 on an empty disk: metadata status %+v (ok %v), want rejoining", st, ok)
	}
	if w.planner.peersHealthy(0) {
		t.Error("node 1's peers count as healthy while node 3 rebuilds its wiped disk")
	}
	for k := 0; k < 200 && w.rebuilding(victim); k++ {
		runUntil(w, w.now()+100*time.Millisecond)
	}
	if w.rebuilding(victim) {
		t.Fatal("node 3 still rebuilding 20 s after the wipe")
	}
	if !w.planner.peersHealthy(0) {
		t.Error("node 1's peers are not healthy once node 3 rebuilt")
	}
}
