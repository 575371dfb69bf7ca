package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strconv"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/raftlog"
)

// An engine checkpoint is the engine's state as of a raft index, written
// beside the raft log so a restart replays only the entries after it. It
// is an optimisation, never the only copy: every entry stays in the raft
// log, so a missing or damaged checkpoint costs a longer replay, not data.
//
// A partition's checkpoint is written every CheckpointEntries applied
// entries, so it must cost O(1) per entry, not O(log): the offset index
// (one BatchLocation per batch, 28 MB at a million batches) is persisted
// append-only in index chunks, and each checkpoint writes only the batches
// indexed since the last one plus a small header.
//
// Header p/<topic>/<partition>/checkpoint/<raft index, 20 digits>,
// little-endian:
//
//	0   magic               u32 = checkpointMagicV2 ("SCK2"), or
//	                        checkpointMagic ("SCK1", see below)
//	4   crc                 u32 CRC32C (Castagnoli) of bytes [8, end)
//	8   raft_index          u64 raft index the engine state reflects
//	16  conf_state_bytes    u32, then a marshalled raftpb.ConfState
//	..  (SCK2 only) index_start u64, index_end u64: the ordinals of the
//	                        indexed batches (engine.Partition.IndexOrdinals)
//	..  engine_bytes        u64, then engine.Partition.StateSnapshot() (SCK2),
//	                        engine.Partition.Snapshot() (SCK1, written before
//	                        the index chunks existed; still read), or for the
//	                        metadata group (meta/checkpoint/, always SCK1)
//	                        metadata.State.Snapshot()
//
// Index chunk checkpoint/index/<first ordinal, 20 digits>: the batches of
// ordinals [first, first+indexChunkRecords), indexRecordBytes each at
// (ordinal-first)*indexRecordBytes: base_offset i64, record_count i32,
// raft_index u64, append_time_ms i64, max_timestamp_ms i64, crc u32
// (CRC32C of the 36 bytes before it). Bytes past a header's index_end are
// ignored: they are a crashed checkpoint's, and the next one rewrites them.
//
// Write protocol (the Disk has no rename): sync the raft log, so its hard
// state's commit index (which may lag when only the commit moved) is at
// least raft_index (raft refuses Applied > commit); when the chunks must
// be cleared first (their numbering unknown: after a replay, a raft
// snapshot or a failed write), remove every header (one of the same name
// included) and SyncDir, then
// the chunks; append the new index records, Sync the chunks, SyncDir the
// index directory when a chunk was created; write the header, Sync,
// SyncDir; only then remove older headers and the chunks wholly below
// index_start. A crash anywhere leaves every header on disk and every
// record it names intact (after a clearing write none older is left). The
// loop prepares the bytes; storage jobs perform the protocol
// (checkpoint_job.go).
const (
	checkpointMagic   = 0x314b4353 // "SCK1"
	checkpointMagicV2 = 0x324b4353 // "SCK2"

	indexRecordBytes = 40
)

// indexChunkRecords batches per chunk (2.5 MiB): chunks are the unit a
// trim frees, and few enough that listing them is cheap. A variable only so
// tests can cross chunk boundaries with a few batches.
var indexChunkRecords int64 = 1 << 16

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkpoint is a decoded checkpoint file.
type checkpoint struct {
	raftIndex uint64
	confState *raftpb.ConfState
	// indexed: the partition's index chunks hold the batches of ordinals
	// [start, end) (an SCK2 checkpoint); false for SCK1.
	indexed    bool
	indexStart int64
	indexEnd   int64
	partition  *engine.Partition // set when a partition's checkpoint
	meta       *metadata.State   // set when the metadata group's
}

// encodeCheckpoint lays a checkpoint header out as documented above: SCK2
// when indexed, with the ordinals [indexStart, indexEnd).
func encodeCheckpoint(ck *checkpoint, engineState []byte) []byte {
	conf, err := proto.MarshalOptions{Deterministic: true}.Marshal(ck.confState)
	if err != nil {
		panic(fmt.Sprintf("node: marshal conf state: %v", err))
	}
	b := make([]byte, 8, 8+8+4+len(conf)+16+8+len(engineState))
	b = binary.LittleEndian.AppendUint64(b, ck.raftIndex)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(conf)))
	b = append(b, conf...)
	magic := uint32(checkpointMagic)
	if ck.indexed {
		magic = checkpointMagicV2
		b = binary.LittleEndian.AppendUint64(b, uint64(ck.indexStart))
		b = binary.LittleEndian.AppendUint64(b, uint64(ck.indexEnd))
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(len(engineState)))
	b = append(b, engineState...)
	binary.LittleEndian.PutUint32(b[0:4], magic)
	binary.LittleEndian.PutUint32(b[4:8], crc32.Checksum(b[8:], castagnoli))
	return b
}

var errCheckpointCorrupt = errors.New("node: corrupt checkpoint")

// decodeCheckpoint checks and decodes a checkpoint header's bytes: a
// partition's, or the metadata group's when meta is set. An SCK2 header's
// index is read from the chunks in indexDir.
func decodeCheckpoint(disk raftlog.Disk, indexDir string, b []byte, meta bool) (*checkpoint, error) {
	if len(b) < 8 || binary.LittleEndian.Uint32(b[4:8]) != crc32.Checksum(b[8:], castagnoli) {
		return nil, errCheckpointCorrupt
	}
	ck := &checkpoint{confState: &raftpb.ConfState{}}
	switch binary.LittleEndian.Uint32(b[0:4]) {
	case checkpointMagic:
	case checkpointMagicV2:
		ck.indexed = true
	default:
		return nil, fmt.Errorf("%w: unknown magic %#x", errCheckpointCorrupt, binary.LittleEndian.Uint32(b[0:4]))
	}
	r := byteReader{b: b[8:], ok: true}
	ck.raftIndex = r.u64()
	if err := proto.Unmarshal(r.bytes(uint64(r.u32())), ck.confState); err != nil {
		return nil, fmt.Errorf("%w: conf state: %v", errCheckpointCorrupt, err)
	}
	if ck.indexed {
		ck.indexStart, ck.indexEnd = int64(r.u64()), int64(r.u64())
	}
	state := r.bytes(r.u64())
	if !r.ok || len(r.b) != 0 {
		return nil, fmt.Errorf("%w: bad lengths", errCheckpointCorrupt)
	}
	switch {
	case meta && ck.indexed:
		return nil, fmt.Errorf("%w: metadata checkpoint with an index", errCheckpointCorrupt)
	case meta:
		return decodeMetaState(ck, state)
	}
	part, err := restorePartition(disk, indexDir, ck, state)
	if err != nil {
		return nil, err
	}
	ck.partition = part
	if part.AppliedIndex() != ck.raftIndex {
		return nil, fmt.Errorf("%w: engine at %d, raft index %d", errCheckpointCorrupt, part.AppliedIndex(), ck.raftIndex)
	}
	return ck, nil
}

// restorePartition rebuilds the engine of a partition checkpoint: from the
// inline snapshot (SCK1) or from the state and the index chunks (SCK2).
func restorePartition(disk raftlog.Disk, indexDir string, ck *checkpoint, state []byte) (*engine.Partition, error) {
	if !ck.indexed {
		part, err := engine.RestorePartition(state)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errCheckpointCorrupt, err)
		}
		return part, nil
	}
	index, err := readIndex(disk, indexDir, ck.indexStart, ck.indexEnd)
	if err != nil {
		return nil, err
	}
	part, err := engine.RestorePartitionIndexed(state, index)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errCheckpointCorrupt, err)
	}
	if start, end := part.IndexOrdinals(); start != ck.indexStart || end != ck.indexEnd {
		return nil, fmt.Errorf("%w: engine index [%d, %d), header [%d, %d)", errCheckpointCorrupt, start, end, ck.indexStart, ck.indexEnd)
	}
	return part, nil
}

// decodeMetaState restores the metadata group's state of a checkpoint.
func decodeMetaState(ck *checkpoint, state []byte) (*checkpoint, error) {
	st, err := metadata.Restore(state)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errCheckpointCorrupt, err)
	}
	if st.AppliedIndex() != ck.raftIndex {
		return nil, fmt.Errorf("%w: metadata at %d, raft index %d", errCheckpointCorrupt, st.AppliedIndex(), ck.raftIndex)
	}
	ck.meta = st
	return ck, nil
}

// indexChunkName is the name of the chunk holding ordinal.
func indexChunkName(ordinal int64) string {
	return fmt.Sprintf("%020d", ordinal-ordinal%indexChunkRecords)
}

// appendIndexRecord appends b's index record.
func appendIndexRecord(dst []byte, b *engine.BatchLocation) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(b.BaseOffset))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(b.RecordCount))
	dst = binary.LittleEndian.AppendUint64(dst, b.RaftIndex)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(b.AppendTimeMs))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(b.MaxTimestampMs))
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// decodeIndexRecord decodes one index record, checking its crc.
func decodeIndexRecord(rec []byte) (engine.BatchLocation, bool) {
	if crc32.Checksum(rec[:indexRecordBytes-4], castagnoli) != binary.LittleEndian.Uint32(rec[indexRecordBytes-4:]) {
		return engine.BatchLocation{}, false
	}
	return engine.BatchLocation{
		BaseOffset:     int64(binary.LittleEndian.Uint64(rec[0:])),
		RecordCount:    int32(binary.LittleEndian.Uint32(rec[8:])),
		RaftIndex:      binary.LittleEndian.Uint64(rec[12:]),
		AppendTimeMs:   int64(binary.LittleEndian.Uint64(rec[20:])),
		MaxTimestampMs: int64(binary.LittleEndian.Uint64(rec[28:])),
	}, true
}

// readIndex reads the batches of ordinals [start, end) from the chunks in
// dir. A missing chunk or a damaged record fails with errCheckpointCorrupt.
func readIndex(disk raftlog.Disk, dir string, start, end int64) ([]engine.BatchLocation, error) {
	if start < 0 || end < start {
		return nil, fmt.Errorf("%w: index ordinals [%d, %d)", errCheckpointCorrupt, start, end)
	}
	names, err := disk.List(dir)
	if err != nil {
		return nil, fmt.Errorf("node: list %s: %w", dir, err)
	}
	if end-start > int64(len(names))*indexChunkRecords { // before allocating for them
		return nil, fmt.Errorf("%w: %d index records named, %d chunks", errCheckpointCorrupt, end-start, len(names))
	}
	index := make([]engine.BatchLocation, 0, end-start)
	var buf []byte
	for from := start; from < end; {
		name := indexChunkName(from)
		if _, found := slices.BinarySearch(names, name); !found {
			return nil, fmt.Errorf("%w: index chunk %s missing", errCheckpointCorrupt, name)
		}
		first := from - from%indexChunkRecords
		to := min(end, first+indexChunkRecords)
		buf = slices.Grow(buf[:0], int(to-from)*indexRecordBytes)[:int(to-from)*indexRecordBytes]
		if err := readAt(disk, dir+"/"+name, buf, (from-first)*indexRecordBytes); err != nil {
			return nil, fmt.Errorf("%w: index chunk %s: %v", errCheckpointCorrupt, name, err)
		}
		for off := 0; off < len(buf); off += indexRecordBytes {
			b, ok := decodeIndexRecord(buf[off : off+indexRecordBytes])
			if !ok {
				return nil, fmt.Errorf("%w: index record %d: bad crc", errCheckpointCorrupt, from+int64(off/indexRecordBytes))
			}
			index = append(index, b)
		}
		from = to
	}
	return index, nil
}

// readAt fills p from name at off.
func readAt(disk raftlog.Disk, name string, p []byte, off int64) error {
	f, err := disk.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.ReadAt(p, off)
	return err
}

// byteReader reads little-endian fields, remembering the first overrun.
type byteReader struct {
	b  []byte
	ok bool
}

func (r *byteReader) bytes(n uint64) []byte {
	if !r.ok || n > uint64(len(r.b)) {
		r.ok = false
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *byteReader) u32() uint32 {
	if v := r.bytes(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (r *byteReader) u64() uint64 {
	if v := r.bytes(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

// loadCheckpoint returns the newest valid checkpoint in dir at or below
// indexMax (the durable commit index: a newer one cannot be trusted), or
// nil. Damaged or unreadable checkpoints are skipped: the log replays.
func loadCheckpoint(disk raftlog.Disk, dir string, indexMax uint64, meta bool) (*checkpoint, error) {
	names, err := disk.List(dir)
	if err != nil {
		return nil, fmt.Errorf("node: list %s: %w", dir, err)
	}
	for i := len(names) - 1; i >= 0; i-- {
		index, err := strconv.ParseUint(names[i], 10, 64)
		if err != nil || index > indexMax {
			continue
		}
		data, err := readFile(disk, dir+"/"+names[i])
		if err != nil {
			continue
		}
		ck, err := decodeCheckpoint(disk, dir+"/index", data, meta)
		if err != nil || ck.raftIndex != index {
			continue
		}
		return ck, nil
	}
	return nil, nil
}

// readFile reads a whole file of the disk.
func readFile(disk raftlog.Disk, name string) ([]byte, error) {
	f, err := disk.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil && !(errors.Is(err, io.EOF) && size == 0) {
		return nil, err
	}
	return data, nil
}

// prepareIndex fills w with the index records the chunks lack: those of
// ordinals from indexWritten (or the index start) to the index end, and the
// chunks the trim may free. When the engine did not come from an SCK2
// checkpoint, the ordinals may differ from the chunks' (an SCK1 restore
// numbers from 0), so the write clears the chunks first. Pure: the records
// are encoded now, the job writes them (checkpoint_job.go).
func (p *partitionSM) prepareIndex(w *checkpointWrite) (start, end int64) {
	if !p.indexKnown {
		w.clearIndex = true
		p.indexKnown, p.indexWritten, p.indexFreed, p.indexChunkEnd = true, 0, 0, 0
	}
	part := p.g.part
	start, end = part.IndexOrdinals()
	from := max(p.indexWritten, start)
	batches := part.IndexSince(from)
	for from < end {
		first := from - from%indexChunkRecords
		n := min(end, first+indexChunkRecords) - from
		buf := make([]byte, 0, n*indexRecordBytes)
		for i := range n {
			buf = appendIndexRecord(buf, &batches[i])
		}
		// A chunk is new, and its directory entry must be synced, when no
		// earlier write reached it: past the chunk the last write reached
		// (indexChunkEnd; 0 after the write clears every chunk), whether
		// or not this write begins at its first ordinal: an index empty
		// with its start inside the chunk wrote nothing there. Else a power
		// cut could keep the header and lose the chunk it names (the
		// simulator's seeds 57 and 191: "no index chunk holds ordinal 2",
		// "... ordinal 3").
		w.chunks = append(w.chunks, chunkWrite{name: indexChunkName(from), off: (from - first) * indexRecordBytes,
			data: buf, created: from >= p.indexChunkEnd})
		p.indexChunkEnd = first + indexChunkRecords
		batches, from = batches[n:], from+n
	}
	p.indexWritten = end
	if keep := start - start%indexChunkRecords; keep > p.indexFreed {
		w.freeBelow = indexChunkName(keep)
	}
	return start, end
}

// removeFiles removes the names of dir that remove selects, then syncs dir,
// even when it removed none: a process kill may have interrupted an earlier
// removal after its unlinks, before its SyncDir, so names no longer listed
// may still be durable (a clearing write must not remove the chunks while
// an older header it did not see could come back:
// TestClearingCheckpointAfterAKilledClear).
func removeFiles(disk raftlog.Disk, dir string, names []string, remove func(string) bool) error {
	for _, n := range names {
		if remove(n) {
			if err := disk.Remove(dir + "/" + n); err != nil {
				return err
			}
		}
	}
	return disk.SyncDir(dir)
}

// writeAtSync writes data at off of name, creating it, and syncs it.
func writeAtSync(disk raftlog.Disk, name string, data []byte, off int64) error {
	return syncedWrite(disk, name, func(f raftlog.File) error {
		_, err := f.WriteAt(data, off)
		return err
	})
}

// writeFile replaces name's contents with data and syncs it.
func writeFile(disk raftlog.Disk, name string, data []byte) error {
	return syncedWrite(disk, name, func(f raftlog.File) error {
		if err := f.Truncate(0); err != nil {
			return err
		}
		_, err := f.WriteAt(data, 0)
		return err
	})
}

// syncedWrite opens name (creating it), runs write on it, syncs and
// closes it; the file is closed whatever fails.
func syncedWrite(disk raftlog.Disk, name string, write func(raftlog.File) error) error {
	f, err := disk.Open(name)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
