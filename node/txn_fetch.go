package node

import (
	"errors"
	"slices"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/proto/strandpb"
)

// Reads of partitions with transactions (engine/doc.go "Transactions"): a
// fetch at isolation level read_committed stops at the last stable offset
// (engine AppendReadable), every fetch skips the transaction markers (a
// marker's offset holds no batch for a native reader; next_offset moves
// it past those after the last batch, FetchResult.through) and answers the
// partition's last stable offset and the aborted transactions overlapping
// the batches it returns, so a read_uncommitted reader can drop aborted
// batches itself; ListOffsets latest at read_committed is the last stable
// offset.

// markerAnswerBytes is what a served marker counts toward a fetch's
// min_bytes: the size of Kafka's control batch (61-byte header, a
// 17-byte record), which is how the Kafka listener serves it.
const markerAnswerBytes = 78

// errMarkerEntry: the entry at an indexed offset is a transaction marker,
// not a batch; readers skip it.
var errMarkerEntry = errors.New("node: a transaction marker holds no batch")

// validIsolation tells whether a wire isolation level is one of Kafka's
// (0 read_uncommitted, 1 read_committed).
func validIsolation(level int32) bool {
	return level == int32(engine.ReadUncommitted) || level == int32(engine.ReadCommitted)
}

// txnFetchState sets a fetch answer's partition's last stable offset as
// of the read and the aborted transactions overlapping the batches read
// (from the replica's aborted index now: an entry enters with its abort
// marker and only a trim past the marker removes it), and returns them.
// Kafka leaves the filtering to read_committed consumers; a native
// read_committed fetch drops the aborted batches itself (inAborted).
func (c *Core) txnFetchState(wp *strandpb.FetchResponse_Partition, tp TopicPartition, res FetchResult) []engine.AbortedTxn {
	g := c.byTP[tp]
	if wp.GetError() != nil || g == nil || g.part == nil {
		return nil
	}
	wp.LastStableOffset = min(res.LastStableOffset, wp.GetHighWatermark())
	n := len(res.Batches)
	if n == 0 {
		return nil
	}
	last := res.Batches[n-1]
	from, to := res.Batches[0].BaseOffset, last.nextOffset()
	aborted := slices.DeleteFunc(g.part.AppendAbortedTxns(nil, from, to), func(a engine.AbortedTxn) bool {
		return slices.Contains(res.forgotten, a.LastOffset) // its marker compacted away (compaction_fetch.go)
	})
	for _, a := range aborted {
		wp.AbortedTransactions = append(wp.AbortedTransactions, &strandpb.AbortedTransaction{
			ProducerId: a.ProducerID, FirstOffset: a.FirstOffset, LastOffset: a.LastOffset})
	}
	return aborted
}

// inAborted tells whether b belongs to one of the aborted transactions
// (its producer's batches from the first offset up to the abort marker).
func inAborted(aborted []engine.AbortedTxn, b FetchedBatch) bool {
	for _, a := range aborted {
		if b.Producer.ID == a.ProducerID && b.BaseOffset >= a.FirstOffset && b.BaseOffset < a.LastOffset {
			return true
		}
	}
	return false
}

// markerBatch is a marker entry's data as a fetched batch, when
// the fetch serves markers (markers set; a native fetch skips them).
func markerBatch(data []byte, loc engine.BatchLocation, markers bool) (FetchedBatch, bool) {
	if !markers {
		return FetchedBatch{}, false
	}
	m, err := engine.EntryMarker(data)
	if err != nil {
		return FetchedBatch{}, false // decodeProduced decoded it as a marker: cannot happen
	}
	return FetchedBatch{BaseOffset: loc.BaseOffset, AppendTimeMs: loc.AppendTimeMs, Marker: &m,
		Producer: engine.Producer{ID: m.ProducerID, Epoch: m.ProducerEpoch, BaseSequence: -1}}, true
}

// wireBatch is a fetched batch or marker as the fetch answer carries it.
func wireBatch(b FetchedBatch) *strandpb.FetchResponse_Batch {
	w := &strandpb.FetchResponse_Batch{BaseOffset: b.BaseOffset, AppendTimeMs: b.AppendTimeMs, Records: b.Batch,
		ProducerId: &b.Producer.ID, ProducerEpoch: b.Producer.Epoch, BaseSequence: b.Producer.BaseSequence, Transactional: b.Transactional}
	if m := b.Marker; m != nil {
		w.Marker = &strandpb.FetchResponse_TxnMarker{Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}
	}
	return w
}
