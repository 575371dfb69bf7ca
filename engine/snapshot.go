package engine

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// SnapshotVersion is the PartitionSnapshot version Snapshot writes and the
// only one RestorePartition reads. A change of meaning bumps it; new
// optional fields that old state can leave zero do not.
const SnapshotVersion = 1

// Snapshot encodes the whole state in the versioned PartitionSnapshot format.
// The bytes are deterministic: the same state gives the same bytes, on every
// replica and every run (producers sorted by id, deterministic marshalling).
func (p *Partition) Snapshot() []byte {
	live := p.batches[p.head:]
	snap := &strandpb.PartitionSnapshot{
		Version:        SnapshotVersion,
		AppliedIndex:   p.appliedIndex,
		NextOffset:     p.nextOffset,
		LogStartOffset: p.logStartOffset,
		Batches:        make([]*strandpb.BatchLocation, len(live)),
		Producers:      make([]*strandpb.ProducerState, 0, len(p.producers)),
	}
	for i := range live {
		b := &live[i]
		snap.Batches[i] = &strandpb.BatchLocation{
			BaseOffset:     b.BaseOffset,
			RaftIndex:      b.RaftIndex,
			RecordCount:    b.RecordCount,
			AppendTimeMs:   b.AppendTimeMs,
			MaxTimestampMs: b.MaxTimestampMs,
		}
	}
	ids := make([]int64, 0, len(p.producers))
	for id := range p.producers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		snap.Producers = append(snap.Producers, producerToProto(id, p.producers[id]))
	}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(snap)
	if err != nil {
		panic(fmt.Sprintf("engine: marshal snapshot: %v", err))
	}
	return data
}

// RestorePartition rebuilds a partition from Snapshot's bytes; it refuses
// unknown versions and malformed bytes with an error wrapping
// ErrInvalidSnapshot.
func RestorePartition(snapshot []byte) (*Partition, error) {
	var snap strandpb.PartitionSnapshot
	if err := proto.Unmarshal(snapshot, &snap); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSnapshot, err)
	}
	if snap.GetVersion() != SnapshotVersion {
		return nil, fmt.Errorf("%w: version %d, this engine reads %d", ErrInvalidSnapshot, snap.GetVersion(), SnapshotVersion)
	}
	p := &Partition{
		appliedIndex:   snap.GetAppliedIndex(),
		nextOffset:     snap.GetNextOffset(),
		logStartOffset: snap.GetLogStartOffset(),
		batches:        make([]BatchLocation, len(snap.GetBatches())),
		producers:      make(map[int64]*producerState, len(snap.GetProducers())),
	}
	for i, b := range snap.GetBatches() {
		p.batches[i] = BatchLocation{
			BaseOffset:     b.GetBaseOffset(),
			RecordCount:    b.GetRecordCount(),
			RaftIndex:      b.GetRaftIndex(),
			AppendTimeMs:   b.GetAppendTimeMs(),
			MaxTimestampMs: b.GetMaxTimestampMs(),
		}
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
	p.indexSum, p.producerSum = p.digestSums()
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
		ProducerId:      id,
		ProducerEpoch:   st.epoch,
		LastSequence:    newest.lastSequence(),
		LastBaseOffset:  newest.baseOffset,
		LastRecordCount: newest.recordCount,
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
	st := &producerState{epoch: ps.GetProducerEpoch()}
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
