//go:build simbugs

package simnet

// WireBugNames are the planted bugs of the framing a node's listener
// writes answers with (package proto/frame): SpliceStaleHead writes a
// spliced batch after a partition's first with the head piece (base
// offset, append time) of the batch before it. Every native fetch answer
// of the simulator is spliced (corrupt.go's answerFrame). KafkaSpliceStaleBase
// (package kafkaproto) writes a spliced Kafka batch after a partition's
// first with the base offset of the spliced batch before it; every Kafka
// fetch answer of the simulator is spliced (kafkaproto's appendResponse).
var WireBugNames = []string{"SpliceStaleHead", "KafkaSpliceStaleBase"}
