package simnet

import (
	"context"

	"github.com/strandlog/strand/clientlib"
)

// simRun starts fn as a task of cl (clientlib's SimRun: the client's
// blocking calls as a coroutine on the simulator's thread) and remembers
// cl, so that the run's end abandons whatever task of it still waits
// (endLibTasks). Every task the simulator starts goes through here.
func (w *world) simRun(cl *clientlib.Client, fn func(ctx context.Context), done func()) (abandon func()) {
	if w.libClientSeen == nil {
		w.libClientSeen = map[*clientlib.Client]bool{}
	}
	if !w.libClientSeen[cl] {
		w.libClientSeen[cl] = true
		w.libClients = append(w.libClients, cl)
	}
	return cl.SimRun(fn, done)
}

// endLibTasks ends the library tasks still waiting when the run ends: the
// members' and consumers' own ends first (they mark their processes dead),
// then every client's unfinished task. A task waiting on an answer the
// stopped world will never deliver (a run stopped at a failure or the time
// limit, a request to a node down at the end) is otherwise a parked
// coroutine holding the whole world: a pin's hundreds of stopped seeds grew
// its process to 6 GB. Deferred by Run, after the result is taken.
func (w *world) endLibTasks() {
	if w.wire != nil {
		w.wire.endLibConsumers()     // wire_libconsumer.go
		w.wire.txn.endSessionTasks() // wire_txn_session_check.go
		if w.wire.libGroup != nil {
			for _, m := range w.wire.libGroup.members {
				m.kill()
			}
		}
	}
	for _, cl := range w.libClients {
		cl.SimAbandon()
	}
	w.libClients, w.libClientSeen = nil, nil
}
