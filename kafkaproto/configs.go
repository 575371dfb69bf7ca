package kafkaproto

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/proto/strandpb"
)

// configAlter is one resource of an AlterConfigs or IncrementalAlterConfigs
// request: the native topic change, or the error refusing it here.
type configAlter struct {
	typ   kmsg.ConfigResourceType
	name  string
	topic *strandpb.AlterConfigsRequest_Topic
	err   *strandpb.Error
}

// invalid is an INVALID_REQUEST refusal with msg.
func invalid(msg string) *strandpb.Error {
	return &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: msg}
}

// refuseResource refuses what Strand cannot alter: validate_only (a topic
// change cannot be checked without applying it) and non-topic resources.
func refuseResource(typ kmsg.ConfigResourceType, validateOnly bool) *strandpb.Error {
	switch {
	case validateOnly:
		return invalid("Strand cannot validate a config change without applying it: send it without validate_only")
	case typ != kmsg.ConfigResourceTypeTopic:
		return invalid(fmt.Sprintf("Strand alters topic configs only, not resource type %d", typ))
	}
	return nil
}

// alterConfigs serves the legacy AlterConfigs: a resource's configs replace
// the topic's whole configuration, so every key not named goes back to its
// default (a native delete).
func (c *conn) alterConfigs(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.AlterConfigsRequest)
	alters := make([]configAlter, len(r.Resources))
	for i, res := range r.Resources {
		a := configAlter{typ: res.ResourceType, name: res.ResourceName, err: refuseResource(res.ResourceType, r.ValidateOnly)}
		if a.err == nil {
			a.topic = &strandpb.AlterConfigsRequest_Topic{Name: res.ResourceName}
			named := map[string]bool{}
			for _, cfg := range res.Configs {
				if cfg.Value == nil {
					a.err = invalid(fmt.Sprintf("config %s has a null value: AlterConfigs sets values; leave a key out to reset it", cfg.Name))
					break
				}
				named[cfg.Name] = true
				a.topic.Sets = append(a.topic.Sets, &strandpb.ConfigEntry{Name: cfg.Name, Value: *cfg.Value})
			}
			for _, e := range metadata.DefaultTopicConfig().Entries() {
				if !named[e.Name] {
					a.topic.Deletes = append(a.topic.Deletes, e.Name)
				}
			}
		}
		alters[i] = a
	}
	wait := c.submitAlters(alters)
	return func() kmsg.Response {
		errs, ok := wait()
		if !ok {
			return nil
		}
		out := kmsg.NewPtrAlterConfigsResponse()
		out.SetVersion(r.Version)
		for i, a := range alters {
			or := kmsg.NewAlterConfigsResponseResource()
			or.ResourceType, or.ResourceName = a.typ, a.name
			or.ErrorCode, or.ErrorMessage = kafkaCode(errs[i]), message(errs[i])
			out.Resources = append(out.Resources, or)
		}
		return out
	}
}

// incrementalAlterConfigs serves IncrementalAlterConfigs: SET and DELETE
// map onto the native sets and deletes; APPEND and SUBTRACT act on list
// configs, which no Strand topic config is, so they are refused.
func (c *conn) incrementalAlterConfigs(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.IncrementalAlterConfigsRequest)
	alters := make([]configAlter, len(r.Resources))
	for i, res := range r.Resources {
		a := configAlter{typ: res.ResourceType, name: res.ResourceName, err: refuseResource(res.ResourceType, r.ValidateOnly)}
		if a.err == nil {
			a.topic = &strandpb.AlterConfigsRequest_Topic{Name: res.ResourceName}
			for _, cfg := range res.Configs {
				a.err = incrementalOp(a.topic, cfg)
				if a.err != nil {
					break
				}
			}
		}
		alters[i] = a
	}
	wait := c.submitAlters(alters)
	return func() kmsg.Response {
		errs, ok := wait()
		if !ok {
			return nil
		}
		out := kmsg.NewPtrIncrementalAlterConfigsResponse()
		out.SetVersion(r.Version)
		for i, a := range alters {
			or := kmsg.NewIncrementalAlterConfigsResponseResource()
			or.ResourceType, or.ResourceName = a.typ, a.name
			or.ErrorCode, or.ErrorMessage = kafkaCode(errs[i]), message(errs[i])
			out.Resources = append(out.Resources, or)
		}
		return out
	}
}

// incrementalOp adds one IncrementalAlterConfigs entry to t.
func incrementalOp(t *strandpb.AlterConfigsRequest_Topic, cfg kmsg.IncrementalAlterConfigsRequestResourceConfig) *strandpb.Error {
	switch cfg.Op {
	case kmsg.IncrementalAlterConfigOpSet:
		if cfg.Value == nil {
			return invalid(fmt.Sprintf("SET of %s has a null value: use DELETE to reset it to its default", cfg.Name))
		}
		t.Sets = append(t.Sets, &strandpb.ConfigEntry{Name: cfg.Name, Value: *cfg.Value})
	case kmsg.IncrementalAlterConfigOpDelete:
		t.Deletes = append(t.Deletes, cfg.Name)
	case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
		return invalid(fmt.Sprintf("%s of %s refused: Strand takes no list operations (for cleanup.policy SET the whole list, e.g. compact,delete)", cfg.Op, cfg.Name))
	default:
		return invalid(fmt.Sprintf("unknown config op %d for %s", int8(cfg.Op), cfg.Name))
	}
	return nil
}

// submitAlters sends the alters not refused here as one native
// AlterConfigs and returns how to wait for each resource's error (ok false:
// the connection closed first).
func (c *conn) submitAlters(alters []configAlter) func() ([]*strandpb.Error, bool) {
	sreq := &strandpb.AlterConfigsRequest{}
	for _, a := range alters {
		if a.err == nil {
			sreq.Topics = append(sreq.Topics, a.topic)
		}
	}
	var k *call
	if len(sreq.Topics) > 0 {
		k = c.submit(&strandpb.Request{Body: &strandpb.Request_AlterConfigs{AlterConfigs: sreq}})
	}
	return func() ([]*strandpb.Error, bool) {
		var whole *strandpb.Response
		answers := map[string]*strandpb.AlterConfigsResponse_Topic{}
		if k != nil {
			if whole = c.wait(k); whole == nil {
				return nil, false
			}
			for _, t := range whole.GetAlterConfigs().GetTopics() {
				answers[t.GetName()] = t
			}
		}
		errs := make([]*strandpb.Error, len(alters))
		for i, a := range alters {
			switch t, ok := answers[a.name]; {
			case a.err != nil:
				errs[i] = a.err
			case ok:
				errs[i] = partErr(whole, t.GetError())
			case whole.GetError() != nil:
				errs[i] = whole.GetError()
			default:
				errs[i] = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INTERNAL, Message: "topic " + a.name + " not in the answer"}
			}
		}
		return errs, true
	}
}

// deleteRecords serves DeleteRecords as one native DeleteRecords on this
// node: each partition it does not lead is answered NOT_LEADER_OR_FOLLOWER
// by the node, so the client asks the leader, as with Kafka.
func (c *conn) deleteRecords(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.DeleteRecordsRequest)
	sreq := &strandpb.DeleteRecordsRequest{TimeoutMs: r.TimeoutMillis}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			sreq.Partitions = append(sreq.Partitions, &strandpb.DeleteRecordsRequest_Partition{
				Topic: t.Topic, Partition: p.Partition, BeforeOffset: p.Offset})
		}
	}
	var k *call
	if len(sreq.Partitions) > 0 {
		k = c.submit(&strandpb.Request{Body: &strandpb.Request_DeleteRecords{DeleteRecords: sreq}})
	}
	return func() kmsg.Response {
		var whole *strandpb.Response
		answers := map[tp]*strandpb.DeleteRecordsResponse_Partition{}
		if k != nil {
			if whole = c.wait(k); whole == nil {
				return nil
			}
			for _, a := range whole.GetDeleteRecords().GetPartitions() {
				answers[tp{a.GetTopic(), a.GetPartition()}] = a
			}
		}
		out := kmsg.NewPtrDeleteRecordsResponse()
		out.SetVersion(r.Version)
		for _, t := range r.Topics {
			ot := kmsg.NewDeleteRecordsResponseTopic()
			ot.Topic = t.Topic
			for _, p := range t.Partitions {
				op := kmsg.NewDeleteRecordsResponseTopicPartition()
				op.Partition, op.LowWatermark = p.Partition, -1
				a, ok := answers[tp{t.Topic, p.Partition}]
				e := whole.GetError()
				if ok {
					e = partErr(whole, a.GetError())
				} else if e == nil {
					e = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INTERNAL, Message: "partition not in the answer"}
				}
				if op.ErrorCode = kafkaCode(e); op.ErrorCode == 0 {
					op.LowWatermark = a.GetLogStartOffset()
				}
				ot.Partitions = append(ot.Partitions, op)
			}
			out.Topics = append(out.Topics, ot)
		}
		return out
	}
}

// defaultConfigs is each topic config key's default value.
var defaultConfigs = func() map[string]string {
	m := map[string]string{}
	for _, e := range metadata.DefaultTopicConfig().Entries() {
		m[e.Name] = e.Value
	}
	return m
}()

// describedConfig is one topic config as DescribeConfigs reports it: a
// value equal to the default is reported as the default (DEFAULT_CONFIG),
// any other as a topic override (DYNAMIC_TOPIC_CONFIG); with synonyms
// asked, an override lists the default below it, as Kafka does.
func describedConfig(name, value string, version int16, synonyms bool) kmsg.DescribeConfigsResponseResourceConfig {
	cfg := kmsg.NewDescribeConfigsResponseResourceConfig()
	v := value
	cfg.Name, cfg.Value = name, &v
	def, known := defaultConfigs[name]
	cfg.IsDefault = known && def == value
	cfg.Source = kmsg.ConfigSourceDynamicTopicConfig
	if cfg.IsDefault {
		cfg.Source = kmsg.ConfigSourceDefaultConfig
	}
	if version >= 1 && synonyms {
		s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		s.Name, s.Value, s.Source = name, &v, cfg.Source
		cfg.ConfigSynonyms = append(cfg.ConfigSynonyms, s)
		if !cfg.IsDefault && known {
			d := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			dv := def
			d.Name, d.Value, d.Source = name, &dv, kmsg.ConfigSourceDefaultConfig
			cfg.ConfigSynonyms = append(cfg.ConfigSynonyms, d)
		}
	}
	if version >= 3 {
		cfg.ConfigType = configType(name)
	}
	return cfg
}

// configType is the Kafka type of a topic config key.
func configType(name string) kmsg.ConfigType {
	switch name {
	case metadata.ConfigCleanupPolicy:
		return kmsg.ConfigTypeList
	case metadata.ConfigMaxMessageBytes, metadata.ConfigSegmentBytes:
		return kmsg.ConfigTypeInt
	case metadata.ConfigRetentionMs, metadata.ConfigRetentionBytes, metadata.ConfigSegmentMs,
		metadata.ConfigMinCompactionLagMs, metadata.ConfigMaxCompactionLagMs, metadata.ConfigDeleteRetentionMs,
		metadata.ConfigLocalRetentionMs, metadata.ConfigLocalRetentionBytes:
		return kmsg.ConfigTypeLong
	case metadata.ConfigRemoteStorageEnable:
		return kmsg.ConfigTypeBoolean
	case metadata.ConfigMinCleanableDirtyRatio:
		return kmsg.ConfigTypeDouble
	}
	return kmsg.ConfigTypeString
}
