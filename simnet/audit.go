package simnet

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/raftlog/audit"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// The durability audit (raftlog/audit) checks, at the instant a node makes
// a durability promise, that a power loss right then would keep it:
//
//   - every raft message a node sends carries its term, which must be
//     durable (pre-vote traffic excepted: it speaks of a future term);
//   - an accepting MsgAppResp promises the log holds entries up to its
//     Index; a granted MsgVoteResp promises the vote for the candidate in
//     that term;
//   - a produce acknowledged at acks=1 or all promises the leader's log
//     holds the batch.
//
// Messages are observed in Endpoint.Send and answers in the wire reply
// path, decoding frames as the peers would: node's code is untouched. A
// Ready-ordering or fsync bug fails at its first broken promise instead of
// only when a crash lands in its window. Nodes with injected disk faults
// are not audited (their projections may not open, by design).
//
// Rejected: auditing only at crash events (that is what the run already
// did); sampling every check (promises about one log between two syncs
// share one recovery, so the full audit fits the budget).

// streamAudit draws the audit's sampling; the audit changes nothing in the
// run, so its draws never shift another stream.
const streamAudit uint64 = 6

// streamDrift draws the nodes' tick drift (world.go).
const streamDrift uint64 = 7

// produceSearchMax bounds how far back from a log's end the audit looks for
// an acknowledged batch.
const produceSearchMax = 512

// durability is one run's audit state.
type durability struct {
	w        *world
	auditors []*audit.Auditor // per node index, of disks[i]
	disks    []*memdisk.Disk
	rng      *rand.Rand
	// sampleOneIn audits one durable state of a log in this many (1: all,
	// 0: none); sampled states are remembered per node and directory.
	sampleOneIn int
	sample      map[sampleKey]sampleState
	checks      int64
	opensBefore int64 // recoveries of auditors replaced after wipes
	// dirs caches each node's log directory of a topic's partition, and
	// logDirs the directory of each wire topic's partition.
	dirs    map[dirKey]string
	logDirs map[string]map[int32]string
	// recoverLater, per node index: the replica log directories that held
	// unsynced data when the node's Open returned, of replicas it did not
	// host yet; each is checked when its replica starts (afterProcess).
	recoverLater map[int][]string
}

// sampleKey names one log directory of one node.
type sampleKey struct {
	node int
	dir  string
}

// sampleState is the sampling decision for one durable generation.
type sampleState struct {
	generation uint64
	audited    bool
}

// dirKey names a partition of a topic (by name) on one node.
type dirKey struct {
	node      int
	topic     string
	partition int32
}

func newDurability(w *world) *durability {
	d := &durability{w: w, rng: newStream(w.opts.Seed, streamAudit), sampleOneIn: w.opts.AuditOneIn,
		sample: map[sampleKey]sampleState{}, dirs: map[dirKey]string{},
		logDirs: map[string]map[int32]string{}}
	for _, n := range w.nodes {
		d.auditors = append(d.auditors, d.newAuditor(n))
		d.disks = append(d.disks, n.disk)
	}
	return d
}

// auditor returns n's auditor, made anew when n's disk was replaced (a
// wipe).
func (d *durability) auditor(n *simNode) *audit.Auditor {
	if d.disks[n.index] != n.disk {
		d.opensBefore += int64(d.auditors[n.index].Opens)
		d.auditors[n.index], d.disks[n.index] = d.newAuditor(n), n.disk
		for k := range d.sample {
			if k.node == n.index {
				delete(d.sample, k)
			}
		}
		for k := range d.dirs {
			if k.node == n.index {
				delete(d.dirs, k)
			}
		}
	}
	return d.auditors[n.index]
}

// Sampling levels of a promise (see sampled).
const (
	sampleIfDrawn = iota // a log's durable state is drawn for audit one in sampleOneIn
	sampleAlways         // votes: rare, and what split-brain bugs break
	sampleIfOpen         // term-only promises: only when the state was drawn anyway
)

// sampled reports whether a promise about the log in dir is audited now.
// The draw holds for the log's durable generation: every promise made
// between two syncs shares one recovery, so sampling by generation saves
// recoveries where sampling promises would not. Term-only promises (every
// message carries one) never cause a recovery of their own.
func (d *durability) sampled(n *simNode, dir string, level int) bool {
	if d.sampleOneIn <= 0 || !n.up || n.hasFaults() || n.flipped {
		return false
	}
	gen := n.disk.DurableGeneration(dir)
	k := sampleKey{node: n.index, dir: dir}
	s, ok := d.sample[k]
	if ok && s.generation == gen && (s.audited || level != sampleAlways) {
		return s.audited
	}
	switch level {
	case sampleIfOpen:
		return false
	case sampleAlways:
		s = sampleState{generation: gen, audited: true}
	default:
		s = sampleState{generation: gen, audited: d.sampleOneIn == 1 || d.rng.IntN(d.sampleOneIn) == 0}
	}
	d.sample[k] = s
	return s.audited
}

// check audits one promise of node n about the log in dir.
func (d *durability) check(n *simNode, dir string, p audit.Promise, what func() string) {
	d.checks++
	d.w.coverage.Inc("audit/promises")
	if err := d.auditor(n).Check(dir, p); err != nil {
		d.w.coverage.Inc("audit/broken")
		d.w.fail("durability: node %d sent %s: %v", n.id, what(), err)
	}
}

// logDir is where a node keeps the raft log of the group a raft message's
// wire topic names (node/meta.go's layout: meta/log for the metadata group,
// p/<name@id>/<partition>/log for a partition), cached so the hot path
// does not allocate.
func (d *durability) logDir(wireTopic []byte, partition int32) string {
	byPart := d.logDirs[string(wireTopic)]
	if byPart == nil {
		byPart = map[int32]string{}
		d.logDirs[string(wireTopic)] = byPart
	}
	dir, ok := byPart[partition]
	if !ok {
		dir = "p/" + string(wireTopic) + "/" + strconv.Itoa(int(partition)) + "/log"
		if string(wireTopic) == metaTopicPartition.Topic {
			dir = "meta/log"
		}
		byPart[partition] = dir
	}
	return dir
}

// onSend audits the raft messages of a frame node index from is sending.
func (d *durability) onSend(from int, frame []byte) {
	n := d.w.nodes[from]
	if !n.up {
		return
	}
	for b := frame; len(b) > 0; {
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 {
			return
		}
		b = b[k:]
		if num == 2 && typ == protowire.BytesType {
			v, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return
			}
			d.onMessage(n, v)
			b = b[k:]
			continue
		}
		k = protowire.ConsumeFieldValue(num, typ, b)
		if k < 0 {
			return
		}
		b = b[k:]
	}
}

// rawMessage is what the audit reads of a raftpb.Message: its scalars.
type rawMessage struct {
	kind                     raftpb.MessageType
	to, term, index, logTerm uint64
	reject                   bool
}

// onMessage audits one RaftMessage (topic, partition, raftpb.Message).
func (d *durability) onMessage(n *simNode, b []byte) {
	var topic []byte
	var partition int32
	var msg []byte
	for len(b) > 0 {
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 {
			return
		}
		b = b[k:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			topic, k = protowire.ConsumeBytes(b)
		case num == 2 && typ == protowire.VarintType:
			var v uint64
			v, k = protowire.ConsumeVarint(b)
			partition = int32(v)
		case num == 3 && typ == protowire.BytesType:
			msg, k = protowire.ConsumeBytes(b)
		default:
			k = protowire.ConsumeFieldValue(num, typ, b)
		}
		if k < 0 {
			return
		}
		b = b[k:]
	}
	m, ok := scanMessage(msg)
	if !ok || m.term == 0 || m.kind == raftpb.MsgPreVote || m.kind == raftpb.MsgPreVoteResp {
		return
	}
	p, level := audit.Promise{HardTerm: m.term}, sampleIfOpen
	switch {
	case m.kind == raftpb.MsgAppResp && m.reject:
		d.w.coverage.Inc("event/append-rejected")
	case m.kind == raftpb.MsgAppResp && !m.reject:
		p.Index, level = m.index, sampleIfDrawn
	case m.kind == raftpb.MsgVote:
		p.Vote, level = uint64(n.id), sampleAlways
	case m.kind == raftpb.MsgVoteResp && !m.reject:
		p.Vote, level = m.to, sampleAlways
		d.w.coverage.Inc("event/vote-granted")
	}
	dir := d.logDir(topic, partition)
	if !d.sampled(n, dir, level) {
		return
	}
	d.check(n, dir, p, func() string { return fmt.Sprintf("%v to %d in %s/%d", m.kind, m.to, topic, partition) })
}

// scanMessage reads a marshalled raftpb.Message's scalar fields, skipping
// entries and snapshots without decoding them.
func scanMessage(b []byte) (m rawMessage, ok bool) {
	for len(b) > 0 {
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 {
			return m, false
		}
		b = b[k:]
		if typ != protowire.VarintType {
			if k = protowire.ConsumeFieldValue(num, typ, b); k < 0 {
				return m, false
			}
			b = b[k:]
			continue
		}
		v, k := protowire.ConsumeVarint(b)
		if k < 0 {
			return m, false
		}
		b = b[k:]
		switch num {
		case 1:
			m.kind = raftpb.MessageType(v)
		case 2:
			m.to = v
		case 4:
			m.term = v
		case 5:
			m.logTerm = v
		case 6:
			m.index = v
		case 10:
			m.reject = v != 0
		}
	}
	return m, true
}

// onProduceAnswer audits a produce answer node n gives: each partition
// acknowledged at acks=1 or all must be in n's log, durably.
func (d *durability) onProduceAnswer(n *simNode, req *strandpb.ProduceRequest, resp *strandpb.ProduceResponse) {
	if d.sampleOneIn <= 0 || req == nil || resp == nil || (req.GetAcks() != 1 && req.GetAcks() != -1) {
		return
	}
	for _, rp := range resp.GetPartitions() {
		if rp.GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE {
			continue
		}
		var sent *strandpb.ProduceRequest_Partition
		for _, q := range req.GetPartitions() {
			if q.GetTopic() == rp.GetTopic() && q.GetPartition() == rp.GetPartition() {
				sent = q
			}
		}
		if sent != nil {
			d.checkProduce(n, req.GetAcks(), sent, rp.GetBaseOffset())
		}
	}
}

// checkProduce looks for the acknowledged batch (at offset, -1 when the
// answer names none) among the last entries a power loss would keep of n's
// log of the partition.
func (d *durability) checkProduce(n *simNode, acks int32, sent *strandpb.ProduceRequest_Partition, offset int64) {
	var dir string
	var ok bool
	if uuid := sent.GetTopicId(); len(uuid) > 0 {
		// The incarnation the client named (the node checked it).
		id, known := d.w.incarnations.topicIDOf(uuid)
		if !known {
			return
		}
		if !hosts(n, sent.GetTopic(), sent.GetPartition(), id) {
			// The answer left as the replica was deleted with its
			// topic (seed 58): a deleted topic keeps nothing.
			return
		}
		dir, ok = replicaLogDir(sent.GetTopic(), id, sent.GetPartition()), true
	} else {
		dir, ok = d.partitionDir(n, sent.GetTopic(), sent.GetPartition())
	}
	if !ok {
		d.w.fail("durability: node %d acknowledged a produce to %s/%d, of which it has no log",
			n.id, sent.GetTopic(), sent.GetPartition())
		return
	}
	if !d.sampled(n, dir, sampleIfDrawn) {
		return
	}
	d.checks++
	d.w.coverage.Inc("audit/produce-acks")
	match := func(e *raftpb.Entry) bool {
		if e.GetType() != raftpb.EntryNormal || len(e.GetData()) == 0 {
			return false
		}
		f, err := engine.DecodeEntry(e.GetData())
		return err == nil && f.Kind == strandpb.EntryKind_ENTRY_KIND_PRODUCE &&
			f.ProducerID == sent.GetProducerId() && f.ProducerEpoch == sent.GetProducerEpoch() &&
			f.BaseSequence == sent.GetBaseSequence() && bytes.Equal(f.Batch, sent.GetBatch())
	}
	if _, _, err := d.auditor(n).Find(dir, produceSearchMax, match); err != nil {
		if belowLogStart(n, sent, offset) {
			// Removed (retention, DeleteRecords) before the answer left,
			// and its entry folded into the snapshot a checkpoint took
			// meanwhile: nothing in the log to find, and the removal is
			// the retention checks' to judge (seed 128: acknowledged at
			// offset 85, the log start already 88, the log a snapshot at
			// 76 and one entry).
			d.w.coverage.Inc("audit/produce-below-log-start")
			return
		}
		d.w.coverage.Inc("audit/broken")
		d.w.fail("durability: node %d acknowledged a produce (acks=%d) to %s/%d (producer %d sequence %d): %v",
			n.id, acks, sent.GetTopic(), sent.GetPartition(), sent.GetProducerId(), sent.GetBaseSequence(), err)
	}
}

// partitionDir finds n's log directory of topic's partition: the one of
// the newest topic id (a re-created topic has a greater id).
func (d *durability) partitionDir(n *simNode, topic string, partition int32) (string, bool) {
	k := dirKey{node: n.index, topic: topic, partition: partition}
	if dir, ok := d.dirs[k]; ok {
		return dir, true
	}
	prefix, suffix := "p/"+topic+"@", "/"+strconv.Itoa(int(partition))+"/log/"
	best, bestID := "", uint64(0)
	for _, name := range n.disk.Files() {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		i := strings.Index(rest, suffix)
		if i < 0 {
			continue
		}
		id, err := strconv.ParseUint(rest[:i], 10, 64)
		if err == nil && (best == "" || id > bestID) {
			best, bestID = name[:len(prefix)+i+len(suffix)-1], id
		}
	}
	if best == "" {
		return "", false
	}
	d.dirs[k] = best
	return best, true
}

// report sets the audit's cost figure in the coverage (recoveries run) and
// the network's fault counts.
func (d *durability) report() {
	d.w.coverage.counts["fault/net-drop"] = d.w.net.drops
	d.w.coverage.counts["fault/net-dup"] = d.w.net.dups
	d.w.coverage.counts["fault/restart"] = int64(d.w.stats.Restarts)
	d.w.coverage.counts["fault/fail-stop"] = int64(d.w.stats.FailStops)
	d.w.coverage.counts["fault/cut-checkpoint"] = int64(d.w.stats.CutsCheckpoint)
	d.w.coverage.counts["fault/cut-segment-roll"] = int64(d.w.stats.CutsSegmentRoll)
	d.w.coverage.counts["fault/crash-election"] = int64(d.w.stats.CrashElections)
	d.w.coverage.counts["event/stale-read"] = int64(d.w.stats.StaleReads)
	d.w.coverage.counts["event/read-any-replica"] = int64(d.w.stats.ReadsAnyReplica)
	opens := d.opensBefore
	for _, a := range d.auditors {
		opens += int64(a.Opens)
	}
	d.w.coverage.counts["audit/recoveries"] = opens
}

// afterOpen checks what recovery promises: raft takes everything a
// recovered log holds as stable, so once Open returns, a power loss must
// keep every log it recovered exactly as it is (raftlog's rule 8). After a
// process kill inside a round, or between a sync job's writes and its
// fsync, the page cache holds unsynced entries that recovery reads back; a
// recovery that trusts them breaks this at once, where the message audit
// would wait for a promise that depends on them. The logs Open recovered
// are the metadata group's and those of the replicas it hosts at once
// (from a metadata checkpoint); the replicas the metadata log's replay
// starts later are checked when they start (afterProcess). It runs with
// the audit on, at any sampling: restarts are few.
func (d *durability) afterOpen(n *simNode) {
	if d.recoverLater == nil {
		d.recoverLater = map[int][]string{}
	}
	d.recoverLater[n.index] = d.recoverLater[n.index][:0]
	if d.sampleOneIn <= 0 || n.hasFaults() || n.flipped {
		return
	}
	d.checkRecovered(n, "meta/log")
	checked := map[string]bool{}
	for _, s := range n.core.Status() {
		if s.TopicID != 0 {
			// The incarnation this replica is (an older one than the
			// newest directory on disk, when its node's metadata
			// checkpoint predates a re-creation).
			dir := replicaLogDir(s.Topic, s.TopicID, s.Partition)
			checked[dir] = true
			d.checkRecovered(n, dir)
		} else if dir, ok := d.partitionDir(n, s.Topic, s.Partition); ok {
			checked[dir] = true
			d.checkRecovered(n, dir)
		}
	}
	if d.w.opts.WAL {
		// The group logs are written on the loop and synced lazily (the
		// write-ahead log holds them durably): a replica's log may be
		// unsynced again by the end of the round that started it.
		return
	}
	last := ""
	for _, name := range n.disk.Files() { // sorted: each directory's files together
		dir, ok := replicaLogDirOf(name)
		if !ok || dir == last || checked[dir] {
			continue
		}
		last = dir
		if !n.disk.Synced(dir) {
			d.recoverLater[n.index] = append(d.recoverLater[n.index], dir)
		}
	}
}

// replicaLogDirOf returns the replica log directory file name is directly
// in ("p/<topic>@<id>/<partition>/log").
func replicaLogDirOf(name string) (string, bool) {
	if !strings.HasPrefix(name, "p/") {
		return "", false
	}
	i := strings.LastIndexByte(name, '/')
	if i < 0 || !strings.HasSuffix(name[:i], "/log") {
		return "", false
	}
	return name[:i], true
}

// afterProcess checks, after a round of n, the recovery of each replica
// log in recoverLater whose replica started in it: the log held unsynced
// data when n opened, so its recovery must have synced it (or cut it
// off). In this mode (no write-ahead log) the round that starts a replica
// issues no unsynced write to its log (SaveSome's writes wait for the
// sync job the round hands over), so the check sees what recovery left.
func (d *durability) afterProcess(n *simNode, statuses []node.GroupStatus) {
	if len(d.recoverLater[n.index]) == 0 {
		return
	}
	if n.hasFaults() || n.flipped {
		d.recoverLater[n.index] = d.recoverLater[n.index][:0]
		return
	}
	for _, s := range statuses {
		if s.TopicID == 0 {
			continue
		}
		dirs := d.recoverLater[n.index]
		dir := replicaLogDir(s.Topic, s.TopicID, s.Partition)
		if i := slices.Index(dirs, dir); i >= 0 {
			d.recoverLater[n.index] = slices.Delete(dirs, i, i+1)
			d.w.coverage.Inc("audit/recovered-later")
			d.checkRecovered(n, dir)
		}
	}
}

// checkRecovered fails the run when a power loss now would change the
// just-recovered log in dir.
func (d *durability) checkRecovered(n *simNode, dir string) {
	d.w.coverage.Inc("audit/recovered-logs")
	if !n.disk.Synced(dir) {
		d.w.coverage.Inc("audit/broken")
		d.w.fail("durability: node %d recovered %s, but a power loss now would change it: recovery reported unsynced data as stable",
			n.id, dir)
	}
}

// belowLogStart reports whether n's replica of sent's partition already
// starts past the acknowledged batch at offset (-1: unknown, false).
func belowLogStart(n *simNode, sent *strandpb.ProduceRequest_Partition, offset int64) bool {
	if offset < 0 {
		return false
	}
	for _, st := range n.core.Status() {
		if st.Topic == sent.GetTopic() && st.Partition == sent.GetPartition() && offset < st.LogStartOffset {
			return true
		}
	}
	return false
}
