//go:build simbugs

package compacted

import (
	"math/rand/v2"
	"testing"

	"github.com/strandlog/strand/raftlog/memdisk"
)

// TestBugSwitchNotAtomic shows the planted bug breaks
// TestSwitchSurvivesPowerCutAnywhere's promise: a power cut somewhere in a
// switch from a store holding generation 1 leaves neither generation 1 nor
// generation 2 (the store does not open, or opens on neither).
func TestBugSwitchNotAtomic(t *testing.T) {
	SetBugs(true)
	defer SetBugs(false)
	g1, g2 := makeGeneration(t, 1, 0, 12, "a"), makeGeneration(t, 2, 3, 9, "b")
	base := memdisk.New()
	must(t, write(mustOpen(t, base), g1))
	neither := 0
	for cut := 0; cut < 64; cut++ {
		for seed := uint64(0); seed < 4; seed++ {
			disk := &cutDisk{Disk: base.Clone(), budget: -1}
			s := mustOpen(t, disk)
			disk.budget = cut
			err := write(s, g2)
			if err == nil && disk.budget != 0 {
				continue // the switch ran whole
			}
			disk.Crash(rand.New(rand.NewPCG(uint64(cut), seed)))
			disk.budget = -1
			s, err = Open(disk, "c", testOpts)
			if err != nil || holds(s, g2) != nil && holdsOld(s, g1) != nil {
				neither++
			}
		}
	}
	if neither == 0 {
		t.Fatal("every power cut left generation 1 or 2 whole")
	}
	t.Logf("%d power cuts left neither generation", neither)
}
