// Package clientcore holds what clientlib and the simulator (simnet) share
// and what no user of clientlib should see: the seam through which the
// simulator runs clientlib's own client in virtual time.
//
// A Client built with clientlib's Simulated option starts no goroutine and
// opens no socket: its producer loop (clientlib's producer.drive, a step
// function of the time) runs when the Transport calls back, and every
// request travels by Transport.Call. The real process's Client runs the
// same producer core behind goroutines, sockets and the wall clock.
package clientcore

import (
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// Transport is a simulated world as a client sees it: a clock, timers and
// request/answer calls to node addresses. The simulator implements it;
// every callback runs on the simulator's single thread, never before the
// method that scheduled it returns, so a client needs no locks against it.
type Transport interface {
	// Now is the virtual time: monotonic, from any fixed origin.
	Now() time.Duration
	// After runs fn once d of virtual time has passed.
	After(d time.Duration, fn func())
	// Call sends req to the node at addr; done runs once, with the
	// answer or the error that ended the call (a lost answer ends by
	// the transport's request timeout).
	Call(addr string, req *strandpb.Request, done func(*strandpb.Response, error))
}
