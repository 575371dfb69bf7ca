package clientlib_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
)

// MovePartitions records a move and returns; the partition then moves to
// the new replicas (Metadata shows the target until it has); a repeated
// node is ErrInvalidReplicaAssignment at once.
func TestAdminMovePartitions(t *testing.T) {
	_, client, ctx := setup(t, []fake.Opt{fake.Nodes(4), fake.Topic("t", 2)})
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
