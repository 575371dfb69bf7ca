package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/node"
)

// nodeSubcommands are the subcommands of `strand node`.
var nodeSubcommands = []string{"list", "add", "decommission"}

// cmdNode runs `strand node list|add|decommission`.
func cmdNode(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError("node: want a subcommand: %s", strings.Join(nodeSubcommands, ", "))
	}
	sub, rest := args[0], args[1:]
	switch {
	case sub == "-h" || sub == "--help" || sub == "help":
		return &helpShown{text: groupUsage("node")}
	case !slices.Contains(nodeSubcommands, sub):
		return usageError("node: unknown subcommand %q: want %s", sub, strings.Join(nodeSubcommands, ", "))
	}
	fs := newFlags("node " + sub)
	var cf clientFlags
	cf.register(fs, 10*time.Minute)
	var format outputFormat
	if sub == "list" {
		format.register(fs)
		return nodeList(fs, &cf, rest, stdout, &format)
	}
	id := fs.Uint64("id", 0, "the node's id")
	address := fs.String("address", "", "add: HOST:PORT the node listens on for clients and peers")
	rack := fs.String("rack", "", "add: the node's failure domain")
	dryRun := fs.Bool("dry-run", false, "decommission: print the moves, change nothing")
	var plan planFlags
	if sub == "decommission" {
		plan.register(fs)
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	if err := plan.validate(*dryRun); err != nil {
		return err
	}
	if sub == "decommission" && fs.NArg() == 1 && *id == 0 {
		n, err := strconv.ParseUint(fs.Arg(0), 10, 64)
		if err != nil {
			return usageError("node decommission: %q is not a node id", fs.Arg(0))
		}
		*id = n
	} else if fs.NArg() != 0 {
		return usageError("node %s: unexpected arguments %q", sub, fs.Args())
	}
	if *id == 0 {
		return usageError("node %s: give the node's id (--id N)", sub)
	}
	if sub == "add" {
		if _, _, err := net.SplitHostPort(*address); err != nil {
			return usageError("node add: --address %q: want HOST:PORT", *address)
		}
	}
	return cf.run(func(ctx context.Context, c *clientlib.Client) error {
		if sub == "add" {
			if err := c.AddNode(ctx, *id, *address, *rack); err != nil {
				return wrapErr(err, "add node %d", *id)
			}
			fmt.Fprintf(stdout, "node %d registered at %s; start it with: strand serve --id %d --listen %s --join %s --data-dir DIR\n",
				*id, *address, *id, *address, strings.Join(cf.brokers, ","))
			return nil
		}
		return decommission(ctx, c, stdout, *id, *dryRun, plan)
	})
}

// nodeList runs `strand node list`: every registered node with its
// address, rack, membership state, metadata role and replica counts.
func nodeList(fs *pflag.FlagSet, cf *clientFlags, args []string, w io.Writer, format *outputFormat) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("node list takes no arguments, got %q", fs.Args())
	}
	if err := format.validate(); err != nil {
		return err
	}
	return cf.run(func(ctx context.Context, c *clientlib.Client) error {
		members, err := c.ClusterMembers(ctx)
		if err != nil {
			return wrapErr(err, "cluster members")
		}
		if format.json() {
			type nodeEntry struct {
				ID               uint64 `json:"id"`
				Address          string `json:"address"`
				Rack             string `json:"rack,omitempty"`
				State            string `json:"state"`
				MetadataRole     string `json:"metadata_role"`
				Fenced           bool   `json:"fenced"`
				Replicas         int32  `json:"replicas"`
				PreferredLeaders int32  `json:"preferred_leaders"`
			}
			out := make([]nodeEntry, 0, len(members.Members))
			for _, m := range members.Members {
				out = append(out, nodeEntry{ID: m.ID, Address: m.Address, Rack: m.Rack, State: m.State, MetadataRole: m.Role,
					Fenced: m.Fenced, Replicas: m.Replicas, PreferredLeaders: m.PreferredLeaders})
			}
			return writeJSON(w, out)
		}
		tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tADDRESS\tRACK\tSTATE\tMETADATA\tREPLICAS\tPREFERRED LEADERS")
		for _, m := range members.Members {
			rack := m.Rack
			if rack == "" {
				rack = "-"
			}
			state := m.State
			if m.Fenced && state != "decommissioning" {
				state += " (fenced)"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\n", m.ID, m.Address, rack, state, m.Role, m.Replicas, m.PreferredLeaders)
		}
		return tw.Flush()
	})
}

// planFlags are the flags of commands that print a plan of partition
// moves (cluster rebalance, node decommission).
type planFlags struct {
	internal bool
	format   outputFormat
}

func (p *planFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&p.internal, "internal", false, "list the moves of internal topics (__strand_offsets) too; they are made either way")
	p.format.register(fs)
}

// validate refuses a bad --format, and --format json without --dry-run:
// JSON is the plan, and a command that applies it prints progress.
func (p *planFlags) validate(dryRun bool) error {
	if err := p.format.validate(); err != nil {
		return err
	}
	if p.format.json() && !dryRun {
		return usageError("--format json prints the plan: add --dry-run")
	}
	return nil
}

// printPlan prints a plan's moves: as JSON (every move, each marked
// internal or not), or one line per move with the internal topics' moves
// counted unless p.internal.
func printPlan(w io.Writer, header string, moves []metadata.Move, p planFlags) error {
	if p.format.json() {
		type moveEntry struct {
			Topic     string   `json:"topic"`
			Partition int32    `json:"partition"`
			From      []uint64 `json:"from"`
			To        []uint64 `json:"to"`
			Internal  bool     `json:"internal"`
		}
		out := make([]moveEntry, 0, len(moves))
		for _, m := range moves {
			out = append(out, moveEntry{Topic: m.Topic, Partition: m.Partition, From: m.From, To: m.To, Internal: isInternalTopic(m.Topic)})
		}
		return writeJSON(w, struct {
			DryRun bool        `json:"dry_run"`
			Moves  []moveEntry `json:"moves"`
		}{true, out})
	}
	fmt.Fprintln(w, header)
	listMoves(w, moves, p.internal)
	return nil
}

// decommission drains node id: fences it, moves every replica it holds to
// the planned nodes, waits until no partition lists it, then removes it
// from the cluster (the metadata leader takes it out of the metadata
// group).
func decommission(ctx context.Context, c *clientlib.Client, w io.Writer, id uint64, dryRun bool, plan planFlags) error {
	members, err := c.ClusterMembers(ctx)
	if err != nil {
		return wrapErr(err, "cluster members")
	}
	i := slices.IndexFunc(members.Members, func(m clientlib.Member) bool { return m.ID == id })
	switch {
	case i < 0:
		return userErr(clientlib.ErrUnknownNode, "node %d is not registered (strand cluster lists the nodes)", id)
	case members.Members[i].State == "removed":
		return userErr(clientlib.ErrNodeRemoved, "node %d was already removed", id)
	}
	nodes, parts, err := planInput(ctx, c, members, id)
	if err != nil {
		return err
	}
	moves, err := metadata.PlanDecommission(nodes, parts, id)
	if err != nil {
		return fmt.Errorf("plan decommission of node %d: %w (add a node first)", id, err)
	}
	if dryRun {
		return printPlan(w, fmt.Sprintf("decommission node %d (dry run, nothing changed): %s", id, plural(len(moves), "partition move")), moves, plan)
	}
	if err := c.SetNodeDecommissioning(ctx, id); err != nil {
		return wrapErr(err, "mark node %d decommissioning", id)
	}
	fmt.Fprintf(w, "node %d decommissioning (fenced: no new replicas); %s\n", id, plural(len(moves), "partition move"))
	listMoves(w, moves, plan.internal)
	if len(moves) > 0 {
		if err := movePartitions(ctx, c, moves); err != nil {
			return fmt.Errorf("move the replicas off node %d: %w (node %d stays decommissioning; rerun to resume)", id, err, id)
		}
		if err := waitReplicas(ctx, c, moves); err != nil {
			return err
		}
	}
	if err := c.RemoveNode(ctx, id); err != nil {
		return wrapErr(err, "remove node %d", id)
	}
	if err := waitRole(ctx, c, id, "none"); err != nil {
		return err
	}
	fmt.Fprintf(w, "node %d removed: it holds no replica and is out of the metadata group; stop its process\n", id)
	return nil
}

// planInput reads the membership and the replica lists into the
// planners' inputs: nodes active or joining and unfenced are eligible,
// except drain (0: none).
func planInput(ctx context.Context, c *clientlib.Client, members clientlib.Members, drain uint64) ([]metadata.PlanNode, []metadata.PlanPartition, error) {
	info, err := c.Metadata(ctx)
	if err != nil {
		return nil, nil, wrapErr(err, "metadata")
	}
	var nodes []metadata.PlanNode
	for _, m := range members.Members {
		eligible := (m.State == "active" || m.State == "joining") && !m.Fenced && m.ID != drain
		nodes = append(nodes, metadata.PlanNode{ID: m.ID, Rack: m.Rack, Eligible: eligible})
	}
	var parts []metadata.PlanPartition
	for _, t := range info.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, metadata.PlanPartition{Topic: t.Name, Partition: p.Partition, Replicas: slices.Clone(p.Replicas)})
		}
	}
	return nodes, parts, nil
}

// listMoves prints one line per move: topic/partition, from, to; the
// moves of internal topics (__strand_offsets) are only counted unless
// internal.
func listMoves(w io.Writer, moves []metadata.Move, internal bool) {
	hidden := 0
	for _, m := range moves {
		if !internal && isInternalTopic(m.Topic) {
			hidden++
			continue
		}
		fmt.Fprintf(w, "  %s/%d  [%s] -> [%s]\n", m.Topic, m.Partition, joinIDs(m.From), joinIDs(m.To))
	}
	if hidden > 0 {
		fmt.Fprintf(w, "  and %s of internal topics (--internal lists them)\n", plural(hidden, "move"))
	}
}

// waitReplicas polls the metadata until every moved partition lists its
// planned replicas (bounded by ctx).
func waitReplicas(ctx context.Context, c *clientlib.Client, moves []metadata.Move) error {
	for {
		info, err := c.Metadata(ctx)
		if err == nil && movesDone(info, moves) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("partition moves did not finish before --timeout: %w (they go on; rerun to wait again)", ctx.Err())
		case <-time.After(500 * time.Millisecond): // polling the cluster's metadata
		}
	}
}

// movesDone reports whether every move's partition lists exactly its To.
func movesDone(info clientlib.ClusterInfo, moves []metadata.Move) bool {
	for _, m := range moves {
		done := false
		for _, t := range info.Topics {
			for _, p := range t.Partitions {
				if t.Name == m.Topic && p.Partition == m.Partition {
					done = slices.Equal(p.Replicas, m.To)
				}
			}
		}
		if !done {
			return false
		}
	}
	return true
}

// waitRole polls the membership until node id has role (bounded by ctx).
func waitRole(ctx context.Context, c *clientlib.Client, id uint64, role string) error {
	for {
		members, err := c.ClusterMembers(ctx)
		if err == nil {
			for _, m := range members.Members {
				if m.ID == id && m.Role == role {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %d did not become %s in the metadata group before --timeout: %w", id, role, ctx.Err())
		case <-time.After(200 * time.Millisecond): // polling the cluster's membership
		}
	}
}

// joinTimeout bounds serve --join's registration.
const joinTimeout = 30 * time.Second

// joinCluster registers node id at address through the cluster at via
// and returns the cluster's nodes (this one included, with rack), the
// peers the new node starts talking to.
func joinCluster(via string, id uint64, address, rack string) ([]node.Peer, error) {
	cf := clientFlags{brokers: strings.Split(via, ","), timeout: joinTimeout}
	c, err := cf.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
	defer cancel()
	if err := c.AddNode(ctx, id, address, rack); err != nil {
		return nil, wrapErr(err, "join the cluster at %s as node %d", via, id)
	}
	info, err := c.Metadata(ctx)
	if err != nil {
		return nil, wrapErr(err, "metadata from %s", via)
	}
	nodes := []node.Peer{{ID: node.NodeID(id), Address: address, Rack: rack}}
	for _, n := range info.Nodes {
		if n.ID != id {
			nodes = append(nodes, node.Peer{ID: node.NodeID(n.ID), Address: n.Address, Rack: n.Rack})
		}
	}
	sortPeers(nodes)
	return nodes, nil
}
