//go:build simbugs

package kafkaproto

import "testing"

// The planted KafkaHandshakeAuthenticates lets a request through the
// SASL gate once SaslHandshake named a mechanism: TestSASLGate's refusal
// of a fetch between the handshake and the exchange is what it breaks,
// and what the simulator's Kafka impostor check must catch.
func TestBugKafkaHandshakeAuthenticates(t *testing.T) {
	SetBugs(true, false)
	defer SetBugs(false, false)
	g := NewSASLGate(gateLookup(t), nil)
	gateHandshake(t, g)
	if st := g.Step(gateFetch(t, 2)); !st.Pass || st.Principal != "" {
		t.Fatalf("with KafkaHandshakeAuthenticates a fetch after the handshake gave %+v, want passed anonymously", st)
	}
}
