package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// `strand cluster health` (rpk cluster health): one line per problem as
// the metadata leader and the partition leaders see the cluster, or
// "healthy"; exit 1 when anything is wrong, so scripts and probes can use
// it. Problems: no metadata leader; a node down (silent for three election
// timeouts at the metadata leader) or with a full disk; a partition with
// no leader (or led by a down node); a partition under-replicated (a
// replica on a down node, or a follower its leader sees out of step).
// Internal topics count: their health is the cluster's.

// healthListMax bounds the partitions one problem line names.
const healthListMax = 10

// healthReport is what `strand cluster health` found (--format json
// prints it).
type healthReport struct {
	Healthy         bool     `json:"healthy"`
	MetadataLeader  uint64   `json:"metadata_leader"` // 0: none
	Nodes           int      `json:"nodes"`
	Partitions      int      `json:"partitions"`
	NodesDown       []uint64 `json:"nodes_down"`
	DisksFull       []uint64 `json:"disks_full"`
	DisksStalled    []uint64 `json:"disks_stalled"`
	Leaderless      []string `json:"leaderless_partitions"`       // TOPIC/PARTITION
	UnderReplicated []string `json:"under_replicated_partitions"` // TOPIC/PARTITION
	Problems        []string `json:"problems"`                    // as the text lines
	underDetail     []string // UnderReplicated with the replicas out of step
}

// errUnhealthy is the exit-1 error of an unhealthy cluster (the problems
// were printed).
var errUnhealthy = errors.New("cluster unhealthy")

// cmdClusterHealth runs `strand cluster health`.
func cmdClusterHealth(args []string, stdout io.Writer) error {
	fs := newFlags("cluster health")
	var cf clientFlags
	cf.register(fs, 15*time.Second)
	var format outputFormat
	format.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("cluster health takes no arguments, got %q", fs.Args())
	}
	if err := format.validate(); err != nil {
		return err
	}
	return cf.run(func(ctx context.Context, c *clientlib.Client) error {
		h, err := clusterHealth(ctx, c, time.Now())
		if err != nil {
			return err
		}
		if format.json() {
			if err := writeJSON(stdout, h); err != nil {
				return err
			}
		} else {
			printHealth(stdout, h)
		}
		if !h.Healthy {
			return fmt.Errorf("%w: %s (listed above)", errUnhealthy, plural(len(h.Problems), "problem"))
		}
		return nil
	})
}

// printHealth prints h: "healthy: ..." or "unhealthy: N problems" and one
// line per problem.
func printHealth(w io.Writer, h healthReport) {
	if h.Healthy {
		fmt.Fprintf(w, "healthy: %s up, %s led and in step, metadata leader %d\n", plural(h.Nodes, "node"),
			plural(h.Partitions, "partition"), h.MetadataLeader)
		return
	}
	fmt.Fprintf(w, "unhealthy: %s\n", plural(len(h.Problems), "problem"))
	for _, p := range h.Problems {
		fmt.Fprintf(w, "  %s\n", p)
	}
}

// clusterHealth asks the metadata leader for the members and metadata and
// every partition's leader for its followers, and lists the problems.
func clusterHealth(ctx context.Context, c *clientlib.Client, now time.Time) (healthReport, error) {
	h := healthReport{NodesDown: []uint64{}, DisksFull: []uint64{}, DisksStalled: []uint64{}, Leaderless: []string{}, UnderReplicated: []string{},
		Problems: []string{}}
	info, err := c.Metadata(ctx)
	if err != nil {
		return h, wrapErr(err, "metadata")
	}
	members, err := c.ClusterMembers(ctx)
	if err != nil {
		return h, wrapErr(err, "cluster members")
	}
	h.MetadataLeader = members.MetadataLeader
	if h.MetadataLeader == 0 {
		h.Problems = append(h.Problems, "no metadata leader: topic, membership and configuration changes cannot be made")
	}
	down := map[uint64]bool{} // lookup only
	for _, m := range members.Members {
		if m.State == "removed" {
			continue
		}
		h.Nodes++
		if m.Down {
			down[m.ID] = true
			h.NodesDown = append(h.NodesDown, m.ID)
			h.Problems = append(h.Problems, fmt.Sprintf("node %d (%s) down: no contact for %s (since %s)", m.ID, m.Address,
				m.LastContact.Round(time.Second), now.Add(-m.LastContact).UTC().Format("15:04:05 MST")))
		}
		if m.DiskFull {
			h.DisksFull = append(h.DisksFull, m.ID)
			h.Problems = append(h.Problems, fmt.Sprintf("node %d (%s) disk full: refusing produce (not_enough_space) until space returns",
				m.ID, m.Address))
		}
		if m.DiskStalled {
			h.DisksStalled = append(h.DisksStalled, m.ID)
			h.Problems = append(h.Problems, fmt.Sprintf("node %d (%s) disk stalled: a storage job hangs; leading nothing, refusing produce until the disk answers",
				m.ID, m.Address))
		}
	}
	for _, t := range info.Topics {
		if t.Err != nil {
			h.Problems = append(h.Problems, fmt.Sprintf("topic %s: %s", t.Name, userMessage(t.Err)))
			continue
		}
		checkTopicHealth(ctx, c, t, down, &h)
	}
	h.Nodes -= len(h.NodesDown)
	if n := len(h.Leaderless); n > 0 {
		h.Problems = append(h.Problems, fmt.Sprintf("%s without a leader: %s", plural(n, "partition"), listSome(h.Leaderless)))
	}
	if n := len(h.UnderReplicated); n > 0 {
		h.Problems = append(h.Problems, fmt.Sprintf("%s under-replicated: %s", plural(n, "partition"), listSome(h.underDetail)))
	}
	h.Healthy = len(h.Problems) == 0
	return h, nil
}

// checkTopicHealth adds t's leaderless and under-replicated partitions to
// h: a partition is under-replicated when a replica is on a down node or
// its leader reports a follower out of step.
func checkTopicHealth(ctx context.Context, c *clientlib.Client, t clientlib.TopicMetadata, down map[uint64]bool, h *healthReport) {
	var ask []int32
	lagging := map[int32][]uint64{} // lookup only
	for _, p := range t.Partitions {
		h.Partitions++
		name := fmt.Sprintf("%s/%d", t.Name, p.Partition)
		if p.LeaderID == 0 || down[p.LeaderID] {
			h.Leaderless = append(h.Leaderless, name)
			continue
		}
		for _, r := range p.Replicas {
			if down[r] {
				lagging[p.Partition] = append(lagging[p.Partition], r)
			}
		}
		ask = append(ask, p.Partition)
	}
	logs, _ := c.DescribePartitionLogs(ctx, t.Name, ask)
	for _, l := range logs {
		if l.Err != nil {
			continue
		}
		for _, r := range l.LaggingReplicas {
			if !down[r] {
				lagging[l.Partition] = append(lagging[l.Partition], r)
			}
		}
	}
	for _, p := range t.Partitions {
		if ids := lagging[p.Partition]; len(ids) > 0 {
			name := fmt.Sprintf("%s/%d", t.Name, p.Partition)
			h.UnderReplicated = append(h.UnderReplicated, name)
			nodes := "node"
			if len(ids) > 1 {
				nodes = "nodes"
			}
			h.underDetail = append(h.underDetail, fmt.Sprintf("%s (%s %s not in step)", name, nodes, joinIDs(ids)))
		}
	}
}

// listSome joins up to healthListMax names, saying how many more there are.
func listSome(names []string) string {
	if len(names) <= healthListMax {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:healthListMax], ", "), len(names)-healthListMax)
}
