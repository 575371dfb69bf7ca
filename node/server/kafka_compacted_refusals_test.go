package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Bad input to compacted topics through Kafka's protocol (issue 24's "Done
// when"), from franz-go's kadm and kgo against a real node: CreateTopics with min.compaction.lag.ms greater than
// max.compaction.lag.ms, or a negative delete.retention.ms, is
// INVALID_CONFIG with a message that names the keys and what to set, and
// no topic is made; IncrementalAlterConfigs to the same on a compacted
// topic is INVALID_CONFIG and its settings stay; a keyless record to it is
// INVALID_RECORD and nothing is stored (its end offset stays 0).
func TestKafkaCompactedBadInput(t *testing.T) {
	rt := startKafkaServer(t)
	addr := rt.KafkaAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	str := func(s string) *string { return &s }
	adm := kafkaTopic(ctx, t, addr, "kv", 1, map[string]*string{"cleanup.policy": str("compact"),
		"min.compaction.lag.ms": str("1000"), "max.compaction.lag.ms": str("60000")})

	for _, tc := range []struct {
		name    string
		configs map[string]*string
		want    []string
	}{
		{"lag", map[string]*string{"cleanup.policy": str("compact"), "min.compaction.lag.ms": str("10"), "max.compaction.lag.ms": str("5")},
			[]string{"min.compaction.lag.ms=10 is greater than max.compaction.lag.ms=5", "set min.compaction.lag.ms at most max.compaction.lag.ms"}},
		{"retention", map[string]*string{"cleanup.policy": str("compact"), "delete.retention.ms": str("-1")},
			[]string{`delete.retention.ms="-1": want whole milliseconds, at least 0`}},
	} {
		all, err := adm.CreateTopics(ctx, 1, 1, tc.configs, "bad-"+tc.name)
		if err != nil {
			t.Fatalf("%s: create: %v", tc.name, err)
		}
		created := all["bad-"+tc.name]
		if !errors.Is(created.Err, kerr.InvalidConfig) {
			t.Errorf("%s: create answered %v, want INVALID_CONFIG", tc.name, created.Err)
		}
		for _, want := range tc.want {
			if !strings.Contains(created.ErrMessage, want) {
				t.Errorf("%s: create's message %q lacks %q", tc.name, created.ErrMessage, want)
			}
		}
		if strings.Count(created.ErrMessage, "invalid topic config") > 1 {
			t.Errorf("%s: create's message repeats itself: %q", tc.name, created.ErrMessage)
		}
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("bad-lag") || topics.Has("bad-retention") {
		t.Errorf("a refused create made a topic: %v", topics.Names())
	}

	for _, alter := range [][]kadm.AlterConfig{
		{{Name: "min.compaction.lag.ms", Value: str("120000")}},
		{{Name: "delete.retention.ms", Value: str("-5")}},
	} {
		res, err := adm.AlterTopicConfigs(ctx, alter, "kv")
		if err != nil {
			t.Fatalf("alter %s: %v", alter[0].Name, err)
		}
		if r, _ := res.On("kv", nil); !errors.Is(r.Err, kerr.InvalidConfig) || !strings.Contains(r.ErrMessage, alter[0].Name) {
			t.Errorf("alter %s answered %v %q, want INVALID_CONFIG naming it", alter[0].Name, r.Err, r.ErrMessage)
		}
	}
	described, err := adm.DescribeTopicConfigs(ctx, "kv")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := described.On("kv", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		if c.Key == "min.compaction.lag.ms" && c.MaybeValue() != "1000" || c.Key == "delete.retention.ms" && c.MaybeValue() != "86400000" {
			t.Errorf("a refused alter changed %s to %s", c.Key, c.MaybeValue())
		}
	}

	pr, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("kv"), kgo.RecordRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if err := pr.ProduceSync(ctx, &kgo.Record{Value: []byte("no key")}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Errorf("keyless produce answered %v, want INVALID_RECORD", err)
	}
	ends, err := adm.ListEndOffsets(ctx, "kv")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := ends.Lookup("kv", 0); !ok || o.Err != nil || o.Offset != 0 {
		t.Errorf("end offset after a refused keyless produce: %+v (want 0: nothing stored)", o)
	}
}
