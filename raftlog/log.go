package raftlog

import (
	"errors"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Options sizes a Log. Zero fields take the defaults.
type Options struct {
	// SegmentBytesMax rolls the active segment once it holds this many bytes.
	SegmentBytesMax int64
}

// ErrCorrupt reports corruption inside synced data: a record that fails its
// checksum or framing and is followed by valid data, or a damaged snapshot.
// Open refuses to start on it rather than lose or serve damaged records.
var ErrCorrupt = errors.New("raftlog: corrupt data")

// Log is one raft group's durable log: etcd raft's Storage plus the writes a
// Ready asks for, on segmented append-only files of a Disk. Log does no
// locking; one goroutine drives it (the node's Ready loop).
//
// Writes (Append, SetHardState, ApplySnapshot) are buffered in the page cache
// of the Disk and become durable only after Sync returns nil. Reads see the
// writes at once, as raft requires.
type Log struct {
	_ struct{}
}

var _ raft.Storage = (*Log)(nil)

// Open opens, or creates empty, the log in dir of disk, recovering from a
// crash: a torn or corrupt tail after the last valid record is truncated; a
// corrupt record inside synced data fails with ErrCorrupt.
func Open(disk Disk, dir string, options Options) (*Log, error) {
	panic("raftlog: not implemented")
}

// InitialState implements raft.Storage.
func (l *Log) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	panic("raftlog: not implemented")
}

// Entries implements raft.Storage.
func (l *Log) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	panic("raftlog: not implemented")
}

// Term implements raft.Storage.
func (l *Log) Term(i uint64) (uint64, error) { panic("raftlog: not implemented") }

// LastIndex implements raft.Storage.
func (l *Log) LastIndex() (uint64, error) { panic("raftlog: not implemented") }

// FirstIndex implements raft.Storage.
func (l *Log) FirstIndex() (uint64, error) { panic("raftlog: not implemented") }

// Snapshot implements raft.Storage.
func (l *Log) Snapshot() (*raftpb.Snapshot, error) { panic("raftlog: not implemented") }

// Append writes entries after the log, first truncating any existing suffix
// that starts at entries[0].Index (a conflicting suffix raft replaced).
func (l *Log) Append(entries []*raftpb.Entry) error { panic("raftlog: not implemented") }

// SetHardState records raft's term, vote and commit index.
func (l *Log) SetHardState(state *raftpb.HardState) error { panic("raftlog: not implemented") }

// ApplySnapshot replaces the log with snapshot received from the leader:
// every entry is discarded and the log restarts after the snapshot's index.
func (l *Log) ApplySnapshot(snapshot *raftpb.Snapshot) error { panic("raftlog: not implemented") }

// CreateSnapshot records snapshot state data as of index (at most the last
// applied index, with its configuration) and then deletes the whole segments
// that hold only entries at or below index. Entries above index are kept.
func (l *Log) CreateSnapshot(index uint64, confState *raftpb.ConfState, data []byte) error {
	panic("raftlog: not implemented")
}

// Sync makes every write so far durable. Raft must not be told that an entry
// or hard state is stable (Advance, or messages that depend on it) before the
// Sync covering it returned nil.
func (l *Log) Sync() error { panic("raftlog: not implemented") }

// Close releases the log's files without syncing.
func (l *Log) Close() error { panic("raftlog: not implemented") }
