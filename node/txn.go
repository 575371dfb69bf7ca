package node

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/proto/strandpb"
)

// TransactionsTopic is the internal topic whose partitions host the
// transaction coordinators (engine/txn): each record is one TxnCommand, and
// the leader of a transactional id's partition is its coordinator — the
// way __strand_offsets hosts the group coordinators (groups.go).
const TransactionsTopic = "__strand_transactions"

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
// a coordinator's state: only its coordinator writes it, retention never
// trims it and its partition count never changes.
func isCoordinatorTopic(name string) bool { return name == OffsetsTopic || name == TransactionsTopic }

// txnHost is the Core's transaction-coordinator side: one coordinator per
// __strand_transactions partition this node leads.
type txnHost struct {
	coords map[TopicPartition]*txnCoord // lookup only; walked through Core.groups
	// creating: a CreateTopic of __strand_transactions is in flight.
	creating  bool
	lastSweep uint64
	// calls are this node's peer requests waiting for an answer
	// (txn_peer.go).
	calls map[uint64]*txnPeerCall // lookup only; expired in id order
}

// txnCoord is the engine/txn state of one __strand_transactions partition,
// as this node built it while leading in term: a view of the partition's
// log, applied in log order when read back, so every leader builds the
// same state (as coordinator in groups.go).
type txnCoord struct {
	tp      TopicPartition
	term    uint64
	topicID uint64
	state   *txn.State
	next    int64 // the next offset of the partition to apply
	// fresh: not caught up yet; the first catch-up starts from the newest
	// snapshot record in the log.
	fresh         bool
	sinceSnapshot int
	// restoredFrom is the offset of the snapshot this coordinator started
	// from, -1 when it replayed the log from its start.
	restoredFrom int64
	waits        map[uint64]func(txnApplied) // lookup only
	// inFlight marks sweep proposals, marker writes and refills in flight
	// (leader-local).
	inFlight map[string]bool // lookup only
	// lastExpire is the tick of the last proposed id expiry (leader-local).
	lastExpire uint64
}

// txnApplied is the outcome of one applied command.
type txnApplied struct {
	err error
	res txn.Result
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
	// The coordinators' state is the log itself: retention must never
	// delete it (a new coordinator replays it).
	keep := []metadata.ConfigEntry{{Name: metadata.ConfigRetentionMs, Value: "-1"}, {Name: metadata.ConfigRetentionBytes, Value: "-1"}}
	data, err := metadata.EncodeCreateTopic(TransactionsTopic, c.txnConfig().Partitions, rf, keep)
	if err != nil {
		panic(fmt.Sprintf("node: encode the create of %s: %v", TransactionsTopic, err))
	}
	c.txn.creating = true
	c.proposeMeta(data, uint64(c.cfg.RequestTimeoutTicks), func(metadata.Result, error) { c.txn.creating = false })
	return metadata.Topic{}, false
}

// txnCoordinatorOf returns the replica and coordinator of a transactional
// id, if this node coordinates it.
func (c *Core) txnCoordinatorOf(id string) (*group, *txnCoord, error) {
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
func (c *Core) txnCoordinatorFor(g *group) (*txnCoord, error) {
	_, term, leading := g.leadership()
	if !leading {
		return nil, fmt.Errorf("%w: this node does not lead %s/%d", ErrNotCoordinator, g.tp.Topic, g.tp.Partition)
	}
	if c.txn.coords == nil {
		c.txn.coords = make(map[TopicPartition]*txnCoord)
	}
	co := c.txn.coords[g.tp]
	if co == nil || co.term != term || co.topicID != g.topicID {
		if co != nil {
			co.failWaits()
		}
		co = &txnCoord{tp: g.tp, term: term, topicID: g.topicID, state: txn.New(), next: g.part.LogStartOffset(), fresh: true,
			restoredFrom: -1, waits: make(map[uint64]func(txnApplied)), inFlight: make(map[string]bool), lastExpire: c.ticks}
		c.txn.coords[g.tp] = co
	}
	return co, nil
}

// failWaits answers every wait of a replaced coordinator: their commands
// may still apply, so ErrLeadershipLost (maybe written).
func (co *txnCoord) failWaits() {
	ids := make([]uint64, 0, len(co.waits))
	for id := range co.waits {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		w := co.waits[id]
		delete(co.waits, id)
		w(txnApplied{err: ErrLeadershipLost})
	}
}

// txnCatchUp applies the partition's records from co.next up to the
// high-water mark to co.state, answering the waits of the commands met.
func (c *Core) txnCatchUp(g *group, co *txnCoord) error {
	if co.fresh {
		co.fresh = false
		c.restoreTxnSnapshot(g, co)
	}
	for i := 0; co.next < g.part.HighWatermark(); i++ {
		if i >= catchUpReadsMax {
			return fmt.Errorf("%w: %s/%d: catch-up of the transaction log made no progress", ErrStorage, g.tp.Topic, g.tp.Partition)
		}
		res := c.read(g, FetchRequest{TopicPartition: g.tp, Offset: co.next, MaxBytes: groupReadBytes})
		if res.Err != nil {
			return res.Err
		}
		if len(res.Batches) == 0 {
			return fmt.Errorf("%w: %s/%d: no batch at offset %d below the high-water mark", ErrStorage, g.tp.Topic, g.tp.Partition, co.next)
		}
		for _, b := range res.Batches {
			it := recordbatch.NewIterator(b.Batch)
			for it.Next() {
				if off := b.BaseOffset + int64(it.Index()); off >= co.next {
					c.applyTxnRecord(g, co, it.Record().Value)
					co.next = off + 1
				}
			}
			if it.Err() != nil {
				return fmt.Errorf("%w: %s/%d batch at %d: %w", ErrStorage, g.tp.Topic, g.tp.Partition, b.BaseOffset, it.Err())
			}
		}
	}
	return nil
}

// applyTxnRecord applies one record's command and answers its wait. A
// record that is no command is skipped, identically on every leader.
func (c *Core) applyTxnRecord(g *group, co *txnCoord, value []byte) {
	cmd, err := txn.DecodeCommand(value)
	if err != nil {
		g.logs.log(slog.LevelWarn, "skipping a record of the transaction log that is no command", slog.Any("err", err))
		return
	}
	w := co.waits[cmd.GetRequestId()]
	var wasOpen bool
	if id := txnCommandID(cmd); w != nil && id != "" {
		st, _ := co.state.StateOf(id)
		wasOpen = st == txn.Ongoing
	}
	res := co.state.Apply(cmd)
	if cmd.GetSnapshot() != nil {
		co.sinceSnapshot = 0
	} else {
		co.sinceSnapshot++
	}
	if w != nil {
		c.countTxn(cmd, wasOpen, res) // txn_admin.go: its own commands only, once
		delete(co.waits, cmd.GetRequestId())
		w(txnApplied{res: res})
	}
}

// proposeTxn appends cmd to g's log and calls done with its outcome once
// this coordinator applied it, or with the error that kept it from
// applying (ErrTimeout and ErrLeadershipLost: it may still apply).
func (c *Core) proposeTxn(g *group, co *txnCoord, cmd *strandpb.TxnCommand, done func(txnApplied)) {
	id := c.rand.Uint64()
	for id == 0 || co.waits[id] != nil {
		id = c.rand.Uint64()
	}
	now := c.cfg.Clock.Realtime().UnixMilli()
	cmd.RequestId, cmd.NowMs = id, now
	value, err := txn.EncodeCommand(cmd)
	if err != nil {
		panic(fmt.Sprintf("node: marshal a transaction command: %v", err))
	}
	batch, err := recordbatch.Encode(nil, []recordbatch.Record{{TimestampMs: now, Value: value}})
	if err != nil {
		done(txnApplied{err: fmt.Errorf("%w: %w", ErrInvalidRequest, err)})
		return
	}
	co.waits[id] = done
	c.produce(ProduceRequest{TopicPartition: g.tp, Acks: AcksAll, ProducerID: -1, Batch: batch}, func(res ProduceResult) {
		if co.waits[id] == nil {
			return // answered by a catch-up or a replacement
		}
		if res.Err == nil && c.txn.coords[g.tp] == co {
			if err := c.txnCatchUp(g, co); err != nil {
				res.Err = fmt.Errorf("%w: committed, then reading the transaction log back failed: %v", ErrTimeout, err)
			}
		}
		w := co.waits[id]
		if w == nil {
			return
		}
		delete(co.waits, id)
		if res.Err == nil {
			res.Err = ErrLeadershipLost // applied, but this coordinator was replaced before reading it back
		}
		w(txnApplied{err: res.Err})
	})
}

// restoreTxnSnapshot starts a new coordinator from the newest snapshot
// record of its partition, as restoreSnapshot does for groups: it scans
// back from the high-water mark (at most four snapshot intervals) and
// restores the first snapshot whose as_of is still in the log, continuing
// from as_of. Without one, the coordinator replays from the log start.
func (c *Core) restoreTxnSnapshot(g *group, co *txnCoord) {
	logStart, scanMax := g.part.LogStartOffset(), 4*c.txnConfig().SnapshotEvery
	at, scanned := g.part.HighWatermark()-1, 0
	for at >= logStart && scanned < scanMax {
		res := c.read(g, FetchRequest{TopicPartition: g.tp, Offset: at, MaxBytes: 1})
		if res.Err != nil || len(res.Batches) == 0 {
			return
		}
		b := res.Batches[0]
		var values [][]byte
		it := recordbatch.NewIterator(b.Batch)
		for it.Next() && b.BaseOffset+int64(it.Index()) <= at {
			values = append(values, it.Record().Value)
		}
		for i := len(values) - 1; i >= 0; i-- {
			scanned++
			cmd, err := txn.DecodeCommand(values[i])
			if err != nil || cmd.GetSnapshot() == nil {
				continue
			}
			snap := cmd.GetSnapshot()
			if snap.GetAsOf() < logStart || snap.GetAsOf() > b.BaseOffset+int64(i) {
				return // its tail is gone (or it is not one): replay from the log start
			}
			st, err := txn.Restore(snap)
			if err != nil {
				g.logs.log(slog.LevelWarn, "transaction snapshot does not restore; replaying the log", slog.Any("err", err))
				return
			}
			co.state, co.next, co.restoredFrom = st, snap.GetAsOf(), b.BaseOffset+int64(i)
			return
		}
		at = b.BaseOffset - 1
	}
}
