package simnet

import "github.com/strandlog/strand/node"

// Disk-loss recovery in the simulator: a wiped node restarts on its empty
// disk (Faults.WipeRejoin, on by default) and must rebuild every replica
// from its peers without voting before it may (node/rejoin.go). These
// counters show it happened: replicas that opened recovering, finished
// recovering, and vote messages withheld meanwhile.

// rejoinSeen is what the coverage already counted of one incarnation's
// core stats.
type rejoinSeen struct {
	started, done, withheld, repaired uint64
	full, throttled                   uint64
	walRotations, walEarlyFlushes     uint64
	trashJobs                         uint64
	authParked                        uint64
}

// countRejoins adds to the coverage what n's core did for disk-loss
// recovery since the last call in this incarnation.
func (w *world) countRejoins(n *simNode) {
	s, ok := n.core.(interface{ Stats() node.Stats })
	if !ok {
		return
	}
	st := s.Stats()
	w.addDelta("event/rejoin-started", st.RejoinsStarted-n.rejoins.started)
	w.addDelta("event/rejoin-done", st.RejoinsDone-n.rejoins.done)
	w.addDelta("event/vote-withheld", st.VotesWithheld-n.rejoins.withheld)
	w.addDelta("event/replica-repaired", st.ReplicasRepaired-n.rejoins.repaired)
	w.addDelta("event/disk-full", st.DiskFullEntered-n.rejoins.full)
	w.addDelta("event/catchup-throttled", st.CatchUpThrottled-n.rejoins.throttled)
	w.addDelta("event/wal-rotation", st.WALRotations-n.rejoins.walRotations)
	w.addDelta("event/wal-early-flush", st.WALEarlyFlushes-n.rejoins.walEarlyFlushes)
	w.addDelta("event/compaction-trash", st.TrashJobs-n.rejoins.trashJobs)
	w.addDelta("auth/parked", st.AuthorizationsParked-n.rejoins.authParked) // a refusal waiting for a metadata read index
	n.rejoins = rejoinSeen{full: st.DiskFullEntered, throttled: st.CatchUpThrottled, started: st.RejoinsStarted, done: st.RejoinsDone, withheld: st.VotesWithheld, repaired: st.ReplicasRepaired,
		walRotations: st.WALRotations, walEarlyFlushes: st.WALEarlyFlushes, trashJobs: st.TrashJobs,
		authParked: st.AuthorizationsParked}
}
