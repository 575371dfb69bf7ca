package main

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const kaTopic = "kadmin"

// kadm against three real `strand serve` processes changes topic configs
// and deletes records through the Kafka listeners: AlterTopicConfigs
// (IncrementalAlterConfigs SET) sets retention.ms and DescribeTopicConfigs
// shows it as a topic override, DELETE puts it back to the default (shown
// as the default), AlterTopicConfigsState (the legacy AlterConfigs) sets
// retention.bytes; APPEND is refused with INVALID_REQUEST. kadm.DeleteRecords
// (sent by franz-go to each partition's leader) moves the log start and
// ListStartOffsets shows it; a DeleteRecords sent to a node that does not
// lead the partition is answered NOT_LEADER_OR_FOLLOWER.
func TestKafkaAdminConfigsAndDeleteRecords(t *testing.T) {
	skipShort(t)
	c := startKafkaCluster(t, 3)
	adm := kafkaAdmin(t, c.kafka)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createKafkaTopics(ctx, t, adm, 2, 3, kaTopic)
	alterAndDescribe(ctx, t, adm)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.kafka...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 10 {
		for p := range int32(2) {
			r := &kgo.Record{Topic: kaTopic, Partition: p, Value: []byte(strconv.Itoa(i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	var os kadm.Offsets
	os.AddOffset(kaTopic, 0, 4, -1)
	os.AddOffset(kaTopic, 1, -1, -1) // -1: everything
	deleted, err := adm.DeleteRecords(ctx, os)
	if err != nil || deleted.Error() != nil {
		t.Fatalf("delete records: %v / %v", err, deleted.Error())
	}
	if d, _ := deleted.Lookup(kaTopic, 0); d.LowWatermark != 4 {
		t.Fatalf("partition 0 low watermark %d after deleting below 4", d.LowWatermark)
	}
	if d, _ := deleted.Lookup(kaTopic, 1); d.LowWatermark != 10 {
		t.Fatalf("partition 1 low watermark %d after deleting everything", d.LowWatermark)
	}
	starts, err := adm.ListStartOffsets(ctx, kaTopic)
	if err != nil || starts.Error() != nil {
		t.Fatalf("start offsets: %v / %v", err, starts.Error())
	}
	for p, want := range map[int32]int64{0: 4, 1: 10} {
		if s, _ := starts.Lookup(kaTopic, p); s.Offset != want {
			t.Fatalf("partition %d starts at %d after DeleteRecords; want %d", p, s.Offset, want)
		}
	}
	deleteOnFollower(ctx, t, cl)
}

// alterAndDescribe is the config half of the test above.
func alterAndDescribe(ctx context.Context, t *testing.T, adm *kadm.Client) {
	t.Helper()
	set := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kmsg.StringPtr("3600000")}}
	if rs, err := adm.AlterTopicConfigs(ctx, set, kaTopic); err != nil || rs[0].Err != nil {
		t.Fatalf("alter: %v / %+v", err, rs)
	}
	if v, src := describedValue(ctx, t, adm, "retention.ms"); v != "3600000" || src != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("retention.ms described as %q (%v) after setting 3600000", v, src)
	}
	del := []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "retention.ms"}}
	if rs, err := adm.AlterTopicConfigs(ctx, del, kaTopic); err != nil || rs[0].Err != nil {
		t.Fatalf("alter delete: %v / %+v", err, rs)
	}
	if v, src := describedValue(ctx, t, adm, "retention.ms"); v != "604800000" || src != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("retention.ms described as %q (%v) after DELETE; want the default", v, src)
	}
	app := []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "retention.ms", Value: kmsg.StringPtr("1")}}
	if rs, err := adm.AlterTopicConfigs(ctx, app, kaTopic); err != nil || !errors.Is(rs[0].Err, kerr.InvalidRequest) || rs[0].ErrMessage == "" {
		t.Fatalf("APPEND answered %v / %+v; want INVALID_REQUEST with a message", err, rs)
	}
	state := []kadm.AlterConfig{{Name: "retention.bytes", Value: kmsg.StringPtr("1048576")}}
	if rs, err := adm.AlterTopicConfigsState(ctx, state, kaTopic); err != nil || rs[0].Err != nil {
		t.Fatalf("alter state: %v / %+v", err, rs)
	}
	if v, _ := describedValue(ctx, t, adm, "retention.bytes"); v != "1048576" {
		t.Fatalf("retention.bytes described as %q after AlterTopicConfigsState", v)
	}
}

// describedValue is a config of kaTopic as kadm describes it.
func describedValue(ctx context.Context, t *testing.T, adm *kadm.Client, key string) (string, kmsg.ConfigSource) {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctx, kaTopic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(kaTopic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe: %v / %v", err, rc.Err)
	}
	for _, cfg := range rc.Configs {
		if cfg.Key == key && cfg.Value != nil {
			return *cfg.Value, cfg.Source
		}
	}
	t.Fatalf("%s not described: %+v", key, rc.Configs)
	return "", 0
}

// deleteOnFollower sends DeleteRecords for partition 0 straight to a node
// that does not lead it: NOT_LEADER_OR_FOLLOWER, as Kafka answers.
func deleteOnFollower(ctx context.Context, t *testing.T, cl *kgo.Client) {
	t.Helper()
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(kaTopic)
	md.Topics = append(md.Topics, mt)
	mresp, err := md.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics) != 1 || len(mresp.Topics[0].Partitions) != 2 {
		t.Fatalf("metadata: %v / %+v", err, mresp)
	}
	leader := mresp.Topics[0].Partitions[0].Leader
	follower := int32(1)
	if leader == 1 {
		follower = 2
	}
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = kaTopic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Offset = 5
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(follower)))
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.NotLeaderForPartition.Code || p.LowWatermark != -1 {
		t.Fatalf("DeleteRecords on node %d (leader %d): %+v; want NOT_LEADER_OR_FOLLOWER", follower, leader, p)
	}
}
