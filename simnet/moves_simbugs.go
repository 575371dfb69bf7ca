//go:build simbugs

package simnet

// MoveBugNames are the partition moves' planted bugs: they need the moves
// workload (Options.Moves, more nodes than replicas).
var MoveBugNames = []string{"MoveDropsOldReplicaEarly"}
