//go:build simbugs

package frame

// The planted bug's switch (the simulator sets it per run; see bugs.go for
// what the hook does). Package state: it exists only in a -tags simbugs
// build.
var bugSpliceStaleHeadOn bool

// SetBugs switches the framing's planted bugs on or off.
func SetBugs(spliceStaleHead bool) { bugSpliceStaleHeadOn = spliceStaleHead }

func bugSpliceStaleHead() bool { return bugSpliceStaleHeadOn }
