//go:build simbugs

package simnet

import "testing"

// A fetch answer is written as its envelope with the stored batches spliced
// in (frame.AppendSpliced), and the simulator's native fetch answers are
// written that way: with SpliceStaleHead planted (a batch after the first
// of a partition written with the head piece of the one before it, its
// base offset and append time) readers file records at the wrong offsets,
// and the linearizability check catches it (seed 1: 2,571 anomalies).
func TestSimCatchesSpliceStaleHead(t *testing.T) {
	requireCaught(t, "SpliceStaleHead", func(seed uint64) Options { return seedOptions(t, seed, "mixed", "SpliceStaleHead") })
}

// A Kafka fetch answer is written as its frame with the stored Kafka
// batches spliced in (kafkaproto's appendFetchFrame), and the simulator's
// Kafka clients read their fetch answers that way: with
// KafkaSpliceStaleBase planted (a spliced batch after the first of a
// partition written with the base offset of the one before it) a Kafka
// reader files records at the wrong offsets. The sample's options (the
// Kafka codec is a drawn feature; seedOptions leaves it off): caught at
// seed 5 (a fetched batch that no longer decodes), 6 of seeds 1-12 (every
// seed that drew the Kafka codec).
func TestSimCatchesKafkaSpliceStaleBase(t *testing.T) {
	requireCaught(t, "KafkaSpliceStaleBase", func(seed uint64) Options { return sampleOptions(t, seed, "mixed", "KafkaSpliceStaleBase") })
}
