package engine

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/strandlog/strand/proto/strandpb"
)

// EntryFields is a strandpb.Entry read in place: Batch is a slice of the
// entry's bytes, not a copy, so the fetch path can serve stored batches
// without copying or re-encoding them.
type EntryFields struct {
	Kind          strandpb.EntryKind
	AppendTimeMs  int64
	ProducerID    int64
	ProducerEpoch int32
	BaseSequence  int32
	TrimOffset    int64
	ProposalID    uint64
	// Transactional marks a produce entry's batch as part of the
	// producer's open transaction.
	Transactional bool
	// Commit and CoordinatorEpoch belong to a transaction marker.
	Commit           bool
	CoordinatorEpoch int32
	// The compaction fields belong to COMPACT and COMPACT_DONE entries
	// (compaction.go): the generation, the cleanable end (COMPACT) or
	// cleaned-to offset (COMPACT_DONE), the decision's delete.retention.ms
	// and offset map size, and a reported pass's digest (a slice of the
	// entry's bytes, like Batch).
	CompactGeneration uint64
	CompactOffset     int64
	DeleteRetentionMs int64
	OffsetMapBytes    int64
	CompactDigest     []byte
	// The tier fields belong to a TIER_ADD entry (tiering.go): the
	// uploaded segment.
	TierBase, TierEnd, TierBytes, TierMaxTimeMs int64
	TierTerm                                    uint64
	TierCRC                                     uint32
	// TierManifest belongs to a TIER_RESTORE entry: a marshalled
	// strandpb.TierState (a slice of the entry's bytes, like Batch).
	TierManifest []byte
	Batch        []byte
}

// Producer names an idempotent producer's batch: its id, epoch and the
// sequence number of the batch's first record (R15).
type Producer struct {
	ID           int64
	Epoch        int32
	BaseSequence int32
}

// NoProducer marks a batch from a producer without idempotence.
var NoProducer = Producer{ID: -1}

// Field numbers of strandpb.Entry.
const (
	fieldKind          = 1
	fieldAppendTimeMs  = 2
	fieldProducerID    = 3
	fieldProducerEpoch = 4
	fieldBaseSequence  = 5
	fieldTrimOffset    = 6
	fieldProposalID    = 7
	fieldTransactional = 8
	fieldCommit        = 9
	fieldCoordEpoch    = 10
	fieldCompactGen    = 11
	fieldCompactOffset = 12
	fieldDeleteRetain  = 13
	fieldOffsetMap     = 14
	fieldBatch         = 15
	fieldCompactDigest = 16
	fieldTierBase      = 17
	fieldTierEnd       = 18
	fieldTierBytes     = 19
	fieldTierMaxTime   = 20
	fieldTierTerm      = 21
	fieldTierCRC       = 22
	fieldTierManifest  = 23
)

// DecodeEntry reads a marshalled strandpb.Entry with protowire, allocating
// nothing and copying nothing. It accepts what proto.Unmarshal accepts and
// gives the same values: unknown fields are skipped, a repeated field keeps
// its last value, a known field with another wire type counts as unknown.
func DecodeEntry(data []byte) (EntryFields, error) {
	var e EntryFields
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return EntryFields{}, fmt.Errorf("%w: tag: %v", ErrInvalidEntry, protowire.ParseError(n))
		}
		data = data[n:]
		if typ == protowire.BytesType && (num == fieldBatch || num == fieldCompactDigest || num == fieldTierManifest) {
			v, m := protowire.ConsumeBytes(data)
			if m < 0 {
				return EntryFields{}, fmt.Errorf("%w: field %d: %v", ErrInvalidEntry, num, protowire.ParseError(m))
			}
			switch num {
			case fieldBatch:
				e.Batch = v[:len(v):len(v)]
			case fieldCompactDigest:
				e.CompactDigest = v[:len(v):len(v)]
			default:
				e.TierManifest = v[:len(v):len(v)]
			}
			data = data[m:]
			continue
		}
		if typ == protowire.VarintType && (num >= fieldKind && num <= fieldOffsetMap || num >= fieldTierBase && num <= fieldTierCRC) {
			v, m := protowire.ConsumeVarint(data)
			if m < 0 {
				return EntryFields{}, fmt.Errorf("%w: field %d: %v", ErrInvalidEntry, num, protowire.ParseError(m))
			}
			e.setVarint(num, v)
			data = data[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, data)
		if m < 0 {
			return EntryFields{}, fmt.Errorf("%w: field %d: %v", ErrInvalidEntry, num, protowire.ParseError(m))
		}
		data = data[m:]
	}
	return e, nil
}

// setVarint stores a varint field as proto's generated code would.
func (e *EntryFields) setVarint(num protowire.Number, v uint64) {
	switch num {
	case fieldKind:
		e.Kind = strandpb.EntryKind(int32(v))
	case fieldAppendTimeMs:
		e.AppendTimeMs = int64(v)
	case fieldProducerID:
		e.ProducerID = int64(v)
	case fieldProducerEpoch:
		e.ProducerEpoch = int32(v)
	case fieldBaseSequence:
		e.BaseSequence = int32(v)
	case fieldTrimOffset:
		e.TrimOffset = int64(v)
	case fieldProposalID:
		e.ProposalID = v
	case fieldTransactional:
		e.Transactional = v != 0
	case fieldCommit:
		e.Commit = v != 0
	case fieldCoordEpoch:
		e.CoordinatorEpoch = int32(v)
	case fieldCompactGen:
		e.CompactGeneration = v
	case fieldCompactOffset:
		e.CompactOffset = int64(v)
	case fieldDeleteRetain:
		e.DeleteRetentionMs = int64(v)
	case fieldOffsetMap:
		e.OffsetMapBytes = int64(v)
	case fieldTierBase:
		e.TierBase = int64(v)
	case fieldTierEnd:
		e.TierEnd = int64(v)
	case fieldTierBytes:
		e.TierBytes = int64(v)
	case fieldTierMaxTime:
		e.TierMaxTimeMs = int64(v)
	case fieldTierTerm:
		e.TierTerm = v
	case fieldTierCRC:
		e.TierCRC = uint32(v)
	}
}

// EntryBatch returns the batch bytes of a stored produce entry's Data as a
// slice of data: what the fetch path serves.
func EntryBatch(data []byte) ([]byte, error) {
	e, err := DecodeEntry(data)
	if err != nil {
		return nil, err
	}
	if e.Kind != strandpb.EntryKind_ENTRY_KIND_PRODUCE {
		return nil, fmt.Errorf("%w: kind %v holds no batch", ErrInvalidEntry, e.Kind)
	}
	return e.Batch, nil
}

// AppendEntry appends e marshalled as a strandpb.Entry to dst: the same
// bytes as deterministic proto.Marshal (fields in number order, zero values
// left out).
func AppendEntry(dst []byte, e *EntryFields) []byte {
	dst = appendVarintField(dst, fieldKind, uint64(int64(e.Kind)))
	dst = appendVarintField(dst, fieldAppendTimeMs, uint64(e.AppendTimeMs))
	dst = appendVarintField(dst, fieldProducerID, uint64(e.ProducerID))
	dst = appendVarintField(dst, fieldProducerEpoch, uint64(int64(e.ProducerEpoch)))
	dst = appendVarintField(dst, fieldBaseSequence, uint64(int64(e.BaseSequence)))
	dst = appendVarintField(dst, fieldTrimOffset, uint64(e.TrimOffset))
	dst = appendVarintField(dst, fieldProposalID, e.ProposalID)
	dst = appendVarintField(dst, fieldTransactional, boolVarint(e.Transactional))
	dst = appendVarintField(dst, fieldCommit, boolVarint(e.Commit))
	dst = appendVarintField(dst, fieldCoordEpoch, uint64(int64(e.CoordinatorEpoch)))
	dst = appendVarintField(dst, fieldCompactGen, e.CompactGeneration)
	dst = appendVarintField(dst, fieldCompactOffset, uint64(e.CompactOffset))
	dst = appendVarintField(dst, fieldDeleteRetain, uint64(e.DeleteRetentionMs))
	dst = appendVarintField(dst, fieldOffsetMap, uint64(e.OffsetMapBytes))
	dst = appendBytesField(dst, fieldBatch, e.Batch)
	dst = appendBytesField(dst, fieldCompactDigest, e.CompactDigest)
	dst = appendVarintField(dst, fieldTierBase, uint64(e.TierBase))
	dst = appendVarintField(dst, fieldTierEnd, uint64(e.TierEnd))
	dst = appendVarintField(dst, fieldTierBytes, uint64(e.TierBytes))
	dst = appendVarintField(dst, fieldTierMaxTime, uint64(e.TierMaxTimeMs))
	dst = appendVarintField(dst, fieldTierTerm, e.TierTerm)
	dst = appendVarintField(dst, fieldTierCRC, uint64(e.TierCRC))
	return appendBytesField(dst, fieldTierManifest, e.TierManifest)
}

// appendBytesField appends a non-empty bytes field; proto3 omits empty ones.
func appendBytesField(dst []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return dst
	}
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendBytes(dst, v)
}

// boolVarint is a bool's varint value, as proto encodes it.
func boolVarint(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// appendVarintField appends a non-zero varint field; proto3 omits zeros.
func appendVarintField(dst []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return dst
	}
	dst = protowire.AppendTag(dst, num, protowire.VarintType)
	return protowire.AppendVarint(dst, v)
}

// EncodeProduceEntry appends the Data of a produce entry to dst: what the
// node proposes for a client's batch. appendTimeMs is the leader's clock;
// proposalID lets the proposing node find its waiting request.
func EncodeProduceEntry(dst []byte, appendTimeMs int64, proposalID uint64, producer Producer, batch []byte) []byte {
	return AppendEntry(dst, &EntryFields{
		Kind:          strandpb.EntryKind_ENTRY_KIND_PRODUCE,
		AppendTimeMs:  appendTimeMs,
		ProducerID:    producer.ID,
		ProducerEpoch: producer.Epoch,
		BaseSequence:  producer.BaseSequence,
		ProposalID:    proposalID,
		Batch:         batch,
	})
}

// EncodeTrimEntry appends the Data of a trim entry to dst: it moves the log
// start offset to trimOffset (retention or delete-records).
func EncodeTrimEntry(dst []byte, appendTimeMs int64, proposalID uint64, trimOffset int64) []byte {
	return AppendEntry(dst, &EntryFields{
		Kind:         strandpb.EntryKind_ENTRY_KIND_TRIM,
		AppendTimeMs: appendTimeMs,
		TrimOffset:   trimOffset,
		ProposalID:   proposalID,
	})
}

// EncodeTransactionalProduceEntry appends the Data of a produce entry whose
// batch belongs to the producer's open transaction on this partition (Kafka's
// transactional attribute bit): accepted only after a TXN_BEGIN entry of the
// same producer id and epoch, and held back from read_committed readers
// until the transaction's marker.
func EncodeTransactionalProduceEntry(dst []byte, appendTimeMs int64, proposalID uint64, producer Producer, batch []byte) []byte {
	return AppendEntry(dst, &EntryFields{
		Kind:          strandpb.EntryKind_ENTRY_KIND_PRODUCE,
		AppendTimeMs:  appendTimeMs,
		ProducerID:    producer.ID,
		ProducerEpoch: producer.Epoch,
		BaseSequence:  producer.BaseSequence,
		ProposalID:    proposalID,
		Transactional: true,
		Batch:         batch,
	})
}

// EncodeTxnBeginEntry appends the Data of a TXN_BEGIN entry: producerID at
// epoch joined a transaction that includes this partition (KIP-890's
// verification, made a replicated fact). The partition leader proposes it
// once the coordinator has verified the partition is in the producer's
// transaction, before the transaction's first write.
func EncodeTxnBeginEntry(dst []byte, appendTimeMs int64, proposalID uint64, producerID int64, epoch int32) []byte {
	return AppendEntry(dst, &EntryFields{
		Kind:          strandpb.EntryKind_ENTRY_KIND_TXN_BEGIN,
		AppendTimeMs:  appendTimeMs,
		ProducerID:    producerID,
		ProducerEpoch: epoch,
		ProposalID:    proposalID,
	})
}

// Marker is a transaction coordinator's commit or abort marker for one
// partition: Kafka's control record (WriteTxnMarkers).
type Marker struct {
	ProducerID int64
	// ProducerEpoch is the marker's epoch: with KIP-890 the epoch EndTxn
	// bumped to, which fences the transaction's own epoch.
	ProducerEpoch    int32
	CoordinatorEpoch int32
	Commit           bool
}

// EncodeTxnMarkerEntry appends the Data of a TXN_MARKER entry: it ends the
// producer's open transaction on this partition.
func EncodeTxnMarkerEntry(dst []byte, appendTimeMs int64, proposalID uint64, m Marker) []byte {
	return AppendEntry(dst, &EntryFields{
		Kind:             strandpb.EntryKind_ENTRY_KIND_TXN_MARKER,
		AppendTimeMs:     appendTimeMs,
		ProducerID:       m.ProducerID,
		ProducerEpoch:    m.ProducerEpoch,
		ProposalID:       proposalID,
		Commit:           m.Commit,
		CoordinatorEpoch: m.CoordinatorEpoch,
	})
}

// EntryMarker returns the marker of a stored TXN_MARKER entry's Data: what
// the fetch path serves as a control record where the offset index holds
// the marker's one-offset location.
func EntryMarker(data []byte) (Marker, error) {
	e, err := DecodeEntry(data)
	if err != nil {
		return Marker{}, err
	}
	if e.Kind != strandpb.EntryKind_ENTRY_KIND_TXN_MARKER {
		return Marker{}, fmt.Errorf("%w: kind %v is not a transaction marker", ErrInvalidEntry, e.Kind)
	}
	return Marker{ProducerID: e.ProducerID, ProducerEpoch: e.ProducerEpoch,
		CoordinatorEpoch: e.CoordinatorEpoch, Commit: e.Commit}, nil
}
