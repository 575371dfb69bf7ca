package engine

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// SnapshotVersion is the PartitionSnapshot version Snapshot writes: the
// whole state, offset index included. RestorePartition reads it.
// A change of meaning bumps the version; new optional fields that old state
// can leave zero do not.
const SnapshotVersion = 1

// StateVersion is the PartitionSnapshot version StateSnapshot writes: the
// state without the offset index, which the caller persists append-only
// (IndexOrdinals, IndexSince) and hands back to RestorePartitionIndexed.
const StateVersion = 2

// Snapshot encodes the whole state in the versioned PartitionSnapshot format.
// The bytes are deterministic: the same state gives the same bytes, on every
// replica and every run (producers sorted by id, deterministic marshalling).
func (p *Partition) Snapshot() []byte {
	live := p.batches[p.head:]
	snap := p.snapshotProto(SnapshotVersion)
	snap.Batches = batchesToProto(live)
	return marshalSnapshot(snap)
}

// StateSnapshot encodes the state but the offset index: the scalars, the
// index's ordinals and the producer table, which eviction at trim keeps
// bounded. Its size does not grow with the log, so writing it every few
// hundred entries costs O(1) per entry. Deterministic like Snapshot.
func (p *Partition) StateSnapshot() []byte {
	snap := p.snapshotProto(StateVersion)
	snap.IndexStart, snap.IndexEnd = p.IndexOrdinals()
	return marshalSnapshot(snap)
}

// RaftSnapshotState is StateSnapshot for a raft snapshot: the index it
// still holds travels inline (RestorePartitionIndexed with a nil index
// takes it). After Compacted it is empty but on a compacted topic, where
// it keeps the batches the record does not cover yet (a few segments' worth
// of 40-byte entries at most: the raft log is trimmed up to the prefixes).
func (p *Partition) RaftSnapshotState() []byte {
	snap := p.snapshotProto(StateVersion)
	snap.IndexStart, snap.IndexEnd = p.IndexOrdinals()
	snap.Batches = batchesToProto(p.batches[p.head:])
	return marshalSnapshot(snap)
}

// batchesToProto is the index entries of live.
func batchesToProto(live []BatchLocation) []*strandpb.BatchLocation {
	out := make([]*strandpb.BatchLocation, len(live))
	for i := range live {
		b := &live[i]
		out[i] = &strandpb.BatchLocation{
			BaseOffset:     b.BaseOffset,
			RaftIndex:      b.RaftIndex,
			RecordCount:    b.RecordCount,
			AppendTimeMs:   b.AppendTimeMs,
			MaxTimestampMs: b.MaxTimestampMs,
		}
	}
	return out
}

// snapshotProto is the PartitionSnapshot of the state without batches.
func (p *Partition) snapshotProto(version uint32) *strandpb.PartitionSnapshot {
	snap := &strandpb.PartitionSnapshot{
		Version:        version,
		AppliedIndex:   p.appliedIndex,
		NextOffset:     p.nextOffset,
		LogStartOffset: p.logStartOffset,
		Producers:      make([]*strandpb.ProducerState, 0, len(p.producers)),
	}
	if p.hasTimestampSeed {
		snap.HasTimestampSeed, snap.TimestampSeedMs = true, p.timestampSeed
	}
	ids := make([]int64, 0, len(p.producers))
	for id := range p.producers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		snap.Producers = append(snap.Producers, producerToProto(id, p.producers[id]))
	}
	p.txnsToProto(snap)
	p.compactionToProto(snap)
	p.tierToProto(snap)
	return snap
}

// marshalSnapshot marshals deterministically; failure is a bug.
func marshalSnapshot(snap *strandpb.PartitionSnapshot) []byte {
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(snap)
	if err != nil {
		panic(fmt.Sprintf("engine: marshal snapshot: %v", err))
	}
	return data
}

// RestorePartition rebuilds a partition from Snapshot's bytes; it refuses
// other versions (StateSnapshot's included) and malformed bytes with an
// error wrapping ErrInvalidSnapshot.
func RestorePartition(snapshot []byte) (*Partition, error) {
	snap, err := unmarshalSnapshot(snapshot, SnapshotVersion)
	if err != nil {
		return nil, err
	}
	return restore(snap, 0, batchesFromProto(snap.GetBatches()))
}

// batchesFromProto is the index of a snapshot's inline entries.
func batchesFromProto(bs []*strandpb.BatchLocation) []BatchLocation {
	index := make([]BatchLocation, len(bs))
	for i, b := range bs {
		index[i] = BatchLocation{
			BaseOffset:     b.GetBaseOffset(),
			RecordCount:    b.GetRecordCount(),
			RaftIndex:      b.GetRaftIndex(),
			AppendTimeMs:   b.GetAppendTimeMs(),
			MaxTimestampMs: b.GetMaxTimestampMs(),
		}
	}
	return index
}

// RestorePartitionIndexed rebuilds a partition from StateSnapshot's bytes
// and the batches of ordinals [start, end) the state names, in order; it
// takes ownership of index. Other versions, malformed bytes, an index of
// the wrong length or a state that breaks an invariant fail with an error
// wrapping ErrInvalidSnapshot.
func RestorePartitionIndexed(state []byte, index []BatchLocation) (*Partition, error) {
	snap, err := unmarshalSnapshot(state, StateVersion)
	if err != nil {
		return nil, err
	}
	start, end := snap.GetIndexStart(), snap.GetIndexEnd()
	if index == nil && len(snap.GetBatches()) > 0 { // RaftSnapshotState
		index = batchesFromProto(snap.GetBatches())
		snap.Batches = nil
	}
	if start < 0 || end < start || int64(len(index)) != end-start || len(snap.GetBatches()) != 0 {
		return nil, fmt.Errorf("%w: index ordinals [%d, %d) with %d batches given, %d inline",
			ErrInvalidSnapshot, start, end, len(index), len(snap.GetBatches()))
	}
	return restore(snap, start, index)
}

// unmarshalSnapshot decodes a PartitionSnapshot of the given version.
func unmarshalSnapshot(data []byte, version uint32) (*strandpb.PartitionSnapshot, error) {
	var snap strandpb.PartitionSnapshot
	if err := proto.Unmarshal(data, &snap); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSnapshot, err)
	}
	if snap.GetVersion() != version {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrInvalidSnapshot, snap.GetVersion(), version)
	}
	return &snap, nil
}

// restore builds the partition of snap over index, whose first batch has
// ordinal indexBase, and checks it.
func restore(snap *strandpb.PartitionSnapshot, indexBase int64, index []BatchLocation) (*Partition, error) {
	p := &Partition{
		appliedIndex:   snap.GetAppliedIndex(),
		nextOffset:     snap.GetNextOffset(),
		logStartOffset: snap.GetLogStartOffset(),
		batches:        index,
		indexBase:      indexBase,
		producers:      make(map[int64]*producerState, len(snap.GetProducers())),
		txns:           make(map[int64]*txnProducer, len(snap.GetTxnProducers())),
	}
	if snap.GetHasTimestampSeed() {
		if len(index) != 0 {
			return nil, fmt.Errorf("%w: a timestamp seed with %d batches indexed", ErrInvalidSnapshot, len(index))
		}
		p.timestampSeed, p.hasTimestampSeed = snap.GetTimestampSeedMs(), true
	}
	lastID := int64(-1)
	for _, ps := range snap.GetProducers() {
		if ps.GetProducerId() <= lastID {
			return nil, fmt.Errorf("%w: producer %d after %d: not sorted or repeated",
				ErrInvalidSnapshot, ps.GetProducerId(), lastID)
		}
		lastID = ps.GetProducerId()
		st, err := producerFromProto(ps)
		if err != nil {
			return nil, fmt.Errorf("%w: producer %d: %v", ErrInvalidSnapshot, lastID, err)
		}
		p.producers[lastID] = st
	}
	if err := p.txnsFromProto(snap); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSnapshot, err)
	}
	if err := p.compactionFromProto(snap); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSnapshot, err)
	}
	if err := p.tierFromProto(snap); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSnapshot, err)
	}
	p.indexSum, p.producerSum, p.txnSum = p.digestSums()
	p.coveredSum, p.covered = p.coveredSums()
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSnapshot, err)
	}
	return p, nil
}

// producerToProto encodes one producer's record: the newest batch in the
// last_* fields, the older ones in earlier_batches.
func producerToProto(id int64, st *producerState) *strandpb.ProducerState {
	newest := st.newest()
	ps := &strandpb.ProducerState{
		ProducerId:       id,
		ProducerEpoch:    st.epoch,
		LastSequence:     newest.lastSequence(),
		LastBaseOffset:   newest.baseOffset,
		LastRecordCount:  newest.recordCount,
		LastAppendTimeMs: st.lastAppendMs,
	}
	for i := 0; i < st.count-1; i++ {
		b := &st.batches[i]
		ps.EarlierBatches = append(ps.EarlierBatches, &strandpb.ProducerBatch{
			BaseSequence: b.baseSequence,
			RecordCount:  b.recordCount,
			BaseOffset:   b.baseOffset,
		})
	}
	return ps
}

// producerFromProto decodes and checks one producer's record.
func producerFromProto(ps *strandpb.ProducerState) (*producerState, error) {
	st := &producerState{epoch: ps.GetProducerEpoch(), lastAppendMs: ps.GetLastAppendTimeMs()}
	if len(ps.GetEarlierBatches()) > producerBatchesMax-1 {
		return nil, fmt.Errorf("more than %d batches", producerBatchesMax)
	}
	for _, b := range ps.GetEarlierBatches() {
		st.batches[st.count] = producerBatch{
			baseSequence: b.GetBaseSequence(),
			recordCount:  b.GetRecordCount(),
			baseOffset:   b.GetBaseOffset(),
		}
		st.count++
	}
	newest := producerBatch{recordCount: ps.GetLastRecordCount(), baseOffset: ps.GetLastBaseOffset()}
	if newest.recordCount <= 0 {
		return nil, fmt.Errorf("record count %d", newest.recordCount)
	}
	newest.baseSequence = nextSequence(ps.GetLastSequence(), -(newest.recordCount - 1))
	st.batches[st.count] = newest
	st.count++
	if newest.lastSequence() != ps.GetLastSequence() {
		return nil, fmt.Errorf("last sequence %d out of range", ps.GetLastSequence())
	}
	return st, st.check()
}
