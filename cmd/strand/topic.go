package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/clientlib"
)

// topicSubcommands are the subcommands of `strand topic`.
var topicSubcommands = []string{"create", "list", "describe", "alter", "add-partitions", "delete-records", "delete", "recover"}

// cmdTopic runs `strand topic create|list|describe|alter|add-partitions|delete-records|delete|recover`.
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
	timeout := 30 * time.Second
	if sub == "recover" {
		timeout = recoverTimeout // it waits for every partition's restore
	}
	cf.register(fs, timeout)
	var tf topicFlags
	tf.register(sub, fs)
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	names := fs.Args()
	if (sub == "list") != (len(names) == 0) || len(names) > 1 {
		return usageError("topic %s: want %s", sub, map[bool]string{true: "no argument", false: "one topic name"}[sub == "list"])
	}
	if err := tf.format.validate(); err != nil {
		return err
	}
	if err := validateTopicFlags(sub, fs, &tf.create, &tf.alter, &tf.records); err != nil {
		return err
	}
	if sub == "add-partitions" {
		if err := tf.add.validate(fs); err != nil {
			return err
		}
	}
	if sub == "recover" && !tf.recover.fromBucket {
		return usageError("topic recover: give --from-bucket (the only source a topic is recovered from: the object store its tiered segments were uploaded to)")
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
		return topicErr(names[0], topicCreate(ctx, c, stdout, names[0], tf.create))
	case "list":
		return topicList(ctx, c, stdout, tf.internal, tf.format)
	case "describe":
		if tf.format.json() {
			return topicErr(names[0], topicDescribeJSON(ctx, c, stdout, names[0]))
		}
		return topicErr(names[0], topicDescribe(ctx, c, stdout, names[0]))
	case "alter":
		return topicErr(names[0], topicAlter(ctx, c, stdout, names[0], tf.alter))
	case "delete-records":
		return topicErr(names[0], topicDeleteRecords(ctx, c, stdout, names[0], tf.records))
	case "add-partitions":
		return topicAddPartitions(ctx, c, stdout, names[0], tf.add)
	case "recover":
		return topicErr(names[0], topicRecover(ctx, c, stdout, names[0], tf.recover)) // topic_recover.go
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

// topicFlags are the flags of the topic subcommands; register adds the
// ones sub takes.
type topicFlags struct {
	create   topicCreateFlags
	alter    topicAlterFlags
	records  deleteRecordsFlags
	add      addPartitionsFlags
	recover  recoverFlags
	format   outputFormat
	internal bool
}

func (f *topicFlags) register(sub string, fs *pflag.FlagSet) {
	switch sub {
	case "list":
		f.format.register(fs)
		fs.BoolVar(&f.internal, "internal", false, "list internal topics too (__strand_offsets and any name starting with __)")
	case "describe":
		f.format.register(fs)
	case "create":
		f.create.register(fs)
	case "alter":
		f.alter.register(fs)
	case "add-partitions":
		f.add.register(fs)
	case "delete-records":
		f.records.register(fs)
	case "recover":
		f.recover.register(fs)
	}
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
	var err error
	tc.config, err = parseConfigs(tc.configs)
	return err
}

// parseConfigs turns --config KEY=VALUE flags into a map.
func parseConfigs(kvs []string) (map[string]string, error) {
	config := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageError("--config %q: want KEY=VALUE", kv)
		}
		config[k] = v
	}
	return config, nil
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
			fmt.Fprintf(w, "created topic %s: %s, replication factor %d\n", d.Name, plural(int(d.Partitions), "partition"), d.ReplicationFactor)
			return nil
		}
	}
	return userErr(nil, "created topic %s, but it is missing from describe", name)
}

// topicList prints the topics' names, one a line, or as JSON each
// topic's name, partition count and replication factor; internal topics
// (__strand_offsets) only with internal.
func topicList(ctx context.Context, c *clientlib.Client, w io.Writer, internal bool, format outputFormat) error {
	info, err := c.Metadata(ctx)
	if err != nil {
		return err
	}
	type topicEntry struct {
		Name              string `json:"name"`
		Partitions        int    `json:"partitions"`
		ReplicationFactor int    `json:"replication_factor"`
		Internal          bool   `json:"internal"`
	}
	out := []topicEntry{}
	for _, t := range info.Topics {
		if t.Err != nil || (!internal && isInternalTopic(t.Name)) {
			continue
		}
		e := topicEntry{Name: t.Name, Partitions: len(t.Partitions), Internal: isInternalTopic(t.Name)}
		if len(t.Partitions) > 0 {
			e.ReplicationFactor = len(t.Partitions[0].Replicas)
		}
		out = append(out, e)
	}
	if format.json() {
		return writeJSON(w, out)
	}
	for _, e := range out {
		fmt.Fprintln(w, e.Name)
	}
	return nil
}

// topicJSON is `strand topic describe --format json`.
type topicJSON struct {
	Name              string            `json:"name"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int32             `json:"replication_factor"`
	Configs           map[string]string `json:"configs"`
	NodeCaps          map[string]string `json:"node_caps,omitempty"`
	PartitionList     []partitionJSON   `json:"partition_list"`
}

// partitionJSON is one partition of topicJSON; fields the leader could
// not be asked for are null.
type partitionJSON struct {
	Partition         int32    `json:"partition"`
	Leader            uint64   `json:"leader"` // 0: none
	Replicas          []uint64 `json:"replicas"`
	TargetReplicas    []uint64 `json:"target_replicas,omitempty"`
	LogStartOffset    *int64   `json:"log_start_offset"`
	HighWatermark     *int64   `json:"high_watermark"`
	SizeBytes         *int64   `json:"size_bytes"`
	OldestTimestampMs *int64   `json:"oldest_timestamp_ms"`
	// Compaction is the leader's compaction state; absent when the topic
	// does not compact and never did.
	Compaction *compactionJSON `json:"compaction,omitempty"`
	// Tier is the leader's two tiers; absent when the topic is not tiered
	// (topic_tier.go).
	Tier *tierJSON `json:"tier,omitempty"`
}

// compactionJSON is partitionJSON's compaction state (clientlib's
// PartitionCompaction; last_compaction_time_ms is null until a pass is
// done, or while a later one is under way).
type compactionJSON struct {
	DirtyRatio           float64 `json:"dirty_ratio"`
	DirtyBytes           int64   `json:"dirty_bytes"`
	CleanBytes           int64   `json:"clean_bytes"`
	LastGeneration       uint64  `json:"last_generation"`
	LastCompactionTimeMs *int64  `json:"last_compaction_time_ms"`
	CleanedTo            int64   `json:"cleaned_to"`
	DecidedGeneration    uint64  `json:"decided_generation"`
	Stuck                string  `json:"stuck,omitempty"`
	// The leader's last pass (0: none since it opened).
	LastPassBytesIn    int64 `json:"last_pass_bytes_in"`
	LastPassBytesOut   int64 `json:"last_pass_bytes_out"`
	LastPassDurationMs int64 `json:"last_pass_duration_ms"`
}

// describeOne describes the one topic name, failing with its error.
func describeOne(ctx context.Context, c *clientlib.Client, name string) (clientlib.TopicDetail, error) {
	details, err := c.DescribeTopics(ctx, name)
	if err != nil {
		return clientlib.TopicDetail{}, err
	}
	if len(details) != 1 {
		return clientlib.TopicDetail{}, userErr(nil, "describe %s: %d answers", name, len(details))
	}
	return details[0], details[0].Err
}

// topicDescribeJSON prints what topicDescribe prints, as one JSON object.
func topicDescribeJSON(ctx context.Context, c *clientlib.Client, w io.Writer, name string) error {
	d, err := describeOne(ctx, c, name)
	if err != nil {
		return err
	}
	out := topicJSON{Name: d.Name, Partitions: d.Partitions, ReplicationFactor: d.ReplicationFactor, Configs: d.Configs,
		NodeCaps: d.NodeCaps, PartitionList: []partitionJSON{}}
	info, err := c.Metadata(ctx)
	if err != nil {
		return err
	}
	for _, t := range info.Topics {
		if t.Name != name {
			continue
		}
		byPartition := map[int32]clientlib.ListedOffset{}
		if offsets, err := c.ListOffsets(ctx, t.Name, nil, clientlib.OffsetLatest()); err == nil {
			for _, o := range offsets {
				byPartition[o.Partition] = o
			}
		}
		logs := partitionLogs(ctx, c, t)
		for _, p := range t.Partitions {
			pj := partitionJSON{Partition: p.Partition, Leader: p.LeaderID, Replicas: p.Replicas, TargetReplicas: p.TargetReplicas}
			if o, ok := byPartition[p.Partition]; ok && o.Err == nil {
				pj.LogStartOffset, pj.HighWatermark = &o.LogStartOffset, &o.HighWatermark
			}
			if l, ok := logs[p.Partition]; ok && l.Err == nil {
				pj.SizeBytes, pj.OldestTimestampMs = &l.SizeBytes, &l.OldestTimestampMs
				pj.Tier = tierToJSON(l.Tier)
				if pc := l.Compaction; pc != nil {
					cj := &compactionJSON{DirtyRatio: pc.DirtyRatio(), DirtyBytes: pc.DirtyBytes, CleanBytes: pc.PrefixBytes,
						LastGeneration: pc.Done, CleanedTo: pc.CleanedTo, DecidedGeneration: pc.Decided, Stuck: pc.Stuck,
						LastPassBytesIn: pc.LastPassBytesIn, LastPassBytesOut: pc.LastPassBytesOut,
						LastPassDurationMs: pc.LastPassDuration.Milliseconds()}
					if pc.Done > 0 && pc.Done == pc.Decided {
						cj.LastCompactionTimeMs = &pc.DecidedTimeMs
					}
					pj.Compaction = cj
				}
			}
			out.PartitionList = append(out.PartitionList, pj)
		}
	}
	return writeJSON(w, out)
}

// topicDescribe prints a topic's settings and each partition's leader,
// replicas and offsets.
func topicDescribe(ctx context.Context, c *clientlib.Client, w io.Writer, name string) error {
	d, err := describeOne(ctx, c, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "topic %s: %s, replication factor %d\n", d.Name, plural(int(d.Partitions), "partition"), d.ReplicationFactor)
	keys := make([]string, 0, len(d.Configs))
	for k := range d.Configs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		note := configNote(k, d.Configs[k], d.Configs)
		if limit, ok := d.NodeCaps[k]; ok {
			note = "  (the nodes cap it at " + limit + ")"
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
	logs := partitionLogs(ctx, c, t)
	fmt.Fprintln(tw, "  PARTITION\tLEADER\tREPLICAS\tLOG START\tHIGH WATERMARK\tSIZE\tOLDEST RECORD")
	for _, p := range t.Partitions {
		leader := "none"
		if p.LeaderID != 0 {
			leader = fmt.Sprint(p.LeaderID)
		}
		start, hwm, size, oldest := "?", "?", "?", "?"
		if o, ok := byPartition[p.Partition]; ok && o.Err == nil {
			start, hwm = fmt.Sprint(o.LogStartOffset), fmt.Sprint(o.HighWatermark)
		}
		if l, ok := logs[p.Partition]; ok && l.Err == nil {
			size, oldest = formatBytes(l.SizeBytes), formatTimestamp(l.OldestTimestampMs)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Partition, leader, joinIDs(p.Replicas), start, hwm, size, oldest)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range t.Partitions {
		if l, ok := logs[p.Partition]; ok && l.Err == nil && l.Compaction != nil {
			fmt.Fprintf(w, "  partition %d compaction: %s\n", p.Partition, formatCompaction(*l.Compaction))
		}
	}
	for _, p := range t.Partitions {
		if l, ok := logs[p.Partition]; ok && l.Err == nil && l.Tier != nil {
			fmt.Fprintf(w, "  partition %d tiers: %s\n", p.Partition, formatTier(*l.Tier))
		}
	}
	for _, p := range t.Partitions {
		if p.TargetReplicas == nil {
			continue
		}
		line := "moving to " + joinIDs(p.TargetReplicas)
		if l, ok := logs[p.Partition]; ok && l.Err == nil && l.MoveTarget != nil {
			line = formatMoveProgress(l)
		}
		fmt.Fprintf(w, "  partition %d %s\n", p.Partition, line)
	}
	return nil
}

// formatCompaction is one partition's compaction state in a line: the
// dirty ratio (what min.cleanable.dirty.ratio is compared with), the last
// compaction done (generation, decision time, cleaned-to offset), the
// leader's last pass (bytes read and written, time taken), a pass under
// way, and why the leader runs none.
func formatCompaction(pc clientlib.PartitionCompaction) string {
	parts := []string{fmt.Sprintf("dirty ratio %.2f (dirty %s, clean %s)", pc.DirtyRatio(),
		formatBytes(pc.DirtyBytes), formatBytes(pc.PrefixBytes))}
	switch {
	case pc.Done == 0:
		parts = append(parts, "no compaction yet")
	case pc.Done == pc.Decided:
		parts = append(parts, fmt.Sprintf("last compaction generation %d at %s, cleaned to offset %d",
			pc.Done, formatTimestamp(pc.DecidedTimeMs), pc.CleanedTo))
	default:
		parts = append(parts, fmt.Sprintf("last compaction generation %d, cleaned to offset %d", pc.Done, pc.CleanedTo))
	}
	if pc.LastPassBytesIn > 0 || pc.LastPassBytesOut > 0 || pc.LastPassDuration > 0 {
		took := formatDuration(pc.LastPassDuration)
		if pc.LastPassDuration < time.Second {
			took = pc.LastPassDuration.Round(time.Millisecond).String()
		}
		parts = append(parts, fmt.Sprintf("last pass read %s, wrote %s in %s",
			formatBytes(pc.LastPassBytesIn), formatBytes(pc.LastPassBytesOut), took))
	}
	if pc.Decided > pc.Done {
		parts = append(parts, fmt.Sprintf("generation %d under way since %s (offsets below %d)",
			pc.Decided, formatTimestamp(pc.DecidedTimeMs), pc.CleanableEnd))
	}
	if !pc.Compacts {
		parts = append(parts, "the topic no longer compacts")
	}
	if pc.Stuck != "" {
		parts = append(parts, "stuck on the leader: "+pc.Stuck)
	}
	return strings.Join(parts, "; ")
}

func joinIDs(ids []uint64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(id)
	}
	return strings.Join(parts, ",")
}

func idOrNone(id uint64) string {
	if id == 0 {
		return "none"
	}
	return fmt.Sprint(id)
}

// validateTopicFlags checks the flags of the subcommands that take some.
func validateTopicFlags(sub string, fs *pflag.FlagSet, tc *topicCreateFlags, ta *topicAlterFlags, td *deleteRecordsFlags) error {
	switch sub {
	case "create":
		return tc.validate(fs)
	case "alter":
		return ta.validate()
	case "delete-records":
		return td.validate(fs)
	}
	return nil
}

// topicAlterFlags are the flags of `strand topic alter`.
type topicAlterFlags struct {
	configs []string
	deletes []string
	config  map[string]string
}

func (ta *topicAlterFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVarP(&ta.configs, "config", "c", nil, "set a configuration KEY=VALUE (repeatable)")
	fs.StringArrayVar(&ta.deletes, "delete-config", nil, "put KEY back to its default (repeatable)")
}

func (ta *topicAlterFlags) validate() error {
	if len(ta.configs) == 0 && len(ta.deletes) == 0 {
		return usageError("topic alter: want at least one --config KEY=VALUE or --delete-config KEY")
	}
	var err error
	ta.config, err = parseConfigs(ta.configs)
	return err
}

// topicAlter changes a topic's configuration and prints it as applied.
func topicAlter(ctx context.Context, c *clientlib.Client, w io.Writer, name string, ta topicAlterFlags) error {
	applied, err := c.AlterTopicConfig(ctx, name, ta.config, ta.deletes)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "altered topic %s:\n", name)
	keys := make([]string, 0, len(applied))
	for k := range applied {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  config %s=%s%s\n", k, applied[k], configNote(k, applied[k], applied))
	}
	return nil
}

// deleteRecordsFlags are the flags of `strand topic delete-records`.
type deleteRecordsFlags struct {
	partition int32
	before    int64
}

func (td *deleteRecordsFlags) register(fs *pflag.FlagSet) {
	fs.Int32VarP(&td.partition, "partition", "p", -1, "the partition (required)")
	fs.Int64Var(&td.before, "before", -2, "delete records below this offset; -1: every record (required)")
}

func (td *deleteRecordsFlags) validate(fs *pflag.FlagSet) error {
	if !flagSet(fs, "partition") || td.partition < 0 {
		return usageError("topic delete-records: want --partition P (0 or more)")
	}
	if !flagSet(fs, "before") || td.before < -1 {
		return usageError("topic delete-records: want --before OFFSET (0 or more, or -1 for every record)")
	}
	return nil
}

// topicDeleteRecords moves a partition's log start and prints where it is.
func topicDeleteRecords(ctx context.Context, c *clientlib.Client, w io.Writer, name string, td deleteRecordsFlags) error {
	logStart, err := c.DeleteRecords(ctx, name, td.partition, td.before)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "deleted records of %s partition %d: log start is now %d\n", name, td.partition, logStart)
	return nil
}

// partitionLogs asks each partition's leader for its log's size and oldest
// record; partitions it could not ask are missing.
func partitionLogs(ctx context.Context, c *clientlib.Client, t clientlib.TopicMetadata) map[int32]clientlib.PartitionLog {
	partitions := make([]int32, len(t.Partitions))
	for i, p := range t.Partitions {
		partitions[i] = p.Partition
	}
	out := map[int32]clientlib.PartitionLog{}
	logs, err := c.DescribePartitionLogs(ctx, t.Name, partitions)
	if err != nil {
		return out
	}
	for _, l := range logs {
		out[l.Partition] = l
	}
	return out
}

// formatBytes prints a size in B, KiB, MiB or GiB.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// formatTimestamp prints a record timestamp in UTC, "-" for none.
func formatTimestamp(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}
