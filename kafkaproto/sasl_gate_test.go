package kafkaproto

import (
	"errors"
	"testing"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/sasl"
)

// gateLookup is a credential store holding alice's SCRAM-SHA-256
// credential for password "alice-pw".
func gateLookup(t *testing.T) sasl.Lookup {
	t.Helper()
	pc, err := sasl.NewCredential(metadata.ScramSHA256, "alice", "alice-pw", metadata.ScramIterationsMin)
	if err != nil {
		t.Fatal(err)
	}
	cred := metadata.CredentialFromProto("alice", pc)
	return func(name, mech string) (metadata.Credential, bool) {
		return cred, name == "alice" && mech == metadata.ScramSHA256
	}
}

// gateFetch is a Kafka Fetch request's bytes after the size prefix.
func gateFetch(t *testing.T, corr int32) []byte {
	t.Helper()
	frame, _, ok := EncodeRequest(&strandpb.Request{Body: &strandpb.Request_Fetch{Fetch: &strandpb.FetchRequest{
		Partitions: []*strandpb.FetchRequest_Partition{{Topic: "t", Partition: 0}}}}}, corr)
	if !ok {
		t.Fatal("fetch not encoded")
	}
	return frame[4:]
}

// handshake runs a SaslHandshake for SCRAM-SHA-256 through g.
func gateHandshake(t *testing.T, g *SASLGate) {
	t.Helper()
	frame, decode := EncodeSASLHandshake(metadata.ScramSHA256, 1)
	st := g.Step(frame[4:])
	if st.Pass || st.Close != "" || st.Answer == nil {
		t.Fatalf("handshake: %+v", st)
	}
	if resp, err := decode(st.Answer); err != nil || resp.GetError() != nil {
		t.Fatalf("handshake answer %v, %v", resp, err)
	}
}

// gateExchange runs SCRAM as user with password through g over Kafka
// framing, with the client side of package sasl: the last step and the
// node's last answer decoded.
func gateExchange(t *testing.T, g *SASLGate, user, password string) (SASLStep, *strandpb.Response) {
	t.Helper()
	gateHandshake(t, g)
	cl, err := sasl.NewClient(metadata.ScramSHA256, user, password)
	if err != nil {
		t.Fatal(err)
	}
	sess := cl.Session()
	req, err := sess.First()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		frame, decode := EncodeSASLAuthenticate(req.GetSaslAuthenticate().GetAuthBytes(), int32(2+i))
		st := g.Step(frame[4:])
		if st.Confirm { // the lookup is current: confirmed at once
			st = g.Confirmed(nil)
		}
		if st.Pass || st.Answer == nil {
			t.Fatalf("step %d: %+v", i, st)
		}
		resp, err := decode(st.Answer)
		if err != nil {
			t.Fatalf("step %d answer: %v", i, err)
		}
		if st.Close != "" || i == 1 {
			return st, resp
		}
		var done bool
		if req, done, err = sess.Next(resp); err != nil || done {
			t.Fatalf("step %d: client %v, done %v", i, err, done)
		}
	}
	panic("unreachable")
}

// The gate passes a request only once SCRAM proved the password: before
// the handshake and between the handshake and the exchange's end a
// request closes the connection unanswered; a wrong password is answered
// SASL_AUTHENTICATION_FAILED and closes it; the right one authenticates
// the connection, whose requests then pass as its principal, and the
// client verifies the node's final message.
func TestSASLGate(t *testing.T) {
	lookup := gateLookup(t)

	g := NewSASLGate(lookup, nil)
	if st := g.Step(gateFetch(t, 1)); st.Pass || st.Answer != nil || st.Close == "" {
		t.Errorf("a fetch before the handshake: %+v, want closed unanswered", st)
	}

	g = NewSASLGate(lookup, nil)
	gateHandshake(t, g)
	if st := g.Step(gateFetch(t, 2)); st.Pass || st.Answer != nil || st.Close == "" || st.Principal != "" {
		t.Errorf("a fetch after the handshake, before SaslAuthenticate: %+v, want closed unanswered", st)
	}

	g = NewSASLGate(lookup, nil)
	st, resp := gateExchange(t, g, "alice", "wrong")
	if st.Authenticated || st.Close == "" || resp.GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED {
		t.Errorf("a wrong password: %+v, answer %v; want SASL_AUTHENTICATION_FAILED and closed", st, resp)
	}

	g = NewSASLGate(lookup, nil)
	st, resp = gateExchange(t, g, "alice", "alice-pw")
	if !st.Authenticated || st.Close != "" || st.Principal != "User:alice" || resp.GetError() != nil {
		t.Fatalf("the right password: %+v, answer %v", st, resp)
	}
	if st := g.Step(gateFetch(t, 5)); !st.Pass || st.Principal != "User:alice" {
		t.Errorf("a fetch after the exchange: %+v, want passed as User:alice", st)
	}
	frame, _ := EncodeSASLAuthenticate([]byte("again"), 6)
	if st := g.Step(frame[4:]); st.Pass || st.Close == "" {
		t.Errorf("a SaslAuthenticate after the exchange: %+v, want refused and closed", st)
	}

	var open SASLGate // a listener without SASL
	if st := open.Step(gateFetch(t, 7)); !st.Pass || st.Principal != "" {
		t.Errorf("no SASL required: %+v, want passed anonymously", st)
	}
}

// A gate whose lookup lags (the node has not applied a user the metadata
// group acknowledged) answers nothing on the user's first step: it asks
// for a confirmation (Confirm), and once the lookup reads confirmed state
// the step goes on and the exchange succeeds; a confirmation that failed
// closes the connection unanswered (retriable to Kafka clients), never
// SASL_AUTHENTICATION_FAILED. Before, the first step was refused at once.
func TestSASLGateConfirmsBeforeRefusing(t *testing.T) {
	current := gateLookup(t)
	applied := false
	lagging := func(name, mech string) (metadata.Credential, bool) {
		if !applied {
			return metadata.Credential{}, false
		}
		return current(name, mech)
	}
	first := func() (*SASLGate, *sasl.ClientSession, SASLStep) {
		g := NewSASLGate(lagging, nil)
		gateHandshake(t, g)
		cl, err := sasl.NewClient(metadata.ScramSHA256, "alice", "alice-pw")
		if err != nil {
			t.Fatal(err)
		}
		sess := cl.Session()
		req, _ := sess.First()
		frame, _ := EncodeSASLAuthenticate(req.GetSaslAuthenticate().GetAuthBytes(), 2)
		return g, sess, g.Step(frame[4:])
	}
	applied = false
	g, _, st := first()
	if !st.Confirm || st.Answer != nil || st.Close != "" {
		t.Fatalf("first step on a lookup without the user: %+v, want a confirmation asked, nothing answered", st)
	}
	if st := g.Confirmed(errNotServed); st.Answer != nil || st.Close == "" || st.Authenticated {
		t.Fatalf("confirmation failed: %+v, want closed unanswered", st)
	}

	g, sess, st := first()
	applied = true // the node applies the user: its lookup confirmed current
	st = g.Confirmed(nil)
	if st.Answer == nil || st.Close != "" {
		t.Fatalf("after the confirmation: %+v, want the exchange's next message", st)
	}
	_, decode := EncodeSASLAuthenticate(nil, 2)
	resp, err := decode(st.Answer)
	if err != nil {
		t.Fatal(err)
	}
	req, _, err := sess.Next(resp)
	if err != nil {
		t.Fatal(err)
	}
	frame, _ := EncodeSASLAuthenticate(req.GetSaslAuthenticate().GetAuthBytes(), 3)
	if st = g.Step(frame[4:]); !st.Authenticated || st.Principal != "User:alice" {
		t.Fatalf("final step: %+v, want authenticated as User:alice", st)
	}
}

// errNotServed is a confirmation that failed.
var errNotServed = errors.New("the read index was not served in time")
