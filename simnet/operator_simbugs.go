//go:build simbugs

package simnet

// OperatorBugNames are the planted bugs the operator actor's checks are
// for: they need authorization on (two seeds of three).
var OperatorBugNames = []string{"AuthSkipsAlterQuotas"}
