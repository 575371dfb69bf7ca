package engine

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/proto/strandpb"
)

// toProto converts EntryFields into the generated message.
func toProto(e *EntryFields) *strandpb.Entry {
	return &strandpb.Entry{
		Kind:              e.Kind,
		AppendTimeMs:      e.AppendTimeMs,
		ProducerId:        e.ProducerID,
		ProducerEpoch:     e.ProducerEpoch,
		BaseSequence:      e.BaseSequence,
		TrimOffset:        e.TrimOffset,
		ProposalId:        e.ProposalID,
		Transactional:     e.Transactional,
		Commit:            e.Commit,
		CoordinatorEpoch:  e.CoordinatorEpoch,
		CompactGeneration: e.CompactGeneration,
		CompactOffset:     e.CompactOffset,
		DeleteRetentionMs: e.DeleteRetentionMs,
		OffsetMapBytes:    e.OffsetMapBytes,
		CompactDigest:     e.CompactDigest,
		TierBase:          e.TierBase,
		TierEnd:           e.TierEnd,
		TierBytes:         e.TierBytes,
		TierMaxTimeMs:     e.TierMaxTimeMs,
		TierTerm:          e.TierTerm,
		TierCrc:           e.TierCRC,
		TierManifest:      e.TierManifest,
		Batch:             e.Batch,
	}
}

// fromProto converts the generated message into EntryFields.
func fromProto(m *strandpb.Entry) EntryFields {
	return EntryFields{
		Kind:              m.GetKind(),
		AppendTimeMs:      m.GetAppendTimeMs(),
		ProducerID:        m.GetProducerId(),
		ProducerEpoch:     m.GetProducerEpoch(),
		BaseSequence:      m.GetBaseSequence(),
		TrimOffset:        m.GetTrimOffset(),
		ProposalID:        m.GetProposalId(),
		Transactional:     m.GetTransactional(),
		Commit:            m.GetCommit(),
		CoordinatorEpoch:  m.GetCoordinatorEpoch(),
		CompactGeneration: m.GetCompactGeneration(),
		CompactOffset:     m.GetCompactOffset(),
		DeleteRetentionMs: m.GetDeleteRetentionMs(),
		OffsetMapBytes:    m.GetOffsetMapBytes(),
		CompactDigest:     m.GetCompactDigest(),
		TierBase:          m.GetTierBase(),
		TierEnd:           m.GetTierEnd(),
		TierBytes:         m.GetTierBytes(),
		TierMaxTimeMs:     m.GetTierMaxTimeMs(),
		TierTerm:          m.GetTierTerm(),
		TierCRC:           m.GetTierCrc(),
		TierManifest:      m.GetTierManifest(),
		Batch:             m.GetBatch(),
	}
}

// sameFields compares two EntryFields, treating nil and empty batches
// (and digests) alike.
func sameFields(a, b EntryFields) bool {
	if !bytes.Equal(a.Batch, b.Batch) || !bytes.Equal(a.CompactDigest, b.CompactDigest) || !bytes.Equal(a.TierManifest, b.TierManifest) {
		return false
	}
	if a.CompactGeneration != b.CompactGeneration || a.CompactOffset != b.CompactOffset ||
		a.DeleteRetentionMs != b.DeleteRetentionMs || a.OffsetMapBytes != b.OffsetMapBytes {
		return false
	}
	if a.TierBase != b.TierBase || a.TierEnd != b.TierEnd || a.TierBytes != b.TierBytes ||
		a.TierMaxTimeMs != b.TierMaxTimeMs || a.TierTerm != b.TierTerm || a.TierCRC != b.TierCRC {
		return false
	}
	return a.Kind == b.Kind && a.AppendTimeMs == b.AppendTimeMs && a.ProducerID == b.ProducerID &&
		a.ProducerEpoch == b.ProducerEpoch && a.BaseSequence == b.BaseSequence &&
		a.TrimOffset == b.TrimOffset && a.ProposalID == b.ProposalID && a.Transactional == b.Transactional &&
		a.Commit == b.Commit && a.CoordinatorEpoch == b.CoordinatorEpoch
}

// TestEntryCodecMatchesProto shows AppendEntry writes exactly the bytes of
// deterministic proto.Marshal and DecodeEntry reads them back, for random
// field values including negatives and zeros.
func TestEntryCodecMatchesProto(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pick64 := rapid.OneOf(rapid.Just(int64(0)), rapid.Just(int64(-1)), rapid.Int64())
		pick32 := rapid.OneOf(rapid.Just(int32(0)), rapid.Just(int32(-1)), rapid.Int32())
		e := EntryFields{
			Kind:              strandpb.EntryKind(pick32.Draw(t, "kind")),
			AppendTimeMs:      pick64.Draw(t, "time"),
			ProducerID:        pick64.Draw(t, "producer"),
			ProducerEpoch:     pick32.Draw(t, "epoch"),
			BaseSequence:      pick32.Draw(t, "sequence"),
			TrimOffset:        pick64.Draw(t, "trim"),
			ProposalID:        rapid.Uint64().Draw(t, "proposal"),
			Transactional:     rapid.Bool().Draw(t, "transactional"),
			Commit:            rapid.Bool().Draw(t, "commit"),
			CoordinatorEpoch:  pick32.Draw(t, "coordinatorEpoch"),
			CompactGeneration: rapid.Uint64().Draw(t, "generation"),
			CompactOffset:     pick64.Draw(t, "compactOffset"),
			DeleteRetentionMs: pick64.Draw(t, "deleteRetention"),
			OffsetMapBytes:    pick64.Draw(t, "offsetMap"),
			CompactDigest:     rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "digest"),
			TierBase:          pick64.Draw(t, "tierBase"),
			TierEnd:           pick64.Draw(t, "tierEnd"),
			TierBytes:         pick64.Draw(t, "tierBytes"),
			TierMaxTimeMs:     pick64.Draw(t, "tierMaxTime"),
			TierTerm:          rapid.Uint64().Draw(t, "tierTerm"),
			TierCRC:           rapid.Uint32().Draw(t, "tierCRC"),
			TierManifest:      rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "tierManifest"),
			Batch:             rapid.SliceOfN(rapid.Byte(), 0, 50).Draw(t, "batch"),
		}
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(toProto(&e))
		if err != nil {
			t.Fatal(err)
		}
		got := AppendEntry(nil, &e)
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendEntry %x, proto.Marshal %x", got, want)
		}
		back, err := DecodeEntry(got)
		if err != nil || !sameFields(back, e) {
			t.Fatalf("DecodeEntry = %+v, %v; want %+v", back, err, e)
		}
	})
}

// TestEntryBatchIsAView shows EntryBatch returns the stored bytes in place.
func TestEntryBatchIsAView(t *testing.T) {
	data := EncodeProduceEntry(nil, 5, 6, NoProducer, []byte("batch bytes"))
	b, err := EntryBatch(data)
	if err != nil || string(b) != "batch bytes" {
		t.Fatalf("EntryBatch = %q, %v", b, err)
	}
	b[0] = 'B'
	if !bytes.Contains(data, []byte("Batch bytes")) {
		t.Fatalf("EntryBatch copied the batch")
	}
	if _, err := EntryBatch(EncodeTrimEntry(nil, 0, 0, 3)); err == nil {
		t.Fatalf("EntryBatch of a trim entry succeeded")
	}
}

// FuzzDecodeEntry checks DecodeEntry against proto.Unmarshal on arbitrary
// bytes: whatever proto accepts, DecodeEntry reads to the same values.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(EncodeProduceEntry(nil, 1, 2, Producer{3, 4, 5}, []byte("x")))
	f.Add(EncodeTrimEntry(nil, 1, 2, 3))
	f.Add(EncodeTxnBeginEntry(nil, 1, 2, 3, 4))
	f.Add(EncodeTxnMarkerEntry(nil, 1, 2, Marker{ProducerID: 3, ProducerEpoch: 4, CoordinatorEpoch: -5, Commit: true}))
	f.Add(EncodeTransactionalProduceEntry(nil, 1, 2, Producer{3, 4, 5}, []byte("x")))
	f.Add(EncodeCompactEntry(nil, 2, compact.Decision{Generation: 1, CleanableEnd: 5, TimeMs: 9, DeleteRetentionMs: 3, OffsetMapBytes: 1 << 20}))
	f.Add(EncodeCompactDoneEntry(nil, 1, 2, 1, 5, [32]byte{7}))
	f.Add([]byte{0x40, 0x02, 0x48, 0x80, 0x01})
	f.Add([]byte{0x08, 0x01, 0x08, 0x02, 0x7a, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		var m strandpb.Entry
		perr := proto.Unmarshal(data, &m)
		e, err := DecodeEntry(data)
		if perr == nil && (err != nil || !sameFields(e, fromProto(&m))) {
			t.Fatalf("proto.Unmarshal gives %+v, DecodeEntry %+v, %v", fromProto(&m), e, err)
		}
	})
}
