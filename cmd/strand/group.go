package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/clientlib"
)

// groupSubcommands are the subcommands of `strand group`.
var groupSubcommands = []string{"list", "describe", "reset", "delete"}

// cmdGroup runs `strand group list|describe|reset|delete`.
func cmdGroup(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError("group: want a subcommand: %s", strings.Join(groupSubcommands, ", "))
	}
	sub, rest := args[0], args[1:]
	switch {
	case sub == "-h" || sub == "--help" || sub == "help":
		return &helpShown{text: groupUsage("group")}
	case !slices.Contains(groupSubcommands, sub):
		return usageError("group: unknown subcommand %q: want %s", sub, strings.Join(groupSubcommands, ", "))
	}
	fs := newFlags("group " + sub)
	f := registerGroupFlags(fs, sub)
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	level, err := parseIsolation(cmp.Or(f.isolation, "read_uncommitted"))
	if err != nil {
		return err
	}
	names := fs.Args()
	if (sub == "list") != (len(names) == 0) || len(names) > 1 {
		return usageError("group %s: want %s", sub, map[bool]string{true: "no argument", false: "one group id"}[sub == "list"])
	}
	if sub == "reset" {
		if err := f.rf.validate(fs); err != nil {
			return err
		}
	}
	if err := f.format.validate(); err != nil {
		return err
	}
	c, err := f.cf.client()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), f.cf.timeout)
	defer cancel()
	switch sub {
	case "list":
		return groupList(ctx, c, stdout, f.format)
	case "describe":
		if f.format.json() {
			return groupErr(names[0], groupDescribeJSON(ctx, c, stdout, names[0], level))
		}
		return groupErr(names[0], groupDescribe(ctx, c, stdout, names[0], level))
	case "reset":
		return groupErr(names[0], groupReset(ctx, c, stdout, names[0], f.rf))
	}
	if err := c.DeleteGroup(ctx, names[0]); err != nil {
		return groupErr(names[0], err)
	}
	fmt.Fprintf(stdout, "deleted group %s and its committed offsets\n", names[0])
	return nil
}

// groupFlags are the flags of one `strand group` subcommand.
type groupFlags struct {
	cf        clientFlags
	rf        resetFlags
	format    outputFormat
	isolation string // describe only
}

// registerGroupFlags registers subcommand sub's flags on fs.
func registerGroupFlags(fs *pflag.FlagSet, sub string) *groupFlags {
	f := &groupFlags{}
	f.cf.register(fs, 30*time.Second)
	switch sub {
	case "reset":
		f.rf.register(fs)
	case "describe":
		fs.StringVar(&f.isolation, "isolation", "read_uncommitted", "what the group's consumers read, as their isolation.level (Kafka does not record it): "+
			"read_uncommitted measures lag to the high-water mark, as Kafka's tools do; read_committed to the last stable offset, "+
			"the end a read_committed consumer can reach while a transaction is open")
		f.format.register(fs)
	case "list":
		f.format.register(fs)
	}
	return f
}

// groupErr says in plain words what a group error means for the user.
func groupErr(group string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, clientlib.ErrGroupNotFound):
		return userErr(err, "group %s does not exist ('strand group list' shows the groups)", group)
	case errors.Is(err, clientlib.ErrGroupNotEmpty):
		return userErr(err, "group %s has active members: stop its consumers first (they leave at once, or after the 45 s session timeout if killed)", group)
	}
	var ue *userError
	if errors.As(err, &ue) {
		return err
	}
	return wrapErr(err, "group %s", group)
}

// groupList prints every group with its state and member count.
func groupList(ctx context.Context, c *clientlib.Client, w io.Writer, format outputFormat) error {
	gs, err := c.ListGroups(ctx)
	if err != nil {
		return err
	}
	if format.json() {
		type groupEntry struct {
			Group   string `json:"group"`
			State   string `json:"state"`
			Members int    `json:"members"`
		}
		out := make([]groupEntry, 0, len(gs))
		for _, g := range gs {
			out = append(out, groupEntry{Group: g.Group, State: g.State, Members: g.Members})
		}
		return writeJSON(w, out)
	}
	if len(gs) == 0 {
		fmt.Fprintln(w, "no groups")
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSTATE\tMEMBERS")
	for _, g := range gs {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", g.Group, g.State, g.Members)
	}
	return tw.Flush()
}

// groupDescribe prints a group's members and, per partition, committed
// offset, high-water mark (and at read_committed the last stable offset),
// lag in records and time to the end iso reaches, and retention headroom.
func groupDescribe(ctx context.Context, c *clientlib.Client, w io.Writer, group string, iso clientlib.IsolationLevel) error {
	d, err := c.DescribeGroup(ctx, group)
	if err != nil {
		return err
	}
	members := "members"
	if len(d.Members) == 1 {
		members = "member"
	}
	fmt.Fprintf(w, "group %s: %s, %d %s, epoch %d\n", d.Group, d.State, len(d.Members), members, d.Epoch)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	if len(d.Members) > 0 {
		fmt.Fprintln(tw, "  MEMBER\tINSTANCE\tEPOCH\tASSIGNED")
		for _, m := range d.Members {
			inst := m.InstanceID
			if inst == "" {
				inst = "-"
			}
			if m.LeftStatic {
				inst += " (restarting)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", shortID(m.MemberID), inst, m.Epoch, formatPartitions(m.Assigned))
		}
		tw.Flush()
	}
	lag, err := c.GroupLagIsolated(ctx, group, time.Now(), iso)
	if err != nil {
		return err
	}
	if len(lag) == 0 {
		fmt.Fprintln(w, "  no committed offsets")
		return nil
	}
	if err := writeLagTable(tw, lag, iso); err != nil {
		return err
	}
	writeHeldBack(w, lag, iso)
	writeDeadLetterCounts(w, lag)
	return nil
}

// writeLagTable prints one row per partition; at read_committed a LAST
// STABLE column follows the high-water mark and lag is measured to it.
func writeLagTable(tw *tabwriter.Writer, lag []clientlib.PartitionLag, iso clientlib.IsolationLevel) error {
	stable := iso == clientlib.ReadCommitted
	if stable {
		fmt.Fprintln(tw, "  TOPIC\tPARTITION\tCOMMITTED\tHIGH WATERMARK\tLAST STABLE\tLAG\tLAG TIME\tHEADROOM\tOWNER")
	} else {
		fmt.Fprintln(tw, "  TOPIC\tPARTITION\tCOMMITTED\tHIGH WATERMARK\tLAG\tLAG TIME\tHEADROOM\tOWNER")
	}
	for _, l := range lag {
		committed := "-"
		if l.Committed >= 0 {
			committed = fmt.Sprint(l.Committed)
		}
		hwm, lagN := fmt.Sprint(l.HighWatermark), fmt.Sprint(l.Lag)
		if stable {
			hwm += "\t" + fmt.Sprint(l.LastStableOffset)
		}
		if l.Err != nil {
			hwm, lagN = "?", "?"
			if stable {
				hwm = "?\t?"
			}
		}
		owner := shortID(l.Owner)
		if owner == "" {
			owner = "-"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Topic, l.Partition, committed, hwm, lagN, formatDuration(l.LagTime), formatHeadroom(l), owner)
	}
	return tw.Flush()
}

// formatHeadroom is a row's HEADROOM cell.
func formatHeadroom(l clientlib.PartitionLag) string {
	switch {
	case l.Headroom == 0 && l.AtRisk:
		return "LOST (below log start " + fmt.Sprint(l.LogStartOffset) + ")"
	case l.Headroom >= 0:
		if l.AtRisk {
			return formatDuration(l.Headroom) + " AT RISK"
		}
		return formatDuration(l.Headroom)
	}
	return "-"
}

// writeHeldBack says, at read_uncommitted, which partitions an open
// transaction holds back from read_committed consumers, so a user of
// those sees why their lag differs.
func writeHeldBack(w io.Writer, lag []clientlib.PartitionLag, iso clientlib.IsolationLevel) {
	if iso == clientlib.ReadCommitted {
		return
	}
	var held []string
	for _, l := range lag {
		if l.Err == nil && l.LastStableOffset >= 0 && l.LastStableOffset < l.HighWatermark {
			held = append(held, fmt.Sprintf("%s/%d at %d", l.Topic, l.Partition, l.LastStableOffset))
		}
	}
	if len(held) > 0 {
		fmt.Fprintf(w, "  open transactions hold read_committed consumers back: %s (--isolation read_committed measures lag there)\n",
			strings.Join(held, ", "))
	}
}

// groupDescribeJSON prints what groupDescribe prints, as one JSON object
// (member ids in full; durations in milliseconds, headroom -1 when
// nothing is at risk; high_watermark, last_stable_offset and lag null when
// unknown; lag measured to the end isolation reaches).
func groupDescribeJSON(ctx context.Context, c *clientlib.Client, w io.Writer, group string, iso clientlib.IsolationLevel) error {
	d, err := c.DescribeGroup(ctx, group)
	if err != nil {
		return err
	}
	type memberJSON struct {
		MemberID   string   `json:"member_id"`
		InstanceID string   `json:"instance_id,omitempty"`
		Restarting bool     `json:"restarting"`
		Epoch      int32    `json:"epoch"`
		Assigned   []string `json:"assigned"`
	}
	type lagJSON struct {
		Topic          string `json:"topic"`
		Partition      int32  `json:"partition"`
		Committed      int64  `json:"committed"` // -1: none
		HighWatermark  *int64 `json:"high_watermark"`
		LastStable     *int64 `json:"last_stable_offset"`
		LogStartOffset int64  `json:"log_start_offset"`
		Lag            *int64 `json:"lag"`
		LagTimeMs      int64  `json:"lag_time_ms"`
		HeadroomMs     int64  `json:"headroom_ms"`
		AtRisk         bool   `json:"at_risk"`
		Owner          string `json:"owner,omitempty"`
		DeadLetters    int64  `json:"dead_letters"` // records consume --exec (clientlib Handle) dead-lettered
	}
	out := struct {
		Group     string       `json:"group"`
		State     string       `json:"state"`
		Epoch     int32        `json:"epoch"`
		Isolation string       `json:"isolation"` // what lag is measured for
		Members   []memberJSON `json:"members"`
		Offsets   []lagJSON    `json:"offsets"`
	}{Group: d.Group, State: d.State, Epoch: d.Epoch, Isolation: iso.String(), Members: []memberJSON{}, Offsets: []lagJSON{}}
	for _, m := range d.Members {
		mj := memberJSON{MemberID: m.MemberID, InstanceID: m.InstanceID, Restarting: m.LeftStatic, Epoch: m.Epoch, Assigned: []string{}}
		for _, p := range m.Assigned {
			mj.Assigned = append(mj.Assigned, fmt.Sprintf("%s/%d", p.Topic, p.Partition))
		}
		out.Members = append(out.Members, mj)
	}
	lag, err := c.GroupLagIsolated(ctx, group, time.Now(), iso)
	if err != nil {
		return err
	}
	for _, l := range lag {
		lj := lagJSON{Topic: l.Topic, Partition: l.Partition, Committed: l.Committed, LogStartOffset: l.LogStartOffset,
			LagTimeMs: l.LagTime.Milliseconds(), HeadroomMs: l.Headroom.Milliseconds(), AtRisk: l.AtRisk, Owner: l.Owner,
			DeadLetters: l.DeadLetters}
		if l.Headroom < 0 {
			lj.HeadroomMs = -1
		}
		if l.Err == nil {
			lj.HighWatermark, lj.LastStable, lj.Lag = &l.HighWatermark, &l.LastStableOffset, &l.Lag
		}
		out.Offsets = append(out.Offsets, lj)
	}
	return writeJSON(w, out)
}

// shortID shortens a member id for tables.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// formatPartitions prints "t/0,1 u/3".
func formatPartitions(ps []clientlib.TopicPartition) string {
	if len(ps) == 0 {
		return "-"
	}
	var b strings.Builder
	for i, p := range ps {
		switch {
		case i == 0:
			fmt.Fprintf(&b, "%s/%d", p.Topic, p.Partition)
		case ps[i-1].Topic == p.Topic:
			fmt.Fprintf(&b, ",%d", p.Partition)
		default:
			fmt.Fprintf(&b, " %s/%d", p.Topic, p.Partition)
		}
	}
	return b.String()
}

// formatDuration prints a duration rounded for people: 0s, 12s, 3m4s, 5h2m, 6d3h.
func formatDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 24*time.Hour:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	}
	days := d / (24 * time.Hour)
	return fmt.Sprintf("%dd%dh", days, (d-days*24*time.Hour)/time.Hour)
}

// resetFlags are the flags of `strand group reset`.
type resetFlags struct {
	topic      string
	earliest   bool
	latest     bool
	toOffset   int64
	toDatetime string
	shiftBy    int64
	execute    bool
}

func (rf *resetFlags) register(fs *pflag.FlagSet) {
	fs.StringVarP(&rf.topic, "topic", "t", "", "the topic whose offsets to reset (required)")
	fs.BoolVar(&rf.earliest, "to-earliest", false, "reset to each partition's log start")
	fs.BoolVar(&rf.latest, "to-latest", false, "reset to each partition's high-water mark (skip everything)")
	fs.Int64Var(&rf.toOffset, "to-offset", -1, "reset every partition to this offset")
	fs.StringVar(&rf.toDatetime, "to-datetime", "", "reset to the first record at or after this RFC3339 time (replay)")
	fs.Int64Var(&rf.shiftBy, "shift-by", 0, "move each committed offset by N (negative: replay N records)")
	fs.BoolVar(&rf.execute, "execute", false, "apply the plan (without it, only print it)")
}

// validate checks exactly one target was given.
func (rf *resetFlags) validate(fs *pflag.FlagSet) error {
	if rf.topic == "" {
		return usageError("group reset: --topic is required")
	}
	n := 0
	for _, f := range []string{"to-earliest", "to-latest", "to-offset", "to-datetime", "shift-by"} {
		if fs.Changed(f) {
			n++
		}
	}
	if n != 1 {
		return usageError("group reset: want exactly one of --to-earliest, --to-latest, --to-offset N, --to-datetime RFC3339, --shift-by N")
	}
	if fs.Changed("to-offset") && rf.toOffset < 0 {
		return usageError("group reset: --to-offset %d: want 0 or more", rf.toOffset)
	}
	if fs.Changed("to-datetime") {
		if _, err := time.Parse(time.RFC3339Nano, rf.toDatetime); err != nil {
			return usageError("group reset: --to-datetime %q: want an RFC3339 time such as 2026-11-30T18:00:00Z", rf.toDatetime)
		}
	}
	return nil
}

// groupReset prints the plan for the topic's partitions and, with
// --execute, commits it. Refused while the group has members: a running
// consumer would overwrite the reset with its next commit.
func groupReset(ctx context.Context, c *clientlib.Client, w io.Writer, group string, rf resetFlags) error {
	d, err := c.DescribeGroup(ctx, group)
	switch {
	case errors.Is(err, clientlib.ErrGroupNotFound):
		d = clientlib.GroupDescription{Group: group} // a reset may create the group's offsets
	case err != nil:
		return err
	case len(d.Members) > 0:
		return userErr(clientlib.ErrGroupNotEmpty, "group %s has %d active members: stop its consumers before resetting (killed ones leave after the 45 s session timeout)", group, len(d.Members))
	}
	current := map[int32]int64{}
	for _, o := range d.Offsets {
		if o.Topic == rf.topic {
			current[o.Partition] = o.Offset
		}
	}
	bounds, err := c.ListOffsets(ctx, rf.topic, nil, clientlib.OffsetLatest())
	if err != nil {
		return topicErr(rf.topic, err)
	}
	var at []clientlib.ListedOffset
	if rf.toDatetime != "" {
		t, _ := time.Parse(time.RFC3339Nano, rf.toDatetime)
		if at, err = c.ListOffsets(ctx, rf.topic, nil, clientlib.OffsetAtTimestamp(t)); err != nil {
			return topicErr(rf.topic, err)
		}
	}
	plan := map[clientlib.TopicPartition]int64{}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tLOG START\tHIGH WATERMARK\tCURRENT\tNEW")
	for i, b := range bounds {
		if b.Err != nil {
			return wrapErr(b.Err, "%s/%d", rf.topic, b.Partition)
		}
		cur, has := current[b.Partition]
		target := rf.target(b, cur, has, at, i)
		clamped := min(max(target, b.LogStartOffset), b.HighWatermark)
		note := ""
		if clamped != target {
			note = fmt.Sprintf(" (%d is outside the readable range)", target)
		}
		curS := "-"
		if has {
			curS = fmt.Sprint(cur)
		}
		plan[clientlib.TopicPartition{Topic: rf.topic, Partition: b.Partition}] = clamped
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d%s\n", rf.topic, b.Partition, b.LogStartOffset, b.HighWatermark, curS, clamped, note)
	}
	tw.Flush()
	if !rf.execute {
		fmt.Fprintln(w, "dry run: nothing changed; add --execute to apply this plan")
		return nil
	}
	if err := c.CommitOffsets(ctx, group, plan); err != nil {
		return err
	}
	fmt.Fprintf(w, "reset group %s on %s: %s committed as shown\n", group, rf.topic, plural(len(plan), "partition"))
	return nil
}

// target is a partition's new offset before clamping.
func (rf *resetFlags) target(b clientlib.ListedOffset, cur int64, has bool, at []clientlib.ListedOffset, i int) int64 {
	switch {
	case rf.earliest:
		return b.LogStartOffset
	case rf.latest:
		return b.HighWatermark
	case rf.toDatetime != "":
		if i < len(at) && at[i].Err == nil && at[i].Offset >= 0 {
			return at[i].Offset
		}
		return b.HighWatermark // no record at or after the time
	case rf.toOffset >= 0:
		return rf.toOffset
	}
	if !has {
		cur = b.LogStartOffset
	}
	return cur + rf.shiftBy
}
