//go:build simbugs

package simnet

import (
	"flag"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"
)

// Flags of the catch-rate sweep (make sim-bugs SEEDS=N BUGS=a,b).
var (
	flagCatchRate = flag.Int("sim.catchrate", 0, "catch-rate sweep: run each planted bug over this many seeds and print caught/N (0: skip)")
	flagBugs      = flag.String("sim.bugs", "", "comma-separated planted bugs for -sim.catchrate (default: every bug)")
)

// catchRate is one bug's row of the sweep.
type catchRate struct {
	bug    string
	caught []uint64 // the seeds that failed
	seeds  int
	// eligible counts the seeds that ran what the bug needs (a
	// transaction bug: the seeds that drew the transactional workload;
	// the others are not run); seeds for every other bug.
	eligible int
	first    string // the first catching seed's first failure line
	cpu      time.Duration
}

func (c catchRate) String() string {
	first := "-"
	if len(c.caught) > 0 {
		first = fmt.Sprint(c.caught[0])
	}
	of := ""
	if c.eligible != c.seeds {
		of = fmt.Sprintf(" (%d/%d of the seeds that ran it)", len(c.caught), c.eligible)
	}
	return fmt.Sprintf("%-27s %3d/%-3d%s first=%-4s cpu=%-7v seeds=%v", c.bug, len(c.caught), c.seeds, of, first,
		c.cpu.Round(time.Second), c.caught)
}

// TestSimCatchRate measures how often the simulator catches each planted
// bug: every bug runs over -sim.catchrate seeds from -sim.seed-start (a
// run stops at its first failed check), and the sweep prints one line per
// bug, caught/N, the first catching seed and the seeds that caught it.
// It is for humans (make sim-bugs): the issues ask every bug to be caught in
// at least half of the seeds. Skipped unless -sim.catchrate is set.
func TestSimCatchRate(t *testing.T) {
	if *flagCatchRate <= 0 {
		t.Skip("set -sim.catchrate=N (make sim-bugs SEEDS=N)")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	bugs := append(append(append(append(slices.Clone(BugNames), GroupBugNames...), OperatorBugNames...), ClientBugNames...), TxnBugNames...)
	bugs = append(bugs, CompactBugNames...)
	bugs = append(bugs, LoopBugNames...)
	bugs = append(bugs, WireBugNames...)
	bugs = append(bugs, TierBugNames...)
	bugs = append(bugs, FullDiskBugNames...)
	if *flagBugs != "" {
		bugs = strings.Split(*flagBugs, ",")
	}
	var rows []catchRate
	for _, bug := range bugs {
		if _, err := ParseBug(bug); err != nil || bug == "" {
			t.Fatalf("-sim.bugs: unknown planted bug %q", bug)
		}
		row := catchRate{bug: bug, seeds: *flagCatchRate}
		cpu := cpuTime()
		for i := 0; i < *flagCatchRate; i++ {
			seed := *flagSeedStart + uint64(i)
			o := sampleOptions(t, seed, *flagProfile, bug)
			if slices.Contains(GroupBugNames, bug) || slices.Contains(ClientBugNames, bug) {
				o.GroupMembers = 4
			}
			if strings.HasPrefix(bug, "Offsets") {
				o.CompactCoordinators = true // passes over __strand_offsets (offsets_replay.go)
			}
			if bug == "GroupClassicForgotten" {
				o.ClassicMembers = 3
			}
			if slices.Contains(CompactBugNames, bug) && !o.Compacted {
				continue // the seed did not draw the compacted-topic workload
			}
			if bug == "CompactDeleteUncut" && !kvCompactDelete(o) {
				continue // the seed's kv topic is compact only: no trim
			}
			if slices.Contains(TxnBugNames, bug) && !o.Txn {
				continue // the seed did not draw the transactional workload
			}
			if slices.Contains(TierBugNames, bug) && !o.Tiered {
				continue // the seed did not draw tiered storage
			}
			if slices.Contains(FullDiskBugNames, bug) && o.Faults.DiskFull == 0 {
				continue // the seed's fault mix has no full disk
			}
			row.eligible++
			o.StopAtFailure = true
			if res := runSeed(t, o, ""); res.Failed() {
				if len(row.caught) == 0 {
					row.first = firstLine(res.Failures[0])
				}
				row.caught = append(row.caught, seed)
			}
		}
		row.cpu = cpuTime() - cpu
		rows = append(rows, row)
		fmt.Printf("catchrate: %s\n  first failure: %s\n", row, row.first)
	}
	fmt.Printf("catchrate: seeds %d-%d, profile %s\n", *flagSeedStart, *flagSeedStart+uint64(*flagCatchRate)-1, *flagProfile)
	for _, row := range rows {
		half := ""
		if 2*len(row.caught) < row.eligible {
			half = "  BELOW HALF OF THE SEEDS THAT RAN IT"
		} else if 2*len(row.caught) < row.seeds {
			half = "  BELOW HALF"
		}
		fmt.Printf("catchrate:   %s%s\n", row, half)
	}
}
