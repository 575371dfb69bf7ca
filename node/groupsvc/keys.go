package groupsvc

import (
	"encoding/binary"
	"slices"

	"github.com/strandlog/strand/engine/recordbatch"
)

// Keys of a compacted coordinator log (doc.go, "A compacted log").

// TombstonesMax bounds the tombstones one snapshot batch carries; the
// commands beyond wait for the next snapshot (their records stay until
// then: a leak bounded by one batch, never a loss).
const TombstonesMax = 1 << 14

// commandKeyPrefix and SnapshotKey tell a command's record from a
// snapshot's by their first byte.
const commandKeyPrefix = 'c'

// SnapshotKey is the key of every snapshot record: compaction keeps the
// newest.
var SnapshotKey = []byte("s")

// CommandKey is the key of the record of the command with request id
// proposed by the leader of term: unique in the partition's history, as a
// partition has one leader per term and a coordinator never reuses an id
// it waits for.
func CommandKey(term, requestID uint64) []byte {
	k := make([]byte, 17)
	k[0] = commandKeyPrefix
	binary.BigEndian.PutUint64(k[1:], term)
	binary.BigEndian.PutUint64(k[9:], requestID)
	return k
}

// isCommandKey reports whether key is a CommandKey.
func isCommandKey(key []byte) bool { return len(key) == 17 && key[0] == commandKeyPrefix }

// pendingKey is a command applied whose tombstone was not applied yet.
type pendingKey struct {
	key    string
	offset int64
}

// Tombstoned keeps track of the commands of a compacted coordinator log
// that still need a tombstone (doc.go): the key and offset of every
// command applied whose tombstone was not applied.
type Tombstoned struct {
	pending map[string]int64 // lookup only; Below sorts
}

// Applied records the command record at offset with key.
func (t *Tombstoned) Applied(key []byte, offset int64) {
	if !isCommandKey(key) {
		return
	}
	if t.pending == nil {
		t.pending = make(map[string]int64)
	}
	t.pending[string(key)] = offset
}

// Tombstone records a tombstone of key applied.
func (t *Tombstoned) Tombstone(key []byte) { delete(t.pending, string(key)) }

// Forget drops every command below asOf: a restored snapshot's batch
// and the ones before it tombstoned them.
func (t *Tombstoned) Forget(asOf int64) {
	for k, off := range t.pending {
		if off < asOf {
			delete(t.pending, k) // deletion order does not leak
		}
	}
}

// Reset forgets every command (a coordinator starting over).
func (t *Tombstoned) Reset() { t.pending = nil }

// Len is the number of commands waiting for a tombstone.
func (t *Tombstoned) Len() int { return len(t.pending) }

// Below returns the tombstone records of the commands below asOf, oldest
// first, at most TombstonesMax.
func (t *Tombstoned) Below(asOf, nowMs int64) []recordbatch.Record {
	var keys []pendingKey
	for k, off := range t.pending {
		if off < asOf {
			keys = append(keys, pendingKey{key: k, offset: off})
		}
	}
	slices.SortFunc(keys, func(a, b pendingKey) int {
		if a.offset != b.offset {
			if a.offset < b.offset {
				return -1
			}
			return 1
		}
		return 0
	})
	keys = keys[:min(len(keys), TombstonesMax)]
	out := make([]recordbatch.Record, len(keys))
	for i, k := range keys {
		out[i] = recordbatch.Record{TimestampMs: nowMs, Key: []byte(k.key)}
	}
	return out
}

// Keyed is a coordinator's place in its compacted log (doc.go): both
// coordinators (this package's and node/txnsvc's) embed it.
type Keyed struct {
	// RestoredFrom is the offset of the snapshot this coordinator last
	// restored, -1 when it replayed the log from its start.
	RestoredFrom int64
	// OwnApplied: a command this coordinator proposed was read back, so
	// every record of earlier terms is below its Next (a snapshot may be
	// proposed: doc.go, "Order of snapshots").
	OwnApplied bool
	// Tombstoned are the commands applied whose tombstone was not.
	Tombstoned Tombstoned
	// replaying: the coordinator restores at the snapshots it meets (a
	// fresh one, until its first catch-up reaches the high-water mark).
	replaying bool
}

// NewKeyed is the place of a fresh coordinator: nothing restored yet.
func NewKeyed() Keyed { return Keyed{RestoredFrom: -1} }

// StartReplay marks a fresh coordinator's first catch-up.
func (k *Keyed) StartReplay() { k.replaying = true }

// EndReplay marks its end: at the high-water mark, the state is whole.
func (k *Keyed) EndReplay() { k.replaying = false }

// StartOver forgets the place: the next catch-up restores again.
func (k *Keyed) StartOver() {
	k.RestoredFrom = -1
	k.Tombstoned.Reset()
}

// RestoresAt reports whether a snapshot record at off is to be restored
// (a replay meeting one above the last restored).
func (k *Keyed) RestoresAt(off int64) bool { return k.replaying && off > k.RestoredFrom }

// Restored records the restore of the snapshot at offset at, as of asOf.
func (k *Keyed) Restored(asOf, at int64) {
	k.RestoredFrom = at
	k.Tombstoned.Forget(asOf)
}

// Applied records a record applied at off with key: a command
// (snapshot false) waits for its tombstone; own: its wait was this
// coordinator's.
func (k *Keyed) Applied(off int64, key []byte, snapshot, own bool) {
	if !snapshot {
		k.Tombstoned.Applied(key, off)
	}
	if own {
		k.OwnApplied = true
	}
}

// KeyedRecords are the records of a command with requestID proposed by
// the leader of term at nowMs (value marshalled), keyed by CommandKey; for
// a snapshot (snapshot true, as of asOf) one keyed by SnapshotKey followed
// by a tombstone for each command below asOf that has none yet, then
// extra (a planted bug's).
func (k *Keyed) KeyedRecords(term, requestID uint64, snapshot bool, asOf int64, value []byte, nowMs int64, extra []recordbatch.Record) []recordbatch.Record {
	if !snapshot {
		return []recordbatch.Record{{TimestampMs: nowMs, Key: CommandKey(term, requestID), Value: value}}
	}
	recs := append([]recordbatch.Record{{TimestampMs: nowMs, Key: SnapshotKey, Value: value}}, k.Tombstoned.Below(asOf, nowMs)...)
	return append(recs, extra...)
}
