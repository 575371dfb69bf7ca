package simnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// Whole-state comparison of replicas. The world keeps one reference engine
// per group (engine.Partition, or metadata.State for the metadata group)
// fed with the committed entries in index order, as the first replica to
// apply each index reports them, and records its Digest at every index.
// A replica's own engine state becomes visible when it writes a
// checkpoint (node/checkpoint.go: the engine's Snapshot as of a raft
// index, synced, then its directory synced): the world restores it and
// compares its Digest with the reference at that index. A replica whose
// state drifted from what its applied prefix implies (a restore that
// forgot the producer table, an index entry, the log start) fails at the
// first checkpoint after the drift, whatever the high-water mark says.
//
// Every replica's live state is compared too: node.GroupStatus carries the
// engine's Digest (O(1) for a partition, cached per applied index for the
// metadata group), and checkStatus compares it with the reference at the
// replica's applied index after every event the replica processes, so a
// restore that forgot part of the state fails at the restored index.
//
// A replica restored from a raft snapshot at S (installed from a leader, or
// at restart) lacks the batches below the log start that a TRIM after S
// agreed, until it applies that TRIM itself (node/snapshot.go). While its
// log start is above the reference's and at most the largest TRIM offset
// committed after the index, it is compared by TailDigest (applied index,
// high-water mark, producer table); everywhere else by the whole digest.
// A replica that moved its log start on its own (a compaction above the
// agreed start) is outside that window and fails.
//
// Rejected: comparing checkpoints of different replicas with each other
// (they checkpoint at different indexes); a running hash of applied
// entries (a restore cannot rebuild it).

// reference is one group's reference replay.
type reference struct {
	part    *engine.Partition
	meta    *metadata.State
	applied uint64
	digests map[uint64]refDigest // by raft index
	// trims are the TRIM entries applied, in index order.
	trims []refTrim
	// decisions are the COMPACT decisions applied, by generation - 1;
	// reported is the last generation a COMPACT_DONE recorded
	// (prefixes.go).
	decisions []compact.Decision
	reported  uint64
}

// refDigest is the reference state at one index.
type refDigest struct {
	digest, tail uint64
	logStart     int64
}

// refTrim is one TRIM entry of the reference.
type refTrim struct {
	index  uint64
	offset int64
}

// trimAfter is the largest offset of the TRIMs applied after index.
func (r *reference) trimAfter(index uint64) int64 {
	best := int64(-1)
	for i := len(r.trims) - 1; i >= 0 && r.trims[i].index > index; i-- {
		best = max(best, r.trims[i].offset)
	}
	return best
}

// matches reports whether a replica state (digest, tail digest, log start)
// at index agrees with the reference, and whether it did so only by the
// tail digest inside a snapshot's window.
func (r *reference) matches(index uint64, want refDigest, digest, tail uint64, logStart int64) (ok, window bool) {
	if digest == want.digest {
		return true, false
	}
	if r.part == nil || logStart <= want.logStart || logStart > r.trimAfter(index) {
		return false, false
	}
	return tail == want.tail, true
}

// digests is one run's whole-state comparison.
type digests struct {
	w    *world
	refs []*reference // by group index
	// seen is each node's DurableSeq at its last look; checked the header
	// it last compared per checkpoint directory.
	seen     []uint64
	disks    []*memdisk.Disk // the disk seen[i] counts on
	checked  []map[string]checkedHeader
	compared int64
	// prefixes is, per group slot, each compaction generation's outcome
	// as first seen (prefixes.go).
	prefixes map[int]map[uint64]prefixOutcome
}

func newDigests(w *world) *digests {
	d := &digests{w: w, seen: make([]uint64, len(w.nodes)), checked: make([]map[string]checkedHeader, len(w.nodes))}
	for range w.opts.Partitions {
		d.refs = append(d.refs, &reference{part: engine.NewPartition(), digests: map[uint64]refDigest{}})
	}
	d.refs = append(d.refs, &reference{meta: metadata.New(), digests: map[uint64]refDigest{}})
	for range coordinatorPartitions(w.opts) { // the coordinators' partitions come after it
		d.refs = append(d.refs, &reference{part: engine.NewPartition(), digests: map[uint64]refDigest{}})
	}
	for i, n := range w.nodes {
		d.checked[i] = map[string]checkedHeader{}
		d.disks = append(d.disks, n.disk)
	}
	return d
}

// onApply feeds the reference of group g with entry index, once, and
// returns a partition's Result of it (ok: applied here, now).
func (d *digests) onApply(g int, index uint64, data []byte) (res engine.Result, ok bool) {
	if !d.w.opts.DigestChecks {
		return res, false
	}
	r := d.ref(g)
	if index != r.applied+1 {
		return res, false // replayed by another replica or incarnation: checked by entry digest
	}
	r.applied = index
	if r.meta != nil {
		if len(data) == 0 {
			r.meta.ApplyEmpty(index)
		} else {
			r.meta.Apply(index, data)
		}
		r.digests[index] = refDigest{digest: r.meta.Digest()}
		return res, false
	}
	if len(data) == 0 {
		r.part.ApplyEmpty(index)
	} else {
		res, ok = r.part.Apply(index, data), true
		if errors.Is(res.Err, recordbatch.ErrCorrupt) {
			// A node must refuse a damaged batch before proposing it
			// (corrupt.go): a committed one wastes an index and answers a
			// client after the fact.
			d.w.fail("group %s index %d: a committed entry holds a damaged batch: %v", d.w.incarnations.label(g), index, res.Err)
		}
		if e, err := engine.DecodeEntry(data); err == nil && e.Kind == strandpb.EntryKind_ENTRY_KIND_TRIM {
			r.trims = append(r.trims, refTrim{index: index, offset: e.TrimOffset})
		}
		d.noteDecisions(g, r)
	}
	r.digests[index] = refDigest{digest: r.part.Digest(), tail: r.part.TailDigest(), logStart: r.part.LogStartOffset()}
	return res, ok
}

// checkStatus compares the digest a replica reports for its engine state
// (node.GroupStatus.Digest) with the reference's at the replica's applied
// index: a replica whose state drifted from what its applied prefix
// implies fails at the first index where it reports the drift, not at
// its next checkpoint.
func (d *digests) checkStatus(n *simNode, g int, s node.GroupStatus) {
	if !d.w.opts.DigestChecks || s.AppliedIndex == 0 {
		return
	}
	want, ok := d.ref(g).digests[s.AppliedIndex]
	if !ok {
		return
	}
	d.w.coverage.Inc("digest/status-compared")
	ok, window := d.refs[g].matches(s.AppliedIndex, want, s.Digest, s.TailDigest, s.LogStartOffset)
	if window {
		d.w.coverage.Inc("digest/snapshot-window")
	}
	if !ok {
		d.w.fail("digest: node %d's state of group %d at applied index %d has digest %016x (log start %d, tail %t, hwm %d), the committed entries give %016x (log start %d)",
			n.id, g, s.AppliedIndex, s.Digest, s.LogStartOffset, s.TailDigest == want.tail, s.HighWatermark, want.digest, want.logStart)
	}
}

// afterProcess compares the checkpoints n wrote since the last look.
// New checkpoints are counted (coverage) even with the comparison off.
func (d *digests) afterProcess(n *simNode) {
	if n.hasFaults() || n.flipped {
		return
	}
	if d.disks[n.index] != n.disk { // wiped: a new disk, nothing seen of it
		d.disks[n.index], d.seen[n.index] = n.disk, 0
		clear(d.checked[n.index])
	}
	seq := n.disk.DurableSeq()
	if seq == d.seen[n.index] {
		return
	}
	since := d.seen[n.index]
	d.seen[n.index] = seq
	for _, dir := range n.disk.ChangedDirs(since) {
		// A header's index chunks changing durably under it matters as
		// much as a new header: look at the directory again.
		dir = strings.TrimSuffix(dir, "/index")
		if strings.HasSuffix(dir, "/checkpoint") {
			d.compare(n, dir)
		}
		if strings.HasSuffix(dir, "/compacted") {
			d.comparePrefix(n, dir) // prefixes.go
		}
	}
}

// checkedHeader is the header compare last looked at in a checkpoint
// directory, and the durable generations (memdisk.DurableGeneration) of
// the directory and its index chunks then: compare looks again when
// either changed, since a later write may damage what an older header
// names (seed 155: a checkpoint cleared the chunks of the header at 36,
// which a power loss then left the newest).
type checkedHeader struct {
	name     string
	dir, idx uint64
}

// compare restores n's newest durable checkpoint in dir (what a power loss
// now would keep: names dir-synced, bytes synced) and compares its digest
// with the reference's at the checkpoint's index. The durable view, not
// the page cache: a kill inside a checkpoint write leaves its header torn
// or empty in the page cache, which the node skips at its restart (crc),
// and a durable change in dir (an older header removed) exposed it to the
// comparison (the simulator's seed 155, "does not parse").
func (d *digests) compare(n *simNode, dir string) {
	durable := n.disk.ProjectCrash(dir)
	names, err := durable.List(dir)
	if err != nil || len(names) == 0 {
		return
	}
	name := names[len(names)-1]
	seen := checkedHeader{name: name, dir: n.disk.DurableGeneration(dir), idx: n.disk.DurableGeneration(dir + "/index")}
	last := d.checked[n.index][dir]
	if last == seen {
		return
	}
	d.checked[n.index][dir] = seen
	if last.name != name {
		d.w.coverage.Inc("event/checkpoint")
	} else {
		d.w.coverage.Inc("digest/checkpoint-recompared")
	}
	if !d.w.opts.DigestChecks {
		return
	}
	data, ok := durable.ReadFile(dir + "/" + name)
	if !ok {
		return
	}
	index, state, indexed, ok := parseCheckpoint(data)
	if !ok {
		d.w.fail("digest: node %d checkpoint %s/%s does not parse", n.id, dir, name)
		return
	}
	g, ok := d.groupOfDir(dir)
	if !ok {
		return // a topic the scenario does not know
	}
	want, ok := d.ref(g).digests[index]
	if !ok {
		return // beyond the reference (cannot be: the node applied it) or before a re-creation
	}
	var got, tail uint64
	var logStart int64
	if d.ref(g).meta != nil {
		s, err := metadata.Restore(state)
		if err != nil {
			d.w.fail("digest: node %d metadata checkpoint at %d does not restore: %v", n.id, index, err)
			return
		}
		got = s.Digest()
	} else {
		var p *engine.Partition
		var err error
		if indexed {
			p, err = restoreIndexed(n.disk.ProjectCrash(dir+"/index"), dir, state)
		} else {
			p, err = engine.RestorePartition(state)
		}
		if err != nil {
			d.w.fail("digest: node %d checkpoint %s at %d does not restore: %v", n.id, dir, index, err)
			return
		}
		got, tail, logStart = p.Digest(), p.TailDigest(), p.LogStartOffset()
	}
	d.compared++
	d.w.coverage.Inc("digest/compared")
	if ok, _ := d.refs[g].matches(index, want, got, tail, logStart); !ok {
		d.w.fail("digest: node %d's state of group %d at index %d has digest %016x, the committed entries give %016x (%s/%s)",
			n.id, g, index, got, want.digest, dir, name)
	}
}

// ref is slot g's reference (incarnations.go), made empty on first use
// for a later incarnation of a partition.
func (d *digests) ref(g int) *reference {
	for len(d.refs) <= g {
		d.refs = append(d.refs, &reference{part: engine.NewPartition(), digests: map[uint64]refDigest{}})
	}
	return d.refs[g]
}

// groupOfDir maps a checkpoint directory (meta/checkpoint, or
// p/<topic>@<id>/<partition>/checkpoint) to its slot (incarnations.go).
func (d *digests) groupOfDir(dir string) (int, bool) {
	if dir == "meta/checkpoint" {
		return d.w.opts.Partitions, true
	}
	parts := strings.Split(dir, "/")
	if len(parts) != 4 || parts[0] != "p" {
		return 0, false
	}
	topic, idText, _ := strings.Cut(parts[1], "@")
	topicID, err := strconv.ParseUint(idText, 10, 64)
	if err != nil {
		return 0, false
	}
	p := 0
	for _, c := range parts[2] {
		if c < '0' || c > '9' {
			return 0, false
		}
		p = p*10 + int(c-'0')
	}
	g, ok := d.w.groupOf[node.TopicPartition{Topic: topic, Partition: int32(p)}]
	if !ok {
		return 0, false
	}
	return d.w.incarnations.slot(g, topicID), true
}

// parseCheckpoint reads node/checkpoint.go's header layout: magic u32
// ("SCK1" or "SCK2"), crc u32, raft index u64, conf state (u32 length,
// bytes), for SCK2 the index ordinals (two u64, also inside the state),
// engine state (u64 length, bytes), little-endian.
func parseCheckpoint(b []byte) (index uint64, state []byte, indexed, ok bool) {
	if len(b) < 20 {
		return 0, nil, false, false
	}
	switch binary.LittleEndian.Uint32(b) {
	case checkpointMagicV1:
	case checkpointMagicV2:
		indexed = true
	default:
		return 0, nil, false, false
	}
	index = binary.LittleEndian.Uint64(b[8:])
	conf := uint64(binary.LittleEndian.Uint32(b[16:]))
	rest := b[20:]
	skip := conf
	if indexed {
		skip += 16
	}
	if uint64(len(rest)) < skip+8 {
		return 0, nil, false, false
	}
	rest = rest[skip:]
	n := binary.LittleEndian.Uint64(rest)
	rest = rest[8:]
	if uint64(len(rest)) != n {
		return 0, nil, false, false
	}
	return index, rest, indexed, true
}

// Checkpoint magics and the index chunk record size of node/checkpoint.go.
const (
	checkpointMagicV1 = 0x314b4353 // "SCK1": engine Snapshot inline
	checkpointMagicV2 = 0x324b4353 // "SCK2": StateSnapshot, index in chunks
	indexRecordBytes  = 40
)

// restoreIndexed rebuilds an SCK2 checkpoint's partition: the state names
// the index ordinals [start, end), whose records sit in the chunk files of
// dir/index on disk (compare passes the durable projection), each named by
// its first ordinal (base_offset i64,
// record_count i32, raft_index u64, append_time_ms i64, max_timestamp_ms
// i64, crc u32).
func restoreIndexed(disk *memdisk.Disk, dir string, state []byte) (*engine.Partition, error) {
	var snap strandpb.PartitionSnapshot
	if err := proto.Unmarshal(state, &snap); err != nil {
		return nil, err
	}
	start, end := snap.GetIndexStart(), snap.GetIndexEnd()
	names, err := disk.List(dir + "/index")
	if err != nil {
		return nil, err
	}
	firsts := make([]int64, 0, len(names))
	for _, name := range names {
		if f, err := strconv.ParseInt(name, 10, 64); err == nil {
			firsts = append(firsts, f)
		}
	}
	index := make([]engine.BatchLocation, 0, end-start)
	chunks := map[int64][]byte{}
	for ord := start; ord < end; ord++ {
		k := sort.Search(len(firsts), func(i int) bool { return firsts[i] > ord }) - 1
		if k < 0 {
			return nil, fmt.Errorf("no index chunk holds ordinal %d", ord)
		}
		first := firsts[k]
		chunk, ok := chunks[first]
		if !ok {
			chunk, _ = disk.ReadFile(fmt.Sprintf("%s/index/%020d", dir, first))
			chunks[first] = chunk
		}
		off := (ord - first) * indexRecordBytes
		if off+indexRecordBytes > int64(len(chunk)) {
			return nil, fmt.Errorf("index chunk %d ends before ordinal %d", first, ord)
		}
		r := chunk[off:]
		index = append(index, engine.BatchLocation{
			BaseOffset:     int64(binary.LittleEndian.Uint64(r[0:])),
			RecordCount:    int32(binary.LittleEndian.Uint32(r[8:])),
			RaftIndex:      binary.LittleEndian.Uint64(r[12:]),
			AppendTimeMs:   int64(binary.LittleEndian.Uint64(r[20:])),
			MaxTimestampMs: int64(binary.LittleEndian.Uint64(r[28:])),
		})
	}
	return engine.RestorePartitionIndexed(state, index)
}
