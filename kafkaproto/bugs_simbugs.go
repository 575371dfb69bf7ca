//go:build simbugs

package kafkaproto

import "sync/atomic"

// handshakeAuthenticates is the planted bug KafkaHandshakeAuthenticates:
// the Kafka listener's SASL gate takes a successful SaslHandshake as
// authentication, so a connection that named a mechanism has its
// requests served (as the anonymous principal) without ever proving a
// password. Set per run by the simulator (SetBugs).
var handshakeAuthenticates atomic.Bool

// spliceStaleBase is the planted bug KafkaSpliceStaleBase (bugs.go).
var spliceStaleBase atomic.Bool

// SetBugs plants (or clears) the package's bugs; only in simbugs builds.
func SetBugs(handshakeAuth, staleBase bool) {
	handshakeAuthenticates.Store(handshakeAuth)
	spliceStaleBase.Store(staleBase)
}

func bugHandshakeAuthenticates() bool { return handshakeAuthenticates.Load() }

func bugSpliceStaleBase() bool { return spliceStaleBase.Load() }
