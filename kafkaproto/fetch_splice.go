package kafkaproto

import (
	"encoding/binary"
	"net"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// SpliceBytesMin is the smallest stored Kafka batch a fetch answer
// leaves in place (its bytes after the base offset, length and leader
// epoch written as they are, with writev) rather than copying into the
// answer's buffer: below it a separate write vector costs more than the
// copy. The native listener's threshold (proto/frame.SpliceBytesMin).
const SpliceBytesMin = 4 << 10

// kafkaHeadBytes is the part of a stored Kafka batch a fetch answer
// rewrites: base offset (stored as zero), batch length, leader epoch.
const kafkaHeadBytes = 16

// fetchAnswerVersionMax is the newest Fetch version appendFetchFrame lays
// out itself (the handler serves up to it); a newer one is marshalled by
// kmsg whole.
const fetchAnswerVersionMax = 13

// fetchAnswer is a fetch's answer before it is written: the Kafka
// response with every partition's RecordBatches empty, and the stored
// batches each partition's record bytes are made from (batches[i] for the
// i-th partition over the topics in order; nil for a partition answered
// with an error). appendFetchFrame writes it with the stored Kafka batches
// spliced; AppendTo (kmsg.Response) marshals it whole.
type fetchAnswer struct {
	*kmsg.FetchResponse
	batches [][]*strandpb.FetchResponse_Batch
}

// AppendTo appends the response body, record bytes included, marshalled
// by kmsg (kmsg.Response): the form a caller holding a kmsg.Response
// decodes. The listener and Translate write appendFetchFrame's bytes,
// which are the same.
func (f *fetchAnswer) AppendTo(dst []byte) []byte {
	whole := *f.FetchResponse
	whole.Topics = slices.Clone(whole.Topics)
	i := 0
	for t := range whole.Topics {
		ps := slices.Clone(whole.Topics[t].Partitions)
		for p := range ps {
			ps[p].RecordBatches = appendFetchRecords(slices.Clip(ps[p].RecordBatches), f.partitionBatches(i))
			i++
		}
		whole.Topics[t].Partitions = ps
	}
	return whole.AppendTo(dst)
}

// partitionBatches is batches[i], nil past its end.
func (f *fetchAnswer) partitionBatches(i int) []*strandpb.FetchResponse_Batch {
	if i < len(f.batches) {
		return f.batches[i]
	}
	return nil
}

// appendFetchRecords appends one partition's record bytes, whole: each
// stored batch in Kafka's RecordBatch v2 form (appendFetchBatch).
func appendFetchRecords(dst []byte, batches []*strandpb.FetchResponse_Batch) []byte {
	for _, b := range batches {
		var ok bool
		if dst, _, ok = appendFetchBatch(dst, b, 0); !ok {
			break
		}
	}
	return dst
}

// appendFetchBatch appends stored batch b in Kafka's RecordBatch v2 form:
// a transaction marker as Kafka's control batch, a batch of a compacted
// prefix as AppendCompacted writes it, any other as AppendKafka does. When
// spliceMin > 0 and b is stored in Kafka's form with at least spliceMin
// bytes after its first kafkaHeadBytes, only those are appended (base
// offset stamped, leader epoch -1) and rest is the stored remainder, to
// be written after them as it is. ok is false when b cannot be served (a
// stored batch always can: the engine validated it): the partition's
// answer ends before it, as it always has.
func appendFetchBatch(dst []byte, b *strandpb.FetchResponse_Batch, spliceMin int) (out, rest []byte, ok bool) {
	if m := b.GetMarker(); m != nil {
		return AppendControl(dst, b.GetBaseOffset(), -1, Marker{ProducerID: b.GetProducerId(), ProducerEpoch: int16(b.GetProducerEpoch()),
			CoordinatorEpoch: m.GetCoordinatorEpoch(), Commit: m.GetCommit(), TimestampMs: b.GetAppendTimeMs()}), nil, true
	}
	records := b.GetRecords()
	if compact.IsCompacted(records) {
		// A batch of a compacted prefix: Kafka's form keeps its offset
		// range and producer fields, fewer records.
		out, err := AppendCompacted(dst, records, -1)
		return out, nil, err == nil
	}
	if spliceMin > 0 && recordbatch.IsKafka(records) && len(records) >= v2HeaderBytes && len(records)-kafkaHeadBytes >= spliceMin {
		// AppendKafka's bytes, the stored remainder left where it is.
		dst = binary.BigEndian.AppendUint64(dst, uint64(b.GetBaseOffset()))
		dst = append(dst, records[v2LengthOffset:v2EpochOffset]...)
		dst = binary.BigEndian.AppendUint32(dst, ^uint32(0)) // leader epoch -1
		return dst, records[kafkaHeadBytes:], true
	}
	pf := ProducerFields{ID: -1, Epoch: -1, Sequence: -1}
	if b.ProducerId != nil && b.GetProducerId() >= 0 {
		pf = ProducerFields{ID: b.GetProducerId(), Epoch: int16(b.GetProducerEpoch()), Sequence: b.GetBaseSequence(),
			Transactional: b.GetTransactional()}
	}
	out, err := AppendKafka(dst, records, b.GetBaseOffset(), -1, pf)
	return out, nil, err == nil
}

// fetchPiece is one piece of a spliced frame: head[from:to], or ext (a
// stored slice) when set.
type fetchPiece struct {
	from, to int
	ext      []byte
}

// fetchSplicer builds one fetch answer's frame in head: first every
// partition's converted record bytes (the one buffer what needs
// re-encoding is built in), then the frame's own bytes in order; pieces
// lists the frame in wire order as ranges of head and stored slices.
type fetchSplicer struct {
	head   []byte
	pieces []fetchPiece
	floor  int // pieces before it are not merged into
}

// add appends a range of head to the frame, merged into the piece before
// when it continues it (and is not below floor).
func (s *fetchSplicer) add(from, to int) {
	if from == to {
		return
	}
	if n := len(s.pieces); n > s.floor && s.pieces[n-1].ext == nil && s.pieces[n-1].to == from {
		s.pieces[n-1].to = to
		return
	}
	s.pieces = append(s.pieces, fetchPiece{from: from, to: to})
}

// ext appends stored bytes to the frame as a piece of their own.
func (s *fetchSplicer) ext(b []byte) {
	s.pieces = append(s.pieces, fetchPiece{ext: b})
}

// plainFetchAnswer reports whether appendFetchFrame lays r out itself: a
// version it knows, and no field Strand's fetch never sets (tagged fields,
// unknown tags, brokers), which kmsg marshals instead.
func plainFetchAnswer(r *kmsg.FetchResponse) bool {
	if r.Version < 0 || r.Version > fetchAnswerVersionMax || r.UnknownTags.Len() > 0 || len(r.Brokers) > 0 {
		return false
	}
	for i := range r.Topics {
		t := &r.Topics[i]
		if t.UnknownTags.Len() > 0 {
			return false
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.UnknownTags.Len() > 0 || p.DivergingEpoch.Epoch != -1 || p.DivergingEpoch.EndOffset != -1 || p.DivergingEpoch.UnknownTags.Len() > 0 ||
				p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1 || p.CurrentLeader.UnknownTags.Len() > 0 ||
				p.SnapshotID.EndOffset != -1 || p.SnapshotID.Epoch != -1 || p.SnapshotID.UnknownTags.Len() > 0 || len(p.RecordBatches) > 0 {
				return false
			}
			for _, a := range p.AbortedTransactions {
				if a.UnknownTags.Len() > 0 {
					return false
				}
			}
		}
	}
	return true
}

// appendFetchFrame is appendResponse for a fetch answer, without copying
// its stored Kafka batches of spliceMin bytes or more (spliceMin ≤ 0:
// none): it appends the frame's own bytes and the converted batches to
// head and returns the whole frame in bufs — pieces of head in turn with
// the stored slices as they are (written with writev by net.Buffers). The
// bytes of bufs are exactly appendResponse's with kmsg's marshalling of
// the answer. Converted batches of spliceMin bytes or more are pieces of
// head of their own (copied once, where they were converted); the rest of
// the frame is copied into runs of head between them, so an answer with
// nothing of spliceMin bytes is one piece (a tailing reader's answer
// holds a record or two). bufs refers to head: head must not be appended
// to before bufs is written.
func appendFetchFrame(head []byte, bufs net.Buffers, corr int32, flexibleHeader bool, f *fetchAnswer, spliceMin int) ([]byte, net.Buffers) {
	r := f.FetchResponse
	if !plainFetchAnswer(r) {
		start := len(head)
		head = appendFrame(head, corr, flexibleHeader, f)
		return head, append(bufs, head[start:])
	}
	s := fetchSplicer{head: head}

	// The record bytes: converted ones built here, in wire order; a
	// partition's are s.pieces[from:to] meanwhile.
	type partRecords struct{ from, to, size int }
	var parts []partRecords
	for i := range f.batches {
		pr := partRecords{from: len(s.pieces)}
		s.floor = pr.from // a partition's pieces are its own
		prevSpliced := -1 // the head of the partition's last spliced batch
		for _, b := range f.batches[i] {
			at := len(s.head)
			var rest []byte
			var ok bool
			if s.head, rest, ok = appendFetchBatch(s.head, b, spliceMin); !ok {
				break
			}
			if rest != nil {
				if prevSpliced >= 0 && bugSpliceStaleBase() {
					copy(s.head[at:at+8], s.head[prevSpliced:prevSpliced+8]) // planted bug: the batch before's base offset
				}
				prevSpliced = at
			}
			s.add(at, len(s.head))
			pr.size += len(s.head) - at
			if rest != nil {
				s.ext(rest)
				pr.size += len(rest)
			}
		}
		pr.to = len(s.pieces)
		parts = append(parts, pr)
	}
	records := s.pieces
	s.pieces, s.floor = nil, 0

	// The frame, as appendResponse and kmsg's FetchResponse.AppendTo lay
	// it out.
	version := r.Version
	flexible := version >= 12
	frameAt := len(s.head)
	at := frameAt
	s.head = append(s.head, 0, 0, 0, 0) // size, filled in below
	s.head = binary.BigEndian.AppendUint32(s.head, uint32(corr))
	if flexibleHeader {
		s.head = append(s.head, 0)
	}
	if version >= 1 {
		s.head = binary.BigEndian.AppendUint32(s.head, uint32(r.ThrottleMillis))
	}
	if version >= 7 {
		s.head = binary.BigEndian.AppendUint16(s.head, uint16(r.ErrorCode))
		s.head = binary.BigEndian.AppendUint32(s.head, uint32(r.SessionID))
	}
	s.head = appendLen(s.head, len(r.Topics), flexible)
	i := 0
	for ti := range r.Topics {
		t := &r.Topics[ti]
		if version <= 12 {
			if flexible {
				s.head = appendLen(s.head, len(t.Topic), true)
			} else {
				s.head = binary.BigEndian.AppendUint16(s.head, uint16(len(t.Topic)))
			}
			s.head = append(s.head, t.Topic...)
		} else {
			s.head = append(s.head, t.TopicID[:]...)
		}
		s.head = appendLen(s.head, len(t.Partitions), flexible)
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			s.head = binary.BigEndian.AppendUint32(s.head, uint32(p.Partition))
			s.head = binary.BigEndian.AppendUint16(s.head, uint16(p.ErrorCode))
			s.head = binary.BigEndian.AppendUint64(s.head, uint64(p.HighWatermark))
			if version >= 4 {
				s.head = binary.BigEndian.AppendUint64(s.head, uint64(p.LastStableOffset))
			}
			if version >= 5 {
				s.head = binary.BigEndian.AppendUint64(s.head, uint64(p.LogStartOffset))
			}
			if version >= 4 {
				if p.AbortedTransactions == nil {
					s.head = appendNullLen(s.head, flexible)
				} else {
					s.head = appendLen(s.head, len(p.AbortedTransactions), flexible)
				}
				for _, a := range p.AbortedTransactions {
					s.head = binary.BigEndian.AppendUint64(s.head, uint64(a.ProducerID))
					s.head = binary.BigEndian.AppendUint64(s.head, uint64(a.FirstOffset))
					if flexible {
						s.head = append(s.head, 0) // no tags
					}
				}
			}
			if version >= 11 {
				s.head = binary.BigEndian.AppendUint32(s.head, uint32(p.PreferredReadReplica))
			}
			var pr partRecords
			if i < len(parts) {
				pr = parts[i]
			}
			i++
			s.head = appendLen(s.head, pr.size, flexible) // RecordBatches, never null
			for _, pc := range records[pr.from:pr.to] {
				if pc.ext == nil && pc.to-pc.from < spliceMin {
					// Converted bytes under spliceMin (a spliced batch's
					// head among them) join the run: fewer write vectors.
					s.head = append(s.head, s.head[pc.from:pc.to]...)
					continue
				}
				s.add(at, len(s.head))
				if pc.ext != nil {
					s.ext(pc.ext)
				} else {
					s.add(pc.from, pc.to)
				}
				at = len(s.head)
			}
			if flexible {
				s.head = append(s.head, 0) // the partition's tags: none
			}
		}
		if flexible {
			s.head = append(s.head, 0) // the topic's tags: none
		}
	}
	if flexible {
		s.head = append(s.head, 0) // the response's tags: none
	}
	s.add(at, len(s.head))

	size := 0
	for _, pc := range s.pieces {
		size += pc.to - pc.from + len(pc.ext)
	}
	binary.BigEndian.PutUint32(s.head[frameAt:], uint32(size-4))
	for _, pc := range s.pieces {
		if pc.ext != nil {
			bufs = append(bufs, pc.ext)
		} else {
			bufs = append(bufs, s.head[pc.from:pc.to])
		}
	}
	return s.head, bufs
}

// appendLen appends an array, string or bytes length n: a compact
// (uvarint n+1) one in a flexible version, else an int32.
func appendLen(dst []byte, n int, flexible bool) []byte {
	if flexible {
		return binary.AppendUvarint(dst, uint64(uint32(n)+1))
	}
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

// appendNullLen appends a null array's length.
func appendNullLen(dst []byte, flexible bool) []byte {
	if flexible {
		return append(dst, 0)
	}
	return binary.BigEndian.AppendUint32(dst, ^uint32(0))
}
