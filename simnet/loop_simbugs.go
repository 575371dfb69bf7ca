//go:build simbugs

package simnet

// LoopBugNames are the planted bugs of the node's loop round (package
// node/loop): StaleSecurityView needs authorization on (the operator
// draws it), where the simulated clients authenticate against the
// round's security view.
var LoopBugNames = []string{"StaleSecurityView"}
