package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/raftlog"
)

// An engine checkpoint is the engine's snapshot as of a raft index, written
// beside the raft log so a restart replays only the entries after it. It
// is an optimisation, never the only copy: every entry stays in the raft
// log, so a missing or damaged checkpoint costs a longer replay, not data.
//
// File p/<topic>/<partition>/checkpoint/<raft index, 20 digits>, little-endian:
//
//	0   magic               u32 = checkpointMagic ("SCK1")
//	4   crc                 u32 CRC32C (Castagnoli) of bytes [8, end)
//	8   raft_index          u64 raft index the engine state reflects
//	16  conf_state_bytes    u32, then a marshalled raftpb.ConfState
//	..  engine_bytes        u64, then engine.Partition.Snapshot(), or for the
//	                        metadata group (meta/checkpoint/) metadata.State.Snapshot()
//
// Write protocol (the Disk has no rename): write the new file, Sync it,
// SyncDir; only then remove older checkpoints. Before writing, the raft log
// is synced, so its hard state's commit index (which may lag when only the
// commit moved) is at least raft_index: raft refuses Applied > commit.
const checkpointMagic = 0x314b4353

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkpoint is a decoded checkpoint file.
type checkpoint struct {
	raftIndex uint64
	confState *raftpb.ConfState
	partition *engine.Partition // set when a partition's checkpoint
	meta      *metadata.State   // set when the metadata group's
}

// encodeCheckpoint lays a checkpoint out as documented above.
func encodeCheckpoint(raftIndex uint64, cs *raftpb.ConfState, engineState []byte) []byte {
	conf, err := proto.MarshalOptions{Deterministic: true}.Marshal(cs)
	if err != nil {
		panic(fmt.Sprintf("node: marshal conf state: %v", err))
	}
	b := make([]byte, 8, 8+8+4+len(conf)+8+len(engineState))
	b = binary.LittleEndian.AppendUint64(b, raftIndex)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(conf)))
	b = append(b, conf...)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(engineState)))
	b = append(b, engineState...)
	binary.LittleEndian.PutUint32(b[0:4], checkpointMagic)
	binary.LittleEndian.PutUint32(b[4:8], crc32.Checksum(b[8:], castagnoli))
	return b
}

var errCheckpointCorrupt = errors.New("node: corrupt checkpoint")

// decodeCheckpoint checks and decodes a checkpoint file's bytes: a
// partition's, or the metadata group's when meta is set.
func decodeCheckpoint(b []byte, meta bool) (*checkpoint, error) {
	if len(b) < 8 || binary.LittleEndian.Uint32(b[0:4]) != checkpointMagic ||
		binary.LittleEndian.Uint32(b[4:8]) != crc32.Checksum(b[8:], castagnoli) {
		return nil, errCheckpointCorrupt
	}
	r := byteReader{b: b[8:], ok: true}
	ck := &checkpoint{raftIndex: r.u64(), confState: &raftpb.ConfState{}}
	if err := proto.Unmarshal(r.bytes(uint64(r.u32())), ck.confState); err != nil {
		return nil, fmt.Errorf("%w: conf state: %v", errCheckpointCorrupt, err)
	}
	state := r.bytes(r.u64())
	if !r.ok || len(r.b) != 0 {
		return nil, fmt.Errorf("%w: bad lengths", errCheckpointCorrupt)
	}
	if meta {
		return decodeMetaState(ck, state)
	}
	part, err := engine.RestorePartition(state)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errCheckpointCorrupt, err)
	}
	ck.partition = part
	if part.AppliedIndex() != ck.raftIndex {
		return nil, fmt.Errorf("%w: engine at %d, raft index %d", errCheckpointCorrupt, part.AppliedIndex(), ck.raftIndex)
	}
	return ck, nil
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
		ck, err := decodeCheckpoint(data, meta)
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

// writeCheckpoint writes g's engine state as of its applied index and
// removes older checkpoints. Errors are fatal like any failed write.
func (c *Core) writeCheckpoint(g *group) error {
	if err := g.log.Sync(); err != nil {
		return fmt.Errorf("node: %s/%d: sync before checkpoint: %w", g.tp.Topic, g.tp.Partition, err)
	}
	dir := g.dir + "/checkpoint"
	name := fmt.Sprintf("%020d", g.appliedRaft)
	var state []byte
	if g.meta != nil {
		state = g.meta.Snapshot()
	} else {
		state = c.bugCheckpointState(g.part.Snapshot())
	}
	data := encodeCheckpoint(g.appliedRaft, g.confState, state)
	if err := writeFile(c.cfg.Disk, dir+"/"+name, data); err != nil {
		return fmt.Errorf("node: %s/%d: checkpoint: %w", g.tp.Topic, g.tp.Partition, err)
	}
	if err := c.cfg.Disk.SyncDir(dir); err != nil {
		return fmt.Errorf("node: %s/%d: checkpoint: %w", g.tp.Topic, g.tp.Partition, err)
	}
	names, err := c.cfg.Disk.List(dir)
	if err != nil {
		return fmt.Errorf("node: %s/%d: checkpoint: %w", g.tp.Topic, g.tp.Partition, err)
	}
	removed := false
	for _, n := range names {
		if n < name { // same width: string order is numeric order
			if err := c.cfg.Disk.Remove(dir + "/" + n); err != nil {
				return fmt.Errorf("node: %s/%d: checkpoint: %w", g.tp.Topic, g.tp.Partition, err)
			}
			removed = true
		}
	}
	if removed {
		if err := c.cfg.Disk.SyncDir(dir); err != nil {
			return fmt.Errorf("node: %s/%d: checkpoint: %w", g.tp.Topic, g.tp.Partition, err)
		}
	}
	g.checkpointIndex = g.appliedRaft
	c.stats.Checkpoints++
	return nil
}

// writeFile replaces name's contents with data and syncs it.
func writeFile(disk raftlog.Disk, name string, data []byte) error {
	f, err := disk.Open(name)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		_ = f.Close()
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
