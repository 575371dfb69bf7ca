//go:build simbugs

package simnet

// MoveBugNames are the partition moves' planted bugs: they need the moves
// workload (Options.Moves, more nodes than replicas).
var MoveBugNames = []string{"MoveDropsOldReplicaEarly"}

// SampleBugNames are planted bugs that need features only the standard
// sample combines (features.go): MoveRacesRebalance needs the group
// workload and moves in one run (sampleOptions forces both for it, as
// seedOptions forces the WAL for WALAckBeforeFsync).
var SampleBugNames = []string{"MoveRacesRebalance"}
