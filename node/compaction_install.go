package node

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/raftlog/compacted"
	"google.golang.org/protobuf/proto"
)

// Installing a compacted prefix from a peer (issue 24; engine/compact's
// doc, "Replicas"). A replica that cannot run its passes (it is "stuck":
// a raft snapshot past its log, a missed generation, a prefix that does
// not open or whose end and digest differ from the engine's record)
// installs the prefix of the generation the record names from a peer
// whose prefix of that generation is current:
//
//  1. Asking (on the loop, at each retention check while stuck and no
//     install runs): once the record names a generation past the
//     replica's own (or its own one with another end or digest, whose
//     files are then removed first: they are wrong, and a same-generation
//     writer would write over their names), the replica sends a
//     PrefixRequest to one peer of the group's voters, in turn, from the
//     prefix's start.
//  2. Serving (on the peer's loop): a replica whose current generation is
//     the one asked, whose passes are not stuck and whose prefix agrees
//     with its own engine's record when that record is of the generation,
//     answers a PrefixChunk of whole batches (ReadBatches, at most
//     Config.PrefixChunkBytes and fetchBatchesMax), with its prefix's start, end
//     and digest; any other replica refuses (generation 0).
//  3. Writing (off the loop, untimed like a pass's write): the first
//     chunk begins a Writer of that generation beside the current one
//     (raftlog/compacted's Begin), each chunk's batches are appended by a
//     storage job (Append checks each batch whole), and the next chunk is
//     asked once the job is done. An answer that is not the one awaited
//     (another peer, generation or offset) is dropped; none within
//     RequestTimeoutTicks drops the writer and the next check asks the
//     next peer.
//  4. Committing (off the loop, timed): Commit with the end and digest of
//     the engine's record, which it checks against the bytes written
//     (ErrDigestMismatch: the writer is dropped, the next peer asked), then
//     the switch; on the loop, Finish makes it current, the replica is no
//     longer stuck, the decisions up to that generation leave its pending
//     list and the replaced generation's files go.
//
// A crash at any step leaves the old generation (or none, after a wrong
// one was removed) and the replica stuck again at reopen; the raft log
// still holds every record at or past the prefix end the replica trimmed
// to, since the trim is bounded by the record's end (prefixTrimBound).
// Rejected: the installing replica trusting the peer's digest (a peer's
// prefix may be damaged; only the record, agreed through raft, says what
// generation g is); shipping the prefix inside raft's MsgSnap (engine/
// compact's doc: every snapshot would carry the live set).

// prefixChunkBytes is Config.PrefixChunkBytes's default.
const prefixChunkBytes = 256 << 10

// compactedManifest is the name of a compacted prefix's manifest file
// (raftlog/compacted's doc, "Files").
const compactedManifest = "manifest"

// prefixInstall is one install in progress (passState.install).
type prefixInstall struct {
	gen    uint64
	end    int64
	digest [sha256.Size]byte
	peer   NodeID
	// next is the offset of the chunk awaited (-1: the first); deadline
	// the tick by which it must come.
	next     int64
	deadline uint64
	w        *compacted.Writer
	// job is the token of the append or (commit) commit job in flight.
	job    uint64
	commit bool
	last   bool // the chunk being appended is the last
}

// prefixFrame is what a received frame carried for prefix installs.
type prefixFrame struct {
	requests []*strandpb.PrefixRequest
	chunks   []*strandpb.PrefixChunk
	held     []*strandpb.PrefixHeld // compaction_held.go
}

// installTarget says whether stuck g should install the record's
// generation, and whether its own prefix must go first.
func (c *Core) installTarget(g *group) (target, discard bool) {
	st := g.part.Compaction()
	if st.DoneGeneration == 0 {
		return false, false // nothing reported yet: no peer could be checked
	}
	s := g.pass.store
	if s == nil || g.pass.damaged {
		return true, true // it does not open, or a read found it damaged
	}
	switch gen := s.Generation(); {
	case st.DoneGeneration > gen:
		return true, false
	case st.DoneGeneration == gen && (st.CleanedTo != s.End() || st.Digest != s.Digest()):
		return true, true
	}
	return false, false // wait for the record to pass this replica's prefix
}

// installStep starts an install on stuck g, or abandons one whose answer
// is late.
func (c *Core) installStep(g *group) {
	p := &g.pass
	if in := p.install; in != nil {
		if in.job != 0 || c.ticks < in.deadline {
			return
		}
		c.dropInstall(g, "no answer from the peer")
		return
	}
	target, discard := c.installTarget(g)
	if !target {
		return
	}
	if discard && !c.discardPrefix(g) {
		return
	}
	if p.store == nil && !c.openPrefix(g) {
		return
	}
	var peers []NodeID
	for _, id := range g.confState.GetVoters() {
		if NodeID(id) != c.cfg.ID {
			peers = append(peers, NodeID(id))
		}
	}
	if len(peers) == 0 {
		return
	}
	slices.Sort(peers)
	peer := peers[p.installTurn%len(peers)]
	p.installTurn++
	st := g.part.Compaction()
	p.install = &prefixInstall{gen: st.DoneGeneration, end: st.CleanedTo, digest: st.Digest, peer: peer, next: -1}
	c.askPrefix(g, p.install)
}

// askPrefix sends in's next request.
func (c *Core) askPrefix(g *group, in *prefixInstall) {
	in.deadline = c.ticks + uint64(c.cfg.RequestTimeoutTicks)
	req := &strandpb.PrefixRequest{Topic: wireTopic(g.tp.Topic, g.topicID), Partition: g.tp.Partition,
		Generation: in.gen, Offset: in.next}
	c.sendPrefixFrame(in.peer, &strandpb.RaftFrame{FromNode: uint64(c.cfg.ID), PrefixRequests: []*strandpb.PrefixRequest{req}})
}

// sendPrefixFrame sends a frame of prefix requests or chunks.
func (c *Core) sendPrefixFrame(to NodeID, f *strandpb.RaftFrame) {
	b, err := deterministic.Marshal(f)
	if err != nil {
		panic(fmt.Sprintf("node: marshal a prefix frame: %v", err))
	}
	c.cfg.Network.Send(to, b)
	c.stats.FramesSent++
}

// discardPrefix removes g's compacted prefix, wrong or unreadable, so an
// install of its generation can begin (on the loop: a few files).
func (c *Core) discardPrefix(g *group) bool {
	c.closePrefix(g)
	dir := g.dir + compactedDir
	// The manifest first, durably: a power cut in the middle then leaves
	// no generation (the stuck replica installs again), never a manifest
	// naming removed segments.
	names, err := c.cfg.Disk.List(dir)
	if err == nil && slices.Contains(names, compactedManifest) {
		err = c.cfg.Disk.Remove(dir + "/" + compactedManifest)
		if err == nil {
			err = c.cfg.Disk.SyncDir(dir)
		}
	}
	if err == nil {
		err = removeDir(c.cfg, dir)
	}
	if err != nil {
		c.failStorage(g, fmt.Errorf("%w: removing a wrong compacted prefix: %v", ErrStorage, err))
		return false
	}
	return true
}

// dropInstall ends g's install without a switch.
func (c *Core) dropInstall(g *group, why string) {
	in := g.pass.install
	g.pass.install = nil
	if in.w != nil && g.pass.store != nil {
		_ = g.pass.store.Finish(in.w) // uncommitted: dropped
	}
	g.logs.log(slog.LevelWarn, "compacted prefix install abandoned; the next check asks another peer",
		slog.Uint64("generation", in.gen), slog.Uint64("peer", uint64(in.peer)), slog.String("why", why))
}

// receivePrefixFrame serves a peer's prefix requests and takes the chunks
// this node's installs wait for.
func (c *Core) receivePrefixFrame(from NodeID, f *prefixFrame) {
	for _, req := range f.requests {
		c.servePrefix(from, req)
	}
	for _, ch := range f.chunks {
		c.takeChunk(from, ch)
	}
	for _, h := range f.held {
		c.takeHeld(from, h)
	}
}

// servePrefix answers one PrefixRequest (step 2).
func (c *Core) servePrefix(from NodeID, req *strandpb.PrefixRequest) {
	ans := &strandpb.PrefixChunk{Topic: req.GetTopic(), Partition: req.GetPartition()}
	defer func() {
		c.sendPrefixFrame(from, &strandpb.RaftFrame{FromNode: uint64(c.cfg.ID), PrefixChunks: []*strandpb.PrefixChunk{ans}})
	}()
	g := c.routeMessage(req.GetTopic(), req.GetPartition())
	if g == nil || req.GetTopic() == metaTopic {
		return
	}
	g.pass.askedAt = c.ticks
	if g.pass.stuck != "" {
		ans.Stuck = true
		return
	}
	if g.pass.install != nil || !c.openPrefix(g) {
		return
	}
	s := g.pass.store
	st := g.part.Compaction()
	if s.Generation() == 0 || s.Generation() != req.GetGeneration() ||
		(st.DoneGeneration == s.Generation() && (st.CleanedTo != s.End() || st.Digest != s.Digest())) {
		return
	}
	offset := max(req.GetOffset(), s.Start())
	buf, next, err := s.ReadBatches(nil, offset, c.cfg.PrefixChunkBytes, fetchBatchesMax)
	if err != nil {
		if errors.Is(err, compacted.ErrCorrupt) {
			c.prefixFailed(g, err)
		}
		return
	}
	digest := s.Digest()
	ans.Generation, ans.Start, ans.End, ans.Digest = s.Generation(), s.Start(), s.End(), digest[:]
	ans.Offset, ans.Next, ans.Batches = offset, next, buf
}

// takeChunk appends a chunk g's install waits for (step 3).
func (c *Core) takeChunk(from NodeID, ch *strandpb.PrefixChunk) {
	g := c.routeMessage(ch.GetTopic(), ch.GetPartition())
	if g == nil || ch.GetTopic() == metaTopic {
		return
	}
	notePeerStuck(&g.pass, from, ch.GetStuck())
	if g.pass.install == nil || g.pass.store == nil {
		return
	}
	in := g.pass.install
	if in.peer != from || in.job != 0 || ch.GetGeneration() != in.gen {
		if in.peer == from && in.job == 0 && ch.GetGeneration() == 0 {
			why := "the peer holds no such prefix"
			if ch.GetStuck() {
				why = "the peer is stuck too"
			}
			c.dropInstall(g, why)
		}
		return
	}
	if (in.next >= 0 && ch.GetOffset() != in.next) || (in.next < 0 && ch.GetOffset() != ch.GetStart()) {
		return // a late or duplicated answer
	}
	if ch.GetEnd() != in.end || len(ch.GetDigest()) != sha256.Size || [sha256.Size]byte(ch.GetDigest()) != in.digest ||
		ch.GetNext() <= ch.GetOffset() && ch.GetNext() != ch.GetEnd() {
		c.dropInstall(g, "the peer's prefix is not the record's")
		return
	}
	if in.w == nil {
		w, err := g.pass.store.Begin(in.gen, ch.GetStart())
		if err != nil {
			c.dropInstall(g, err.Error())
			return
		}
		in.w = w
	}
	batches, w := ch.GetBatches(), in.w
	in.next, in.last = ch.GetNext(), ch.GetNext() >= ch.GetEnd() || c.bugInstallFirstChunk() // planted-bug hook (-tags simbugs)
	guard := c.replicaGuard(g.dir)
	run := func() error { return guard.do(func() error { return appendChunk(w, batches) }) }
	in.job = c.queueJob(syncJob{g: g, run: run, install: in, untimed: true})
}

// appendChunk appends a chunk's batches to w, one at a time.
func appendChunk(w *compacted.Writer, buf []byte) error {
	for len(buf) > 0 {
		if len(buf) < compact.HeaderBytes {
			return fmt.Errorf("%w: %d bytes left after a batch", compacted.ErrCorrupt, len(buf))
		}
		n := compact.HeaderBytes + int(binary.LittleEndian.Uint32(buf[compact.HeaderBytes-4:]))
		if n > len(buf) || n < compact.HeaderBytes {
			return fmt.Errorf("%w: batch of %d bytes, %d left", compacted.ErrCorrupt, n, len(buf))
		}
		if err := w.Append(buf[:n:n]); err != nil {
			return err
		}
		buf = buf[n:]
	}
	return nil
}

// finishInstallJob ends an install's append or commit job on the loop.
func (c *Core) finishInstallJob(token uint64, job syncJob, err error) {
	g, in := job.g, job.install
	if !c.hosted(g) || g.pass.install != in || in.job != token {
		return
	}
	in.job = 0
	s := g.pass.store
	if err != nil {
		if in.commit && errors.Is(err, compacted.ErrFailed) {
			g.pass.install = nil
			ferr := s.Finish(in.w)
			g.logs.log(slog.LevelError, "compacted prefix switch failed; the node stops (fail-stop)", slog.Any("err", err))
			c.fatal = fmt.Errorf("node: %s/%d: compacted prefix install: %w", g.tp.Topic, g.tp.Partition, errors.Join(err, ferr))
			return
		}
		c.dropInstall(g, err.Error())
		return
	}
	if !in.commit {
		c.stats.PrefixChunks++
	}
	if !in.last {
		c.askPrefix(g, in)
		return
	}
	if !in.commit {
		w, end, digest, guard := in.w, in.end, in.digest, c.replicaGuard(g.dir)
		in.commit = true
		run := func() error { return guard.do(func() error { return w.Commit(end, digest) }) }
		in.job = c.queueJob(syncJob{g: g, run: run, install: in})
		return
	}
	g.pass.install = nil
	if err := s.Finish(in.w); err != nil {
		c.fatal = fmt.Errorf("node: %s/%d: compacted prefix install: %w", g.tp.Topic, g.tp.Partition, err)
		return
	}
	// The engine's decision is noted again at the next check: the next
	// pass if it is in.gen + 1, stuck again (a later install) if later.
	p := &g.pass
	p.seeded, p.noted, p.pending, p.stuck, p.damaged = false, 0, nil, "", false
	c.stats.PrefixInstalls++
	g.logs.log(slog.LevelInfo, "compacted prefix installed from a peer", slog.Uint64("generation", in.gen),
		slog.Uint64("peer", uint64(in.peer)), slog.Int64("end", in.end))
	guard, remove := c.replicaGuard(g.dir), s.StaleRemoval()
	c.queueJob(syncJob{g: g, run: func() error { return guard.do(remove) }, trash: true})
	if c.passActive(g) {
		c.passStep(g)
	}
}

// prefixFramesMax bounds the requests or chunks taken from one frame.
const prefixFramesMax = 64

// parseHeld decodes one prefix_held field; one that does not decode is
// dropped.
func (f *prefixFrame) parseHeld(b []byte) {
	if m := (&strandpb.PrefixHeld{}); proto.Unmarshal(b, m) == nil && len(f.held) < prefixFramesMax {
		f.held = append(f.held, m)
	}
}

// parse decodes one prefix_requests (chunk false) or prefix_chunks field;
// one that does not decode is dropped.
func (f *prefixFrame) parse(chunk bool, b []byte) {
	if chunk {
		if m := (&strandpb.PrefixChunk{}); proto.Unmarshal(b, m) == nil && len(f.chunks) < prefixFramesMax {
			f.chunks = append(f.chunks, m)
		}
		return
	}
	if m := (&strandpb.PrefixRequest{}); proto.Unmarshal(b, m) == nil && len(f.requests) < prefixFramesMax {
		f.requests = append(f.requests, m)
	}
}

// notePeerStuck records whether peer's answer said it is stuck: in
// p.stuckPeers or p.freePeers, out of the other.
func notePeerStuck(p *passState, peer NodeID, stuck bool) {
	add, drop := &p.freePeers, &p.stuckPeers
	if stuck {
		add, drop = drop, add
	}
	if i, in := slices.BinarySearch(*add, peer); !in {
		*add = slices.Insert(*add, i, peer)
	}
	if i, in := slices.BinarySearch(*drop, peer); in {
		*drop = slices.Delete(*drop, i, i+1)
	}
}

// probeStuck asks peer, for a stuck leader deciding where to hand its
// leadership, whether it is stuck too: a request for generation gen's
// first chunk, answered like any other (takeChunk notes the answer's
// stuck flag; the chunk itself, if any, no install awaits).
func (c *Core) probeStuck(g *group, peer NodeID, gen uint64) {
	req := &strandpb.PrefixRequest{Topic: wireTopic(g.tp.Topic, g.topicID), Partition: g.tp.Partition,
		Generation: gen, Offset: -1}
	c.sendPrefixFrame(peer, &strandpb.RaftFrame{FromNode: uint64(c.cfg.ID), PrefixRequests: []*strandpb.PrefixRequest{req}})
}
