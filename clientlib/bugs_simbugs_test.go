//go:build simbugs

package clientlib

import "testing"

// The planted bugAutoCommitFetched shows in the scripted group world: the
// records' end is committed in the Poll that hands them out, before the
// application processed them (the clean build commits it a Poll later).
func TestBugAutoCommitFetchedCommitsUnprocessed(t *testing.T) {
	SetBugs(true)
	defer SetBugs(false)
	_, _, early := runGroupMember(t)
	if len(early) == 0 {
		t.Fatal("no commit before processing: the planted bug does not show")
	}
}
