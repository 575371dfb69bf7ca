package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// dlqSubcommands are the subcommands of `strand dlq`.
var dlqSubcommands = []string{"describe", "redrive"}

// cmdDLQ runs `strand dlq describe|redrive TOPIC`.
func cmdDLQ(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError("dlq: want a subcommand: %s", strings.Join(dlqSubcommands, ", "))
	}
	sub, rest := args[0], args[1:]
	switch {
	case sub == "-h" || sub == "--help" || sub == "help":
		return &helpShown{text: groupUsage("dlq")}
	case !slices.Contains(dlqSubcommands, sub):
		return usageError("dlq: unknown subcommand %q: want %s", sub, strings.Join(dlqSubcommands, ", "))
	}
	fs := newFlags("dlq " + sub)
	var cf clientFlags
	cf.register(fs, 2*time.Minute)
	var format outputFormat
	var to, filter *string
	if sub == "describe" {
		format.register(fs)
	} else {
		to = fs.String("to", "", "write the dead letters to this topic (default: each one's source topic); it needs their source partitions")
		filter = fs.String("filter-error", "", "redrive only dead letters whose error text contains this")
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("dlq %s: want one dead-letter topic, e.g. orders%s", sub, clientlib.DeadLetterSuffix)
	}
	if err := format.validate(); err != nil {
		return err
	}
	topic := fs.Arg(0)
	if strings.HasSuffix(topic, clientlib.RedriveLedgerSuffix) {
		return usageError("dlq %s %s: that is a redrive ledger; name the dead-letter topic %s", sub, topic, strings.TrimSuffix(topic, clientlib.RedriveLedgerSuffix))
	}
	if to != nil && *to == topic {
		return usageError("dlq redrive %s --to %s: that is the dead-letter topic itself; name the topic to write back to", topic, topic)
	}
	c, err := cf.client(clientlib.ManualPartitioner())
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	if err := dlqExists(ctx, c, topic); err != nil {
		return err
	}
	if sub == "describe" {
		return topicErr(topic, dlqDescribe(ctx, c, stdout, topic, format))
	}
	return topicErr(topic, dlqRedrive(ctx, c, stdout, stderr, topic, *to, *filter))
}

// dlqGroup is one line of `dlq describe`: the dead letters of one source
// partition with one error text.
type dlqGroup struct {
	Source    string   `json:"source_topic"`
	Partition int32    `json:"source_partition"`
	Error     string   `json:"error"`
	Count     int      `json:"count"`
	Redriven  int      `json:"redriven"`
	Offsets   []int64  `json:"source_offsets"`
	Groups    []string `json:"groups"`
}

// dlqSummary groups dead letters by source partition and error text, in
// that order; records without dead-letter headers count as invalid.
func dlqSummary(entries []clientlib.DeadLetterEntry) (rows []*dlqGroup, invalid int) {
	index := map[string]*dlqGroup{}
	for _, e := range entries {
		if e.Err != nil {
			invalid++
			continue
		}
		k := e.Info.Source.Topic + "\x00" + strconv.Itoa(int(e.Info.Source.Partition)) + "\x00" + e.Info.Err
		g := index[k]
		if g == nil {
			g = &dlqGroup{Source: e.Info.Source.Topic, Partition: e.Info.Source.Partition, Error: e.Info.Err}
			index[k] = g
			rows = append(rows, g)
		}
		g.Count++
		g.Offsets = append(g.Offsets, e.Info.Offset)
		if e.Redriven {
			g.Redriven++
		}
		if !slices.Contains(g.Groups, e.Info.Group) {
			g.Groups = append(g.Groups, e.Info.Group)
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Source != b.Source {
			return a.Source < b.Source
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.Error < b.Error
	})
	return rows, invalid
}

// dlqDescribe prints a dead-letter topic's letters grouped by source
// partition and error.
func dlqDescribe(ctx context.Context, c *clientlib.Client, w io.Writer, topic string, format outputFormat) error {
	entries, err := c.ReadDeadLetters(ctx, topic)
	if err != nil {
		return err
	}
	rows, invalid := dlqSummary(entries)
	if format.json() {
		return writeJSON(w, map[string]any{"topic": topic, "dead_letters": len(entries) - invalid, "invalid": invalid, "by_source_and_error": rows})
	}
	redriven := 0
	for _, r := range rows {
		redriven += r.Redriven
	}
	fmt.Fprintf(w, "dead-letter topic %s: %s, %d redriven", topic, plural(len(entries)-invalid, "dead letter"), redriven)
	if invalid > 0 {
		fmt.Fprintf(w, ", %d records without dead-letter headers", invalid)
	}
	fmt.Fprintln(w)
	if len(rows) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  SOURCE\tCOUNT\tREDRIVEN\tGROUPS\tSOURCE OFFSETS\tERROR")
	for _, r := range rows {
		fmt.Fprintf(tw, "  %s/%d\t%d\t%d\t%s\t%s\t%s\n", r.Source, r.Partition, r.Count, r.Redriven,
			strings.Join(r.Groups, ","), offsetList(r.Offsets), oneLine(r.Error))
	}
	return tw.Flush()
}

// offsetList prints up to 5 offsets and how many more.
func offsetList(offs []int64) string {
	var parts []string
	for i, o := range offs {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("… (+%d)", len(offs)-5))
			break
		}
		parts = append(parts, strconv.FormatInt(o, 10))
	}
	return strings.Join(parts, ",")
}

// oneLine shortens an error text to one line of at most 80 characters.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 80 {
		return string(r[:79]) + "…"
	}
	return s
}

// dlqRedrive writes a dead-letter topic's letters back and reports.
func dlqRedrive(ctx context.Context, c *clientlib.Client, stdout, stderr io.Writer, topic, to, filter string) error {
	opts := clientlib.RedriveOptions{To: to}
	if filter != "" {
		opts.Filter = func(i clientlib.DeadLetterInfo) bool { return strings.Contains(i.Err, filter) }
	}
	opts.OnEach = func(e clientlib.DeadLetterEntry, at int64) {
		fmt.Fprintf(stderr, "strand: redrove %s/%d@%d to %s/%d@%d\n", topic, e.Record.Partition, e.Record.Offset,
			firstNonEmpty(to, e.Info.Source.Topic), e.Info.Source.Partition, at)
	}
	rep, err := c.Redrive(ctx, topic, opts)
	fmt.Fprintf(stdout, "redrove %s from %s", plural(rep.Redriven, "dead letter"), topic)
	if rep.Recovered > 0 {
		fmt.Fprintf(stdout, " (and found %d written by an interrupted redrive)", rep.Recovered)
	}
	fmt.Fprintf(stdout, "; %d redriven before, %d left out by --filter-error", rep.Already, rep.Skipped)
	if rep.Duplicates > 0 {
		fmt.Fprintf(stdout, ", %d repeated dead letters of records written back once", rep.Duplicates)
	}
	if rep.Invalid > 0 {
		fmt.Fprintf(stdout, ", %d records without dead-letter headers left alone", rep.Invalid)
	}
	fmt.Fprintf(stdout, "; recorded in %s\n", topic+clientlib.RedriveLedgerSuffix)
	if err != nil {
		return wrapErr(err, "redrive stopped (run it again: what was written is not written twice)")
	}
	return nil
}

// firstNonEmpty is a if set, else b.
func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// writeDeadLetterCounts adds to group describe the records the group
// dead-lettered, per partition (nothing when none).
func writeDeadLetterCounts(w io.Writer, lag []clientlib.PartitionLag) {
	var total int64
	var parts []string
	for _, l := range lag {
		if l.DeadLetters > 0 {
			total += l.DeadLetters
			parts = append(parts, fmt.Sprintf("%s/%d: %d", l.Topic, l.Partition, l.DeadLetters))
		}
	}
	if total > 0 {
		fmt.Fprintf(w, "  dead-lettered: %s (%s); strand dlq describe TOPIC.dlq lists them\n",
			plural(int(total), "record"), strings.Join(parts, ", "))
	}
}

// dlqExists fails, saying where dead-letter topics come from, when topic
// does not exist.
func dlqExists(ctx context.Context, c *clientlib.Client, topic string) error {
	ds, err := c.DescribeTopics(ctx, topic)
	if err != nil {
		return err
	}
	if len(ds) == 1 && errors.Is(ds[0].Err, clientlib.ErrUnknownTopic) {
		return userErr(ds[0].Err, "dead-letter topic %s does not exist: consume --exec creates TOPIC.dlq (or its --dlq-topic) at its first dead letter; strand topic list shows the topics", topic)
	}
	return nil
}
