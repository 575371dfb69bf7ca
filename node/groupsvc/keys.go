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
