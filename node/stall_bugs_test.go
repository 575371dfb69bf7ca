//go:build simbugs

package node

import "testing"

// StalledLeaderKeepsLeading: with the watchdog blind, a leader whose fsync
// hangs keeps its partition for three stall thresholds, and the produce
// waiting on it is never answered (the simulator's disk-stall check,
// simnet/diskstall.go, catches it).
func TestBugStalledLeaderKeepsLeading(t *testing.T) {
	w := newStallWorld(t, 41, nil, func(cfg *Config) { cfg.Bugs.StalledLeaderKeepsLeading = true })
	core := w.c.cores[w.stalled]
	var hung *ProduceResult
	core.produceNow(ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "hung", 1)},
		func(r ProduceResult) { hung = &r })
	w.run()
	for range 3 * core.diskStallTicks() {
		w.tick()
	}
	if lead := w.leaderOf(tp0); lead != w.stalled || core.diskStalled() || hung != nil {
		t.Fatalf("bug should keep node %d leading, unstalled, the produce unanswered: leader %d, stalled %v, %+v",
			w.stalled, lead, core.diskStalled(), hung)
	}
}
