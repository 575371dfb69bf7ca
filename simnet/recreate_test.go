package simnet

import (
	"strings"
	"testing"
)

// A finding of the re-creation workload (make sim SEEDS=200, seed 64,
// before node's replica tombstones): a node that crashed after it had
// deleted a topic incarnation's replica (files removed) replayed its
// metadata from an older checkpoint on restart, hosted that incarnation
// again with an empty log and term, and voted in its raft group until it
// applied the delete. Nodes 1 and 3 came back to incarnation 4 of sim2 at
// term 1 having been at term 3, node 2 was elected in term 3, which node
// 3 had led (two leaders in one term), and a client still holding that
// incarnation's id saw its high-water mark go back from 3 to 0. A
// deleted replica now leaves a durable tombstone before its files go,
// and reconcile never hosts an incarnation this node deleted. The seed's
// trace changed with the fix (the tombstone is a disk write), so this
// test keeps the seed honest rather than proving the fix alone; the
// node logic does (node/meta.go deletedHere).
func TestSimDeletedIncarnationNotHostedAgain(t *testing.T) {
	res := runSeed(t, seedOptions(t, 64, "mixed", ""), "")
	for _, f := range res.Failures {
		if strings.Contains(f, "incarnation slot") || strings.Contains(f, "sim2#") {
			t.Fatalf("seed 64: a deleted incarnation misbehaves again: %s", firstLine(f))
		}
	}
	if res.Failed() {
		t.Fatalf("seed 64 failed: %q", res.Failures)
	}
}
