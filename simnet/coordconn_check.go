package simnet

import "github.com/strandlog/strand/proto/strandpb"

// A clientlib client sends its group and transaction coordinator
// requests on a connection of their own (clientlib/coordconn.go), never
// on the data connection whose produce or fetch answers a quota
// throttles: a node reads nothing on a throttled connection until the
// throttle ends, and the client holds its sends there too, so a
// heartbeat behind a throttle outlives its member's session (the
// simulator's seed 153 of an earlier trace: a member's heartbeats waited
// 5.6 s behind a fetch throttle, 1 s session, and the group never
// converged). The check fails a coordinator request on a connection its
// node told a throttle (ww.told): it shows whenever a quota bites a
// connection to a coordinator, not only when a throttle happens to
// outlast a session in the settle phase (planted
// LibCoordinatorBehindThrottle: 0 of seeds 1-60 failed the convergence
// check alone).

// checkCoordinatorConn fails req, a request of clientlib's on connection
// id (0: none), when it is a coordinator request and the connection's
// node throttled it for a produce or fetch.
func (ww *wireWorkload) checkCoordinatorConn(id uint64, req *strandpb.Request) {
	if id == 0 || !coordinatorRequest(req) {
		return
	}
	ww.w.coverage.Inc("check/lib-coordinator-conn")
	if until, ok := ww.told[id]; ok {
		ww.w.fail("clientlib sent a coordinator request (%T) on connection %d, which its node throttled for a produce or fetch (until %v): a throttle there holds heartbeats past the session (clientlib/coordconn.go)",
			req.GetBody(), id, until)
	}
}

// coordinatorRequest reports whether req goes to a group's or a
// transactional id's coordinator (clientlib's groupRequest, txnRequest).
func coordinatorRequest(req *strandpb.Request) bool {
	switch req.GetBody().(type) {
	case *strandpb.Request_GroupHeartbeat, *strandpb.Request_OffsetCommit, *strandpb.Request_OffsetFetch,
		*strandpb.Request_TxnOffsetCommit, *strandpb.Request_DescribeGroups, *strandpb.Request_DeleteGroups,
		*strandpb.Request_TxnInitProducerId, *strandpb.Request_AddPartitionsToTxn, *strandpb.Request_AddOffsetsToTxn,
		*strandpb.Request_EndTxn:
		return true
	}
	return false
}
