//go:build !simbugs

package node

import (
	"go.etcd.io/raft/v3"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/node/groupsvc"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/raftlog"
)

// Production builds carry no planted bug: the switches below are empty
// types and constant-false hooks the compiler removes. The simulator's
// bug-planting build (-tags simbugs, bugs_simbugs.go) gives them content,
// so no production struct and no on-disk format has a field for them.

// plantedBugs is embedded in Config; empty without the simbugs tag.
//
//lint:ignore U1000 the field's content exists only with -tags simbugs
type plantedBugs struct{}

// groupBugs is embedded in group; empty without the simbugs tag.
//
//lint:ignore U1000 the field's content exists only with -tags simbugs
type groupBugs struct{}

// produceBugs is embedded in produceWait; empty without the simbugs tag.
//
//lint:ignore U1000 the field's content exists only with -tags simbugs
type produceBugs struct{}

func (c *Core) bugLogOptions(*raftlog.Options)                           {}
func (c *Core) bugReadOnlyOption() raft.ReadOnlyOption                   { return raft.ReadOnlySafe }
func (c *Core) bugSkipFsync() bool                                       { return false }
func (c *Core) bugStartSyncSkippingFsync(*group) (w, s func() error)     { return nil, nil }
func (c *Core) bugWALAckEarly(*group)                                    {}
func (c *Core) bugLocalRead() bool                                       { return false }
func (c *Core) bugAckEarly(*group, *produceWait, func(ProduceResult))    {}
func (c *Core) bugAckedEarly(*group, *produceWait) bool                  { return false }
func (c *Core) bugUncommittedTail(*group, int64) ([]FetchedBatch, error) { return nil, nil }
func (c *Core) bugReapply(*group) bool                                   { return false }
func (c *Core) bugNoCheckpoint(*group) bool                              { return false }
func (c *Core) bugForgetProducers(*group)                                {}
func (c *Core) bugRestoreIndexTimes(*group)                              {}
func (c *Core) bugQuiescedNeverWake() bool                               { return false }
func (c *Core) bugRestartNeverWakes() bool                               { return false }
func (c *Core) bugFullKeepsLeading() bool                                { return false }
func (c *Core) bugFirstBatchMustFit() bool                               { return false }
func (c *Core) bugCheckpointState(state []byte) []byte                   { return state }
func (g *group) bugEngineIndex(raftIndex uint64) uint64                  { return raftIndex }
func (c *Core) bugBatchBase(base, _ int64) int64                         { return base }
func (c *Core) bugAckLeaderEarly(Acks) bool                              { return false }
func (g *group) bugRaftIndexOf(engineIndex uint64) uint64                { return engineIndex }
func (c *Core) bugReleaseBeforeSync(*group)                              {}
func (c *Core) bugWipedNodeVotes() bool                                  { return false }
func (c *Core) bugRepairTrustsItself() bool                              { return false }
func (c *Core) bugCompactLimit(_ *group, limit uint64) uint64            { return limit }
func (c *Core) bugHeldUnbounded() bool                                   { return false }
func (c *Core) bugReplayEmpty() bool                                     { return false }
func (c *Core) bugSkipTopicID() bool                                     { return false }
func (c *Core) bugBatchCRC(batch []byte) []byte                          { return batch }
func (c *Core) bugMoveDropsEarly() bool                                  { return false }
func (c *Core) bugCoordinatorFromEnd(*group, *groupsvc.Coordinator)      {}
func (c *Core) bugRemoveBeforeCaughtUp() bool                            { return false }
func (c *Core) bugIgnoreStall() bool                                     { return false }
func (c *Core) bugSkipAuthorization(*strandpb.Request) bool              { return false }
func (c *Core) bugRefuseUnconfirmed() bool                               { return false }
func (c *Core) bugElectionTick() int                                     { return c.cfg.ElectionTicks }

// bugPassDecision (CompactActiveSegment, CompactDeleteUncut) is a pass's
// decision unchanged.
func (c *Core) bugPassDecision(_ *group, d compact.Decision) compact.Decision { return d }

// bugInstallFirstChunk (PrefixInstallUnchecked) is false: an install
// switches after its last chunk.
func (c *Core) bugInstallFirstChunk() bool { return false }
