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

// Conns is what a Transport that models connections adds (the
// simulator's do): a Client with the SASL option then authenticates each
// connection before its first request, as over TCP, and again once the
// connection is lost. A Transport without it has no connections: each
// Call stands alone.
type Conns interface {
	// Dial opens a connection to addr and returns its id (never 0).
	Dial(addr string) uint64
	// Open reports whether connection id is still open: false once its
	// node restarted, or closed it (a refused exchange), or the client
	// closed it.
	Open(id uint64) bool
	// CallOn is Call on connection id: a request on a connection that is
	// gone fails as on a closed connection.
	CallOn(id uint64, addr string, req *strandpb.Request, done func(*strandpb.Response, error))
	// Close closes connection id from the client's side (a lost answer,
	// a failed exchange): the next request dials again.
	Close(id uint64)
}
