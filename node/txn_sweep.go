package node

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/node/txnsvc"
	"github.com/strandlog/strand/proto/strandpb"
)

// txnExpireEvery is how often, in real time, a coordinator that holds ids
// proposes the expiry of those idle past TxnConfig.IDRetention.
const txnExpireEvery = time.Hour

// sweepTxn runs on Tick, every sweepEvery. For every __strand_transactions
// partition this node leads it catches the coordinator up and proposes
// what the leader's clock decides: the abort of transactions past their
// transaction.timeout.ms, the markers of every prepared transaction not yet
// reported (so a new coordinator finishes what its predecessor decided), a
// snapshot every SnapshotEvery commands, a block of producer ids before
// the pool runs out, and the expiry of idle ids. Nothing runs before the
// topic exists (first use).
func (c *Core) sweepTxn() {
	c.expirePeerCalls()
	every := uint64(max(1, sweepEvery/c.cfg.TickDuration))
	if c.ticks < c.txn.lastSweep+every || c.meta == nil {
		return
	}
	c.txn.lastSweep = c.ticks
	t, ok := c.meta.meta.Topic(TransactionsTopic)
	if !ok {
		return
	}
	for _, g := range c.groups {
		if g.tp.Topic != TransactionsTopic || g.part == nil || g.topicID != t.ID {
			continue
		}
		if _, _, leading := g.leadership(); !leading {
			if co := c.txn.coords[g.tp]; co != nil {
				co.FailWaits(ErrLeadershipLost)
				delete(c.txn.coords, g.tp) // lookup-only map: deletion order does not leak
			}
			continue
		}
		co, err := c.txnCoordinatorFor(g)
		if err != nil {
			continue
		}
		if err := c.txnCatchUp(g, co); err != nil {
			g.logs.log(slog.LevelWarn, "transaction coordinator cannot read its log", slog.Any("err", err))
			continue
		}
		c.probeTxnRestore(g, co)
		c.sweepTxnCoordinator(g, co)
	}
}

// sweepTxnCoordinator runs one coordinator's sweep (txnsvc.Sweep decides;
// the node's clocks, configuration, proposals and marker writes serve it).
func (c *Core) sweepTxnCoordinator(g *group, co *txnsvc.Coordinator) {
	cfg := c.txnConfig()
	txnsvc.Sweep{
		Propose:           func(cmd *strandpb.TxnCommand, done func(txnsvc.Applied)) { c.proposeTxn(g, co, cmd, done) },
		DriveMarkers:      func() { c.driveMarkers(g, co) },
		RefillProducerIDs: func() { c.refillProducerIDs(g, co, func(error) {}) },
		NowMs:             c.cfg.Clock.Realtime().UnixMilli(),
		Now:               c.ticks,
		SnapshotEvery:     cfg.SnapshotEvery,
		ProducerIDBlock:   cfg.ProducerIDBlock,
		IDRetentionMs:     cfg.IDRetention.Milliseconds(),
		ExpireEvery:       uint64(max(1, txnExpireEvery/c.cfg.TickDuration)),
	}.Run(co)
}

// errRefillInFlight: another refill of the coordinator's producer ids is
// under way; the caller's request is retriable.
var errRefillInFlight = errors.New("a refill of producer ids is in flight")

// refillProducerIDs takes a block of producer ids from the metadata group
// (which never hands an id out twice) and grants it to the coordinator
// through its log, then calls done (nil: granted).
func (c *Core) refillProducerIDs(g *group, co *txnsvc.Coordinator, done func(error)) {
	const key = "\x00refill"
	if co.InFlight[key] {
		done(errRefillInFlight)
		return
	}
	data, err := metadata.EncodeAllocateProducerIDs(c.txnConfig().ProducerIDBlock)
	if err != nil {
		panic(fmt.Sprintf("node: encode producer id allocation: %v", err))
	}
	co.InFlight[key] = true
	c.proposeMeta(data, uint64(c.cfg.RequestTimeoutTicks), func(res metadata.Result, err error) {
		if err == nil {
			err = res.Err
		}
		if err == nil && c.txn.coords[g.tp] != co {
			err = ErrNotCoordinator
		}
		if err != nil {
			delete(co.InFlight, key)
			done(err)
			return
		}
		// A block this coordinator does not grant (it lost its leadership
		// first) is never used: ids are plentiful, reuse is not allowed.
		cmd := &strandpb.TxnCommand{Body: &strandpb.TxnCommand_GrantProducerIds{GrantProducerIds: &strandpb.TxnProducerIdBlock{
			First: res.FirstProducerID, Count: int64(res.ProducerIDCount)}}}
		c.proposeTxn(g, co, cmd, func(a txnsvc.Applied) {
			delete(co.InFlight, key)
			done(txnsvc.Outcome(a))
		})
	})
}
