package simnet

import (
	"testing"
)

// knownDuplicateSeeds wrote a record twice before produces orphaned by a
// leadership change were answered as indefinite (ErrLeadershipLost).
var knownDuplicateSeeds = []uint64{19, 58, 193}

// Regression seeds of a duplicate the simulator found: a produce answered
// NOT_LEADER or UNAVAILABLE after it had been proposed looked surely
// unwritten to clientlib, so the Window renumbered it under a new epoch and
// it was written twice. The node now answers TIMEOUT (ErrLeadershipLost),
// which the client treats as maybe written.
func TestSimLeadershipLostIsNotADuplicate(t *testing.T) {
	for _, seed := range knownDuplicateSeeds {
		if res := runSeed(t, seedOptions(t, seed, "mixed", ""), ""); res.Failed() {
			t.Errorf("seed %d: %s", seed, firstLine(res.Failures[0]))
		}
	}
}
