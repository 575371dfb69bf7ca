//go:build simbugs

package simnet

import "testing"

// The node's loop round (node/loop) is what the simulator runs now, its
// security view included: with StaleSecurityView planted (the view rebuilt
// only when the metadata leader moves) a user created under a stable
// leader is refused by the SASL exchange of a node that has applied it,
// and the SASL check ("refused ... although it has applied the user's
// credential") catches it. Before the round, the simulator's SASL sessions
// read the core's applied state directly and ran no view: the bug could
// not show.
func TestSimCatchesStaleSecurityView(t *testing.T) {
	requireCaught(t, "StaleSecurityView", func(seed uint64) Options { return seedOptions(t, seed, "mixed", "StaleSecurityView") })
}
