package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// startCompactedDev starts `strand dev --nodes 1` and returns its Kafka address and the environment pointing the CLI at it.
func startCompactedDev(t *testing.T) (string, []string) {
	t.Helper()
	port := freeConsecutivePorts(t, 1)
	dir := t.TempDir()
	native := "127.0.0.1:" + strconv.Itoa(port+devNativePortOffset)
	dev := startProc(t, filepath.Join(dir, "dev.log"), nil, "dev", "--nodes", "1", "--base-port", strconv.Itoa(port))
	t.Cleanup(dev.kill)
	env := []string{"STRAND_BROKERS=" + native}
	waitFor(t, "strand dev", 30*time.Second, func() error {
		_, errOut, err := runCLIResult(t, env, "", "cluster", "--timeout", "2s")
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		return nil
	})
	return "127.0.0.1:" + strconv.Itoa(port), env
}

// compactedTopicConfigs are a compacted topic's settings that let passes
// run within seconds: small segments (a pass never touches the active
// one), any dirt cleanable, tombstones removed by the pass after the one
// that first sees them.
var compactedTopicConfigs = []string{"-c", "cleanup.policy=compact", "-c", "segment.bytes=4096",
	"-c", "min.cleanable.dirty.ratio=0.01", "-c", "delete.retention.ms=0"}

// readKeys consumes topic from the beginning through franz-go up to a
// fresh end marker and returns each key's "value@offset" in order (a
// null value is "<null>").
func readKeys(ctx context.Context, t *testing.T, broker, topic string, pr *kgo.Client) map[string][]string {
	t.Helper()
	end := pr.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("end"), Value: []byte("end")})
	if err := end.FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	last := end[0].Record.Offset
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[string][]string{}
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read of %s did not reach offset %d: %v", topic, last, out)
		}
		for _, e := range fetches.Errors() {
			t.Fatalf("fetch: %v", e.Err)
		}
		reached := false
		fetches.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if r.Value == nil {
				v = "<null>"
			}
			out[string(r.Key)] = append(out[string(r.Key)], fmt.Sprintf("%s@%d", v, r.Offset))
			reached = reached || r.Offset >= last
		})
		if reached {
			return out
		}
	}
}

// Real clients on a compacted topic (issue 24), against real `strand dev`
// processes: franz-go writes 20 keys ten times each and then tombstones
// for five of them; with filler of one more key until passes have run, a
// consume from the beginning shows each of the 15 live keys once, with
// its latest value at the offset it was written at, and no record at all
// of the five deleted keys (delete.retention.ms=0: the tombstones go at
// the pass after the one that first sees them). `strand topic describe`
// then shows the compaction done.
func TestCompactedTopicFranzGoProcess(t *testing.T) {
	skipShort(t)
	broker, env := startCompactedDev(t)
	runCLI(t, env, "", append([]string{"topic", "create", "kv", "-p", "1", "-r", "1"}, compactedTopicConfigs...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pr, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.DefaultProduceTopic("kv"))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	latest := map[string]string{}
	for round := range 10 {
		for k := range 20 {
			key, value := fmt.Sprintf("k%02d", k), fmt.Sprintf("k%02d.r%d", k, round)
			res := pr.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte(value)})
			if err := res.FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			latest[key] = fmt.Sprintf("%s@%d", value, res[0].Record.Offset)
		}
	}
	for k := range 5 {
		key := fmt.Sprintf("k%02d", k)
		if err := pr.ProduceSync(ctx, &kgo.Record{Key: []byte(key)}).FirstErr(); err != nil {
			t.Fatalf("tombstone: %v", err)
		}
		delete(latest, key)
	}
	var seen map[string][]string
	for i := 0; ; i++ {
		if ctx.Err() != nil {
			t.Fatalf("the compacted view did not show; last read: %v", seen)
		}
		for range 20 {
			if err := pr.ProduceSync(ctx, &kgo.Record{Key: []byte("f"), Value: []byte(fmt.Sprintf("f.%d", i))}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		seen = readKeys(ctx, t, broker, "kv", pr)
		if compactedAsWanted(seen, latest, 20) {
			t.Logf("compacted view after %d filler rounds", i+1)
			break
		}
		time.Sleep(100 * time.Millisecond) // polling a readiness condition, bounded by ctx
	}
	out := runCLI(t, env, "", "topic", "describe", "kv")
	for _, want := range []string{"config cleanup.policy=compact", "partition 0 compaction: dirty ratio ", "last compaction generation "} {
		if !strings.Contains(out, want) {
			t.Errorf("topic describe lacks %q:\n%s", want, out)
		}
	}
}

// compactedAsWanted reports whether seen holds, of the keys k00..k(n-1),
// exactly one record of each key in latest, equal to it, and none of the
// others.
func compactedAsWanted(seen map[string][]string, latest map[string]string, n int) bool {
	for k := range n {
		key := fmt.Sprintf("k%02d", k)
		want, live := latest[key]
		if got := seen[key]; live && !slices.Equal(got, []string{want}) || !live && len(got) > 0 {
			return false
		}
	}
	return true
}

// kcat (librdkafka) on a compacted topic: -P -Z -K: writes keyed records,
// an empty value with -Z being a tombstone (null); once passes have run,
// kcat -C from the beginning reads one record per live key with its latest
// value and nothing of the deleted key. Skipped when kcat is not installed
// (.ci/run installs Debian's kcat).
func TestCompactedTopicKcatProcess(t *testing.T) {
	skipShort(t)
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat); .ci/run installs it")
	}
	broker, env := startCompactedDev(t)
	runCLI(t, env, "", append([]string{"topic", "create", "kc", "-p", "1", "-r", "1"}, compactedTopicConfigs...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	run := func(stdin string, args ...string) string {
		t.Helper()
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		defer ccancel()
		cmd := exec.CommandContext(cctx, kcat, args...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("kcat %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out.String(), errOut.String())
		}
		return out.String()
	}
	var lines strings.Builder
	for round := range 5 {
		for _, k := range []string{"a", "b", "c"} {
			fmt.Fprintf(&lines, "%s:%s%d\n", k, k, round)
		}
	}
	lines.WriteString("b:\n") // -Z: an empty value is null, a tombstone
	run(lines.String(), "-b", broker, "-P", "-t", "kc", "-K:", "-Z")
	pr, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.DefaultProduceTopic("kc"))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	want := []string{"a=a4", "c=c4"}
	var got []string
	for i := 0; ; i++ {
		if ctx.Err() != nil {
			t.Fatalf("kcat -C never read the compacted view %q; last: %q", want, got)
		}
		for range 20 {
			if err := pr.ProduceSync(ctx, &kgo.Record{Key: []byte("f"), Value: []byte(fmt.Sprintf("f.%d", i))}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		out := run("", "-b", broker, "-C", "-t", "kc", "-o", "beginning", "-e", "-q", "-Z", "-f", `%k=%s\n`)
		got = nil
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if !strings.HasPrefix(line, "f=") {
				got = append(got, line)
			}
		}
		if slices.Equal(got, want) {
			t.Logf("kcat read the compacted view after %d filler rounds", i+1)
			return
		}
		time.Sleep(100 * time.Millisecond) // polling a readiness condition, bounded by ctx
	}
}

// Bad input to a compacted topic through the CLI, against a real `strand
// dev` process: topic create with min.compaction.lag.ms greater than
// max.compaction.lag.ms or a negative delete.retention.ms fails saying
// what to set and makes no topic; topic alter to the same fails and the
// settings stay; strand produce of a keyless line fails with Kafka's
// INVALID_RECORD message and a hint naming the key flags, and nothing is
// stored (high-water mark 0).
func TestCompactedTopicBadInputProcess(t *testing.T) {
	skipShort(t)
	_, env := startCompactedDev(t)
	refused := func(stdin string, wants []string, args ...string) {
		t.Helper()
		_, errOut, err := runCLIResult(t, env, stdin, args...)
		if err == nil {
			t.Errorf("%v succeeded, want a refusal", args)
		}
		for _, want := range wants {
			if !strings.Contains(errOut, want) {
				t.Errorf("%v: stderr %q lacks %q", args, errOut, want)
			}
		}
	}
	lag := []string{"min.compaction.lag.ms=10 is greater than max.compaction.lag.ms=5: set min.compaction.lag.ms at most max.compaction.lag.ms, or raise max.compaction.lag.ms"}
	refused("", lag, "topic", "create", "bad", "-c", "cleanup.policy=compact", "-c", "min.compaction.lag.ms=10", "-c", "max.compaction.lag.ms=5")
	refused("", []string{`strand: invalid topic config: delete.retention.ms="-1": want whole milliseconds, at least 0`},
		"topic", "create", "bad", "-c", "cleanup.policy=compact", "-c", "delete.retention.ms=-1")
	if out := runCLI(t, env, "", "topic", "list"); strings.Contains(out, "bad") {
		t.Errorf("a refused create made a topic:\n%s", out)
	}
	runCLI(t, env, "", "topic", "create", "kv", "-c", "cleanup.policy=compact", "-c", "max.compaction.lag.ms=5")
	refused("", lag, "topic", "alter", "kv", "-c", "min.compaction.lag.ms=10")
	refused("", []string{`delete.retention.ms="-5"`}, "topic", "alter", "kv", "-c", "delete.retention.ms=-5")
	refused("hello\n", []string{"Compacted topic cannot accept message without key in topic partition kv-0",
		"0 records written to kv; a compacted topic takes keyed records only: give keys with -K SEP (split each line), -k KEY or --key-file"},
		"produce", "kv")
	var d topicJSON
	if err := json.Unmarshal([]byte(runCLI(t, env, "", "topic", "describe", "kv", "--format", "json")), &d); err != nil {
		t.Fatal(err)
	}
	if d.Configs["min.compaction.lag.ms"] != "0" || d.Configs["delete.retention.ms"] != "86400000" {
		t.Errorf("a refused alter changed the settings: %v", d.Configs)
	}
	if len(d.PartitionList) != 1 || d.PartitionList[0].HighWatermark == nil || *d.PartitionList[0].HighWatermark != 0 {
		t.Errorf("a refused keyless produce stored something: %+v", d.PartitionList)
	}
	if c := d.PartitionList[0].Compaction; c == nil || c.LastGeneration != 0 || c.LastCompactionTimeMs != nil {
		t.Errorf("describe --format json of a compacted topic never compacted: %+v", c)
	}
}
