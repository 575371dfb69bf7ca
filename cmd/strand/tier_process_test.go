package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Three real nodes sharing a directory store (--tier-dir): a topic with
// remote.storage.enable=true and a local retention of one segment is
// produced past it; every replica's raft log drops its oldest segments
// (its first segment file is no longer the log's first), the store holds
// the uploaded segments, and a read from offset 0 answers every record
// in order, the oldest through remote reads.
func TestTieredTopicReadBackFromZero(t *testing.T) {
	tierDir, c, env := startTieredCluster(t)
	admins := []string{c.withAdmin(0), c.withAdmin(1), c.withAdmin(2)}
	const n = 3000
	var lines strings.Builder
	for i := range n {
		fmt.Fprintf(&lines, "record-%05d-%s\n", i, strings.Repeat("x", 40))
	}
	runCLI(t, env, lines.String(), "produce", "tiered", "-p", "0")
	waitFor(t, "local retention on every replica", 60*time.Second, func() error {
		objects := 0
		_ = filepath.WalkDir(tierDir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".seg") {
				objects++
			}
			return nil
		})
		if objects < 3 {
			return fmt.Errorf("%d objects in the store", objects)
		}
		for id := 1; id <= 3; id++ {
			if first, err := firstSegment(filepath.Join(c.dir, fmt.Sprintf("data-%d", id)), "tiered"); err != nil || first <= 1 {
				return fmt.Errorf("node %d: first raft segment %d (%v)", id, first, err)
			}
		}
		return nil
	})
	out := runCLI(t, env, "", "consume", "tiered", "--from", "earliest", "--until-end")
	got := strings.Fields(out)
	if len(got) != n {
		t.Fatalf("read back %d of %d records from offset 0", len(got), n)
	}
	for i, v := range got {
		if want := fmt.Sprintf("record-%05d-%s", i, strings.Repeat("x", 40)); v != want {
			t.Fatalf("record %d: %q, want %q", i, v, want)
		}
	}
	checkTierVisible(t, env, admins)
}

// startTieredCluster starts three real nodes sharing a directory store
// and creates the topic "tiered" (1 partition, 3 replicas) with a local
// retention of one 4 KiB segment and no total retention: its tiered
// segments are uploaded and dropped locally as soon as they seal. It
// returns the store's directory, the cluster and the CLI's environment.
func startTieredCluster(t *testing.T) (string, *testCluster, []string) {
	t.Helper()
	tierDir := t.TempDir()
	c, env := startTieredClusterOn(t, map[string]string{"STRAND_TIER_DIR": tierDir})
	return tierDir, c, env
}

// startTieredClusterOn is startTieredCluster on the object store that
// store, serve's flags as environment variables, names.
func startTieredClusterOn(t *testing.T, store map[string]string) (*testCluster, []string) {
	t.Helper()
	for k, v := range store {
		t.Setenv(k, v)
	}
	t.Setenv("STRAND_TIERED_STORAGE_UNFINISHED", "true")
	c := startCluster(t, 3)
	env := []string{"STRAND_BROKERS=" + strings.Join(c.addrs, ",")}
	runCLI(t, env, "", "topic", "create", "tiered", "--partitions", "1", "--replication-factor", "3",
		"-c", "remote.storage.enable=true", "-c", "segment.bytes=4096", "-c", "local.retention.bytes=4096", "-c", "retention.ms=-1")
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(c.addrs, "tiered", 1) })
	return c, env
}

// checkTierVisible shows both tiers of the read-back topic: describe
// prints the leader's local and remote size, its remote log from offset 0
// and the upload lag, and says local.retention.bytes is enforced; every
// node's /metrics has the tier series of its replica, and the nodes
// together counted uploads and remote reads.
func checkTierVisible(t *testing.T, env, admins []string) {
	t.Helper()
	out := runCLI(t, env, "", "topic", "describe", "tiered")
	t.Logf("strand topic describe tiered:\n%s", out)
	if !strings.Contains(out, "  config local.retention.bytes=4096  (enforced: older records leave the local disk once uploaded, and are read from the bucket)\n") {
		t.Fatalf("describe does not say local.retention.bytes is enforced:\n%s", out)
	}
	line := regexp.MustCompile(`(?m)^  partition 0 tiers: local \S+ \S+; remote \S+ \S+ in (\d+) segments, offsets 0 to (\d+) \(remote log start 0\); upload lag \S+ \S+, oldest record not remote \S+ old$`)
	m := line.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("describe has no tiers line for partition 0 with the remote log from 0:\n%s", out)
	}
	if segs, _ := strconv.Atoi(m[1]); segs < 3 {
		t.Fatalf("describe lists %s remote segments, want at least the 3 objects in the store:\n%s", m[1], out)
	}
	var reads, uploads float64
	for i, a := range admins {
		_, body, err := httpGet("http://" + a + "/metrics")
		if err != nil {
			t.Fatalf("node %d /metrics: %v", i+1, err)
		}
		labels := fmt.Sprintf(`{node="%d",partition="0",topic="tiered"}`, i+1)
		for _, name := range []string{"strand_partition_remote_bytes", "strand_partition_remote_segments", "strand_partition_remote_log_start_offset",
			"strand_partition_upload_lag_bytes", "strand_partition_upload_lag_seconds", "strand_partition_remote_read_bytes_total",
			"strand_partition_remote_read_errors_total", "strand_partition_upload_bytes_total", "strand_partition_upload_errors_total"} {
			if metricValue(body, name+labels) < 0 {
				t.Fatalf("node %d /metrics lacks %s%s", i+1, name, labels)
			}
		}
		if v := metricValue(body, "strand_partition_remote_bytes"+labels); v <= 0 {
			t.Fatalf("node %d: strand_partition_remote_bytes %v, want the uploaded bytes", i+1, v)
		}
		if v := metricValue(body, "strand_partition_remote_log_start_offset"+labels); v != 0 {
			t.Fatalf("node %d: strand_partition_remote_log_start_offset %v, want 0", i+1, v)
		}
		reads += metricValue(body, "strand_partition_remote_reads_total"+labels)
		uploads += metricValue(body, "strand_partition_uploads_total"+labels)
	}
	if reads <= 0 || uploads < 3 {
		t.Fatalf("the nodes counted %v remote reads and %v uploads, want some reads (the consume from 0) and at least 3 uploads", reads, uploads)
	}
}

// firstSegment answers the lowest base of the raft segment files
// (%020d.log) under root in a directory whose path names topic.
func firstSegment(root, topic string) (uint64, error) {
	first, found := uint64(0), false
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(p, topic) || filepath.Ext(p) != ".log" || len(d.Name()) != 24 {
			return nil
		}
		var base uint64
		if _, err := fmt.Sscanf(d.Name(), "%020d.log", &base); err == nil && (!found || base < first) {
			first, found = base, true
		}
		return nil
	})
	if err == nil && !found {
		entries, _ := os.ReadDir(root)
		err = fmt.Errorf("no raft segment of %s under %s (%d entries)", topic, root, len(entries))
	}
	return first, err
}
