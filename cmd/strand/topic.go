package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/metadata"
)

// topicSubcommands are the subcommands of `strand topic`.
var topicSubcommands = []string{"create", "list", "describe", "delete"}

// cmdTopic runs `strand topic create|list|describe|delete`.
func cmdTopic(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError("topic: want a subcommand: %s", strings.Join(topicSubcommands, ", "))
	}
	sub, rest := args[0], args[1:]
	switch {
	case sub == "-h" || sub == "--help" || sub == "help":
		return &helpShown{text: groupUsage("topic")}
	case !slices.Contains(topicSubcommands, sub):
		return usageError("topic: unknown subcommand %q: want %s", sub, strings.Join(topicSubcommands, ", "))
	}
	fs := newFlags("topic " + sub)
	var cf clientFlags
	cf.register(fs, 30*time.Second)
	var tc topicCreateFlags
	if sub == "create" {
		tc.register(fs)
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	names := fs.Args()
	if (sub == "list") != (len(names) == 0) || len(names) > 1 {
		return usageError("topic %s: want %s", sub, map[bool]string{true: "no argument", false: "one topic name"}[sub == "list"])
	}
	if sub == "create" {
		if err := tc.validate(fs); err != nil {
			return err
		}
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	switch sub {
	case "create":
		return topicErr(names[0], topicCreate(ctx, c, stdout, names[0], tc))
	case "list":
		return topicList(ctx, c, stdout)
	case "describe":
		return topicErr(names[0], topicDescribe(ctx, c, stdout, names[0]))
	}
	if err := checkTopic(ctx, c, names[0], -1, cf.timeout); err != nil {
		return err
	}
	if err := c.DeleteTopic(ctx, names[0]); err != nil {
		return topicErr(names[0], err)
	}
	fmt.Fprintf(stdout, "deleted topic %s\n", names[0])
	return nil
}

// topicCreateFlags are the flags of `strand topic create` (rpk's short
// names: -p, -r, -c).
type topicCreateFlags struct {
	partitions  int32
	replication int32
	configs     []string
	config      map[string]string
}

func (tc *topicCreateFlags) register(fs *pflag.FlagSet) {
	fs.Int32VarP(&tc.partitions, "partitions", "p", 1, "number of partitions (1 or more)")
	fs.Int32VarP(&tc.replication, "replication-factor", "r", 0,
		"replicas per partition (default: 3, or the number of nodes when fewer)")
	fs.StringArrayVarP(&tc.configs, "config", "c", nil, "topic configuration KEY=VALUE (repeatable)")
}

// validate refuses values the server would not apply as given: it would
// silently turn a partition count below 1 into 1 and a replication factor
// below 1 into its default.
func (tc *topicCreateFlags) validate(fs *pflag.FlagSet) error {
	if tc.partitions < 1 {
		return usageError("--partitions %d: want 1 or more", tc.partitions)
	}
	if flagSet(fs, "replication-factor") && tc.replication < 1 {
		return usageError("--replication-factor %d: want 1 or more (leave it out for the default)", tc.replication)
	}
	tc.config = map[string]string{}
	for _, kv := range tc.configs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usageError("--config %q: want KEY=VALUE", kv)
		}
		tc.config[k] = v
	}
	return nil
}

// topicCreate creates a topic (the replication factor defaults to
// min(3, nodes)) and prints the settings the server reports it applied.
func topicCreate(ctx context.Context, c *clientlib.Client, w io.Writer, name string, tc topicCreateFlags) error {
	rf := tc.replication
	if rf == 0 {
		info, err := c.Metadata(ctx)
		if err != nil {
			return err
		}
		rf = int32(min(3, max(1, len(info.Nodes))))
	}
	if err := c.CreateTopic(ctx, name, tc.partitions, rf, tc.config); err != nil {
		return err
	}
	details, err := c.DescribeTopics(ctx, name)
	if err != nil {
		return wrapErr(err, "created topic %s, but describing it failed", name)
	}
	for _, d := range details {
		if d.Name == name && d.Err == nil {
			fmt.Fprintf(w, "created topic %s: %d partitions, replication factor %d\n", d.Name, d.Partitions, d.ReplicationFactor)
			return nil
		}
	}
	return userErr(nil, "created topic %s, but it is missing from describe", name)
}

func topicList(ctx context.Context, c *clientlib.Client, w io.Writer) error {
	names, err := c.ListTopics(ctx)
	if err != nil {
		return err
	}
	for _, n := range names {
		fmt.Fprintln(w, n)
	}
	return nil
}

// topicDescribe prints a topic's settings and each partition's leader,
// replicas and offsets.
func topicDescribe(ctx context.Context, c *clientlib.Client, w io.Writer, name string) error {
	details, err := c.DescribeTopics(ctx, name)
	if err != nil {
		return err
	}
	if len(details) != 1 {
		return userErr(nil, "describe %s: %d answers", name, len(details))
	}
	d := details[0]
	if d.Err != nil {
		return d.Err
	}
	fmt.Fprintf(w, "topic %s: %d partitions, replication factor %d\n", d.Name, d.Partitions, d.ReplicationFactor)
	keys := make([]string, 0, len(d.Configs))
	for k := range d.Configs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		note := ""
		if !metadata.Enforced(k, d.Configs[k]) {
			note = "  (not enforced yet)"
		}
		fmt.Fprintf(w, "  config %s=%s%s\n", k, d.Configs[k], note)
	}
	info, err := c.Metadata(ctx)
	if err != nil {
		return err
	}
	for _, t := range info.Topics {
		if t.Name == name {
			return printPartitions(ctx, c, w, t)
		}
	}
	return nil
}

// printPartitions prints one topic's partitions as a table.
func printPartitions(ctx context.Context, c *clientlib.Client, w io.Writer, t clientlib.TopicMetadata) error {
	offsets, err := c.ListOffsets(ctx, t.Name, nil, clientlib.OffsetLatest())
	byPartition := map[int32]clientlib.ListedOffset{}
	if err == nil {
		for _, o := range offsets {
			byPartition[o.Partition] = o
		}
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  PARTITION\tLEADER\tREPLICAS\tLOG START\tHIGH WATERMARK")
	for _, p := range t.Partitions {
		leader := "none"
		if p.LeaderID != 0 {
			leader = fmt.Sprint(p.LeaderID)
		}
		start, hwm := "?", "?"
		if o, ok := byPartition[p.Partition]; ok && o.Err == nil {
			start, hwm = fmt.Sprint(o.LogStartOffset), fmt.Sprint(o.HighWatermark)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", p.Partition, leader, joinIDs(p.Replicas), start, hwm)
	}
	return tw.Flush()
}

func joinIDs(ids []uint64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(id)
	}
	return strings.Join(parts, ",")
}

// cmdCluster prints nodes, topics, partitions, leaders and high-water
// marks; it fails (exit 1) when the cluster cannot be reached.
func cmdCluster(args []string, stdout io.Writer) error {
	fs := newFlags("cluster")
	var cf clientFlags
	cf.register(fs, 10*time.Second)
	if err := parseFlags(fs, args); err != nil {
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
	fmt.Fprintf(stdout, "nodes (metadata leader: %s):\n", idOrNone(info.ControllerID))
	full := nodesDiskFull(ctx, info.Nodes)
	for _, n := range info.Nodes {
		rack := ""
		if n.Rack != "" {
			rack = "  rack " + n.Rack
		}
		if full[n.ID] {
			rack += "  DISK FULL: refusing produce (not_enough_space) until space returns"
		}
		fmt.Fprintf(stdout, "  %d  %s%s\n", n.ID, n.Address, rack)
	}
	if len(info.Topics) == 0 {
		fmt.Fprintln(stdout, "no topics")
	}
	for _, t := range info.Topics {
		if t.Err != nil {
			fmt.Fprintf(stdout, "topic %s: %s\n", t.Name, userMessage(t.Err))
			continue
		}
		fmt.Fprintf(stdout, "topic %s: %d partitions\n", t.Name, len(t.Partitions))
		if err := printPartitions(ctx, c, stdout, t); err != nil {
			return err
		}
	}
	return nil
}

func idOrNone(id uint64) string {
	if id == 0 {
		return "none"
	}
	return fmt.Sprint(id)
}

// errTopicExists reports whether err says the topic already exists.
func errTopicExists(err error) bool { return errors.Is(err, clientlib.ErrTopicExists) }
