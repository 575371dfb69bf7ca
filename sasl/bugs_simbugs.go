//go:build simbugs

package sasl

import "sync/atomic"

// acceptsAnyProof is the planted bug AcceptsAnyProof: the server's
// exchange takes a final client message with a wrong proof (a wrong
// password) as proven, and the connection authenticates as the user it
// claimed. Set per run by the simulator (SetBugs).
var acceptsAnyProof atomic.Bool

// refusesUnconfirmed is the planted bug SASLRefusesUnconfirmed: an
// exchange whose lookup lacks the user (or whose proof does not match the
// credential found) is refused at once, without the confirmation that the
// node's credentials are current (ServerStep.Confirm): a node that has not
// applied a user the metadata group acknowledged refuses its login.
var refusesUnconfirmed atomic.Bool

// SetBugs plants (or clears) the package's bugs; only in simbugs builds.
func SetBugs(anyProof, unconfirmed bool) {
	acceptsAnyProof.Store(anyProof)
	refusesUnconfirmed.Store(unconfirmed)
}

func bugRefusesUnconfirmed() bool { return refusesUnconfirmed.Load() }

func bugAcceptsAnyProof() bool { return acceptsAnyProof.Load() }
