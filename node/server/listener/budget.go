package listener

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// BudgetUnit is the grain of a Budget: a holder takes whole units, at
// least one, so a budget of b bytes holds at most b/BudgetUnit holders.
const BudgetUnit = 64 << 10

// Budget bounds bytes held across all of a node's connections: the
// request bytes queued for the loop, or the fetch answer bytes reserved
// until written. A weighted semaphore takes a holder's units all at once
// and serves waiters in order, so two half-served readers can never hold
// the whole budget between them, and a large holder is not starved by
// small ones.
type Budget struct {
	units int64
	sem   *semaphore.Weighted
	held  atomic.Int64 // units held now, for HeldBytes
}

// NewBudget is a budget of bytesMax bytes (at least one unit).
func NewBudget(bytesMax int) *Budget {
	units := max(int64(bytesMax/BudgetUnit), 1)
	return &Budget{units: units, sem: semaphore.NewWeighted(units)}
}

// Acquire takes the units for n bytes (at most the whole budget), or gives
// up, holding none, when done closes; it says how many it holds.
func (b *Budget) Acquire(n int, done <-chan struct{}) (int, bool) {
	want := min(1+int64(n/BudgetUnit), b.units)
	if b.sem.TryAcquire(want) {
		b.held.Add(want)
		return int(want), true
	}
	// The budget is full: wait, until done closes. A context for done is
	// made only here, off the fast path.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := b.sem.Acquire(ctx, want); err != nil {
		return 0, false
	}
	b.held.Add(want)
	return int(want), true
}

// Release gives back units taken by Acquire.
func (b *Budget) Release(units int) {
	if units == 0 {
		return
	}
	b.held.Add(-int64(units))
	b.sem.Release(int64(units))
}

// HeldBytes is the budget held now, in bytes (whole units).
func (b *Budget) HeldBytes() int64 { return b.held.Load() * BudgetUnit }

// MaxBytes is the budget's size, in bytes (whole units).
func (b *Budget) MaxBytes() int64 { return b.units * BudgetUnit }
