package node

import (
	"log/slog"

	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/node/txnsvc"
	"github.com/strandlog/strand/proto/strandpb"
)

// TxnMarker is one marker of a decided transaction: a commit or abort
// control record for one partition, or the completion of one group's
// transactional offsets (Group set, Partition zero).
type TxnMarker struct {
	TransactionalID string
	Commit          bool
	// Producer is the producer id and marker epoch (the transaction's
	// epoch + 1): the marker fences every older epoch in the partition.
	Producer txn.Producer
	// KeptEpoch: the transaction ended at its own epoch (a transactions v1
	// client), so Producer's epoch is also the one it ran at.
	KeptEpoch bool
	Partition TopicPartition
	Group     string
	// CoordinatorEpoch is the coordinator's epoch (its partition's raft
	// term, coordinatorEpoch): a partition refuses a marker of an older
	// coordinator epoch than its last for the producer.
	CoordinatorEpoch int32
}

// TxnMarkerWriter is the seam between the transaction coordinator and the
// partition side: it makes one marker durable. The coordinator calls it
// for every partition and group of a prepared transaction (after the
// decision is durable in its log), again after a fail-over for those not
// yet reported, and again after an error: so WriteTxnMarker must be
// idempotent (a marker already written for this producer id and epoch is
// done). It runs on the Core's loop; done must be called once, on the loop
// (from a completion of the Core's own calls), with nil when the marker is
// durable; the coordinator then proposes MarkerWritten, and the last one
// moves the transaction to CompleteCommit or CompleteAbort.
type TxnMarkerWriter interface {
	WriteTxnMarker(c *Core, m TxnMarker, done func(error))
}

// driveMarkers starts the writes of every marker Pending lists that is not
// in flight yet (txnsvc.Coordinator.DriveMarkers decides which): after an
// EndTxn, a timeout or fencing abort, and on every sweep, so a new
// coordinator finishes what its predecessor decided.
func (c *Core) driveMarkers(g *group, co *txnsvc.Coordinator) {
	w := c.cfg.Txn.Markers
	if w == nil {
		return
	}
	epoch := coordinatorEpoch(co.Term)
	co.DriveMarkers(func(m txnsvc.Marker, key string) {
		tm := TxnMarker{TransactionalID: m.TransactionalID, Commit: m.Commit, Producer: m.Producer, KeptEpoch: m.KeptEpoch,
			Partition: TopicPartition{Topic: m.Topic, Partition: m.Partition}, Group: m.Group, CoordinatorEpoch: epoch}
		w.WriteTxnMarker(c, tm, func(err error) { c.markerDone(g, co, key, tm, err) })
	})
}

// markerDone reports a written marker to the coordinator's log. A failed
// write, or a report that did not apply, clears the flight so the next
// sweep writes it again.
func (c *Core) markerDone(g *group, co *txnsvc.Coordinator, key string, m TxnMarker, err error) {
	if err != nil || c.txn.coords[g.tp] != co {
		delete(co.InFlight, key)
		if err != nil {
			c.stats.TxnMarkerRetries++
			g.logs.log(slog.LevelWarn, "transaction marker not written; retrying on the next sweep",
				slog.String("transactional_id", m.TransactionalID), slog.Any("err", err))
		}
		return
	}
	cmd := &strandpb.TxnCommand{Body: &strandpb.TxnCommand_MarkerWritten{MarkerWritten: &strandpb.TxnMarkerWritten{
		TransactionalId: m.TransactionalID, Marker: &strandpb.TxnProducer{ProducerId: m.Producer.ID, Epoch: int32(m.Producer.Epoch)},
		Topic: m.Partition.Topic, Partition: m.Partition.Partition, Group: m.Group,
	}}}
	// Whatever the outcome, the flight ends: applied, the marker is no
	// longer pending; refused as stale, another report got there first;
	// failed (maybe not written), the next sweep reports it again, and a
	// duplicate is refused as stale.
	c.proposeTxn(g, co, cmd, func(txnsvc.Applied) { delete(co.InFlight, key) })
}
