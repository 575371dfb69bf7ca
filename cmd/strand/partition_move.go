package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/clientlib"
)

// cmdPartition runs `strand partition move`.
func cmdPartition(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError("partition: want a subcommand: move")
	}
	switch sub := args[0]; sub {
	case "-h", "--help", "help":
		return &helpShown{text: groupUsage("partition")}
	case "move":
		return partitionMove(args[1:], stdout)
	default:
		return usageError("partition: unknown subcommand %q: want move", sub)
	}
}

// moveFlags are the flags of `strand partition move`.
type moveFlags struct {
	replicas string
	noWait   bool
	cancel   bool
	wait     time.Duration
	allowRF  bool
}

func (mf *moveFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&mf.replicas, "replicas", "", "the new replica node ids, comma separated; the first is the preferred leader")
	fs.BoolVar(&mf.noWait, "no-wait", false, "return once the move is recorded, without following it")
	fs.BoolVar(&mf.cancel, "cancel", false, "cancel the partition's move in progress: its replicas stay where they are (no --replicas)")
	fs.DurationVar(&mf.wait, "wait", 30*time.Minute, "how long to follow the move before giving up (it goes on in the cluster)")
	fs.BoolVar(&mf.allowRF, "allow-rf-change", false, "allow --replicas to name more or fewer nodes than the partition has (changes its replication factor)")
}

// partitionMove parses `strand partition move TOPIC/P --replicas 1,4,5`,
// records the move and, unless --no-wait, follows it to the end, printing
// the new replicas' progress.
func partitionMove(args []string, stdout io.Writer) error {
	fs := newFlags("partition move")
	var cf clientFlags
	cf.register(fs, 30*time.Second)
	var mf moveFlags
	mf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if len(fs.Args()) != 1 {
		return usageError("partition move: want one TOPIC/PARTITION, e.g. hello/0")
	}
	if mf.cancel == (mf.replicas != "") {
		return usageError("partition move: want either --replicas ID,ID,... or --cancel")
	}
	var move clientlib.PartitionMove
	var err error
	if mf.cancel {
		move.Topic, move.Partition, err = parseTopicPartition(fs.Args()[0])
	} else {
		move, err = parseMove(fs.Args()[0], mf.replicas)
	}
	if err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	if err := checkTopic(ctx, c, move.Topic, move.Partition, cf.timeout); err != nil {
		return err
	}
	if mf.cancel {
		if move, err = cancelMove(ctx, c, move); err != nil {
			return err
		}
	} else if err := checkRFChange(ctx, c, stdout, move, mf.allowRF); err != nil {
		return err
	}
	move.AllowReplicationChange = mf.allowRF
	res, err := c.MovePartitions(ctx, []clientlib.PartitionMove{move})
	if err != nil {
		return err
	}
	r := res[0]
	switch {
	case errors.Is(r.Err, clientlib.ErrReassignmentInProgress):
		return userErr(r.Err, "%s/%d is already moving; wait for that move to finish (strand topic describe %s shows it)",
			move.Topic, move.Partition, move.Topic)
	case r.Err != nil:
		return wrapErr(r.Err, "move %s/%d", move.Topic, move.Partition)
	case r.Target == nil:
		fmt.Fprintf(stdout, "%s/%d is on replicas %s\n", move.Topic, move.Partition, joinIDs(r.Replicas))
		return nil
	}
	if move.Redirect {
		fmt.Fprintf(stdout, "cancelling the move of %s/%d: back to replicas %s\n", move.Topic, move.Partition, joinIDs(r.Target))
	} else {
		fmt.Fprintf(stdout, "moving %s/%d from replicas %s to %s\n", move.Topic, move.Partition, joinIDs(r.Replicas), joinIDs(r.Target))
	}
	if mf.noWait {
		return nil
	}
	wctx, wcancel := context.WithTimeout(context.Background(), mf.wait)
	defer wcancel()
	return followMove(wctx, c, stdout, move, r.Replicas)
}

// checkRFChange refuses a move whose replica list is longer or shorter
// than the partition's, unless allow: `--replicas 1` on a partition of
// three replicas used to drop it to one without a word. With allow it
// says what the factor becomes. The cluster checks the same (a client
// that skips this is refused too).
func checkRFChange(ctx context.Context, c *clientlib.Client, w io.Writer, move clientlib.PartitionMove, allow bool) error {
	info, err := c.Metadata(ctx)
	if err != nil {
		return err
	}
	p, ok := findPartition(info, move.Topic, move.Partition)
	if !ok || len(p.Replicas) == len(move.Replicas) {
		return nil
	}
	if !allow {
		return userErr(clientlib.ErrInvalidReplicaAssignment,
			"%s/%d has %s (%s); --replicas %s names %d: that would change its replication factor from %d to %d. "+
				"Name %d nodes to move it, or add --allow-rf-change to change the factor",
			move.Topic, move.Partition, plural(len(p.Replicas), "replica"), joinIDs(p.Replicas), joinIDs(move.Replicas),
			len(move.Replicas), len(p.Replicas), len(move.Replicas), len(p.Replicas))
	}
	fmt.Fprintf(w, "changing the replication factor of %s/%d from %d to %d (--allow-rf-change)\n",
		move.Topic, move.Partition, len(p.Replicas), len(move.Replicas))
	return nil
}

// cancelMove turns move into the cancel of the partition's move in
// progress: a redirect to its current replicas.
func cancelMove(ctx context.Context, c *clientlib.Client, move clientlib.PartitionMove) (clientlib.PartitionMove, error) {
	info, err := c.Metadata(ctx)
	if err != nil {
		return move, err
	}
	p, ok := findPartition(info, move.Topic, move.Partition)
	if !ok || p.TargetReplicas == nil {
		return move, userErr(nil, "%s/%d has no move in progress: nothing to cancel", move.Topic, move.Partition)
	}
	move.Replicas, move.Redirect = p.Replicas, true
	return move, nil
}

// parseTopicPartition reads TOPIC/PARTITION.
func parseTopicPartition(arg string) (string, int32, error) {
	i := strings.LastIndexByte(arg, '/')
	if i <= 0 {
		return "", 0, usageError("partition move: %q: want TOPIC/PARTITION, e.g. hello/0", arg)
	}
	partition, err := strconv.ParseInt(arg[i+1:], 10, 32)
	if err != nil || partition < 0 {
		return "", 0, usageError("partition move: %q: want TOPIC/PARTITION, e.g. hello/0", arg)
	}
	return arg[:i], int32(partition), nil
}

// parseMove reads TOPIC/PARTITION and the replica list.
func parseMove(arg, replicas string) (clientlib.PartitionMove, error) {
	topic, partition, err := parseTopicPartition(arg)
	if err != nil {
		return clientlib.PartitionMove{}, err
	}
	if replicas == "" {
		return clientlib.PartitionMove{}, usageError("partition move: --replicas is required, e.g. --replicas 1,4,5")
	}
	move := clientlib.PartitionMove{Topic: topic, Partition: partition}
	for _, f := range strings.Split(replicas, ",") {
		id, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil || id == 0 {
			return move, usageError("--replicas %q: want node ids above 0, comma separated", replicas)
		}
		if slices.Contains(move.Replicas, id) {
			return move, usageError("--replicas %q: node %d twice", replicas, id)
		}
		move.Replicas = append(move.Replicas, id)
	}
	return move, nil
}

// followMove polls the metadata and the partition's leader until the
// move from replicas from completed, printing progress when it changes.
func followMove(ctx context.Context, c *clientlib.Client, w io.Writer, move clientlib.PartitionMove, from []uint64) error {
	last, seen := "", false
	for {
		info, err := c.Metadata(ctx)
		if p, ok := findPartition(info, move.Topic, move.Partition); err == nil && ok {
			var settled bool
			settled, seen = moveSettled(p, from, move.Replicas, seen)
			switch {
			case settled && !slices.Equal(p.Replicas, move.Replicas):
				return userErr(nil, "%s/%d is on replicas %s, not %s: another move replaced it", move.Topic, move.Partition,
					joinIDs(p.Replicas), joinIDs(move.Replicas))
			case settled:
				fmt.Fprintf(w, "moved %s/%d: replicas %s\n", move.Topic, move.Partition, joinIDs(p.Replicas))
				return nil
			}
		}
		if line := moveProgressLine(ctx, c, move.Topic, move.Partition); line != "" && line != last {
			fmt.Fprintln(w, "  "+line)
			last = line
		}
		select {
		case <-ctx.Done():
			return userErr(ctx.Err(), "%s/%d is still moving (the cluster goes on with it; strand topic describe %s follows it)",
				move.Topic, move.Partition, move.Topic)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// moveSettled judges one metadata answer about a partition moving from
// replicas from to target: settled once no move is in progress (on target,
// or elsewhere: another move replaced it). An answer still showing from
// with no move comes from a node that has not applied the move yet
// (metadata is read from any node, and followers learn a commit a
// heartbeat later): not settled, until an answer has shown the move
// (seen); after that it means the move rolled back.
func moveSettled(p clientlib.PartitionInfo, from, target []uint64, seen bool) (settled, seenNow bool) {
	switch {
	case p.TargetReplicas != nil:
		return false, true
	case slices.Equal(p.Replicas, target):
		return true, true
	case slices.Equal(p.Replicas, from) && !seen:
		return false, false
	}
	return true, seen
}

// findPartition finds one partition in a metadata answer.
func findPartition(info clientlib.ClusterInfo, topic string, partition int32) (clientlib.PartitionInfo, bool) {
	for _, t := range info.Topics {
		if t.Name != topic {
			continue
		}
		for _, p := range t.Partitions {
			if p.Partition == partition {
				return p, true
			}
		}
	}
	return clientlib.PartitionInfo{}, false
}

// moveProgressLine describes a move's progress from the partition's
// leader ("" when it cannot be had right now).
func moveProgressLine(ctx context.Context, c *clientlib.Client, topic string, partition int32) string {
	logs, err := c.DescribePartitionLogs(ctx, topic, []int32{partition})
	if err != nil || len(logs) != 1 || logs[0].Err != nil || logs[0].MoveTarget == nil {
		return ""
	}
	return formatMoveProgress(logs[0])
}

// formatMoveProgress is one line of a move in progress: each new
// replica's percent caught up and whether it votes yet.
func formatMoveProgress(l clientlib.PartitionLog) string {
	parts := make([]string, 0, len(l.MoveProgress))
	for _, p := range l.MoveProgress {
		state := "learner"
		if p.Voter {
			state = "voter"
		}
		parts = append(parts, fmt.Sprintf("node %d %.0f%% (%s)", p.Node, p.PercentDone(), state))
	}
	if len(parts) == 0 {
		parts = append(parts, "removing old replicas")
	}
	return fmt.Sprintf("moving to %s: %s", joinIDs(l.MoveTarget), strings.Join(parts, ", "))
}
