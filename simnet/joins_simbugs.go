//go:build simbugs

package simnet

// JoinBugNames are the node membership's planted bugs: they need the joins
// workload (Options.Joins, spare nodes).
var JoinBugNames = []string{"RemoveBeforeCaughtUp"}
