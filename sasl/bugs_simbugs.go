//go:build simbugs

package sasl

import "sync/atomic"

// acceptsAnyProof is the planted bug AcceptsAnyProof: the server's
// exchange takes a final client message with a wrong proof (a wrong
// password) as proven, and the connection authenticates as the user it
// claimed. Set per run by the simulator (SetBugs).
var acceptsAnyProof atomic.Bool

// SetBugs plants (or clears) the package's bugs; only in simbugs builds.
func SetBugs(anyProof bool) { acceptsAnyProof.Store(anyProof) }

func bugAcceptsAnyProof() bool { return acceptsAnyProof.Load() }
