//go:build simbugs

package loop

import (
	"testing"

	"github.com/strandlog/strand/engine/metadata"
)

// TestBugStaleSecurityView: with the planted StaleSecurityView a user
// applied under a stable metadata leader stays unknown to the SASL lookup
// (what TestRoundSecurityView checks, and the simulator's SASL check
// catches); a leader change brings the view up to date.
func TestBugStaleSecurityView(t *testing.T) {
	SetBugs(true)
	defer SetBugs(false)
	f := &fakeCore{leader: 1}
	r := New(f, Config{Clock: &fixedClock{}})
	r.Run()
	f.creds, f.version = []metadata.Credential{{Name: "alice", Mechanism: metadata.ScramSHA256}}, 1
	r.Run()
	if _, ok := r.LookupCredential("alice", metadata.ScramSHA256); ok {
		t.Fatal("StaleSecurityView planted, yet alice is known under a stable leader")
	}
	f.leader = 2
	r.Run()
	if _, ok := r.LookupCredential("alice", metadata.ScramSHA256); !ok {
		t.Fatal("alice unknown after a leader change")
	}
}
