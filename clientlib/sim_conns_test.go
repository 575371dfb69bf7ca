package clientlib

import (
	"errors"
	"testing"
	"time"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/internal/clientcore"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/sasl"
)

// connWorld is a scriptedWorld that models connections
// (clientcore.Conns): its node answers each connection's Hello, then
// requires SASL on it, with sasl.ServerSession, as node/server does.
type connWorld struct {
	scriptedWorld
	creds  map[string]metadata.Credential
	conns  map[uint64]*fakeConn
	next   uint64
	served []string // principal of each request past the exchange
	steps  int      // SaslAuthenticate requests seen
	hellos int      // Hello requests seen
	// silent: the node answers nothing (a paused node accepts
	// connections but answers no Hello); deaf: it answers Hellos only.
	silent, deaf bool
	// throttle: every produce is answered throttled this long, and its
	// connection then read only after it (node/server's reader pause).
	throttle time.Duration
}

type fakeConn struct {
	open       bool
	mutedUntil time.Duration // the node reads nothing on it before
	sess       *sasl.ServerSession
	principal  string
}

// simulatedClient is a Client on w with opts, and its Transport as the
// Client wraps it (simConns).
func simulatedClient(t *testing.T, w clientcore.Transport, opts ...Opt) (*Client, clientcore.Transport) {
	t.Helper()
	c, err := NewClient(append([]Opt{Simulated(w), SeedAddresses("n1")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c, c.cfg.simulated
}

func newConnWorld(t *testing.T, user, password string) *connWorld {
	pc, err := sasl.NewCredential("SCRAM-SHA-256", user, password, 4096)
	if err != nil {
		t.Fatal(err)
	}
	w := &connWorld{creds: map[string]metadata.Credential{user: metadata.CredentialFromProto(user, pc)}, conns: map[uint64]*fakeConn{}}
	w.answer = func(string, *strandpb.Request) *strandpb.Response { panic("Call outside a connection") }
	return w
}

func (w *connWorld) Dial(string) uint64 {
	w.next++
	lookup := func(name, mech string) (metadata.Credential, bool) { c, ok := w.creds[name]; return c, ok }
	w.conns[w.next] = &fakeConn{open: true, sess: sasl.NewServerSession(lookup, nil)}
	return w.next
}

func (w *connWorld) Open(id uint64) bool { return w.conns[id].open }
func (w *connWorld) Close(id uint64)     { w.conns[id].open = false }

func (w *connWorld) CallOn(id uint64, addr string, req *strandpb.Request, done func(*strandpb.Response, error)) {
	c := w.conns[id]
	if !c.open {
		w.After(time.Millisecond, func() { done(nil, &ConnError{Addr: addr, Sent: true, Err: errors.New("closed")}) })
		return
	}
	if w.silent {
		return
	}
	var resp *strandpb.Response
	if req.GetHello() != nil {
		w.hellos++
		resp = &strandpb.Response{Body: &strandpb.Response_Hello{Hello: &strandpb.HelloResponse{NodeId: 1, Version: protocolVersionMin}}}
		w.After(time.Millisecond, func() { done(resp, nil) })
		return
	}
	if w.deaf {
		return
	}
	if w.now < c.mutedUntil {
		w.After(c.mutedUntil-w.now, func() { w.CallOn(id, addr, req, done) })
		return
	}
	if c.principal == "" && w.creds != nil {
		w.steps++
		st := c.sess.Step(req)
		resp = st.Answer
		if st.Refused != nil {
			c.open = false
		}
		c.principal = st.Principal
	} else {
		w.served = append(w.served, c.principal)
		resp = &strandpb.Response{Body: &strandpb.Response_Metadata{Metadata: &strandpb.MetadataResponse{}}}
		if req.GetProduce() != nil && w.throttle > 0 {
			resp = &strandpb.Response{Body: &strandpb.Response_Produce{Produce: &strandpb.ProduceResponse{ThrottleMs: int32(w.throttle.Milliseconds())}}}
			c.mutedUntil = w.now + 2*time.Millisecond + w.throttle
		}
	}
	w.After(2*time.Millisecond, func() { done(resp, nil) })
}

// A simulated Client with SASL authenticates each connection once,
// before its first request (requests sent meanwhile wait), and again
// once the connection is lost; a wrong password fails the waiting
// requests definitely (SASL_AUTHENTICATION_FAILED), as the TCP path does.
func TestSimulatedSASLPerConnection(t *testing.T) {
	w := newConnWorld(t, "alice", "pw")
	_, tr := simulatedClient(t, w, SASL("SCRAM-SHA-256", "alice", "pw"))
	var errs []error
	call := func() {
		tr.Call("n1", &strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}},
			func(_ *strandpb.Response, err error) { errs = append(errs, err) })
	}
	call()
	call()
	w.run(t, 100)
	if w.hellos != 1 || w.steps != 2 || len(w.served) != 2 || w.served[0] != "User:alice" || errs[0] != nil || errs[1] != nil {
		t.Fatalf("first connection: %d hellos, %d steps, served %v, errors %v; want one Hello, one exchange (2 steps), both as User:alice",
			w.hellos, w.steps, w.served, errs)
	}
	call()
	w.run(t, 100)
	if w.steps != 2 || len(w.served) != 3 {
		t.Fatalf("a request on the open connection: %d steps, served %v; want no new exchange", w.steps, w.served)
	}
	w.conns[w.next].open = false // the node restarted
	call()
	w.run(t, 100)
	if w.next != 2 || w.hellos != 2 || w.steps != 4 || len(w.served) != 4 {
		t.Fatalf("after the connection was lost: %d dials, %d hellos, %d steps, served %v; want a new authenticated connection",
			w.next, w.hellos, w.steps, w.served)
	}

	w = newConnWorld(t, "alice", "pw")
	_, tr = simulatedClient(t, w, SASL("SCRAM-SHA-256", "alice", "wrong"))
	errs = nil
	call()
	call()
	w.run(t, 100)
	var se *Error
	if len(w.served) != 0 || len(errs) != 2 || !errors.As(errs[0], &se) ||
		se.Code != strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED || ClassifyErr(errs[1]).Retriable {
		t.Fatalf("wrong password: served %v, errors %v; want both refused SASL_AUTHENTICATION_FAILED, nothing served", w.served, errs)
	}
	if w.conns[1].open {
		t.Fatal("the refused connection is still open")
	}
}
