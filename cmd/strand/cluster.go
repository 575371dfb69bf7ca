package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// cmdCluster prints nodes (membership, liveness as the metadata leader
// sees it, metadata role), topics, partitions, leaders and high-water
// marks; it fails (exit 1) when the cluster cannot be reached. Internal
// topics (names starting "__") are left out unless --internal.
func cmdCluster(args []string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "health" {
		return cmdClusterHealth(args[1:], stdout)
	}
	if len(args) > 0 && slices.Contains(clusterSubcommands, args[0]) {
		return cmdClusterSub(args[0], args[1:], stdout)
	}
	fs := newFlags("cluster")
	var cf clientFlags
	cf.register(fs, 10*time.Second)
	internal := fs.Bool("internal", false, "also list internal topics (names starting __, such as __strand_offsets)")
	var format outputFormat
	format.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("cluster takes no arguments, got %q (subcommands: health, %s)", fs.Args(), strings.Join(clusterSubcommands, ", "))
	}
	if err := format.validate(); err != nil {
		return err
	}
	c, err := cf.client(clientlib.MaxRetries(3))
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	info, err := c.Metadata(ctx)
	var conn *clientlib.ConnError
	if errors.As(err, &conn) {
		return err // says itself which address failed and how
	}
	if err != nil {
		return wrapErr(err, "metadata from the cluster at %s", strings.Join(cf.brokers, ","))
	}
	if !*internal {
		info.Topics = slices.DeleteFunc(info.Topics, func(t clientlib.TopicMetadata) bool { return isInternalTopic(t.Name) })
	}
	members, merr := c.ClusterMembers(ctx)
	if format.json() {
		return writeJSON(stdout, clusterJSONOf(ctx, c, info, members, merr, time.Now()))
	}
	fmt.Fprintf(stdout, "nodes (metadata leader: %s):\n", idOrNone(info.ControllerID))
	if merr == nil {
		printMembers(stdout, members, time.Now())
	} else { // a node without membership requests
		printNodes(ctx, stdout, info.Nodes)
	}
	if len(info.Topics) == 0 {
		fmt.Fprintln(stdout, "no topics")
	}
	for _, t := range info.Topics {
		if t.Err != nil {
			fmt.Fprintf(stdout, "topic %s: %s\n", t.Name, userMessage(t.Err))
			continue
		}
		fmt.Fprintf(stdout, "topic %s: %s\n", t.Name, plural(len(t.Partitions), "partition"))
		if err := printPartitions(ctx, c, stdout, t); err != nil {
			return err
		}
	}
	return nil
}

// printNodes prints the nodes of a metadata answer, each with its rack and
// the disk state it says of itself: what `strand cluster` shows of a
// cluster that does not answer membership requests.
func printNodes(ctx context.Context, w io.Writer, nodes []clientlib.Node) {
	notes := nodesDiskNotes(ctx, nodes)
	for _, n := range nodes {
		rack := ""
		if n.Rack != "" {
			rack = "  rack " + n.Rack
		}
		if note := notes[n.ID]; note != "" {
			rack += "  " + note
		}
		fmt.Fprintf(w, "  %d  %s%s\n", n.ID, n.Address, rack)
	}
}

// livenessText is a member's liveness as `strand cluster` prints it: "up",
// or "DOWN since 21:40:01 UTC (last contact 1m12s ago)".
func livenessText(m clientlib.Member, now time.Time) string {
	if !m.Down {
		return "up"
	}
	return fmt.Sprintf("DOWN since %s (last contact %s ago)", now.Add(-m.LastContact).UTC().Format("15:04:05 MST"),
		m.LastContact.Round(time.Second))
}

// clusterJSON is `strand cluster --format json`.
type clusterJSON struct {
	MetadataLeader uint64            `json:"metadata_leader"` // 0: none
	AnsweredBy     uint64            `json:"answered_by,omitempty"`
	Nodes          []clusterNodeJSON `json:"nodes"`
	Topics         []clusterTopic    `json:"topics"`
}

type clusterNodeJSON struct {
	ID      uint64 `json:"id"`
	Address string `json:"address"`
	Rack    string `json:"rack,omitempty"`
	// State is the membership state (active, joining, decommissioning,
	// removed); Liveness "up" or "down" as the metadata leader sees it,
	// "unknown" when the cluster does not say.
	State         string     `json:"state,omitempty"`
	Liveness      string     `json:"liveness"`
	LastContactMs int64      `json:"last_contact_ms"` // -1: unknown
	DownSince     *time.Time `json:"down_since,omitempty"`
	MetadataRole  string     `json:"metadata_role,omitempty"`
	Replicas      int32      `json:"replicas"`
	Preferred     int32      `json:"preferred_leaders"`
	DiskFull      bool       `json:"disk_full"`
	DiskStalled   bool       `json:"disk_stalled"`
}

type clusterTopic struct {
	Name       string             `json:"name"`
	Error      string             `json:"error,omitempty"`
	Partitions []clusterPartition `json:"partitions"`
}

type clusterPartition struct {
	Partition      int32    `json:"partition"`
	Leader         uint64   `json:"leader"` // 0: none
	Replicas       []uint64 `json:"replicas"`
	LogStartOffset int64    `json:"log_start_offset"` // -1: unknown
	HighWatermark  int64    `json:"high_watermark"`   // -1: unknown
}

// clusterJSONOf builds `strand cluster --format json` from the metadata
// and the members (merr: the cluster did not answer them).
func clusterJSONOf(ctx context.Context, c *clientlib.Client, info clientlib.ClusterInfo, members clientlib.Members, merr error,
	now time.Time) clusterJSON {
	out := clusterJSON{MetadataLeader: info.ControllerID, Nodes: []clusterNodeJSON{}, Topics: []clusterTopic{}}
	if merr == nil {
		out.AnsweredBy = members.AnsweredBy
		for _, m := range members.Members {
			n := clusterNodeJSON{ID: m.ID, Address: m.Address, Rack: m.Rack, State: m.State, Liveness: "up",
				LastContactMs: m.LastContact.Milliseconds(), MetadataRole: m.Role, Replicas: m.Replicas,
				Preferred: m.PreferredLeaders, DiskFull: m.DiskFull, DiskStalled: m.DiskStalled}
			if m.Down {
				since := now.Add(-m.LastContact).UTC().Truncate(time.Millisecond)
				n.Liveness, n.DownSince = "down", &since
			}
			out.Nodes = append(out.Nodes, n)
		}
	} else {
		for _, n := range info.Nodes {
			out.Nodes = append(out.Nodes, clusterNodeJSON{ID: n.ID, Address: n.Address, Rack: n.Rack, Liveness: "unknown", LastContactMs: -1})
		}
	}
	for _, t := range info.Topics {
		ct := clusterTopic{Name: t.Name, Partitions: []clusterPartition{}}
		if t.Err != nil {
			ct.Error = userMessage(t.Err)
			out.Topics = append(out.Topics, ct)
			continue
		}
		offsets := map[int32]clientlib.ListedOffset{} // lookup only
		if offs, err := c.ListOffsets(ctx, t.Name, nil, clientlib.OffsetLatest()); err == nil {
			for _, o := range offs {
				offsets[o.Partition] = o
			}
		}
		for _, p := range t.Partitions {
			cp := clusterPartition{Partition: p.Partition, Leader: p.LeaderID, Replicas: p.Replicas, LogStartOffset: -1, HighWatermark: -1}
			if o, ok := offsets[p.Partition]; ok && o.Err == nil {
				cp.LogStartOffset, cp.HighWatermark = o.LogStartOffset, o.HighWatermark
			}
			ct.Partitions = append(ct.Partitions, cp)
		}
		out.Topics = append(out.Topics, ct)
	}
	return out
}
