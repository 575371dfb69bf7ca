package compacted

import (
	"testing"

	"github.com/strandlog/strand/raftlog/memdisk"
)

// TestOpenAfterKillIsDurable kills the process (every disk operation fails
// from then on, but the page cache survives: no memdisk crash) after each
// number of disk operations of a switch to g2 (from an empty store, and
// from one holding g1), reopens on the same
// disk, then loses the power (every unsynced write and name dropped) and
// reopens again: the generation the first Open returned must be the one
// the power loss leaves, since the store's owner reports what it opened as
// held to its peers, which trim their raft logs by it (simulator seed 143:
// a kill between the manifest's rename and its SyncDir left generation 1
// in the page cache only; the replica reported it, the leader trimmed, and
// a power loss brought generation 0 back).
func TestOpenAfterKillIsDurable(t *testing.T) {
	g1, g2 := makeGeneration(t, 1, 0, 12, "a"), makeGeneration(t, 2, 3, 9, "b")
	withG1 := memdisk.New()
	must(t, write(mustOpen(t, withG1), g1))
	t.Run("empty", func(t *testing.T) { killEachStep(t, memdisk.New(), generation{}, g2) })
	t.Run("full", func(t *testing.T) { killEachStep(t, withG1, g1, g2) })
}

// killEachStep is TestOpenAfterKillIsDurable's run over base, holding old.
func killEachStep(t *testing.T, base *memdisk.Disk, old, g2 generation) {
	for cut := 0; ; cut++ {
		disk := &cutDisk{Disk: base.Clone(), budget: -1}
		s := mustOpen(t, disk)
		disk.budget = cut
		err := write(s, g2)
		if err == nil && disk.budget != 0 {
			if cut < 10 {
				t.Fatalf("the whole switch took %d disk operations: too few to be the protocol", cut)
			}
			return
		}
		disk.budget = -1 // killed: a new process on the same page cache
		opened := mustOpen(t, disk).Generation()
		disk.Crash(nil)
		after := mustOpen(t, disk)
		if after.Generation() != opened {
			t.Fatalf("killed after %d ops: Open returned generation %d, a power loss then left generation %d", cut, opened, after.Generation())
		}
		want := old
		if opened == g2.gen {
			want = g2
		}
		if err := holds(after, want); err != nil {
			t.Fatalf("killed after %d ops: %v", cut, err)
		}
	}
}
