package sasl

import (
	"bytes"
	"errors"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

// seeded is a deterministic randomness source.
func seeded(seed uint64) *rand.ChaCha8 {
	var s [32]byte
	s[0] = byte(seed)
	return rand.NewChaCha8(s)
}

// runSessions drives a ServerSession and a ClientSession against each
// other; it returns the server's last step and the client's error.
func runSessions(t *testing.T, s store, mech, user, password string, seed uint64) (ServerStep, [][]byte, error) {
	t.Helper()
	cl, err := NewClientRand(mech, user, password, seeded(seed))
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServerSession(s.lookup, seeded(seed+1))
	cs := cl.Session()
	req, err := cs.First()
	if err != nil {
		t.Fatal(err)
	}
	var answers [][]byte
	for i := range SessionStepsMax {
		req.CorrelationId = uint64(i + 1)
		st := srv.Step(req)
		if st.Confirm { // the store is current: confirmed at once
			st = srv.Confirmed(req, nil)
		}
		if st.Answer.GetCorrelationId() != req.CorrelationId {
			t.Fatalf("answer correlation %d, want %d", st.Answer.GetCorrelationId(), req.CorrelationId)
		}
		answers = append(answers, st.Answer.GetSaslAuthenticate().GetAuthBytes())
		next, done, err := cs.Next(st.Answer)
		if err != nil || done || st.Refused != nil {
			return st, answers, err
		}
		req = next
	}
	t.Fatal("exchange did not end")
	return ServerStep{}, nil, nil
}

func TestSessionsAuthenticate(t *testing.T) {
	for _, mech := range Mechanisms {
		s := newStore(t, mech, "alice", "pw")
		st, _, err := runSessions(t, s, mech, "alice", "pw", 1)
		if err != nil || !st.Done || st.Principal != "User:alice" || st.Refused != nil {
			t.Fatalf("%s: step %+v, client err %v; want done as User:alice", mech, st, err)
		}
	}
}

// With seeded sources the exchange is the same bytes every time: what
// the simulator needs to replay a seed.
func TestSessionsSeededNoncesRepeat(t *testing.T) {
	s := newStore(t, "SCRAM-SHA-256", "alice", "pw")
	_, a, _ := runSessions(t, s, "SCRAM-SHA-256", "alice", "pw", 7)
	_, b, _ := runSessions(t, s, "SCRAM-SHA-256", "alice", "pw", 7)
	_, c, _ := runSessions(t, s, "SCRAM-SHA-256", "alice", "pw", 8)
	if len(a) == 0 || !bytes.Equal(a[0], b[0]) || bytes.Equal(a[0], c[0]) {
		t.Fatalf("server-first messages: seed 7 %q and %q, seed 8 %q: want equal for one seed, different across", a[0], b[0], c[0])
	}
}

func TestServerSessionRefusesWrongPassword(t *testing.T) {
	s := newStore(t, "SCRAM-SHA-256", "alice", "pw")
	st, _, err := runSessions(t, s, "SCRAM-SHA-256", "alice", "wrong", 1)
	var refused *RefusedError
	if st.Done || st.Principal != "" || !errors.Is(st.Refused, ErrAuthentication) || !errors.As(err, &refused) ||
		refused.Err.GetCode() != strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED {
		t.Fatalf("wrong password: step %+v, client err %v; want refused SASL_AUTHENTICATION_FAILED", st, err)
	}
	if st.Answer.GetSaslAuthenticate() != nil || st.Answer.GetError().GetMessage() != refusedMessage {
		t.Fatalf("refusal answer %v: want only the error, saying nothing of the user", st.Answer)
	}
}

func TestServerSessionRefusals(t *testing.T) {
	s := newStore(t, "SCRAM-SHA-256", "alice", "pw")
	sasl := func(mech string, b []byte) *strandpb.Request {
		return &strandpb.Request{CorrelationId: 9, Body: &strandpb.Request_SaslAuthenticate{
			SaslAuthenticate: &strandpb.SaslAuthenticateRequest{Mechanism: mech, AuthBytes: b}}}
	}
	code := func(st ServerStep) strandpb.ErrorCode { return st.Answer.GetError().GetCode() }

	srv := NewServerSession(s.lookup, nil)
	st := srv.Step(&strandpb.Request{CorrelationId: 9, Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}})
	if !errors.Is(st.Refused, ErrRequired) || code(st) != strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED ||
		st.Answer.GetError().GetMessage() != ErrRequired.Error() || st.Answer.GetCorrelationId() != 9 {
		t.Fatalf("a request before SASL: %+v", st)
	}
	if st := srv.Step(sasl("SCRAM-SHA-256", nil)); st.Refused == nil || st.Done {
		t.Fatalf("a step after a refusal: %+v, want refused", st)
	}

	srv = NewServerSession(s.lookup, nil)
	if st := srv.Step(sasl("PLAIN", nil)); code(st) != strandpb.ErrorCode_ERROR_CODE_UNSUPPORTED_SASL_MECHANISM || st.Refused == nil {
		t.Fatalf("PLAIN: %+v, want UNSUPPORTED_SASL_MECHANISM", st)
	}

	// An authenticated session takes no more steps (a replay).
	cl, _ := NewClient("SCRAM-SHA-256", "alice", "pw")
	cs := cl.Session()
	srv = NewServerSession(s.lookup, nil)
	req, _ := cs.First()
	st = srv.Step(req)
	req, _, _ = cs.Next(st.Answer)
	if st = srv.Step(req); !st.Done {
		t.Fatalf("exchange: %+v", st)
	}
	if st = srv.Step(req); st.Refused == nil || st.Done || code(st) != strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED {
		t.Fatalf("a step after done: %+v, want refused", st)
	}
}

func TestServerSessionBoundsSteps(t *testing.T) {
	s := newStore(t, "SCRAM-SHA-256", "alice", "pw")
	srv := NewServerSession(s.lookup, nil)
	srv.steps = SessionStepsMax // as after SessionStepsMax steps that neither ended nor failed
	st := srv.Step(&strandpb.Request{Body: &strandpb.Request_SaslAuthenticate{SaslAuthenticate: &strandpb.SaslAuthenticateRequest{Mechanism: "SCRAM-SHA-256"}}})
	if st.Refused == nil || st.Refused.Error() != "sasl: too many SASL steps" {
		t.Fatalf("step %d: %+v, want too many steps", SessionStepsMax+1, st)
	}
}

// A node whose store lags (it has not applied a user the metadata group
// acknowledged) does not refuse the user's first step: it asks for a
// confirmation, and once its store reads confirmed state (here: the user
// applied meanwhile) the same step goes on and the exchange succeeds.
// Before, the step was refused SASL_AUTHENTICATION_FAILED at once.
func TestServerSessionConfirmsBeforeRefusingUnknownUser(t *testing.T) {
	current := newStore(t, "SCRAM-SHA-256", "alice", "pw")
	lagging := store{}
	cl, _ := NewClientRand("SCRAM-SHA-256", "alice", "pw", seeded(1))
	cs := cl.Session()
	srv := NewServerSession(lagging.lookup, seeded(2))
	req, _ := cs.First()
	req.CorrelationId = 3
	st := srv.Step(req)
	if !st.Confirm || st.Answer != nil || st.Refused != nil {
		t.Fatalf("first step on a store without the user: %+v, want a confirmation asked, nothing answered", st)
	}
	if again := srv.Step(req); again.Refused == nil {
		t.Fatalf("a step while one waits for its confirmation: %+v, want refused", again)
	}
	srv = NewServerSession(lagging.lookup, seeded(2))
	srv.Step(req)
	maps.Copy(lagging, current) // the replica applies the user: confirmed current
	for range SessionStepsMax {
		if st.Confirm {
			st = srv.Confirmed(req, nil)
		}
		if st.Refused != nil || st.Done {
			break
		}
		next, _, err := cs.Next(st.Answer)
		if err != nil {
			t.Fatal(err)
		}
		req = next
		st = srv.Step(req)
	}
	if !st.Done || st.Principal != "User:alice" {
		t.Fatalf("after the confirmation: %+v, want authenticated as User:alice", st)
	}
}

// Refusals after a confirmation: a user the confirmed store lacks is
// refused as before; a confirmation that failed is UNAVAILABLE
// (retriable), saying nothing of the user; a proof checked against a
// credential the confirmed store replaced (a password change the node had
// not applied) is UNAVAILABLE too, and one against the credential still
// current is refused.
func TestServerSessionRefusesOnlyConfirmed(t *testing.T) {
	code := func(st ServerStep) strandpb.ErrorCode { return st.Answer.GetError().GetCode() }
	first := func(s store, user, password string) (*ServerSession, *ClientSession, *strandpb.Request, ServerStep) {
		cl, _ := NewClientRand("SCRAM-SHA-256", user, password, seeded(1))
		cs := cl.Session()
		srv := NewServerSession(s.lookup, seeded(2))
		req, _ := cs.First()
		return srv, cs, req, srv.Step(req)
	}
	empty := store{}
	srv, _, req, st := first(empty, "bob", "pw")
	if st = srv.Confirmed(req, nil); st.Confirm || st.Refused == nil || code(st) != strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED {
		t.Fatalf("unknown user, confirmed: %+v, want SASL_AUTHENTICATION_FAILED", st)
	}
	srv, _, req, _ = first(empty, "bob", "pw")
	st = srv.Confirmed(req, errors.New("no metadata leader"))
	if st.Refused == nil || code(st) != strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE || st.Answer.GetError().GetMessage() != ErrNotConfirmed.Error() {
		t.Fatalf("unknown user, not confirmed: %+v, want UNAVAILABLE with the generic message", st)
	}

	for _, changed := range []bool{false, true} {
		s := newStore(t, "SCRAM-SHA-256", "alice", "old")
		srv, cs, _, st := first(s, "alice", "new")
		final, _, err := cs.Next(st.Answer)
		if err != nil {
			t.Fatal(err)
		}
		if st = srv.Step(final); !st.Confirm {
			t.Fatalf("a proof that does not match: %+v, want a confirmation asked", st)
		}
		want := strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED
		if changed {
			maps.Copy(s, newStore(t, "SCRAM-SHA-256", "alice", "new"))
			want = strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE
		}
		if st = srv.Confirmed(final, nil); st.Refused == nil || code(st) != want {
			t.Fatalf("credential changed %v: %+v, want refused %v", changed, st, want)
		}
	}
}
