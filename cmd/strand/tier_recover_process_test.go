package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strandlog/strand/engine/tier"
)

// TestTopicRecoverFromBucket: three real nodes tier a topic to a shared
// directory store past its local retention; once part of it is remote, a
// delete-records moves its log start inside its second object (the first
// object goes, the second stays) and an alter sets its retention.ms; then
// all three stop and their data directories are wiped (the store kept).
// A fresh cluster on the same store refuses to recover a name the bucket
// lacks, then `strand topic recover` rebuilds the topic: it prints the
// offsets recovered, from the deleted records' end, every record that was
// remote above it reads back with its offset and value, the topic has
// the altered retention, the log continues at the remote end, and a
// second recover of the name is refused (the topic exists).
func TestTopicRecoverFromBucket(t *testing.T) {
	tierDir, c, env := startTieredCluster(t)
	const n = 3000
	value := func(i int64) string { return fmt.Sprintf("record-%05d-%s", i, strings.Repeat("x", 40)) }
	var lines strings.Builder
	for i := range int64(n) {
		fmt.Fprintln(&lines, value(i))
	}
	runCLI(t, env, lines.String(), "produce", "tiered", "-p", "0")
	var remoteEnd int64
	waitFor(t, "most of the topic remote", 60*time.Second, func() error {
		start, end, err := remoteLog(t, env, "tiered")
		if err == nil && (start != 0 || end < n/2) {
			err = fmt.Errorf("remote log [%d, %d)", start, end)
		}
		remoteEnd = end
		return err
	})
	logStart := deleteInSecondObject(t, env, tierDir)
	runCLI(t, env, "", "topic", "alter", "tiered", "-c", "retention.ms=2592000000")
	waitFor(t, "the altered descriptor in the bucket", 30*time.Second, func() error {
		b, err := os.ReadFile(filepath.Join(tierDir, "names", "tiered"))
		if err == nil && !strings.Contains(string(b), `["retention.ms","2592000000"]`) {
			err = fmt.Errorf("descriptor without the altered retention.ms: %s", b)
		}
		return err
	})
	wipeAndRestart(t, c)
	if _, errOut, err := runCLIResult(t, env, "", "topic", "recover", "missing", "--from-bucket"); err == nil ||
		!strings.Contains(errOut, "no topic missing in the bucket") {
		t.Fatalf("recover of a topic the bucket lacks: %v\n%s", err, errOut)
	}
	if _, errOut, err := runCLIResult(t, env, "", "topic", "recover", "tiered"); err == nil || !strings.Contains(errOut, "--from-bucket") {
		t.Fatalf("recover without --from-bucket: %v\n%s", err, errOut)
	}
	out := runCLI(t, env, "", "topic", "recover", "tiered", "--from-bucket")
	t.Logf("strand topic recover tiered --from-bucket:\n%s", out)
	m := regexp.MustCompile(`(?m)^partition 0: recovered offsets (\d+) to (\d+) \((\d+) offsets, `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("recover does not print partition 0's recovered offsets:\n%s", out)
	}
	first, _ := strconv.ParseInt(m[1], 10, 64)
	last, _ := strconv.ParseInt(m[2], 10, 64)
	if first != logStart {
		t.Fatalf("recovered offsets from %d; delete-records had moved the log start to %d", first, logStart)
	}
	if last+1 < remoteEnd || last >= n {
		t.Fatalf("recovered offsets to %d; %d were remote before the wipe, %d produced", last, remoteEnd, n)
	}
	got := strings.Split(strings.TrimSpace(runCLI(t, env, "", "consume", "tiered", "-o", "beginning", "-e", "-f", `%o %s\n`)), "\n")
	if int64(len(got)) != last+1-logStart {
		t.Fatalf("read back %d records from the beginning, recovered [%d, %d]", len(got), logStart, last)
	}
	for i, line := range got {
		o := logStart + int64(i)
		if want := fmt.Sprintf("%d %s", o, value(o)); line != want {
			t.Fatalf("record %d: %q, want %q", o, line, want)
		}
	}
	if desc := runCLI(t, env, "", "topic", "describe", "tiered"); !strings.Contains(desc, "config retention.ms=2592000000") {
		t.Fatalf("the recovered topic does not have the altered retention.ms:\n%s", desc)
	}
	runCLI(t, env, "after-recovery\n", "produce", "tiered", "-p", "0")
	tail := runCLI(t, env, "", "consume", "tiered", "-o", strconv.FormatInt(last+1, 10), "-e", "-f", `%o %s\n`)
	if want := fmt.Sprintf("%d after-recovery\n", last+1); tail != want {
		t.Fatalf("the record produced after recovery: %q, want %q", tail, want)
	}
	if _, errOut, err := runCLIResult(t, env, "", "topic", "recover", "tiered", "--from-bucket"); err == nil ||
		!strings.Contains(errOut, "topic tiered exists in the cluster") {
		t.Fatalf("recover of a topic that exists: %v\n%s", err, errOut)
	}
}

// TestTopicRecoverNeedsTiering: a cluster whose nodes have no object store
// refuses to recover a topic the bucket holds, saying why, and creates
// nothing.
func TestTopicRecoverNeedsTiering(t *testing.T) {
	bucket := t.TempDir()
	b, err := tier.EncodeDescriptor(tier.Descriptor{Name: "lost", ID: "0123abcd-4567-89ef-8123-456789abcdef", Partitions: 2, ReplicationFactor: 1,
		Configs: [][2]string{{"remote.storage.enable", "true"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(bucket, "names"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bucket, "names", "lost"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, 1)
	env := []string{"STRAND_BROKERS=" + strings.Join(c.addrs, ",")}
	_, errOut, err := runCLIResult(t, env, "", "topic", "recover", "lost", "--from-bucket", "--tier-dir", bucket)
	if err == nil || !strings.Contains(errOut, "no object store configured") {
		t.Fatalf("recover on a cluster without tiering: %v\n%s", err, errOut)
	}
	if out := runCLI(t, env, "", "topic", "list"); strings.Contains(out, "lost") {
		t.Fatalf("a refused recover created the topic:\n%s", out)
	}
}

// remoteLog answers the remote log [start, end) of partition 0 of topic
// as `topic describe` shows it.
func remoteLog(t *testing.T, env []string, topic string) (start, end int64, err error) {
	t.Helper()
	var d struct {
		Partitions []struct {
			Tier *struct {
				RemoteStart int64 `json:"remote_start"`
				RemoteEnd   int64 `json:"remote_end"`
			} `json:"tier"`
		} `json:"partition_list"`
	}
	out, errOut, err := runCLIResult(t, env, "", "topic", "describe", topic, "--format", "json")
	if err != nil {
		return 0, 0, fmt.Errorf("describe: %w: %s", err, errOut)
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil || len(d.Partitions) == 0 || d.Partitions[0].Tier == nil {
		return 0, 0, fmt.Errorf("describe: %v: %s", err, out)
	}
	return d.Partitions[0].Tier.RemoteStart, d.Partitions[0].Tier.RemoteEnd, nil
}

// wipeAndRestart stops c's nodes, wipes their data directories and starts
// a fresh cluster on the same addresses (and object store).
func wipeAndRestart(t *testing.T, c *testCluster) {
	t.Helper()
	for i, p := range c.procs {
		if err := p.stop(syscall.SIGTERM, 30*time.Second); err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
		c.procs[i] = nil
		if err := os.RemoveAll(filepath.Join(c.dir, fmt.Sprintf("data-%d", i+1))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range c.procs {
		c.start(i)
	}
	waitFor(t, "the fresh cluster", 60*time.Second, func() error { return clusterReady(c.addrs, len(c.procs)) })
}

// deleteInSecondObject moves the log start of the read-back topic inside
// its second uploaded object with delete-records, waits for its log start
// marker in the store, and answers the new log start.
func deleteInSecondObject(t *testing.T, env []string, tierDir string) int64 {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(tierDir, "topics", "*", "0"))
	if len(dirs) != 1 {
		t.Fatalf("%d partition 0 prefixes in the store, want 1", len(dirs))
	}
	prefix, _ := filepath.Rel(tierDir, dirs[0])
	entries, err := os.ReadDir(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	var segs []tier.Segment
	for _, e := range entries {
		if seg, ok := tier.ParseSegmentKey(prefix, prefix+"/"+e.Name()); ok {
			segs = append(segs, seg)
		}
	}
	chain := tier.Chain(segs)
	if len(chain) < 2 || chain[0].Base != 0 || chain[1].End-chain[1].Base < 2 {
		t.Fatalf("objects in the store %v, want two from 0, the second of 2 offsets or more", chain)
	}
	start := chain[1].Base + 1
	runCLI(t, env, "", "topic", "delete-records", "tiered", "-p", "0", "--before", strconv.FormatInt(start, 10))
	waitFor(t, "the log start marker in the store", 30*time.Second, func() error {
		_, err := os.Stat(filepath.Join(tierDir, tier.StartKey(prefix, start)))
		return err
	})
	return start
}

// TestTopicRecoverOtherStore: `topic recover` named a bucket holding the
// topic's objects while the nodes tier to another, empty one: the nodes
// restore nothing, and the command says so (each partition's offsets in
// both), names the likely cause and what to do, instead of reporting an
// empty topic as recovered.
func TestTopicRecoverOtherStore(t *testing.T) {
	bucket := t.TempDir()
	const id = "0123abcd-4567-89ef-8123-456789abcdef"
	b, err := tier.EncodeDescriptor(tier.Descriptor{Name: "lost", ID: id, Partitions: 1, ReplicationFactor: 1,
		Configs: [][2]string{{"remote.storage.enable", "true"}}})
	if err != nil {
		t.Fatal(err)
	}
	prefix := tier.PartitionPrefix(id, 0)
	for key, body := range map[string][]byte{
		tier.DescriptorKey("lost"):                                       b,
		tier.SegmentKey(prefix, tier.Segment{Base: 0, End: 10, Term: 1}): []byte("not read: the nodes tier elsewhere"),
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(bucket, key)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bucket, key), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("STRAND_TIER_DIR", t.TempDir())
	t.Setenv("STRAND_TIERED_STORAGE_UNFINISHED", "true")
	c := startCluster(t, 1)
	env := []string{"STRAND_BROKERS=" + strings.Join(c.addrs, ",")}
	_, errOut, err := runCLIResult(t, env, "", "topic", "recover", "lost", "--from-bucket", "--tier-dir", bucket)
	if err == nil || !strings.Contains(errOut, "partition 0: the cluster restored offsets [0, 0), the bucket given here holds [0, 10)") ||
		!strings.Contains(errOut, "is not the one named here") {
		t.Fatalf("recover from a bucket the nodes do not tier to: %v\n%s", err, errOut)
	}
}
