package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/proto/strandpb"
)

// txnSubcommands are strand txn's subcommands.
var txnSubcommands = []string{"list", "describe", "abort", "producers"}

// txnStates are the state names ListTransactions filters on (Kafka's).
var txnStates = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"}

// cmdTxn runs strand txn SUBCOMMAND: the transactional ids the
// coordinators hold (rpk cluster txn, kafka-transactions.sh), and the
// producers each partition's leader remembers.
func cmdTxn(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError("txn: want a subcommand: %s", strings.Join(txnSubcommands, ", "))
	}
	sub, rest := args[0], args[1:]
	switch {
	case sub == "-h" || sub == "--help" || sub == "help":
		return &helpShown{text: groupUsage("txn")}
	case !slices.Contains(txnSubcommands, sub):
		return usageError("txn: unknown subcommand %q: want %s", sub, strings.Join(txnSubcommands, ", "))
	}
	fs := newFlags("txn " + sub)
	var cf clientFlags
	cf.register(fs, 30*time.Second)
	var format outputFormat
	format.register(fs)
	var states []string
	partition := int32(-1)
	switch sub {
	case "list":
		fs.StringSliceVar(&states, "state", nil, "list only ids in these states (repeatable or comma-separated): "+strings.Join(txnStates, ", "))
	case "producers":
		fs.Int32VarP(&partition, "partition", "p", -1, "describe only this partition (-1: every partition)")
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	names := fs.Args()
	if err := txnArgs(sub, names, states); err != nil {
		return err
	}
	if err := format.validate(); err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	switch sub {
	case "list":
		return txnList(ctx, c, stdout, format, states)
	case "abort":
		return txnErr(names[0], txnAbort(ctx, c, stdout, format, names[0]))
	case "producers":
		return txnProducers(ctx, c, stdout, format, names[0], partition)
	}
	return txnErr(names[0], txnDescribe(ctx, c, stdout, format, names[0]))
}

// txnArgs checks a subcommand's arguments: list takes none, producers a
// topic, the others one transactional id.
func txnArgs(sub string, names, states []string) error {
	want := "one transactional id"
	switch sub {
	case "list":
		want = "no argument"
	case "producers":
		want = "one topic"
	}
	if (sub == "list") != (len(names) == 0) || len(names) > 1 {
		return usageError("txn %s: want %s", sub, want)
	}
	for _, s := range states {
		if !slices.Contains(txnStates, s) {
			return usageError("--state %q: want one of %s", s, strings.Join(txnStates, ", "))
		}
	}
	return nil
}

// txnErr says what an unknown transactional id, or one without a
// transaction to abort, means for the user.
func txnErr(id string, err error) error {
	var se *clientlib.Error
	switch {
	case !errors.As(err, &se):
	case se.Code == strandpb.ErrorCode_ERROR_CODE_TRANSACTIONAL_ID_NOT_FOUND:
		return userErr(err, "transactional id %q is not known to its coordinator (never initialized, or expired: 'strand txn list' shows the known ones)", id)
	case se.Code == strandpb.ErrorCode_ERROR_CODE_INVALID_TXN_STATE:
		return userErr(err, "transactional id %q has no open transaction to abort (none open, or it is being committed: 'strand txn describe %s' shows its state)", id, id)
	}
	return err
}

// txnAbort aborts the id's open transaction and says what the abort
// fenced and where its markers go.
func txnAbort(ctx context.Context, c *clientlib.Client, w io.Writer, format outputFormat, id string) error {
	a, err := c.AbortTransactionByID(ctx, id)
	if err != nil {
		return err
	}
	parts := make([]string, 0, len(a.Partitions))
	for _, tp := range a.Partitions {
		parts = append(parts, fmt.Sprintf("%s/%d", tp.Topic, tp.Partition))
	}
	if format.json() {
		type entry struct {
			ID            string   `json:"transactional_id"`
			ProducerID    int64    `json:"producer_id"`
			ProducerEpoch int16    `json:"producer_epoch"`
			Partitions    []string `json:"partitions"`
			Groups        []string `json:"groups"`
			Already       bool     `json:"already_aborting"`
		}
		return writeJSON(w, entry{ID: a.ID, ProducerID: a.ProducerID, ProducerEpoch: a.ProducerEpoch, Partitions: parts,
			Groups: append([]string{}, a.Groups...), Already: a.Already})
	}
	if a.Already {
		fmt.Fprintf(w, "transactional id %s: its transaction was already being aborted (producer %d, abort epoch %d)\n", a.ID, a.ProducerID, a.ProducerEpoch)
	} else {
		fmt.Fprintf(w, "transactional id %s: transaction aborted; producer %d fenced below epoch %d\n", a.ID, a.ProducerID, a.ProducerEpoch)
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "abort markers to: %s\n", strings.Join(parts, ", "))
	}
	if len(a.Groups) > 0 {
		fmt.Fprintf(w, "offsets dropped for groups: %s\n", strings.Join(a.Groups, ", "))
	}
	fmt.Fprintf(w, "'strand txn describe %s' shows CompleteAbort once every marker is written\n", a.ID)
	return nil
}

// txnList prints every transactional id, its producer id and state.
func txnList(ctx context.Context, c *clientlib.Client, w io.Writer, format outputFormat, states []string) error {
	ts, err := c.ListTransactions(ctx, states...)
	if err != nil {
		return err
	}
	if format.json() {
		type entry struct {
			ID         string `json:"transactional_id"`
			ProducerID int64  `json:"producer_id"`
			State      string `json:"state"`
		}
		out := make([]entry, 0, len(ts))
		for _, t := range ts {
			out = append(out, entry{ID: t.ID, ProducerID: t.ProducerID, State: t.State})
		}
		return writeJSON(w, out)
	}
	if len(ts) == 0 {
		fmt.Fprintln(w, "no transactional ids")
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TRANSACTIONAL ID\tPRODUCER ID\tSTATE")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", t.ID, t.ProducerID, t.State)
	}
	return tw.Flush()
}

// txnDescribe prints one transactional id as its coordinator holds it.
func txnDescribe(ctx context.Context, c *clientlib.Client, w io.Writer, format outputFormat, id string) error {
	d, err := c.DescribeTransaction(ctx, id)
	if err != nil {
		return err
	}
	parts := make([]string, 0, len(d.Partitions))
	for _, tp := range d.Partitions {
		parts = append(parts, fmt.Sprintf("%s/%d", tp.Topic, tp.Partition))
	}
	if format.json() {
		type entry struct {
			ID            string   `json:"transactional_id"`
			State         string   `json:"state"`
			ProducerID    int64    `json:"producer_id"`
			ProducerEpoch int16    `json:"producer_epoch"`
			TimeoutMs     int64    `json:"timeout_ms"`
			StartedMs     int64    `json:"started_ms"`
			Partitions    []string `json:"partitions"`
			Groups        []string `json:"groups"`
		}
		started := int64(-1)
		if !d.Started.IsZero() {
			started = d.Started.UnixMilli()
		}
		return writeJSON(w, entry{ID: d.ID, State: d.State, ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch,
			TimeoutMs: d.Timeout.Milliseconds(), StartedMs: started, Partitions: parts, Groups: append([]string{}, d.Groups...)})
	}
	fmt.Fprintf(w, "transactional id %s: %s, producer %d epoch %d, timeout %s\n", d.ID, d.State, d.ProducerID, d.ProducerEpoch, formatDuration(d.Timeout))
	if !d.Started.IsZero() {
		fmt.Fprintf(w, "open since %s (%s ago)\n", d.Started.UTC().Format(time.RFC3339), formatDuration(time.Since(d.Started)))
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "partitions: %s\n", strings.Join(parts, ", "))
	}
	if len(d.Groups) > 0 {
		fmt.Fprintf(w, "groups: %s\n", strings.Join(d.Groups, ", "))
	}
	return nil
}
