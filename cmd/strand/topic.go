package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// cmdTopic runs `strand topic create|list|describe|delete`.
func cmdTopic(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError("topic: want create, list, describe or delete")
	}
	sub, rest := args[0], args[1:]
	fs := newFlags("topic " + sub)
	var cf clientFlags
	cf.register(fs, 30*time.Second)
	partitions := int32(1)
	replication := int32(0)
	var configs []string
	if sub == "create" {
		fs.Int32Var(&partitions, "partitions", 1, "number of partitions")
		fs.Int32Var(&replication, "replication-factor", 0, "replicas per partition (default: 3, or fewer when the cluster has fewer nodes)")
		fs.StringArrayVar(&configs, "config", nil, "topic configuration KEY=VALUE (repeatable)")
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	names := fs.Args()
	if (sub == "list") != (len(names) == 0) || len(names) > 1 {
		return usageError("topic %s: want %s", sub, map[bool]string{true: "no argument", false: "one topic name"}[sub == "list"])
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
		return topicCreate(ctx, c, stdout, names[0], partitions, replication, configs)
	case "list":
		return topicList(ctx, c, stdout)
	case "describe":
		return topicDescribe(ctx, c, stdout, names[0])
	case "delete":
		if err := c.DeleteTopic(ctx, names[0]); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "deleted topic %s\n", names[0])
		return nil
	}
	return usageError("topic: unknown subcommand %q", sub)
}

// topicCreate creates a topic; the replication factor defaults to
// min(3, nodes).
func topicCreate(ctx context.Context, c *clientlib.Client, w io.Writer, name string, partitions, rf int32, configs []string) error {
	cfg := map[string]string{}
	for _, kv := range configs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usageError("--config %q: want KEY=VALUE", kv)
		}
		cfg[k] = v
	}
	if rf == 0 {
		info, err := c.Metadata(ctx)
		if err != nil {
			return err
		}
		rf = int32(min(3, max(1, len(info.Nodes))))
	}
	if err := c.CreateTopic(ctx, name, partitions, rf, cfg); err != nil {
		return err
	}
	fmt.Fprintf(w, "created topic %s: %d partitions, replication factor %d\n", name, partitions, rf)
	return nil
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
		return fmt.Errorf("describe %s: %d answers", name, len(details))
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
		fmt.Fprintf(w, "  config %s=%s\n", k, d.Configs[k])
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
	if err != nil {
		return fmt.Errorf("cannot reach the cluster at %s: %w", strings.Join(cf.brokers, ","), err)
	}
	fmt.Fprintf(stdout, "nodes (metadata leader: %s):\n", idOrNone(info.ControllerID))
	for _, n := range info.Nodes {
		rack := ""
		if n.Rack != "" {
			rack = "  rack " + n.Rack
		}
		fmt.Fprintf(stdout, "  %d  %s%s\n", n.ID, n.Address, rack)
	}
	if len(info.Topics) == 0 {
		fmt.Fprintln(stdout, "no topics")
	}
	for _, t := range info.Topics {
		if t.Err != nil {
			fmt.Fprintf(stdout, "topic %s: %v\n", t.Name, t.Err)
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
