package simnet

import (
	"regexp"
	"runtime"
	"testing"
)

// A run leaves no library task behind: a task waiting on an answer the
// stopped world never delivers is a parked coroutine holding the whole
// world, and a test process running hundreds of seeds grew to gigabytes
// (kvSim's and the producers' tasks were never abandoned). Seeds cut off
// after 1 to 20,000 events, with clients mid-call, and whole seeds all end
// with no coroutine parked.
func TestRunLeavesNoLibraryTask(t *testing.T) {
	for _, events := range []int64{1, 3_000, 20_000, 0} {
		for seed := uint64(1); seed <= 3; seed++ {
			o := sampleOptions(t, seed, "mixed", "")
			if events > 0 {
				o.EventsMax = events
			}
			res := runSeed(t, o, "")
			if parked := parkedCoroutines(); len(parked) > 0 {
				t.Errorf("seed %d cut at %d events (ran %d) left %d coroutines parked:\n%s", seed, events, res.Events, len(parked), parked[0])
			}
		}
	}
}

// parkedCoroutines are the stacks of the process's goroutines parked as
// coroutines (iter.Pull's: clientlib's simulated tasks).
func parkedCoroutines() []string {
	buf := make([]byte, 1<<22)
	all := string(buf[:runtime.Stack(buf, true)])
	return regexp.MustCompile(`(?s)goroutine \d+ \[coroutine\]:.*?\n\n`).FindAllString(all+"\n\n", -1)
}
