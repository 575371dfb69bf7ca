package clientlib_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
	"github.com/strandlog/strand/proto/strandpb"
)

// moveTargetOfT0 waits for t/0 of a 4-node fake cluster to have a leader
// and returns a target that swaps its first replica for the node outside it.
func moveTargetOfT0(t *testing.T, client *clientlib.Client, ctx context.Context) []uint64 {
	t.Helper()
	var current []uint64
	eventually(t, "replicas of t/0", func() error {
		info, err := client.Metadata(ctx)
		if err != nil {
			return err
		}
		for _, tm := range info.Topics {
			if tm.Name == "t" && len(tm.Partitions) == 2 && tm.Partitions[0].LeaderID != 0 {
				current = tm.Partitions[0].Replicas
				return nil
			}
		}
		return fmt.Errorf("no leader of t/0 yet")
	})
	target := slices.Clone(current[1:])
	for id := uint64(1); id <= 4; id++ {
		if !slices.Contains(current, id) {
			target = append([]uint64{id}, target...)
		}
	}
	return target
}

// MovePartitions records a move and returns; the partition then moves to
// the new replicas (Metadata shows the target until it has); a repeated
// node is ErrInvalidReplicaAssignment at once.
func TestAdminMovePartitions(t *testing.T) {
	_, client, ctx := setup(t, []fake.Opt{fake.Nodes(4), fake.Topic("t", 2)})
	target := moveTargetOfT0(t, client, ctx)
	res, err := client.MovePartitions(ctx, []clientlib.PartitionMove{
		{Topic: "t", Partition: 0, Replicas: target},
		{Topic: "t", Partition: 1, Replicas: []uint64{1, 1}},
	})
	if err != nil || len(res) != 2 {
		t.Fatalf("move: %v %v", res, err)
	}
	if res[0].Err != nil || !slices.Equal(res[0].Target, target) {
		t.Fatalf("move to %v: %+v", target, res[0])
	}
	if !errors.Is(res[1].Err, clientlib.ErrInvalidReplicaAssignment) {
		t.Fatalf("move to 1,1: %v, want ErrInvalidReplicaAssignment", res[1].Err)
	}
	eventually(t, "the move", func() error {
		info, err := client.Metadata(ctx)
		if err != nil {
			return err
		}
		for _, tm := range info.Topics {
			if tm.Name == "t" && tm.Partitions[0].TargetReplicas == nil && slices.Equal(tm.Partitions[0].Replicas, target) {
				return nil
			}
		}
		return fmt.Errorf("not moved yet: %+v", info.Topics)
	})
}

// A move refused with a retriable error is resent: a node answers each move
// on its own, and one that arrives while the metadata leader hands its
// leadership on is refused NOT_CONTROLLER. `strand node decommission` took
// such a refusal as final and stopped before moving anything (CI, stop 28).
// The move answered at once is not sent again.
func TestAdminMovePartitionsResendsRetriableRefusals(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Nodes(4), fake.Topic("t", 2)})
	target := moveTargetOfT0(t, client, ctx)
	var sent []int // moves per request
	var mu sync.Mutex
	cluster.Control(func(_ uint64, req *strandpb.Request) (fake.Action, bool) {
		if m := req.GetMovePartitions(); m != nil {
			mu.Lock()
			sent = append(sent, len(m.GetMoves()))
			mu.Unlock()
		}
		return fake.Action{}, false
	})
	cluster.Control(fake.FailTimes(2, strandpb.ErrorCode_ERROR_CODE_NOT_CONTROLLER, fake.IsMovePartitions))
	res, err := client.MovePartitions(ctx, []clientlib.PartitionMove{
		{Topic: "t", Partition: 0, Replicas: target},
	})
	if err != nil || len(res) != 1 || res[0].Err != nil || !slices.Equal(res[0].Target, target) {
		t.Fatalf("move after two NOT_CONTROLLER refusals: %+v, %v; want the move recorded", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(sent, []int{1, 1, 1}) {
		t.Fatalf("moves per request %v, want [1 1 1]", sent)
	}
}
