package server

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// A partition move in progress shows in /api/cluster (from, to, the
// leader and each added node's catch-up) and in /metrics
// (strand_partition_move_progress_ratio on the leader,
// strand_partition_moves_in_progress). The move adds a stopped node, so it
// stays in progress with its learner at 0%. A listener that does not serve
// the leader shows the move with its reported leader and progress -1.
func TestAdminShowsMoveInProgress(t *testing.T) {
	servers := startTestCluster(t, 3)
	c := newTestClient(t, servers[0])
	ctx, cancel := context.WithTimeout(context.Background(), adminTestWait)
	defer cancel()
	if err := c.CreateTopic(ctx, "mv", 1, 2, nil); err != nil {
		t.Fatal(err)
	}
	produceAndCommit(t, c, "mv", 1, 5, "", 0)
	info, err := c.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var p clientlib.PartitionInfo
	for _, tm := range info.Topics {
		if tm.Name == "mv" && len(tm.Partitions) == 1 {
			p = tm.Partitions[0]
		}
	}
	if len(p.Replicas) != 2 {
		t.Fatalf("mv/0 replicas %v", p.Replicas)
	}
	var out uint64 // the node outside the partition
	for id := uint64(1); id <= 3; id++ {
		if !slices.Contains(p.Replicas, id) {
			out = id
		}
	}
	var served []*Server
	for _, s := range servers {
		if uint64(s.id()) != out {
			served = append(served, s)
		}
	}
	a := startTestAdmin(t, served...)
	if err := servers[out-1].Close(); err != nil {
		t.Fatal(err)
	}
	target := append(slices.Clone(p.Replicas), out)
	c = newTestClient(t, served[0])
	// Two replicas to three: the move changes the factor, on purpose.
	res, err := c.MovePartitions(ctx, []clientlib.PartitionMove{{Topic: "mv", Partition: 0, Replicas: target, AllowReplicationChange: true}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("move: %v %+v", err, res)
	}
	var cluster apiCluster
	deadline := time.Now().Add(adminTestWait)
	for {
		getJSONInto(t, a.URL()+"api/cluster", &cluster)
		if len(cluster.Moves) == 1 && cluster.Moves[0].Leader != 0 && len(cluster.Moves[0].Adding) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no move with its leader's progress in /api/cluster: %+v", cluster.Moves)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition
	}
	m := cluster.Moves[0]
	want := apiMoveTarget{Node: out, Percent: 0}
	if m.Topic != "mv" || m.Partition != 0 || !slices.Equal(m.From, p.Replicas) || !slices.Equal(m.To, target) ||
		m.Percent != 0 || m.Adding[0] != want {
		t.Fatalf("move %+v, want mv/0 %v -> %v at 0%% adding %+v", m, p.Replicas, target, want)
	}
	// A listener that does not serve the leader shows the move, its
	// reported leader and "unknown" progress.
	// The leader reaches the other node through the metadata group's
	// leader reports, a moment after the leader's own listener has it.
	i := slices.IndexFunc(served, func(s *Server) bool { return uint64(s.id()) != m.Leader })
	otherURL := startTestAdmin(t, served[i]).URL() + "api/cluster"
	var other apiCluster
	for {
		getJSONInto(t, otherURL, &other)
		if len(other.Moves) != 1 || other.Moves[0].Leader == m.Leader || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling a condition
	}
	if len(other.Moves) != 1 || other.Moves[0].Percent != -1 || other.Moves[0].Adding != nil || other.Moves[0].Leader != m.Leader {
		t.Fatalf("node %d's listener: moves %+v, want the move at -1%% led by %d", served[i].id(), other.Moves, m.Leader)
	}
	fams := scrape(t, a)
	if got := sum(fams, "strand_partition_move_progress_ratio", "topic", "mv"); got != 0 || len(fams["strand_partition_move_progress_ratio"].GetMetric()) != 1 {
		t.Fatalf("strand_partition_move_progress_ratio: %v", fams["strand_partition_move_progress_ratio"])
	}
	if got := sum(fams, "strand_partition_moves_in_progress"); got != float64(len(served)) {
		t.Fatalf("strand_partition_moves_in_progress summed over %d nodes = %v, want one each", len(served), got)
	}
}
