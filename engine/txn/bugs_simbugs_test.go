//go:build simbugs

package txn

import "testing"

// TestBugSkipFence shows the planted bug lets a zombie (an epoch an
// InitProducerId fenced) decide the new producer's transaction: the commit
// a checker must never see.
func TestBugSkipFence(t *testing.T) {
	SetBugs(true)
	defer SetBugs(false)
	f := newFixture(t)
	zombie := f.init("a")
	current := f.init("a")
	f.ok(f.add("a", current, 0))
	r := f.s.EndTxn(EndTxn{ID: "a", Producer: zombie, Commit: true})
	if r.Err != nil || !r.Prepared {
		t.Fatalf("bug not effective: %+v", r)
	}
}
