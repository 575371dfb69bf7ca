package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
	tierDir := t.TempDir()
	t.Setenv("STRAND_TIER_DIR", tierDir)
	t.Setenv("STRAND_TIERED_STORAGE_UNFINISHED", "true")
	c := startCluster(t, 3)
	env := []string{"STRAND_BROKERS=" + strings.Join(c.addrs, ",")}
	runCLI(t, env, "", "topic", "create", "tiered", "--partitions", "1", "--replication-factor", "3",
		"-c", "remote.storage.enable=true", "-c", "segment.bytes=4096", "-c", "local.retention.bytes=4096", "-c", "retention.ms=-1")
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(c.addrs, "tiered", 1) })
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
