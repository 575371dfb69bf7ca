package clientlib

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// laggingWorld scripts t/0 led by n2, whose metadata lags until
// caughtUp: it answers metadata at version 3 without the topic and fetches
// with UNKNOWN_TOPIC_ID. n1 is current (version 10) but its answers to a
// metadata request naming the topic are lost.
func laggingWorld(t *testing.T, caughtUp time.Duration) *scriptedWorld {
	id := []byte("0123456789abcdef")
	meta := func(version uint64, topics ...*strandpb.MetadataResponse_Topic) *strandpb.Response {
		return &strandpb.Response{Body: &strandpb.Response_Metadata{Metadata: &strandpb.MetadataResponse{
			Nodes:  []*strandpb.MetadataResponse_Node{{Id: 1, Address: "n1"}, {Id: 2, Address: "n2"}},
			Topics: topics, MetadataVersion: version}}}
	}
	known := &strandpb.MetadataResponse_Topic{Name: "t", TopicId: id,
		Partitions: []*strandpb.MetadataResponse_Partition{{Partition: 0, LeaderId: 2}}}
	unknown := &strandpb.MetadataResponse_Topic{Name: "t",
		Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION}}
	w := &scriptedWorld{}
	w.answer = func(addr string, req *strandpb.Request) *strandpb.Response {
		lagging := addr == "n2" && w.now < caughtUp
		byName := len(req.GetMetadata().GetTopics()) > 0
		switch {
		case req.GetMetadata() != nil && addr == "n1" && byName:
			return nil
		case req.GetMetadata() != nil && lagging && byName:
			return meta(3, unknown)
		case req.GetMetadata() != nil && lagging:
			return meta(3)
		case req.GetMetadata() != nil:
			return meta(10, known)
		case req.GetFetch() != nil && lagging:
			return &strandpb.Response{Body: &strandpb.Response_Fetch{Fetch: &strandpb.FetchResponse{
				Partitions: []*strandpb.FetchResponse_Partition{{Topic: "t", Partition: 0,
					Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID}}}}}}
		case req.GetFetch() != nil:
			return (&groupWorld{}).fetch(t, req.GetFetch())
		}
		t.Fatalf("unexpected request %T to %s", req.GetBody(), addr)
		return nil
	}
	return w
}

// TestConsumerIgnoresLaggingNodeOnTopicGone: a consumer whose fetch a
// lagging leader refuses with UNKNOWN_TOPIC_ID asks metadata about the
// topic; the only answer comes from the lagging node (older metadata
// than the client applied, without the topic). The topic is alive: the
// consumer retries and reads once the node caught up, and never reports
// it deleted. Found by the simulator's plain consumers (a node restarted
// with a wiped disk answered for a live topic): the consumer stopped the
// partitions for good with "topic was deleted while consuming".
func TestConsumerIgnoresLaggingNodeOnTopicGone(t *testing.T) {
	w := laggingWorld(t, 3*time.Second)
	c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	k := NewConsumer(c, FetchMaxWait(100*time.Millisecond))
	k.Assign("t", 0, OffsetExact(0))
	var got []int64
	var gone error
	c.SimRun(func(ctx context.Context) {
		for i := 0; i < 200 && len(got) < 5 && gone == nil; i++ {
			fs := k.Poll(ctx)
			for _, r := range fs.Records() {
				got = append(got, r.Offset)
			}
			var re *TopicRecreatedError
			if errors.As(fs.FirstErr(), &re) {
				gone = re
			}
		}
	}, func() {})
	w.run(t, 100000)
	if gone != nil {
		t.Fatalf("the consumer declared the live topic gone on a lagging node's answer: %v", gone)
	}
	if len(got) != 5 {
		t.Fatalf("read offsets %v, want 0..4 once the node caught up", got)
	}
}
