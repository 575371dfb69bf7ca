//go:build simbugs

package sasl

import "testing"

// The planted AcceptsAnyProof authenticates a wrong password as the user
// it claims: TestServerSessionRefusesWrongPassword's refusal is what it
// breaks, and what the simulator's intruder check must catch.
func TestBugAcceptsAnyProof(t *testing.T) {
	SetBugs(true, false)
	defer SetBugs(false, false)
	s := newStore(t, "SCRAM-SHA-256", "alice", "pw")
	st, _, _ := runSessions(t, s, "SCRAM-SHA-256", "alice", "wrong", 1)
	if !st.Done || st.Principal != "User:alice" {
		t.Fatalf("with AcceptsAnyProof a wrong password gave %+v, want authenticated as User:alice", st)
	}
}
