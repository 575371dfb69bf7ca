package kafkaproto

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/proto/strandpb"
)

// partitionsAnswer answers a native CreatePartitions: "small" is refused
// INVALID_PARTITIONS, "gone" TOPIC_NOT_FOUND, "few" NOT_ENOUGH_REPLICAS,
// the others grow to the count asked.
func partitionsAnswer(req *strandpb.Request) *strandpb.Response {
	out := &strandpb.CreatePartitionsResponse{}
	for _, t := range req.GetCreatePartitions().GetTopics() {
		r := &strandpb.CreatePartitionsResponse_Topic{Name: t.GetName(), Partitions: t.GetPartitions(), Added: 1}
		switch t.GetName() {
		case "small":
			r.Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_PARTITIONS, Message: `topic "small" already has 4 partitions`}
		case "gone":
			r.Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND, Message: `unknown topic "gone"`}
		case "few":
			r.Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS, Message: "replication factor 3, 2 nodes available"}
		}
		out.Topics = append(out.Topics, r)
	}
	return &strandpb.Response{Body: &strandpb.Response_CreatePartitions{CreatePartitions: out}}
}

// CreatePartitions at every served version is one native CreatePartitions
// carrying the totals and validate_only; a topic named twice and a manual
// assignment are refused INVALID_REQUEST without reaching the node; the
// node's refusals come back as Kafka's codes (INVALID_PARTITIONS,
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICATION_FACTOR) with Strand's
// message, in request order.
func TestCreatePartitions(t *testing.T) {
	for v := int16(0); v <= 3; v++ {
		b := &recordBackend{answer: partitionsAnswer}
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.SetVersion(v)
		req.TimeoutMillis, req.ValidateOnly = 1500, v == 1
		for _, tc := range []struct {
			name   string
			count  int32
			assign bool
		}{{"grow", 6, false}, {"dup", 2, false}, {"small", 3, false}, {"dup", 3, false}, {"manual", 4, true}, {"gone", 2, false}, {"few", 9, false}} {
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = tc.name, tc.count
			if tc.assign {
				rt.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{1, 2}}}
			}
			req.Topics = append(req.Topics, rt)
		}
		resp := roundTrip(t, b, req).(*kmsg.CreatePartitionsResponse)
		if len(b.got) != 1 {
			t.Fatalf("v%d: %d native requests, want 1", v, len(b.got))
		}
		sent := b.got[0].GetCreatePartitions()
		if sent.GetTimeoutMs() != 1500 || sent.GetValidateOnly() != (v == 1) || len(sent.GetTopics()) != 4 ||
			sent.GetTopics()[0].GetName() != "grow" || sent.GetTopics()[0].GetPartitions() != 6 {
			t.Fatalf("v%d: native request %v", v, sent)
		}
		want := []struct {
			code int16
			msg  string
		}{
			{0, ""}, {kerr.InvalidRequest.Code, "name it once"}, {kerr.InvalidPartitions.Code, "already has 4"},
			{kerr.InvalidRequest.Code, "name it once"}, {kerr.InvalidRequest.Code, "without an assignment"},
			{kerr.UnknownTopicOrPartition.Code, `"gone"`}, {kerr.InvalidReplicationFactor.Code, "2 nodes available"},
		}
		if len(resp.Topics) != len(want) {
			t.Fatalf("v%d: %d topics answered, want %d", v, len(resp.Topics), len(want))
		}
		for i, w := range want {
			got := resp.Topics[i]
			msg := ""
			if got.ErrorMessage != nil {
				msg = *got.ErrorMessage
			}
			if got.ErrorCode != w.code || w.msg != "" && !strings.Contains(msg, w.msg) || w.msg == "" && msg != "" {
				t.Fatalf("v%d topic %d (%s): code %d %q, want %d %q", v, i, got.Topic, got.ErrorCode, msg, w.code, w.msg)
			}
		}
	}
}

// ApiVersions advertises CreatePartitions 0-3 (it was refused as
// unsupported, "adding partitions").
func TestCreatePartitionsAdvertised(t *testing.T) {
	a, ok := apiByKey(37)
	if !ok || a.min != 0 || a.max != 3 {
		t.Fatalf("CreatePartitions served as %+v (%v), want versions 0-3", a, ok)
	}
	if _, refused := unsupportedAPIs[37]; refused {
		t.Fatal("CreatePartitions is still listed as unsupported")
	}
}

func FuzzCreatePartitions(f *testing.F) {
	req := kmsg.NewPtrCreatePartitionsRequest()
	t := kmsg.NewCreatePartitionsRequestTopic()
	t.Topic, t.Count = "t", 4
	dup := t
	dup.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{1}}}
	req.Topics = append(req.Topics, t, dup)
	fuzzAPI(f, 37, req)
}
