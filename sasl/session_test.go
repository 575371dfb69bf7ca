package sasl

import (
	"bytes"
	"errors"
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
