package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const cpTopic = "grown"

// kadm against three real `strand serve` processes grows a topic through
// the Kafka listeners: CreatePartitions (+2) and UpdatePartitions (to a
// total) add partitions that Metadata lists and a kgo producer writes to;
// a shrink is INVALID_PARTITIONS, a missing topic
// UNKNOWN_TOPIC_OR_PARTITION, and ValidateUpdatePartitions changes
// nothing. Then `strand topic add-partitions` grows it again over the
// native protocol and prints what was applied; its refusals are one line.
func TestKafkaCreatePartitions(t *testing.T) {
	skipShort(t)
	c := startKafkaCluster(t, 3)
	adm := kafkaAdmin(t, c.kafka)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createKafkaTopics(ctx, t, adm, 2, 3, cpTopic)
	waitPartitions(ctx, t, adm, 2)
	if err := partitionsResult(adm.CreatePartitions(ctx, 2, cpTopic)); err != nil {
		t.Fatalf("CreatePartitions +2: %v", err)
	}
	if err := partitionsResult(adm.UpdatePartitions(ctx, 5, cpTopic)); err != nil {
		t.Fatalf("UpdatePartitions to 5: %v", err)
	}
	if err := partitionsResult(adm.UpdatePartitions(ctx, 3, cpTopic)); !errors.Is(err, kerr.InvalidPartitions) ||
		!strings.Contains(err.Error(), "can only be added") {
		t.Fatalf("shrink to 3: %v, want INVALID_PARTITIONS saying partitions can only be added", err)
	}
	if err := partitionsResult(adm.ValidateUpdatePartitions(ctx, 9, cpTopic)); err != nil {
		t.Fatalf("validate-only to 9: %v", err)
	}
	if err := partitionsResult(adm.UpdatePartitions(ctx, 4, "nosuch")); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("missing topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	waitPartitions(ctx, t, adm, 5)
	waitFor(t, "produce to partition 4", 30*time.Second, func() error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.kafka...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			return err
		}
		defer cl.Close()
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		defer pcancel()
		return cl.ProduceSync(pctx, &kgo.Record{Topic: cpTopic, Partition: 4, Value: []byte("new")}).FirstErr()
	})
	checkAddPartitionsCLI(t, "--brokers="+c.addrs[0])
	waitPartitions(ctx, t, adm, 7)
}

// checkAddPartitionsCLI runs `strand topic add-partitions` against the
// grown topic (5 partitions).
func checkAddPartitionsCLI(t *testing.T, b string) {
	t.Helper()
	o := runOutcome(t, "", "topic", "add-partitions", cpTopic, "--num", "2", b)
	if o.code != 0 || o.stdout != "added 2 partitions to topic "+cpTopic+": it has 7 partitions\n" {
		t.Fatalf("add-partitions --num 2: %+v", o)
	}
	o = runOutcome(t, "", "topic", "add-partitions", cpTopic, "-p", "9", "--validate-only", b)
	if o.code != 0 || o.stdout != "topic "+cpTopic+" would have 9 partitions (2 added); nothing changed (--validate-only)\n" {
		t.Fatalf("add-partitions --validate-only: %+v", o)
	}
	runOutcome(t, "", "topic", "add-partitions", cpTopic, "--partitions", "7", b).wantFailure(t, 1,
		`invalid partition count: topic "`+cpTopic+`" already has 7 partitions`)
	runOutcome(t, "", "topic", "add-partitions", cpTopic, "--partitions", "3", b).wantFailure(t, 1,
		`invalid partition count: topic "`+cpTopic+`" has 7 partitions and cannot shrink to 3: partitions can only be added`)
	runOutcome(t, "", "topic", "add-partitions", "nosuch", "-p", "3", b).wantFailure(t, 1,
		`topic "nosuch" does not exist (create it with: strand topic create nosuch --partitions N)`)
}

// partitionsResult is the one topic's error of a kadm partitions call.
func partitionsResult(rs kadm.CreatePartitionsResponses, err error) error {
	if err != nil {
		return err
	}
	if len(rs) != 1 {
		return fmt.Errorf("%d topics answered", len(rs))
	}
	for _, r := range rs {
		if r.Err != nil {
			return fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
		}
	}
	return nil
}

// waitPartitions waits until Kafka metadata lists n partitions of cpTopic,
// each with a leader.
func waitPartitions(ctx context.Context, t *testing.T, adm *kadm.Client, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d partitions", n), 30*time.Second, func() error {
		td, err := adm.ListTopics(ctx, cpTopic)
		if err != nil {
			return err
		}
		d := td[cpTopic]
		if d.Err != nil || len(d.Partitions) != n {
			return fmt.Errorf("metadata: %d partitions, %v", len(d.Partitions), d.Err)
		}
		for _, p := range d.Partitions {
			if p.Leader < 0 || p.Err != nil {
				return fmt.Errorf("partition %d: leader %d, %v", p.Partition, p.Leader, p.Err)
			}
		}
		return nil
	})
}

// `strand topic add-partitions` refuses, before contacting anything, a
// missing count, both counts at once and counts below 1, with exit 2; its
// help has a synopsis and an example.
func TestAddPartitionsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"topic", "add-partitions", "t"},
		{"topic", "add-partitions", "t", "-p", "4", "-n", "1"},
		{"topic", "add-partitions", "t", "--partitions", "0"},
		{"topic", "add-partitions", "t", "--num", "-1"},
		{"topic", "add-partitions", "-p", "4"},
	} {
		var out, errOut bytes.Buffer
		code := run(append(args, "--brokers", "127.0.0.1:1"), strings.NewReader(""), &out, &errOut)
		if code != 2 || out.Len() != 0 || !strings.HasPrefix(errOut.String(), "strand: ") || strings.Contains(errOut.String(), "reach") {
			t.Errorf("strand %v: exit %d, stdout %q, stderr %q; want exit 2 with a usage message", args, code, out.String(), errOut.String())
		}
	}
	checkHelp(t, []string{"topic", "add-partitions", "--help"}, []string{"Usage:\n  strand topic add-partitions NAME",
		"Example:\n  strand topic add-partitions hello --partitions 6", "--num", "--validate-only"})
	checkHelp(t, []string{"topic", "--help"}, []string{"strand topic add-partitions NAME"})
}
