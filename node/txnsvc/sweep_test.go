package txnsvc

import (
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

// TestSweepProposes shows the sweep's decisions from a Coordinator and the
// node's clocks alone: a transaction past its timeout is aborted once (its
// key in flight until answered; an abort that prepared drives the
// markers), markers are driven on every sweep, a snapshot is written once
// SnapshotEvery commands applied, a refill is asked for when less than
// half a block is left, and idle ids are expired every ExpireEvery ticks.
func TestSweepProposes(t *testing.T) {
	co := New(1, 1, 0, 0)
	co.State.Apply(grantCmd(0, 1000, 10))
	co.State.Apply(initCmd(0))
	d, err := co.State.Describe("app")
	if err != nil {
		t.Fatal(err)
	}
	if r := co.State.Apply(addOffsetsCmd(0, d.Producer)); r.Err != nil {
		t.Fatal(r.Err)
	}
	co.SinceSnapshot, co.OwnApplied = 3, true // one of its own commands read back: snapshots may go
	var proposed []*strandpb.TxnCommand
	var dones []func(Applied)
	drives, refills := 0, 0
	sweep := func(nowMs int64, now uint64) {
		Sweep{
			Propose: func(cmd *strandpb.TxnCommand, done func(Applied)) {
				proposed, dones = append(proposed, cmd), append(dones, done)
			},
			DriveMarkers:      func() { drives++ },
			RefillProducerIDs: func() { refills++ },
			NowMs:             nowMs, Now: now, SnapshotEvery: 3, ProducerIDBlock: 100, IDRetentionMs: 1 << 40, ExpireEvery: 10,
		}.Run(co)
	}
	sweep(1000, 5) // nothing timed out, ids not due for expiry
	if len(proposed) != 1 || proposed[0].GetSnapshot() == nil || drives != 1 || refills != 1 {
		t.Fatalf("first sweep proposed %v, drove markers %d times, refilled %d times; want a snapshot, 1, 1", proposed, drives, refills)
	}
	sweep(1000+60_001, 10) // app timed out; ids due
	sweep(1000+60_002, 11) // both in flight: not proposed again
	if len(proposed) != 3 || proposed[1].GetTimeoutAbort().GetTransactionalId() != "app" ||
		proposed[2].GetExpireIdsRetentionMs() == 0 || co.LastExpire != 10 {
		t.Fatalf("proposed %v (last expire %d), want the snapshot, app's abort, the ids' expiry at 10", proposed, co.LastExpire)
	}
	proposed[1].NowMs = 1000 + 60_001 // the node stamps its wall clock
	dones[1](Applied{Res: co.State.Apply(proposed[1])})
	if drives != 4 || co.InFlight["\x00timeout\x00app"] {
		t.Fatalf("after the abort prepared: drove markers %d times (want 4), in flight %v", drives, co.InFlight["\x00timeout\x00app"])
	}
}
