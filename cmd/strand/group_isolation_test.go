package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// `strand group describe --isolation`: franz-go commits a transaction of
// two records on tx/0 (offsets 0, 1; its marker at 2) and leaves a second
// one open with two more (3, 4), so the high-water mark is 5 and the last
// stable offset 3. A group committed at 1 lags 4 records at
// read_uncommitted (the default, to the high-water mark, as Kafka's tools
// measure) with a note naming the held-back partition, and 2 records at
// read_committed (to the last stable offset, where such a consumer
// stops), with a LAST STABLE column; --format json carries the isolation
// and last_stable_offset. Before, both showed lag 4 and no LSO.
func TestGroupDescribeIsolation(t *testing.T) {
	skipShort(t)
	c := startKafkaCluster(t, 1)
	adm := kafkaAdmin(t, c.kafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createKafkaTopics(ctx, t, adm, 1, 1, "tx")
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.kafka...), kgo.TransactionalID("lag-tx"), kgo.DefaultProduceTopic("tx"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 2 {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{"a", "b"} {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %q: %v", v, err)
			}
		}
		if i == 0 {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
		}
	}
	runCLI(t, nil, "", "group", "reset", "lagging", "-t", "tx", "--to-offset", "1", "--execute", "-b", c.addrs[0])

	// The commit's marker is written after EndTxn answers: wait for it.
	var uncommitted string
	waitFor(t, "marker and open transaction", 30*time.Second, func() error {
		uncommitted = runCLI(t, nil, "", "group", "describe", "lagging", "-b", c.addrs[0])
		if !regexp.MustCompile(`tx +0 +1 +5 +4 `).MatchString(uncommitted) {
			return fmt.Errorf("read_uncommitted:\n%s", uncommitted)
		}
		if !strings.Contains(uncommitted, "open transactions hold read_committed consumers back: tx/0 at 3") {
			return fmt.Errorf("no held-back note (marker not yet written?):\n%s", uncommitted)
		}
		return nil
	})
	committed := runCLI(t, nil, "", "group", "describe", "lagging", "--isolation", "read_committed", "-b", c.addrs[0])
	if !strings.Contains(committed, "HIGH WATERMARK  LAST STABLE  LAG") || !regexp.MustCompile(`tx +0 +1 +5 +3 +2 `).MatchString(committed) {
		t.Fatalf("read_committed: want lag 2 to the last stable offset 3:\n%s", committed)
	}
	if strings.Contains(committed, "hold read_committed consumers back") {
		t.Errorf("read_committed output repeats the held-back note:\n%s", committed)
	}
	var out struct {
		Isolation string `json:"isolation"`
		Offsets   []struct {
			HighWatermark *int64 `json:"high_watermark"`
			LastStable    *int64 `json:"last_stable_offset"`
			Lag           *int64 `json:"lag"`
		} `json:"offsets"`
	}
	js := runCLI(t, nil, "", "group", "describe", "lagging", "--isolation", "read_committed", "--format", "json", "-b", c.addrs[0])
	if err := json.Unmarshal([]byte(js), &out); err != nil {
		t.Fatalf("%v:\n%s", err, js)
	}
	if o := out.Offsets; out.Isolation != "read_committed" || len(o) != 1 || o[0].LastStable == nil || *o[0].LastStable != 3 ||
		*o[0].Lag != 2 || *o[0].HighWatermark != 5 {
		t.Fatalf("json:\n%s", js)
	}
	if _, stderr, err := runCLIResult(t, nil, "", "group", "describe", "lagging", "--isolation", "committed", "-b", c.addrs[0]); err == nil ||
		!strings.Contains(stderr, `--isolation "committed": want read_uncommitted or read_committed`) {
		t.Fatalf("a bad --isolation: %v\n%s", err, stderr)
	}

	// `strand consume -g` commits its position, past the commit marker at
	// 2: a read_committed member that printed a and b leaves its group at
	// the last stable offset, lag 0 (it committed 2, lag 1, before).
	if out := runCLI(t, nil, "", "consume", "tx", "-g", "readall", "--isolation", "read_committed", "--until-end",
		"--from", "beginning", "-b", c.addrs[0]); strings.Join(strings.Fields(out), " ") != "a b" {
		t.Fatalf("consume -g read_committed printed %q, want a b", out)
	}
	if out := runCLI(t, nil, "", "group", "describe", "readall", "--isolation", "read_committed", "-b", c.addrs[0]); !regexp.MustCompile(`tx +0 +3 +5 +3 +0 `).MatchString(out) {
		t.Fatalf("after consume -g, want committed 3 (past the marker) and lag 0:\n%s", out)
	}
}
