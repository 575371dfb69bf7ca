package simnet

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Coverage counts how often each named fault kind fired and each rare code
// event happened (a truncation, a checkpoint restore, a leader change, a
// ListOffsets answered), over one run or, merged, over a sample of seeds.
// A sample in which an expected name stayed at zero did not test what it
// claims to, and Missing names them.
//
// Names are free-form ("fault/crash", "event/truncation"); output is
// sorted by name, so it never depends on map order. Not safe for
// concurrent use (the world is one goroutine).
type Coverage struct {
	counts map[string]int64
}

// NewCoverage returns an empty Coverage that lists names (with count 0)
// until they happen.
func NewCoverage(names ...string) *Coverage {
	c := &Coverage{counts: make(map[string]int64, len(names))}
	c.Declare(names...)
	return c
}

// Declare lists names with count 0 unless already counted, so the table
// shows what never happened.
func (c *Coverage) Declare(names ...string) {
	for _, name := range names {
		if _, ok := c.counts[name]; !ok {
			c.counts[name] = 0
		}
	}
}

// Add counts n happenings of name (n may be 0: it declares name).
func (c *Coverage) Add(name string, n int64) {
	if n < 0 {
		panic(fmt.Sprintf("simnet: coverage %s: negative count %d", name, n))
	}
	if n == 0 {
		// The world adds zero deltas after every Process: a lookup, not a
		// map write, for names already declared.
		if _, ok := c.counts[name]; ok {
			return
		}
	}
	c.counts[name] += n
}

// Inc counts one happening of name.
func (c *Coverage) Inc(name string) { c.counts[name]++ }

// Count returns how often name happened.
func (c *Coverage) Count(name string) int64 { return c.counts[name] }

// Merge adds every count of o into c.
func (c *Coverage) Merge(o *Coverage) {
	for name, n := range o.counts {
		c.counts[name] += n
	}
}

// Names returns every name counted or declared, sorted.
func (c *Coverage) Names() []string {
	names := make([]string, 0, len(c.counts))
	for name := range c.counts {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Missing returns the names of expected that stayed at zero, sorted.
func (c *Coverage) Missing(expected []string) []string {
	var out []string
	for _, name := range expected {
		if c.counts[name] == 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Line renders the counts on one line: "name=count ..." sorted by name.
func (c *Coverage) Line() string {
	var b strings.Builder
	for i, name := range c.Names() {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", name, c.counts[name])
	}
	return b.String()
}

// Table renders the counts as aligned "name  count" rows sorted by name,
// each row prefixed with prefix; zeros are marked so they stand out.
func (c *Coverage) Table(prefix string) string {
	names := c.Names()
	width := 0
	for _, name := range names {
		width = max(width, len(name))
	}
	var b strings.Builder
	for _, name := range names {
		n := c.counts[name]
		mark := ""
		if n == 0 {
			mark = "  <- never"
		}
		fmt.Fprintf(&b, "%s%-*s %8d%s\n", prefix, width, name, n, mark)
	}
	return b.String()
}

// CoverageExpected are the names the CI sample of seeds (TestSim's 200)
// must see at least once each: every fault kind the planner and the
// network inject, and the rare paths the checks are meant to exercise.
var CoverageExpected = []string{
	"fault/crash", "fault/partition-sym", "fault/partition-asym", "fault/isolate-leader",
	"fault/bit-flip", "fault/fail-read", "fault/fail-sync", "fault/net-drop", "fault/net-dup",
	"fault/restart", "fault/fail-stop", "fault/power-cut", "fault/wipe", "fault/clock-jump", "fault/crash-leader",
	"fault/cut-checkpoint", "fault/cut-segment-roll", "fault/crash-election",
	"fault/kill", "fault/cut-round", "fault/power-cut-round", "fault/kill-round", "fault/rolling-kill",
	"fault/pause", "fault/leader-chain", "fault/leader-chain-isolate", "run/tick-drift", "run/tail-cache-off", "fault/cut-recovery", "fault/power-cut-recovery", "event/stale-read", "event/read-any-replica",
	"fault/crash-before-fsync", "fault/crash-after-fsync", "fault/kill-before-fsync", "audit/recovered-later",
	"event/leader-elected", "event/vote-granted", "event/append-rejected", "event/log-truncate",
	"event/recovery-truncate", "event/checkpoint", "event/checkpoint-restore", "event/produce-duplicate",
	"audit/promises", "audit/produce-acks", "digest/compared",
	"event/lib-produce-ok", "event/lib-produce-failed", // clientlib's own producer (wire_libproducer.go)
	"event/multi-record-batch", "event/fetch-inside-batch", "event/fetch-over-budget", "event/large-record",
	"event/produce-acks0", "event/produce-acks1", "event/list-offsets", "event/list-offsets-time",
	"event/describe-topics", "event/rejoin-started", "event/rejoin-done", "event/vote-withheld",
	"event/replica-repaired", "fault/disk-full", "event/disk-full", "event/catchup-throttled",
	"event/trim-proposed", "event/compaction", "event/compaction-trash", "event/snapshot-sent", "event/snapshot-installed",
	"event/segment-roll-age", "event/fetch-below-log-start", "digest/snapshot-window",
	"event/topic-delete", "event/topic-recreate", "event/unknown-topic-id",
	"fault/client-corrupt-produce", "fault/client-corrupt-fetch", "fault/client-truncate",
	"event/corrupt-batch-refused", "event/corrupt-fetch-refused", "fault/starve-leader",
	"event/liveness-probe", "event/liveness-probe-crash", "fault/overload", "event/long-poll-tail",
	"fault/disk-stall", "check/disk-stall",
	"group/restore-after-compaction", "txn/restore-after-compaction", // offsets_replay.go
}

// coverageGaps are names the table lists although the workload cannot make
// them happen yet (an issue asks for them): shown as "never" so the gap
// stays visible.
var coverageGaps = []string{}

// newRunCoverage returns a run's coverage listing every known name.
func newRunCoverage() *Coverage {
	c := NewCoverage(CoverageExpected...)
	c.Declare(coverageGaps...)
	c.Declare(RequestCoverageNames()...)
	return c
}

// checkpointedGroups counts the groups of n's disk with a checkpoint file:
// the engines its restart restores rather than replays from index 1.
func checkpointedGroups(n *simNode) int {
	count, last := 0, ""
	for _, name := range n.disk.Files() {
		dir := path.Dir(name)
		if strings.HasSuffix(dir, "/checkpoint") && dir != last {
			count++
			last = dir
		}
	}
	return count
}
