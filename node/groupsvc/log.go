package groupsvc

import (
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
		for _, b := range batches {
			it := recordbatch.NewIterator(b.Data)
			for it.Next() {
				if off := b.BaseOffset + int64(it.Index()); off >= *next {
					apply(it.Record().Value)
					*next = off + 1
				}
			}
			if it.Err() != nil {
				return log.Damaged(" batch at %d: %w", b.BaseOffset, it.Err())
			}
		}
	}
	return nil
}

// FindSnapshot scans log back from its high-water mark, at most scanMax
// records, for the newest record that decode takes for a snapshot (ok),
// and returns it with its offset. A read that fails ends the scan with
// none: the coordinator then replays the log from its start.
func FindSnapshot[T any](log Log, scanMax int, decode func(value []byte) (T, bool)) (snap T, at int64, ok bool) {
	logStart := log.LogStartOffset()
	at, scanned := log.HighWatermark()-1, 0
	for at >= logStart && scanned < scanMax {
		batches, err := log.Read(at, 1)
		if err != nil || len(batches) == 0 {
			return snap, 0, false
		}
		b := batches[0]
		var values [][]byte
		it := recordbatch.NewIterator(b.Data)
		for it.Next() && b.BaseOffset+int64(it.Index()) <= at {
			values = append(values, it.Record().Value)
		}
		for i := len(values) - 1; i >= 0; i-- {
			scanned++
			if s, ok := decode(values[i]); ok {
				return s, b.BaseOffset + int64(i), true
			}
		}
		at = b.BaseOffset - 1
	}
	return snap, 0, false
}
