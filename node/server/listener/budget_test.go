package listener

import (
	"testing"
	"time"
)

// queuedBytesMax is the size of the node's queued-bytes budget.
const queuedBytesMax = 256 << 20

// A budget refuses more than its size: a reader whose
// connection closes while waiting gives back what it took, and released
// units can be taken again.
func TestBudget(t *testing.T) {
	b := NewBudget(queuedBytesMax)
	never := make(chan struct{})
	held, ok := b.Acquire(queuedBytesMax-BudgetUnit, never)
	if !ok || held != queuedBytesMax/BudgetUnit {
		t.Fatalf("acquire of the whole budget: %d units, ok %v", held, ok)
	}
	closed := make(chan struct{})
	close(closed)
	if _, ok := b.Acquire(10, closed); ok {
		t.Fatal("acquire beyond the budget succeeded")
	}
	b.Release(held)
	if !b.sem.TryAcquire(b.units) {
		t.Fatal("a refused acquire kept units: the whole budget is not free after the release")
	}
	b.Release(int(b.units))
	if got, ok := b.Acquire(3*BudgetUnit, never); !ok || got != 4 {
		t.Fatalf("acquire after release: %d units, ok %v", got, ok)
	}
	// A reader waiting on a full budget is served once units come back.
	rest, _ := b.Acquire(queuedBytesMax-5*BudgetUnit, never)
	got := make(chan int, 1)
	go func() {
		n, _ := b.Acquire(BudgetUnit, never) // 2 units: waits
		got <- n
	}()
	b.Release(rest)
	select {
	case n := <-got:
		if n != 2 {
			t.Fatalf("the waiting reader got %d units, want 2", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting reader was not served after units came back")
	}
}
