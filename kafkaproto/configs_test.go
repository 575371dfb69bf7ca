package kafkaproto

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/proto/strandpb"
)

// recordBackend records the native requests and answers each with answer.
type recordBackend struct {
	got    []*strandpb.Request
	answer func(*strandpb.Request) *strandpb.Response
}

func (b *recordBackend) Submit(_ <-chan struct{}, req *strandpb.Request, reply func(*strandpb.Response)) error {
	b.got = append(b.got, req)
	reply(b.answer(req))
	return nil
}

// roundTrip serves req at its version over b and returns the answer after
// encoding and decoding it as a client would.
func roundTrip(t *testing.T, b Backend, req kmsg.Request) kmsg.Response {
	t.Helper()
	s := &Server{cfg: Config{Backend: b, NodeID: 1}, logger: slog.New(slog.DiscardHandler), classic: newClassicState()}
	c := &conn{s: s, done: make(chan struct{})}
	p, err := c.serve(frameRequest(req, 5))
	if err != nil {
		t.Fatal(err)
	}
	resp := p.resp()
	frame := appendResponse(nil, p, resp)
	body := frame[8:] // size, correlation id
	if req.IsFlexible() {
		if body, err = skipTags(body); err != nil {
			t.Fatal(err)
		}
	}
	got := req.ResponseKind()
	got.SetVersion(req.GetVersion())
	if err := got.ReadFrom(body); err != nil {
		t.Fatalf("decoding the answer: %v", err)
	}
	return got
}

// alterAnswer answers a native AlterConfigs: topic "bad" fails with
// INVALID_CONFIG, the others succeed.
func alterAnswer(req *strandpb.Request) *strandpb.Response {
	out := &strandpb.AlterConfigsResponse{}
	for _, t := range req.GetAlterConfigs().GetTopics() {
		r := &strandpb.AlterConfigsResponse_Topic{Name: t.GetName()}
		if t.GetName() == "bad" {
			r.Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_CONFIG, Message: "retention.ms=\"x\""}
		}
		out.Topics = append(out.Topics, r)
	}
	return &strandpb.Response{Body: &strandpb.Response_AlterConfigs{AlterConfigs: out}}
}

// IncrementalAlterConfigs maps SET and DELETE onto one native AlterConfigs
// per request at every served version; APPEND and SUBTRACT, validate_only
// and broker resources are refused with INVALID_REQUEST and a message,
// without reaching the node; a node's INVALID_CONFIG comes back as Kafka's.
func TestIncrementalAlterConfigs(t *testing.T) {
	for v := int16(0); v <= 1; v++ {
		b := &recordBackend{answer: alterAnswer}
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.SetVersion(v)
		ok := kmsg.NewIncrementalAlterConfigsRequestResource()
		ok.ResourceType, ok.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
		set := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		set.Name, set.Op, set.Value = "retention.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("1000")
		del := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		del.Name, del.Op = "segment.ms", kmsg.IncrementalAlterConfigOpDelete
		ok.Configs = append(ok.Configs, set, del)
		appendRes := ok
		appendRes.ResourceName = "a"
		app := set
		app.Op = kmsg.IncrementalAlterConfigOpAppend
		appendRes.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{app}
		bad := ok
		bad.ResourceName = "bad"
		broker := ok
		broker.ResourceType, broker.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
		req.Resources = append(req.Resources, ok, appendRes, bad, broker)
		resp := roundTrip(t, b, req).(*kmsg.IncrementalAlterConfigsResponse)
		if len(b.got) != 1 {
			t.Fatalf("v%d: %d native requests, want 1", v, len(b.got))
		}
		topics := b.got[0].GetAlterConfigs().GetTopics()
		if len(topics) != 2 || topics[0].GetName() != "t" || topics[1].GetName() != "bad" {
			t.Fatalf("v%d: native topics %v", v, topics)
		}
		if s := topics[0].GetSets(); len(s) != 1 || s[0].GetName() != "retention.ms" || s[0].GetValue() != "1000" ||
			len(topics[0].GetDeletes()) != 1 || topics[0].GetDeletes()[0] != "segment.ms" {
			t.Fatalf("v%d: native topic %v", v, topics[0])
		}
		want := []int16{0, kerr.InvalidRequest.Code, kerr.InvalidConfig.Code, kerr.InvalidRequest.Code}
		for i, r := range resp.Resources {
			if r.ErrorCode != want[i] || (want[i] != 0) != (r.ErrorMessage != nil) {
				t.Fatalf("v%d: resource %s: code %d message %v, want code %d", v, r.ResourceName, r.ErrorCode, r.ErrorMessage, want[i])
			}
		}
		if !strings.Contains(*resp.Resources[1].ErrorMessage, "SET") {
			t.Fatalf("APPEND refusal says %q", *resp.Resources[1].ErrorMessage)
		}
		req.ValidateOnly = true
		b.got = nil
		resp = roundTrip(t, b, req).(*kmsg.IncrementalAlterConfigsResponse)
		if len(b.got) != 0 || resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code ||
			!strings.Contains(*resp.Resources[0].ErrorMessage, "validate_only") {
			t.Fatalf("v%d: validate_only reached the node (%d) or answered %+v", v, len(b.got), resp.Resources[0])
		}
	}
}

// The legacy AlterConfigs replaces a topic's whole configuration: the keys
// named are set and every other known key is reset to its default.
func TestAlterConfigsReplacesWholeConfig(t *testing.T) {
	for v := int16(0); v <= 2; v++ {
		b := &recordBackend{answer: alterAnswer}
		req := kmsg.NewPtrAlterConfigsRequest()
		req.SetVersion(v)
		res := kmsg.NewAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
		cfg := kmsg.NewAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = "retention.bytes", kmsg.StringPtr("4096")
		res.Configs = append(res.Configs, cfg)
		req.Resources = append(req.Resources, res)
		resp := roundTrip(t, b, req).(*kmsg.AlterConfigsResponse)
		if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 || resp.Resources[0].ResourceName != "t" {
			t.Fatalf("v%d: %+v", v, resp.Resources)
		}
		nt := b.got[0].GetAlterConfigs().GetTopics()[0]
		if len(nt.GetSets()) != 1 || nt.GetSets()[0].GetName() != "retention.bytes" {
			t.Fatalf("v%d: sets %v", v, nt.GetSets())
		}
		deletes := "," + strings.Join(nt.GetDeletes(), ",") + ","
		if strings.Contains(deletes, ",retention.bytes,") || !strings.Contains(deletes, ",retention.ms,") || !strings.Contains(deletes, ",segment.bytes,") {
			t.Fatalf("v%d: deletes %s", v, deletes)
		}
	}
}

// DeleteRecords goes to the node as one native DeleteRecords; the log
// start comes back as the low watermark, a partition this node does not
// lead as NOT_LEADER_OR_FOLLOWER and one past the end as
// OFFSET_OUT_OF_RANGE, each with low watermark -1.
func TestDeleteRecords(t *testing.T) {
	answer := func(req *strandpb.Request) *strandpb.Response {
		out := &strandpb.DeleteRecordsResponse{}
		for _, p := range req.GetDeleteRecords().GetPartitions() {
			a := &strandpb.DeleteRecordsResponse_Partition{Topic: p.GetTopic(), Partition: p.GetPartition(), LogStartOffset: p.GetBeforeOffset()}
			switch p.GetPartition() {
			case 1:
				a.Error, a.LogStartOffset = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_LEADER, Message: "leader is node 2"}, -1
			case 2:
				a.Error, a.LogStartOffset = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE, Message: "past the end"}, -1
			}
			out.Partitions = append(out.Partitions, a)
		}
		return &strandpb.Response{Body: &strandpb.Response_DeleteRecords{DeleteRecords: out}}
	}
	for v := int16(0); v <= 2; v++ {
		b := &recordBackend{answer: answer}
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.SetVersion(v)
		req.TimeoutMillis = 1234
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = "t"
		for p := int32(0); p < 3; p++ {
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Partition, rp.Offset = p, 7
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp := roundTrip(t, b, req).(*kmsg.DeleteRecordsResponse)
		if len(b.got) != 1 || len(b.got[0].GetDeleteRecords().GetPartitions()) != 3 || b.got[0].GetDeleteRecords().GetTimeoutMs() != 1234 {
			t.Fatalf("v%d: native %v", v, b.got)
		}
		ps := resp.Topics[0].Partitions
		if ps[0].ErrorCode != 0 || ps[0].LowWatermark != 7 {
			t.Fatalf("v%d: partition 0 %+v", v, ps[0])
		}
		if ps[1].ErrorCode != kerr.NotLeaderForPartition.Code || ps[1].LowWatermark != -1 {
			t.Fatalf("v%d: partition 1 %+v", v, ps[1])
		}
		if ps[2].ErrorCode != kerr.OffsetOutOfRange.Code || ps[2].LowWatermark != -1 {
			t.Fatalf("v%d: partition 2 %+v", v, ps[2])
		}
	}
}

// DescribeConfigs reports a value equal to the default as DEFAULT_CONFIG
// and any other as DYNAMIC_TOPIC_CONFIG, with the default as a synonym
// when synonyms are asked for.
func TestDescribeConfigsSources(t *testing.T) {
	answer := func(*strandpb.Request) *strandpb.Response {
		return &strandpb.Response{Body: &strandpb.Response_DescribeTopics{DescribeTopics: &strandpb.DescribeTopicsResponse{
			Topics: []*strandpb.DescribeTopicsResponse_Topic{{Name: "t", Configs: []*strandpb.ConfigEntry{
				{Name: "retention.ms", Value: "1000"}, {Name: "segment.bytes", Value: defaultConfigs["segment.bytes"]}}}}}}}
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(4)
	req.IncludeSynonyms = true
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	req.Resources = append(req.Resources, res)
	resp := roundTrip(t, &recordBackend{answer: answer}, req).(*kmsg.DescribeConfigsResponse)
	cs := resp.Resources[0].Configs
	if len(cs) != 2 {
		t.Fatalf("configs %+v", cs)
	}
	if cs[0].Source != kmsg.ConfigSourceDynamicTopicConfig || *cs[0].Value != "1000" || len(cs[0].ConfigSynonyms) != 2 ||
		*cs[0].ConfigSynonyms[1].Value != defaultConfigs["retention.ms"] || cs[0].ConfigType != kmsg.ConfigTypeLong {
		t.Fatalf("retention.ms %+v", cs[0])
	}
	if cs[1].Source != kmsg.ConfigSourceDefaultConfig || len(cs[1].ConfigSynonyms) != 1 {
		t.Fatalf("segment.bytes %+v", cs[1])
	}
}

// TestCompactionConfigTypes shows DescribeConfigs v3+ types the compaction
// keys as Kafka does (the ratio DOUBLE, the times LONG) and reports their
// defaults as DEFAULT_CONFIG.
func TestCompactionConfigTypes(t *testing.T) {
	for name, want := range map[string]kmsg.ConfigType{
		"min.cleanable.dirty.ratio": kmsg.ConfigTypeDouble, "min.compaction.lag.ms": kmsg.ConfigTypeLong,
		"max.compaction.lag.ms": kmsg.ConfigTypeLong, "delete.retention.ms": kmsg.ConfigTypeLong,
	} {
		def, ok := defaultConfigs[name]
		if !ok {
			t.Fatalf("%s has no default", name)
		}
		cfg := describedConfig(name, def, 3, false)
		if cfg.ConfigType != want || !cfg.IsDefault || cfg.Source != kmsg.ConfigSourceDefaultConfig {
			t.Errorf("%s: type %v default %v source %v, want %v, a default", name, cfg.ConfigType, cfg.IsDefault, cfg.Source, want)
		}
	}
	if defaultConfigs["min.cleanable.dirty.ratio"] != "0.5" || defaultConfigs["delete.retention.ms"] != "86400000" {
		t.Fatalf("defaults %v, want Kafka's", defaultConfigs)
	}
}
