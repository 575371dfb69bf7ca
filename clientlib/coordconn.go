package clientlib

import (
	"context"

	"github.com/strandlog/strand/proto/strandpb"
)

// A Client keeps up to two connections to a node: its data connection
// (produce, fetch, metadata, admin) and its coordinator connection, on
// which go the requests to a group's or a transactional id's coordinator
// (groupRequest, txnRequest: heartbeats, offset commits and reads, group
// admin, the transaction calls). A node that throttles a quota pauses
// the connection its throttled answer went on (node/server's listener;
// the client holds its sends there too, clientcore.Throttle), so a
// fetch's or produce's throttle holds only the data connection, and a
// group member's heartbeat still reaches its coordinator in time: Kafka's
// consumer keeps its coordinator on a connection of its own (node id
// Integer.MAX_VALUE - id) for this reason. A throttle answered on the
// coordinator connection holds that connection alone. Before, one shared
// connection held a member's heartbeats behind a fetch throttle of 5.6 s,
// past its 1 s session; it was expired, and its rejoin waited behind the
// next throttle (the simulator's seed 153 of an earlier trace: the group
// never converged).
//
// Rejected: throttling per request class on one connection (the node
// reads nothing on a paused connection, whatever the client sends).

// connKey names one of the Client's connections: the node's address, and
// whether it is the coordinator connection.
type connKey struct {
	addr  string
	coord bool
}

// coordKey is the coordinator connection to the node at addr.
func coordKey(addr string) connKey {
	return connKey{addr: addr, coord: !bugCoordinatorBehindThrottle()}
}

// coordRequest sends req to the coordinator at addr on its coordinator
// connection and waits for the answer.
func (c *Client) coordRequest(ctx context.Context, addr string, req *strandpb.Request) (*strandpb.Response, error) {
	return c.requestOn(ctx, coordKey(addr), req, 0)
}
