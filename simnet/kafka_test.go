package simnet

import (
	"runtime/debug"
	"testing"
)

// Seeds with every other client's produce and fetch carried in Kafka's
// protocol (kafkaproto's translation, the listener's own code) pass every
// check: linearizability and the log checks, durability audit, digests,
// liveness. Kafka requests must actually have been sent, some of them for
// the topic deleted and re-created mid-run (named by topic id, Produce and
// Fetch v13), and a seed must replay to the same trace hash.
func TestSimKafkaCodec(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	seeds := uint64(12)
	if testing.Short() {
		seeds = 4
	}
	var kafkaRequests, recreatable, kafkaSASL int64
	for seed := uint64(1); seed <= seeds; seed++ {
		o := seedOptions(t, seed, "mixed", "")
		o.KafkaCodec = true
		res := runSeed(t, o, "")
		if res.Failed() {
			t.Fatalf("seed %d with the Kafka codec: %v\n  replay: %s -sim.kafka", seed, res.Failures,
				replayCommand(seed, "mixed", ""))
		}
		kafkaRequests += res.Coverage.Count("event/kafka-request")
		recreatable += res.Coverage.Count("event/kafka-request-recreatable")
		kafkaSASL += res.Coverage.Count("kafka-sasl/authenticated")
	}
	if kafkaRequests == 0 || recreatable == 0 {
		t.Fatalf("%d requests went through the Kafka codec, %d for the re-created topic", kafkaRequests, recreatable)
	}
	if kafkaSASL == 0 { // the seeds with authorization on (SASL required): kafka_sasl.go
		t.Fatal("no Kafka connection authenticated through the Kafka listener's SASL gate")
	}
	t.Logf("%d requests through the Kafka codec, %d for the re-created topic", kafkaRequests, recreatable)
	o := seedOptions(t, 3, "mixed", "")
	o.KafkaCodec = true
	if a, b := runSeed(t, o, ""), runSeed(t, o, ""); a.Hash != b.Hash {
		t.Fatalf("seed 3 with the Kafka codec twice: hash %016x/%016x", a.Hash, b.Hash)
	}
}
