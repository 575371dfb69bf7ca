package groupsvc

import (
	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/engine/recordbatch"
)

// A coordinator's log: the reading both coordinators do (this package's,
// and node/txnsvc's over __strand_transactions) of the partition that
// holds their state.

// Bounds of a coordinator's work.
const (
	// catchUpReadsMax bounds the log reads of one catch-up.
	catchUpReadsMax = 1 << 16
	// readBytes is the read size of a catch-up.
	readBytes = 4 << 20
)

// Log is what a coordinator reads of its partition: the node's replica of
// it, which the node leads. The node implements it over its replica
// (node/groups.go: coordinatorLog).
type Log interface {
	// LogStartOffset is the partition's first offset still held.
	LogStartOffset() int64
	// HighWatermark is the offset after the last committed record.
	HighWatermark() int64
	// Read returns the committed batches from offset on, up to maxBytes
	// (at least one whole batch when there is one).
	Read(offset int64, maxBytes int32) ([]Batch, error)
	// Damaged is the node's storage error for a log that does not read
	// back as it must: format and args describe what, after the
	// partition's name.
	Damaged(format string, args ...any) error
	// Warn logs a record the coordinator skips, with why.
	Warn(msg string, err error)
}

// Batch is one record batch of the log at its base offset.
type Batch struct {
	BaseOffset int64
	Data       []byte
}

// ReadCommitted calls apply with the value of each record of log from
// *next up to the high-water mark, in offset order, and moves *next past
// it before the next one (apply may answer a wait that reads *next or
// catches up again): at most catchUpReadsMax reads of readBytes. what
// names the log in errors ("group", "transaction").
func ReadCommitted(log Log, next *int64, what string, apply func(value []byte)) error {
	return ReadRecords(log, next, what, func(_ int64, _, value []byte) (int64, bool) {
		apply(value)
		return 0, false
	})
}

// ReadRecords is ReadCommitted with each record's offset and key, and a
// way back: when apply returns jump, the read goes on from resume (a
// restore of a snapshot met on the way continues from its as_of, below
// it): apply must not jump at the same record twice, and all jumps count
// against the same catchUpReadsMax reads.
func ReadRecords(log Log, next *int64, what string, apply func(offset int64, key, value []byte) (resume int64, jump bool)) error {
	for i := 0; *next < log.HighWatermark(); i++ {
		if i >= catchUpReadsMax {
			return log.Damaged(": catch-up of the %s log made no progress", what)
		}
		batches, err := log.Read(*next, readBytes)
		if err != nil {
			return err
		}
		if len(batches) == 0 {
			return log.Damaged(": no batch at offset %d below the high-water mark", *next)
		}
	batches:
		for _, b := range batches {
			recs, err := batchRecords(b)
			if err != nil {
				return log.Damaged(" batch at %d: %w", b.BaseOffset, err)
			}
			for _, r := range recs {
				if r.Offset >= *next {
					resume, jump := apply(r.Offset, r.Key, r.Value)
					if jump {
						*next = resume
						break batches
					}
					*next = r.Offset + 1
				}
			}
		}
	}
	return nil
}

// batchRecords are the records of b with their offsets, in offset order:
// a batch as written (recordbatch's form) or as a compaction pass left it
// (engine/compact's form, fewer records than its offset range). A
// transaction marker holds none.
func batchRecords(b Batch) ([]compact.Record, error) {
	if compact.IsCompacted(b.Data) {
		cb, err := compact.DecodeBatch(b.Data)
		if err != nil || cb.Control {
			return nil, err
		}
		return cb.Records, nil
	}
	var out []compact.Record
	it := recordbatch.NewIterator(b.Data)
	for it.Next() {
		out = append(out, compact.Record{Offset: b.BaseOffset + int64(it.Index()), Record: it.Record()})
	}
	return out, it.Err()
}

// FindSnapshot scans log back from its high-water mark, at most scanMax
// records, for the newest record that decode takes for a snapshot (ok),
// and returns it with its offset. A read that fails, or that meets a gap
// (records a compaction removed), ends the scan with none: the coordinator
// then replays the log from its start.
func FindSnapshot[T any](log Log, scanMax int, decode func(value []byte) (T, bool)) (snap T, at int64, ok bool) {
	logStart := log.LogStartOffset()
	at, scanned := log.HighWatermark()-1, 0
	for at >= logStart && scanned < scanMax {
		batches, err := log.Read(at, 1)
		if err != nil || len(batches) == 0 {
			return snap, 0, false
		}
		b := batches[0]
		if b.BaseOffset > at {
			// at lies in a gap a compaction left: the read answers the batch
			// above it, and reads go only forward. The forward replay
			// restores at the snapshots it meets instead.
			return snap, 0, false
		}
		recs, err := batchRecords(b)
		if err != nil {
			return snap, 0, false
		}
		for i := len(recs) - 1; i >= 0; i-- {
			if recs[i].Offset > at {
				continue
			}
			scanned++
			if s, ok := decode(recs[i].Value); ok {
				return s, recs[i].Offset, true
			}
		}
		at = b.BaseOffset - 1
	}
	return snap, 0, false
}
