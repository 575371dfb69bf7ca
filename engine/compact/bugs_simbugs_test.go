//go:build simbugs

package compact

import "testing"

// TestBugKeepsOlder shows the planted bug keeps a key's oldest value in the
// dirty section and removes its latest: TestLatestValueSurvives' log reads
// a=1, not a=3.
func TestBugKeepsOlder(t *testing.T) {
	SetBugs(true, false)
	defer SetBugs(false, false)
	var l testLog
	l.produce(t, noProducer, false, rec("a", "1", 10), rec("b", "1", 11))
	l.produce(t, noProducer, false, rec("a", "2", 12), rec("c", "1", 13), rec("a", "3", 14))
	_, out := l.compact(t, decision(5, 100, 0))
	wantRead(t, out, "a=1@0", "b=1@1", "c=1@3")
}

// TestBugTombstoneEarly shows the planted bug removes a tombstone in the
// first pass that sees it, with delete.retention.ms still to run.
func TestBugTombstoneEarly(t *testing.T) {
	SetBugs(false, true)
	defer SetBugs(false, false)
	var l testLog
	l.produce(t, noProducer, false, rec("a", "1", 10), rec("b", "1", 10))
	l.produce(t, noProducer, false, rec("a", "-", 11))
	_, out := l.compact(t, decision(3, 1000, 500))
	wantRead(t, out, "b=1@1")
}

// TestBugDropsLastRecord shows the planted bug removes the last survivor
// of a batch the pass thinned: in TestLatestValueSurvives' log the second
// batch keeps c=1 and a=3, and a=3, the key's latest value, is gone.
func TestBugDropsLastRecord(t *testing.T) {
	SetRewriteBugs(true)
	defer SetRewriteBugs(false)
	var l testLog
	l.produce(t, noProducer, false, rec("a", "1", 10), rec("b", "1", 11))
	l.produce(t, noProducer, false, rec("a", "2", 12), rec("c", "1", 13), rec("a", "3", 14))
	_, out := l.compact(t, decision(5, 100, 0))
	wantRead(t, out, "c=1@3")
}
