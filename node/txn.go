package node

import (
	"fmt"
	"time"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/node/txnsvc"
	"github.com/strandlog/strand/proto/strandpb"
)

// TransactionsTopic is the internal topic whose partitions host the
// transaction coordinators (package txnsvc).
const TransactionsTopic = txnsvc.TransactionsTopic

// TxnConfig configures the transaction coordinators. Zero fields take the
// defaults below.
type TxnConfig struct {
	// Partitions is the partition count __strand_transactions is created
	// with (default 8, as __strand_offsets); ids map to partitions by
	// TxnPartition.
	Partitions int32
	// MaxTimeout is transaction.max.timeout.ms: the largest
	// transaction.timeout.ms InitProducerId accepts (default 15 min).
	MaxTimeout time.Duration
	// IDRetention is transactional.id.expiration.ms: an id without a
	// transaction this long is forgotten (default 7 days).
	IDRetention time.Duration
	// SnapshotEvery: a coordinator writes a snapshot of its state to its
	// log every this many commands (default 1000), so a new coordinator
	// replays only what follows the newest one.
	SnapshotEvery int
	// ProducerIDBlock is how many producer ids a coordinator takes from
	// the metadata group at a time (default 1000).
	ProducerIDBlock int32
	// TopicConfig are topic configs __strand_transactions is created
	// with beyond its own (coordinatorTopicConfig: compact, never
	// trimmed), as GroupsConfig.OffsetsTopicConfig.
	TopicConfig []metadata.ConfigEntry
	// Markers writes the commit and abort markers of decided transactions
	// (txn_markers.go). nil: the node opens and decides no transaction
	// (AddPartitionsToTxn, AddOffsetsToTxn and EndTxn are refused
	// TRANSACTIONS_NOT_ENABLED), so none can wait forever for markers.
	Markers TxnMarkerWriter
}

// Defaults of TxnConfig.
const (
	TxnPartitionsDefault      = 8
	TxnMaxTimeoutDefault      = time.Duration(txn.DefaultMaxTimeoutMs) * time.Millisecond
	TxnIDRetentionDefault     = time.Duration(txn.DefaultIDRetentionMs) * time.Millisecond
	TxnProducerIDBlockDefault = 1000
)

// ErrTransactionsNotEnabled: the node has no marker writer, so it cannot
// complete a transaction; it refuses to open or decide one instead of
// faking the outcome.
var ErrTransactionsNotEnabled = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_TRANSACTIONS_NOT_ENABLED,
	"node: transactions are not enabled on this node (no transaction marker writer)")

// txnConfig is Config.Txn with defaults filled in.
func (c *Core) txnConfig() TxnConfig {
	t := c.cfg.Txn
	if t.Partitions <= 0 {
		t.Partitions = TxnPartitionsDefault
	}
	if t.MaxTimeout <= 0 {
		t.MaxTimeout = TxnMaxTimeoutDefault
	}
	if t.IDRetention <= 0 {
		t.IDRetention = TxnIDRetentionDefault
	}
	if t.SnapshotEvery <= 0 {
		t.SnapshotEvery = snapshotEveryDefault
	}
	if t.ProducerIDBlock <= 0 || int64(t.ProducerIDBlock) > txn.ProducerIDBlockMax {
		t.ProducerIDBlock = TxnProducerIDBlockDefault
	}
	return t
}

// TxnPartition is the __strand_transactions partition of a transactional
// id: the same stable hash as GroupPartition.
func TxnPartition(transactionalID string, partitions int32) int32 {
	return GroupPartition(transactionalID, partitions)
}

// isCoordinatorTopic reports whether name is an internal topic whose log is
// a coordinator's state (txnsvc.IsCoordinatorTopic).
func isCoordinatorTopic(name string) bool { return txnsvc.IsCoordinatorTopic(name) }

// txnHost is the Core's transaction-coordinator side: one coordinator per
// __strand_transactions partition this node leads.
type txnHost struct {
	coords map[TopicPartition]*txnsvc.Coordinator // lookup only; walked through Core.groups
	// creating: a CreateTopic of __strand_transactions is in flight.
	creating  bool
	lastSweep uint64
	// calls are this node's peer requests waiting for an answer
	// (txn_peer.go).
	calls map[uint64]*txnPeerCall // lookup only; expired in id order
}

// transactionsTopic returns the applied metadata's __strand_transactions,
// asking the metadata group to create it when it does not exist yet.
func (c *Core) transactionsTopic() (metadata.Topic, bool) {
	if t, ok := c.meta.meta.Topic(TransactionsTopic); ok {
		return t, true
	}
	if c.txn.creating {
		return metadata.Topic{}, false
	}
	if lead, _ := c.metaLeader(); lead == 0 {
		return metadata.Topic{}, false
	}
	rf := int32(max(1, min(replicationFactorDefault, c.clusterSize())))
	data, err := metadata.EncodeCreateTopic(TransactionsTopic, c.txnConfig().Partitions, rf, coordinatorTopicConfig(c.cfg.Txn.TopicConfig))
	if err != nil {
		panic(fmt.Sprintf("node: encode the create of %s: %v", TransactionsTopic, err))
	}
	c.txn.creating = true
	c.proposeMeta(data, uint64(c.cfg.RequestTimeoutTicks), func(metadata.Result, error) { c.txn.creating = false })
	return metadata.Topic{}, false
}

// txnCoordinatorOf returns the replica and coordinator of a transactional
// id, if this node coordinates it.
func (c *Core) txnCoordinatorOf(id string) (*group, *txnsvc.Coordinator, error) {
	if id == "" || len(id) > txn.NameMax {
		return nil, nil, fmt.Errorf("%w: transactional id of %d bytes, want 1..%d", ErrInvalidRequest, len(id), txn.NameMax)
	}
	if c.meta == nil {
		return nil, nil, ErrCoordinatorNotAvailable
	}
	t, ok := c.transactionsTopic()
	if !ok {
		return nil, nil, ErrCoordinatorNotAvailable
	}
	tp := TopicPartition{Topic: TransactionsTopic, Partition: TxnPartition(id, t.Partitions())}
	g := c.byTP[tp]
	if g == nil || g.topicID != t.ID {
		return nil, nil, fmt.Errorf("%w: partition %d of %s has no replica here", ErrNotCoordinator, tp.Partition, TransactionsTopic)
	}
	co, err := c.txnCoordinatorFor(g)
	return g, co, err
}

// txnCoordinatorFor returns the coordinator of replica g while it leads, a
// fresh one (built from the log by the next catch-up) when its term moved.
func (c *Core) txnCoordinatorFor(g *group) (*txnsvc.Coordinator, error) {
	_, term, leading := g.leadership()
	if !leading {
		return nil, fmt.Errorf("%w: this node does not lead %s/%d", ErrNotCoordinator, g.tp.Topic, g.tp.Partition)
	}
	if c.txn.coords == nil {
		c.txn.coords = make(map[TopicPartition]*txnsvc.Coordinator)
	}
	co := c.txn.coords[g.tp]
	if co == nil || co.Term != term || co.TopicID != g.topicID {
		if co != nil {
			co.FailWaits(ErrLeadershipLost) // their commands may still apply (maybe written)
		}
		co = txnsvc.New(term, g.topicID, g.part.LogStartOffset(), c.ticks)
		c.txn.coords[g.tp] = co
	}
	return co, nil
}

// txnCatchUp brings co up to g's high-water mark (txnsvc.Coordinator.CatchUp
// over coordinatorLog).
// A fresh coordinator's state is shown to Config.CoordinatorRestored.
func (c *Core) txnCatchUp(g *group, co *txnsvc.Coordinator) error {
	fresh := co.Fresh
	if err := co.CatchUp(coordinatorLog{c: c, g: g}, c.txnConfig().SnapshotEvery); err != nil {
		return err
	}
	if fresh && c.cfg.CoordinatorRestored != nil {
		c.cfg.CoordinatorRestored(g.tp, g.topicID, co.Next, co.State.Snapshot(co.Next))
	}
	return nil
}

// probeTxnRestore is probeRestore for a transaction coordinator.
func (c *Core) probeTxnRestore(g *group, co *txnsvc.Coordinator) {
	if c.cfg.CoordinatorRestored == nil {
		return
	}
	probe := txnsvc.New(co.Term, g.topicID, g.part.LogStartOffset(), c.ticks)
	if probe.CatchUp(coordinatorLog{c: c, g: g, probe: true}, c.txnConfig().SnapshotEvery) == nil {
		c.cfg.CoordinatorRestored(g.tp, g.topicID, probe.Next, probe.State.Snapshot(probe.Next))
	}
}

// proposeTxn appends cmd to g's log and calls done with its outcome once
// this coordinator applied it, or with the error that kept it from
// applying (ErrTimeout and ErrLeadershipLost: it may still apply).
func (c *Core) proposeTxn(g *group, co *txnsvc.Coordinator, cmd *strandpb.TxnCommand, done func(txnsvc.Applied)) {
	id := c.rand.Uint64()
	for id == 0 || co.Waiting(id) {
		id = c.rand.Uint64()
	}
	now := c.cfg.Clock.Realtime().UnixMilli()
	cmd.RequestId, cmd.NowMs = id, now
	value, err := txn.EncodeCommand(cmd)
	if err != nil {
		panic(fmt.Sprintf("node: marshal a transaction command: %v", err))
	}
	batch, err := recordbatch.Encode(nil, co.Records(cmd, value, now))
	if err != nil {
		done(txnsvc.Applied{Err: fmt.Errorf("%w: %w", ErrInvalidRequest, err)})
		return
	}
	co.Wait(id, func(a txnsvc.Applied) {
		if a.Err == nil {
			c.countTxn(cmd, a.WasOpen, a.Res) // txn_admin.go: its own commands only, once
		}
		done(a)
	})
	c.produce(ProduceRequest{TopicPartition: g.tp, Acks: AcksAll, ProducerID: -1, Batch: batch}, func(res ProduceResult) {
		if !co.Waiting(id) {
			return // answered by a catch-up or a replacement
		}
		if res.Err == nil && c.txn.coords[g.tp] == co {
			if err := c.txnCatchUp(g, co); err != nil {
				res.Err = fmt.Errorf("%w: committed, then reading the transaction log back failed: %v", ErrTimeout, err)
			}
		}
		w := co.TakeWait(id)
		if w == nil {
			return
		}
		if res.Err == nil {
			res.Err = ErrLeadershipLost // applied, but this coordinator was replaced before reading it back
		}
		w(txnsvc.Applied{Err: res.Err})
	})
}
