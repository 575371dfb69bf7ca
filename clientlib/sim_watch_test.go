package clientlib

import (
	"errors"
	"testing"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// plainConnWorld is a connWorld without SASL: each connection answers its
// Hello, then serves requests.
func plainConnWorld() *connWorld {
	w := &connWorld{conns: map[uint64]*fakeConn{}}
	w.answer = func(string, *strandpb.Request) *strandpb.Response { panic("Call outside a connection") }
	return w
}

func metadataRequest() *strandpb.Request {
	return &strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}}
}

// A connection whose Hello is never answered (a paused node accepts the
// connection, then answers nothing) fails the requests waiting for it
// after the dial's deadline, the stall bound when shorter, as not sent:
// the dial path's verdict, which sends a client to other nodes.
func TestSimulatedHelloUnanswered(t *testing.T) {
	w := plainConnWorld()
	w.silent = true
	c, _ := simulatedClient(t, w, StallTimeout(200*time.Millisecond), RequestTimeout(time.Second))
	var got error
	at := time.Duration(-1)
	c.simCall("n1", metadataRequest(), time.Second, 0, func(_ *strandpb.Response, err error) { got, at = err, w.now })
	w.run(t, 100)
	var ce *ConnError
	if !errors.As(got, &ce) || ce.Sent || at != 200*time.Millisecond {
		t.Fatalf("unanswered Hello: %v at %v; want a *ConnError not sent at 200ms", got, at)
	}
	if w.conns[1].open {
		t.Fatal("the connection whose Hello went unanswered is still open")
	}
}

// A request whose answer never comes fails with TIMEOUT at the client's
// own deadline (the outcome unknown, as roundTrip reports it) and closes
// its connection, so the next request opens a new one with a Hello.
func TestSimulatedCallTimesOut(t *testing.T) {
	w := plainConnWorld()
	w.deaf = true
	c, _ := simulatedClient(t, w, StallTimeout(0), RequestTimeout(time.Second))
	var got error
	at := time.Duration(-1)
	c.simCall("n1", metadataRequest(), 300*time.Millisecond, 0, func(_ *strandpb.Response, err error) { got, at = err, w.now })
	w.run(t, 100)
	var se *Error
	if !errors.As(got, &se) || se.Code != strandpb.ErrorCode_ERROR_CODE_TIMEOUT || at != 300*time.Millisecond {
		t.Fatalf("lost answer: %v at %v; want TIMEOUT at 300ms", got, at)
	}
	if w.conns[1].open {
		t.Fatal("the timed-out call's connection is still open")
	}
	w.deaf = false
	got = errors.New("no answer")
	c.simCall("n1", metadataRequest(), 300*time.Millisecond, 0, func(_ *strandpb.Response, err error) { got = err })
	w.run(t, 100)
	if got != nil || w.next != 2 || w.hellos != 2 {
		t.Fatalf("next request: %v, %d dials, %d hellos; want an answer on a new connection", got, w.next, w.hellos)
	}
}

// With stall detection on, a request that hears nothing from its node for
// the stall bound beyond its own wait fails sooner than its deadline, as a
// *ConnError sent (maybe written), and the node is suspect.
func TestSimulatedCallStalls(t *testing.T) {
	w := plainConnWorld()
	w.deaf = true
	c, _ := simulatedClient(t, w, StallTimeout(100*time.Millisecond), RequestTimeout(time.Second))
	var got error
	at := time.Duration(-1)
	suspect := false
	c.simCall("n1", metadataRequest(), time.Second, 50*time.Millisecond, func(_ *strandpb.Response, err error) {
		got, at, suspect = err, w.now, c.suspects.Until(1, w.now) != 0
	})
	w.run(t, 100)
	var ce *ConnError
	if !errors.As(got, &ce) || !ce.Sent || !errors.Is(got, errStalled) || at <= 150*time.Millisecond || at > 160*time.Millisecond {
		t.Fatalf("stalled node: %v at %v; want a stall, sent, just after wait+stall (150ms)", got, at)
	}
	if !suspect {
		t.Fatal("the stalled node is not suspect")
	}
}

// A produce answered with a 5 s throttle (over the principal's quota)
// holds the connection: the next request waits on the client until the
// throttle ends, and neither the stall bound (200 ms) nor the deadline
// (1 s) gives the node up meanwhile. Before, the next produce went out at
// once into the paused connection, stalled after 200 ms, and the client
// suspected the node and reconnected on a fresh connection the node did
// not throttle, escaping the quota.
func TestSimulatedThrottleHoldsConnection(t *testing.T) {
	w := plainConnWorld()
	w.throttle = 5 * time.Second
	c, _ := simulatedClient(t, w, StallTimeout(200*time.Millisecond), RequestTimeout(time.Second))
	produce := &strandpb.Request{Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{Acks: -1}}}
	var errs []error
	var at []time.Duration
	for range 3 {
		c.simCall("n1", produce, time.Second, 0, func(_ *strandpb.Response, err error) {
			errs, at = append(errs, err), append(at, w.now)
		})
	}
	w.run(t, 1000)
	if len(errs) != 3 || errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("throttled produces: %v; want three answers", errs)
	}
	if w.next != 1 || w.hellos != 1 {
		t.Fatalf("%d connections, %d hellos; want the throttled connection kept", w.next, w.hellos)
	}
	if at[1] < at[0]+w.throttle || at[2] < at[1]+w.throttle {
		t.Fatalf("answers at %v; want each after the previous one's %v throttle", at, w.throttle)
	}
}

// A produce at acks=0 is done once written, as conn.go's writer finishes
// it, whatever becomes of an answer: here the node answers nothing. Before,
// a simulated one waited for the node's answer, and one the network lost
// held its record until the simulator's backstop.
func TestSimulatedAcksNoneDoneWhenWritten(t *testing.T) {
	w := plainConnWorld()
	w.deaf = true
	c, _ := simulatedClient(t, w, StallTimeout(200*time.Millisecond), RequestTimeout(time.Second))
	produce := &strandpb.Request{Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{Acks: 0}}}
	calls, at := 0, time.Duration(-1)
	var got error
	c.simCall("n1", produce, time.Second, 0, func(_ *strandpb.Response, err error) { calls, got, at = calls+1, err, w.now })
	w.run(t, 100)
	if calls != 1 || got != nil || at < 0 || at > 10*time.Millisecond {
		t.Fatalf("acks=0 produce: %d calls, error %v at %v; want one success when written (after the Hello)", calls, got, at)
	}
}
