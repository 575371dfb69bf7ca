//go:build simbugs

package simnet

import "testing"

// The clientlib group members catch LibAutoCommitFetched (auto-commit
// committing the records Poll is about to return, before the application
// processed them) in at least half of 200 group seeds: a handed-out
// record below the member's own commit, or, after a crash mid-batch, an
// acknowledged record below the final committed offset that no member
// processed. Before the members ran clientlib's GroupConsumer the
// simulator ran none of this code and caught it in no seed. CI asks 10
// catches within seeds 1-60 (39 of them caught it; the tenth comes at seed
// 13); make sim-bugs measures the rate over the 200.
func TestSimCatchesLibAutoCommitFetched(t *testing.T) {
	requireCatches(t, "LibAutoCommitFetched", 1, 60, 10, "groups(lib):",
		func(t *testing.T, seed uint64, _, bug string) Options { return groupOptions(t, seed, bug) }, nil)
}
