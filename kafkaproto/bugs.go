//go:build !simbugs

package kafkaproto

// Production builds carry no planted bug: the hook below is constant
// false. The simulator's bug-planting build (-tags simbugs,
// bugs_simbugs.go) gives it content.

// bugHandshakeAuthenticates (KafkaHandshakeAuthenticates) lets a
// connection's requests through the SASL gate once SaslHandshake named
// a mechanism, before SaslAuthenticate proved anything.
func bugHandshakeAuthenticates() bool { return false }
