//go:build simbugs

package simnet

import (
	"fmt"
	"slices"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/engine/groups"
	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/kafkaproto"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/node/groupsvc"
	"github.com/strandlog/strand/node/loop"
	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/raftlog/compacted"
	"github.com/strandlog/strand/sasl"
)

// BugNames lists the planted bugs ParseBug knows (node.Bugs' fields).
var BugNames = []string{"AckBeforeCommit", "SkipFsync", "FetchBeyondHighMark", "ReapplyAfterRestart", "LocalRead",
	"RestoreForgetsProducers", "CheckpointForgetsProducers", "FetchRenumbersInsideBatch", "AckLeaderEarly",
	"RecoverTrustsPageCache", "LeaseReads", "RestoreIndexTimes",
	"AckBeforeSyncDone", "WipedNodeVotes", "RepairTrustsItself", "CompactPastStart", "StaleSnapshot",
	"TopicIDUnchecked", "ProduceSkipsCRC", "QuiescedNeverWake", "WALAckBeforeFsync",
	"FirstBatchMustFit", "StalledLeaderKeepsLeading", "ElectionInCoreTicks"}

// GroupBugNames are the consumer-group coordinator's planted bugs
// (engine/groups): they need the group workload (Options.GroupMembers).
var GroupBugNames = []string{"GroupAssignBeforeRevoke", "GroupCommitSkipsEpoch", "GroupClassicForgotten",
	"OffsetsRestoreSkipsTail", "OffsetsTombstoneInFlight"}

// ClientBugNames are clientlib's planted bugs: the group workload's
// clientlib members (wire_libgroup.go) and the plain consumers
// (wire_libconsumer.go) run the code they live in.
var ClientBugNames = []string{"LibAutoCommitFetched", "LibSeekSkipsTarget", "LibExhaustedDefinite", "LibStallNotSent",
	"LibIgnoresThrottle", "LibUnsureForgotten", "LibCoordinatorBehindThrottle"}

// TxnBugNames are the planted transaction bugs (the partition's:
// engine's SetTxnBugs; the coordinator's: engine/txn's SetBugs; the
// group's transactional offsets: engine/groups' SetTxnOffsetsBug; the
// transactional producer's: clientlib's SetTxnBugs): they need the
// transactional workload (Options.Txn).
var TxnBugNames = []string{"LSOPassesOpenTxn", "DropAbortOnRestore", "MarkersBeforeDecision", "TxnSkipsFence", "TxnOffsetsOnAbort",
	"LibCommitSkipsFlush"}

// CompactBugNames are the compacted topics' planted bugs (engine/compact's
// pass, raftlog/compacted's switch, node's CompactActiveSegment,
// CompactDeleteUncut and PrefixTrimUnheld): they need the compacted-topic workload
// (Options.Compacted, wire_kv.go); CompactDeleteUncut a compact,delete
// seed of it (kvCompactDelete).
var CompactBugNames = []string{"CompactKeepsOlder", "TombstoneEarly", "CompactDropsLastRecord", "CompactSwitchNotAtomic",
	"CompactActiveSegment", "PrefixInstallUnchecked", "CompactDeleteUncut", "PrefixTrimUnheld"}

// TierBugNames are tiered storage's planted bugs (node/tier.go): they
// need the seeds that draw Options.Tiered.
var TierBugNames = []string{"TierUploadShifted", "TierDeleteOnPropose", "TierLocalEarly", "TierRemoteOffByOne", "TierUploadNotReplicated"}

// FullDiskBugNames are the full disk's planted bugs (node/diskfull.go,
// node/quiesce.go): they need the seeds whose fault mix draws full disks
// (Faults.DiskFull).
var FullDiskBugNames = []string{"FullLeaderKeepsLeading", "RestartNeverWakes"}

// ParseBug checks a planted bug's name; "" plants none.
func ParseBug(name string) (string, error) {
	if name != "" && !slices.Contains(BugNames, name) && !slices.Contains(GroupBugNames, name) && !slices.Contains(MoveBugNames, name) &&
		!slices.Contains(JoinBugNames, name) && !slices.Contains(OperatorBugNames, name) && !slices.Contains(SampleBugNames, name) &&
		!slices.Contains(ClientBugNames, name) && !slices.Contains(TxnBugNames, name) &&
		!slices.Contains(CompactBugNames, name) && !slices.Contains(LoopBugNames, name) && !slices.Contains(WireBugNames, name) &&
		!slices.Contains(TierBugNames, name) && !slices.Contains(FullDiskBugNames, name) {
		return "", fmt.Errorf("simnet: unknown bug %q", name)
	}
	return name, nil
}

// plantBug switches the named bug on in a node's config.
func plantBug(cfg *node.Config, name string) {
	// The coordinator's bugs are package switches of engine/groups: set
	// (or cleared) at every node start of the run.
	groups.SetBugs(name == "GroupAssignBeforeRevoke", name == "GroupCommitSkipsEpoch")
	groups.SetClassicBug(name == "GroupClassicForgotten")                                   // needs Options.ClassicMembers
	groupsvc.SetBugs(name == "OffsetsRestoreSkipsTail", name == "OffsetsTombstoneInFlight") // the coordinators' compacted log (offsets_replay.go)
	clientlib.SetBugs(name == "LibAutoCommitFetched")                                       // needs Options.GroupMembers (wire_libgroup.go)
	clientlib.SetConsumerBugs(name == "LibSeekSkipsTarget")                                 // every consumer runs it (wire_libconsumer.go)
	clientlib.SetProducerBugs(name == "LibExhaustedDefinite")                               // the sample's library producers (wire_libproducer.go)
	clientlib.SetAdminBugs(name == "LibAdminDropsRefusal")                                  // needs authorization on (the operator's intruder: operator.go)
	clientlib.SetConnBugs(name == "LibStallNotSent", name == "LibIgnoresThrottle")          // every library client's stall verdicts and throttles (clientlib/sim_watch.go, sim_conns.go)
	clientlib.SetUnsureBugs(name == "LibUnsureForgotten")                                   // the admin calls that change state (operator.go, wire_moves.go)
	clientlib.SetCoordinatorBugs(name == "LibCoordinatorBehindThrottle")                    // needs Options.GroupMembers or Txn with Options.AppQuota (clientlib/coordconn.go)
	clientlib.SetTxnBugs(name == "LibCommitSkipsFlush")                                     // needs Options.Txn (wire_txn.go's producers)
	engine.SetTxnBugs(name == "LSOPassesOpenTxn", name == "DropAbortOnRestore")             // need Options.Txn (wire_txn.go)
	txn.SetBugs(name == "TxnSkipsFence")                                                    // needs Options.Txn
	groups.SetTxnOffsetsBug(name == "TxnOffsetsOnAbort")                                    // needs Options.Txn (wire_txn_session.go)
	sasl.SetBugs(name == "AcceptsAnyProof", name == "SASLRefusesUnconfirmed")               // need authorization on (the operator draws it: sasl.go)
	compact.SetBugs(name == "CompactKeepsOlder", name == "TombstoneEarly")                  // need Options.Compacted (wire_kv.go)
	compact.SetRewriteBugs(name == "CompactDropsLastRecord")                                // needs Options.Compacted
	compacted.SetBugs(name == "CompactSwitchNotAtomic")                                     // needs Options.Compacted
	compacted.SetInstallBugs(name == "PrefixInstallUnchecked")                              // with node's, below
	loop.SetBugs(name == "StaleSecurityView")                                               // needs authorization on (loop.go, sasl.go)
	frame.SetBugs(name == "SpliceStaleHead")                                                // every native fetch answer (corrupt.go's answerFrame)

	// KafkaHandshakeAuthenticates needs authorization on (kafka_sasl.go);
	// KafkaSpliceStaleBase runs in every Kafka fetch answer (Translate).
	kafkaproto.SetBugs(name == "KafkaHandshakeAuthenticates", name == "KafkaSpliceStaleBase")
	switch name {
	case "AckBeforeCommit":
		cfg.Bugs.AckBeforeCommit = true
	case "SkipFsync":
		cfg.Bugs.SkipFsync = true
	case "FetchBeyondHighMark":
		cfg.Bugs.FetchBeyondHighMark = true
	case "ReapplyAfterRestart":
		cfg.Bugs.ReapplyAfterRestart = true
	case "RestoreForgetsProducers":
		cfg.Bugs.RestoreForgetsProducers = true
	case "CheckpointForgetsProducers":
		cfg.Bugs.CheckpointForgetsProducers = true
	case "FetchRenumbersInsideBatch":
		cfg.Bugs.FetchRenumbersInsideBatch = true
	case "AckLeaderEarly":
		cfg.Bugs.AckLeaderEarly = true
	case "LocalRead":
		cfg.Bugs.LocalRead = true
	case "RestoreIndexTimes":
		cfg.Bugs.RestoreIndexTimes = true
	case "LeaseReads":
		cfg.Bugs.LeaseReads = true
	case "AckBeforeSyncDone":
		cfg.Bugs.AckBeforeSyncDone = true
	case "WALAckBeforeFsync": // needs Options.WAL (seedOptions sets it)
		cfg.Bugs.WALAckBeforeFsync = true
	case "RecoverTrustsPageCache":
		cfg.Bugs.RecoverTrustsPageCache = true
	case "WipedNodeVotes":
		cfg.Bugs.WipedNodeVotes = true
	case "RepairTrustsItself":
		cfg.Bugs.RepairTrustsItself = true
	case "CompactPastStart":
		cfg.Bugs.CompactPastStart = true
	case "StaleSnapshot":
		cfg.Bugs.StaleSnapshot = true
	case "TopicIDUnchecked":
		cfg.Bugs.TopicIDUnchecked = true
	case "ProduceSkipsCRC":
		cfg.Bugs.ProduceSkipsCRC = true
	case "QuiescedNeverWake":
		cfg.Bugs.QuiescedNeverWake = true
	case "FirstBatchMustFit":
		cfg.Bugs.FirstBatchMustFit = true
	case "FullLeaderKeepsLeading": // needs Faults.DiskFull
		cfg.Bugs.FullLeaderKeepsLeading = true
	case "RestartNeverWakes": // needs Faults.DiskFull
		cfg.Bugs.RestartNeverWakes = true
	case "StalledLeaderKeepsLeading": // needs a disk stall (seedOptions draws one)
		cfg.Bugs.StalledLeaderKeepsLeading = true
	case "MoveDropsOldReplicaEarly":
		cfg.Bugs.MoveDropsOldReplicaEarly = true
	case "MoveRacesRebalance":
		cfg.Bugs.MoveRacesRebalance = true
	case "RemoveBeforeCaughtUp":
		cfg.Bugs.RemoveBeforeCaughtUp = true
	case "AuthSkipsAlterQuotas": // needs authorization on (the operator draws it)
		cfg.Bugs.AuthSkipsAlterQuotas = true
	case "AuthRefusesUnconfirmed": // needs authorization on (the operator draws it)
		cfg.Bugs.AuthRefusesUnconfirmed = true
	case "CompactActiveSegment": // needs Options.Compacted
		cfg.Bugs.CompactActiveSegment = true
	case "CompactDeleteUncut": // needs a compact,delete kv seed (kvCompactDelete)
		cfg.Bugs.CompactDeleteUncut = true
	case "PrefixInstallUnchecked": // needs Options.Compacted and a stuck replica
		cfg.Bugs.PrefixInstallUnchecked = true
	case "PrefixTrimUnheld": // needs Options.Compacted (prefixheld.go)
		cfg.Bugs.PrefixTrimUnheld = true
	case "MarkersBeforeDecision": // needs Options.Txn
		cfg.Bugs.MarkersBeforeDecision = true
	case "ElectionInCoreTicks":
		cfg.Bugs.ElectionInCoreTicks = true
	case "TierUploadShifted": // needs Options.Tiered
		cfg.Bugs.TierUploadShifted = true
	case "TierDeleteOnPropose": // needs Options.Tiered
		cfg.Bugs.TierDeleteOnPropose = true
	case "TierLocalEarly": // needs Options.Tiered
		cfg.Bugs.TierLocalEarly = true
	case "TierRemoteOffByOne": // needs Options.Tiered
		cfg.Bugs.TierRemoteOffByOne = true
	case "TierUploadNotReplicated": // needs Options.Tiered
		cfg.Bugs.TierUploadNotReplicated = true
	}
}
