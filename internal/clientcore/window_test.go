package clientcore

import (
	"math"
	"testing"
)

// Sequence numbers wrap to 0 after math.MaxInt32, as Kafka's do.
func TestAddSequenceWraps(t *testing.T) {
	if got := AddSequence(math.MaxInt32, 1); got != 0 {
		t.Fatalf("MaxInt32+1 = %d", got)
	}
	if got := AddSequence(math.MaxInt32-1, 3); got != 1 {
		t.Fatalf("MaxInt32-1+3 = %d", got)
	}
}
