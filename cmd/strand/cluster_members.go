package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/metadata"
)

// movePartitions hands the planned moves to the cluster's partition-move
// API (learner catch-up, then a joint configuration change per partition)
// and returns once the metadata group recorded them all; callers then wait
// for the metadata to list the new replicas. Replicas keep the plan's
// order: the first is the preferred leader.
func movePartitions(ctx context.Context, c *clientlib.Client, moves []metadata.Move) error {
	req := make([]clientlib.PartitionMove, len(moves))
	for i, m := range moves {
		req[i] = clientlib.PartitionMove{Topic: m.Topic, Partition: m.Partition, Replicas: m.To}
	}
	res, err := c.MovePartitions(ctx, req)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("%s/%d: %w", r.Topic, r.Partition, r.Err)
		}
	}
	return nil
}

// clusterSubcommands are the subcommands of `strand cluster` cmdClusterSub
// runs (without one, it prints the cluster; health: cluster_health.go).
var clusterSubcommands = []string{"rebalance", "leaders", "wait"}

// cmdClusterSub runs `strand cluster rebalance|leaders`.
func cmdClusterSub(sub string, args []string, stdout io.Writer) error {
	if sub == "wait" {
		return cmdClusterWait(args, stdout)
	}
	fs := newFlags("cluster " + sub)
	var cf clientFlags
	cf.register(fs, 10*time.Minute)
	dryRun := fs.Bool("dry-run", false, "rebalance: print the plan, change nothing")
	balance := fs.Bool("balance", false, "leaders: move each partition's leadership to its preferred replica when caught up")
	var plan planFlags
	if sub == "rebalance" {
		plan.register(fs)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := plan.validate(*dryRun); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("cluster %s takes no arguments, got %q", sub, fs.Args())
	}
	switch {
	case sub == "leaders" && *dryRun:
		return usageError("cluster leaders has no --dry-run: without --balance it only lists what --balance would move")
	case sub == "rebalance" && *balance:
		return usageError("--balance is for cluster leaders; cluster rebalance moves replicas and preferred leaders (--dry-run prints the plan)")
	}
	return cf.run(func(ctx context.Context, c *clientlib.Client) error {
		if sub == "leaders" {
			return clusterLeaders(ctx, c, stdout, *balance)
		}
		return rebalance(ctx, c, stdout, *dryRun, plan)
	})
}

// rebalance plans an even spread of replicas and preferred leaders over
// the eligible nodes, prints it, and unless dryRun applies it through the
// moves and waits for the metadata to show it.
func rebalance(ctx context.Context, c *clientlib.Client, w io.Writer, dryRun bool, plan planFlags) error {
	members, err := c.ClusterMembers(ctx)
	if err != nil {
		return wrapErr(err, "cluster members")
	}
	nodes, parts, err := planInput(ctx, c, members, 0)
	if err != nil {
		return err
	}
	moves := metadata.PlanRebalance(nodes, parts)
	switch {
	case len(moves) == 0 && !plan.format.json():
		fmt.Fprintln(w, "balanced: nothing to move")
		return nil
	case dryRun:
		return printPlan(w, fmt.Sprintf("rebalance (dry run, nothing changed): %s", plural(len(moves), "partition move")), moves, plan)
	}
	fmt.Fprintf(w, "rebalance: %s\n", plural(len(moves), "partition move"))
	listMoves(w, moves, plan.internal)
	if err := movePartitions(ctx, c, moves); err != nil {
		return fmt.Errorf("rebalance: %w", err)
	}
	if err := waitReplicas(ctx, c, moves); err != nil {
		return err
	}
	fmt.Fprintln(w, "rebalanced")
	return nil
}

// clusterLeaders prints the partitions not led by their preferred replica;
// with balance it asks every active node to hand over the leaderships it
// holds and prints what moved.
func clusterLeaders(ctx context.Context, c *clientlib.Client, w io.Writer, balance bool) error {
	info, err := c.Metadata(ctx)
	if err != nil {
		return wrapErr(err, "metadata")
	}
	if !balance {
		off := 0
		for _, t := range info.Topics {
			for _, p := range t.Partitions {
				if len(p.Replicas) > 0 && p.LeaderID != p.Replicas[0] {
					fmt.Fprintf(w, "  %s/%d  leader %s, preferred %d\n", t.Name, p.Partition, idOrNone(p.LeaderID), p.Replicas[0])
					off++
				}
			}
		}
		fmt.Fprintf(w, "%s not led by their preferred replica (strand cluster leaders --balance moves them)\n", plural(off, "partition"))
		return nil
	}
	members, err := c.ClusterMembers(ctx)
	if err != nil {
		return wrapErr(err, "cluster members")
	}
	moved, lagging := 0, int32(0)
	for _, m := range members.Members {
		if m.State == "removed" {
			continue
		}
		transfers, skipped, err := c.ElectPreferredLeaders(ctx, m.Address)
		if err != nil {
			fmt.Fprintf(w, "  node %d (%s): %s\n", m.ID, m.Address, userMessage(err))
			continue
		}
		lagging += skipped
		for _, t := range transfers {
			fmt.Fprintf(w, "  %s/%d  leader %d -> %d\n", t.Topic, t.Partition, t.From, t.To)
			moved++
		}
	}
	fmt.Fprintf(w, "%s started", plural(moved, "leadership transfer"))
	if lagging > 0 {
		fmt.Fprintf(w, "; %s left: preferred replica not caught up", plural(int(lagging), "partition"))
	}
	fmt.Fprintln(w)
	return nil
}

// printMembers prints the nodes with their membership state, liveness as
// the answering node (the metadata leader) sees it, and metadata role.
func printMembers(w io.Writer, members clientlib.Members, now time.Time) {
	for _, m := range members.Members {
		state := m.State
		if m.State != "removed" { // a removed node is not watched
			state += "  " + livenessText(m, now)
		}
		line := fmt.Sprintf("  %d  %s  %s  metadata %s  replicas %d  preferred leaders %d", m.ID, m.Address, state,
			m.Role, m.Replicas, m.PreferredLeaders)
		if m.Rack != "" {
			line += "  rack " + m.Rack
		}
		if note := diskNote(m.DiskFull, m.DiskStalled); note != "" {
			line += "  " + note
		}
		fmt.Fprintln(w, line)
	}
}
