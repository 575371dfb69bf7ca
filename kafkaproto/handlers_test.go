package kafkaproto

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/proto/strandpb"
)

// Metadata leaves out of its brokers a node Config.Down reports down (as
// Kafka leaves out a fenced broker), never the answering node, and keeps
// every node without Down. Before, a stopped node stayed listed forever,
// and franz-go kept sending AddPartitionsToTxn to a dead transaction
// coordinator it had cached on it until the node came back.
func TestMetadataLeavesOutDownBrokers(t *testing.T) {
	m := &strandpb.MetadataResponse{Nodes: []*strandpb.MetadataResponse_Node{
		{Id: 1, KafkaAddress: "127.0.0.1:9001"}, {Id: 2, KafkaAddress: "127.0.0.1:9002"},
		{Id: 3, KafkaAddress: "127.0.0.1:9003"}, {Id: 4}, // 4: no Kafka listener
	}}
	brokers := func(cfg Config) []int32 {
		s := &Server{cfg: cfg}
		out := kmsg.NewPtrMetadataResponse()
		metadataBrokers(out, m, s.brokerDown)
		var ids []int32
		for _, b := range out.Brokers {
			ids = append(ids, b.NodeID)
		}
		return ids
	}
	everyNodeDown := func(uint64) bool { return true }
	if got := brokers(Config{NodeID: 1, Down: everyNodeDown}); !slices.Equal(got, []int32{1}) {
		t.Fatalf("every other node down: brokers %v, want only the answering node 1", got)
	}
	if got := brokers(Config{NodeID: 1, Down: func(n uint64) bool { return n == 2 }}); !slices.Equal(got, []int32{1, 3}) {
		t.Fatalf("node 2 down: brokers %v, want 1 and 3", got)
	}
	if got := brokers(Config{NodeID: 1}); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("without Down: brokers %v, want every node with a Kafka listener", got)
	}
}
