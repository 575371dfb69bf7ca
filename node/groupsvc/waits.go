package groupsvc

import (
	"maps"
	"slices"
)

// Waits are a coordinator's requests waiting for their command, by request
// id, answered with the command's outcome A when it applies (both
// coordinators here and in node/txnsvc keep them). The map is for lookup
// only: FailWaitsWith answers in request-id order.
type Waits[A any] struct {
	m map[uint64]func(A)
}

// Waiting reports whether a command with request id id is waited for.
func (w *Waits[A]) Waiting(id uint64) bool { return w.m[id] != nil }

// Wait registers done for the command with request id id: the catch-up
// calls it with the command's outcome when it applies it.
func (w *Waits[A]) Wait(id uint64, done func(A)) {
	if w.m == nil {
		w.m = make(map[uint64]func(A))
	}
	w.m[id] = done
}

// TakeWait removes and returns the wait of id, nil when none is left (a
// catch-up or FailWaitsWith answered it).
func (w *Waits[A]) TakeWait(id uint64) func(A) {
	done := w.m[id]
	delete(w.m, id)
	return done
}

// FailWaitsWith answers every wait with a, in request-id order (a replaced
// coordinator: their commands may still apply, maybe written).
func (w *Waits[A]) FailWaitsWith(a A) {
	for _, id := range slices.Sorted(maps.Keys(w.m)) {
		done := w.m[id]
		delete(w.m, id)
		done(a)
	}
}
