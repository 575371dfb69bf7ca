//go:build !simbugs

package kafkaproto

// Production builds carry no planted bug: the hook below is constant
// false. The simulator's bug-planting build (-tags simbugs,
// bugs_simbugs.go) gives it content.

// bugHandshakeAuthenticates (KafkaHandshakeAuthenticates) lets a
// connection's requests through the SASL gate once SaslHandshake named
// a mechanism, before SaslAuthenticate proved anything.
func bugHandshakeAuthenticates() bool { return false }

// bugSpliceStaleBase (KafkaSpliceStaleBase): a fetch answer writes a
// spliced Kafka batch, after the first spliced one of a partition, with
// the base offset of the spliced batch before it (a reused head): the
// client files its records at the offsets of the one before.
func bugSpliceStaleBase() bool { return false }
