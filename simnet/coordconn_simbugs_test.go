//go:build simbugs

package simnet

import "testing"

// A clientlib client keeps its coordinator requests off the connections
// a quota throttles (clientlib/coordconn.go). Planted
// LibCoordinatorBehindThrottle sends them on the data connection again,
// and the check in coordconn_check.go fails the first coordinator
// request on a connection its node throttled for a produce or fetch: 11
// of seeds 1-60 with groups forced on (as make sim-bugs runs the client
// bugs), all among the 27 that drew the app quota (Options.AppQuota);
// the throttle must land on a connection to a coordinator's node. The
// convergence check alone caught it in none of the 60: a throttle seldom
// outlasts a session while the group settles. Pinned: 3 of seeds 7-13
// (7, 9, 13).
// After the s16 merges (lookups pass over throttled nodes, so fewer
// coordinator requests meet a throttle) 1 of seeds 7-13 [7]: CI asks 1
// within 7-30; make sim-bugs measures the rate.
func TestSimCatchesLibCoordinatorBehindThrottle(t *testing.T) {
	requireCatches(t, "LibCoordinatorBehindThrottle", 7, 30, 1, "clientlib sent a coordinator request", sampleOptions,
		func(o *Options) { o.GroupMembers = 4 })
}
