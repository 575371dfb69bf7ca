package clientcore

import (
	"math/rand/v2"
	"testing"
)

// Sticky keeps one partition until its batch is sealed.
func TestSticky(t *testing.T) {
	var s Sticky
	rng := rand.New(rand.NewPCG(1, 2))
	p := s.Partition("t", 8, rng)
	for i := 0; i < 10; i++ {
		if q := s.Partition("t", 8, rng); q != p {
			t.Fatalf("record %d went to %d, sticky partition %d", i, q, p)
		}
	}
	s.BatchSealed("t", (p+1)%8) // another partition: no move
	if q := s.Partition("t", 8, rng); q != p {
		t.Fatalf("sealing another partition moved the sticky one")
	}
	moved := false
	for i := 0; i < 20 && !moved; i++ {
		s.BatchSealed("t", s.Partition("t", 8, rng))
		moved = s.Partition("t", 8, rng) != p
	}
	if !moved {
		t.Fatal("sticky partition never moved after sealing its batch")
	}
}
