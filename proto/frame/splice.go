package frame

import (
	"encoding/binary"
	"fmt"
	"net"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// Field numbers the splicing encoder writes itself (wire.proto); the rest
// of each message is marshalled as usual around them.
const (
	responseFetchField  = 13 // Response.fetch
	fetchPartitionField = 1  // FetchResponse.partitions
	partitionBatchField = 6  // FetchResponse.Partition.batches
	batchRecordsField   = 3  // FetchResponse.Batch.records
)

// SpliceBytesMin is the smallest record batch AppendSpliced leaves in
// place rather than copying into the head: below it a separate write
// vector costs more than the copy.
const SpliceBytesMin = 4 << 10

// AppendSpliced is Append for a fetch answer without copying its record
// batches: it appends the frame's own bytes (length prefix, envelopes,
// field tags and lengths, and batches under spliceMin bytes) to head, and
// returns the whole frame as bufs — pieces of head in turn with the
// batches' records slices as they are (stored bytes, written with writev
// by net.Buffers). The bytes of bufs are exactly Append's. Any other
// answer, and a fetch answer without a batch of spliceMin bytes, is
// appended whole (bufs is one piece of head). resp is read
// while AppendSpliced runs: it must not change meanwhile (it clears and
// restores fields of its fetch answer as it marshals around them, so no
// one else may read it either). bufs refers to head: head must not be
// appended to before bufs is written.
func AppendSpliced(head []byte, bufs net.Buffers, resp *strandpb.Response, spliceMin int) ([]byte, net.Buffers, error) {
	fr := resp.GetFetch()
	if fr == nil || !hasSplice(fr, spliceMin) || len(resp.ProtoReflect().GetUnknown()) > 0 {
		return appendWhole(head, bufs, resp)
	}
	s := newSplicer(head, spliceMin)
	if err := s.response(resp, fr); err != nil {
		return head, bufs, err
	}
	return s.head, s.buffers(bufs), nil
}

// appendWhole appends m's frame to head in one piece and to bufs as one
// buffer: the path of a message with nothing to splice.
func appendWhole(head []byte, bufs net.Buffers, m proto.Message) ([]byte, net.Buffers, error) {
	start := len(head)
	head, err := Append(head, m)
	if err != nil {
		return head, bufs, err
	}
	return head, append(bufs, head[start:]), nil
}

// newSplicer is a splicer laying a frame out after head, splicing batches
// of spliceMin bytes or more (at least 1).
func newSplicer(head []byte, spliceMin int) splicer {
	return splicer{min: max(spliceMin, 1), head: head, base: len(head)}
}

// hasSplice reports whether fr holds a batch of spliceMin bytes or more:
// without one the answer is marshalled whole, in one pass (a tailing
// reader's answers hold a record or two).
func hasSplice(fr *strandpb.FetchResponse, spliceMin int) bool {
	for _, p := range fr.GetPartitions() {
		for _, b := range p.GetBatches() {
			if len(b.GetRecords()) >= max(spliceMin, 1) {
				return true
			}
		}
	}
	return false
}

// splicer builds one spliced frame: the marshalled pieces around the
// spliced fields go to scratch (each a span), then emit writes the frame
// in order into head, the records of large batches as pieces of their own.
type splicer struct {
	min     int
	scratch []byte
	head    []byte
	base    int // head's length before this frame
	spliced int // bytes in the ext pieces
	pieces  []piece
	batches []batchEnc
	parts   []partEnc
	err     error
}

// span is a range of splicer.scratch.
type span struct{ from, to int }

// piece is one piece of the frame: head[from:to], or ext when set.
type piece struct {
	from, to int
	ext      []byte
}

// batchEnc is one batch: its bytes before and after records (whole
// holds the entire batch when it is copied), its records when spliced.
type batchEnc struct {
	pre, post span
	records   []byte // spliced: len ≥ min
	size      int
}

// partEnc is one partition: its bytes before and after its batches, which
// are batches[from:to].
type partEnc struct {
	pre, post span
	from, to  int
	size      int
}

// marshalSplit marshals m (one of its fields cleared by the caller) into
// scratch and splits it before the first field numbered above field.
func (s *splicer) marshalSplit(m proto.Message, field protowire.Number) (pre, post span) {
	from := len(s.scratch)
	var err error
	s.scratch, err = proto.MarshalOptions{Deterministic: true}.MarshalAppend(s.scratch, m)
	if err != nil && s.err == nil {
		s.err = err
	}
	b := s.scratch[from:]
	at := 0
	for at < len(b) {
		num, typ, n := protowire.ConsumeTag(b[at:])
		if n < 0 || num > field {
			break
		}
		m := protowire.ConsumeFieldValue(num, typ, b[at+n:])
		if m < 0 {
			break
		}
		at += n + m
	}
	return span{from, from + at}, span{from + at, len(s.scratch)}
}

// lenField is the size of a length-delimited field of size n.
func lenField(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

// response lays out resp, whose body is the fetch answer fr.
func (s *splicer) response(resp *strandpb.Response, fr *strandpb.FetchResponse) error {
	partsSize := 0
	for _, p := range fr.GetPartitions() {
		pe := s.partition(p)
		partsSize += lenField(fetchPartitionField, pe.size)
	}
	parts := fr.Partitions
	fr.Partitions = nil
	fPre, fPost := s.marshalSplit(fr, fetchPartitionField)
	fr.Partitions = parts
	fetchSize := fPre.len() + partsSize + fPost.len()

	body := resp.Body
	resp.Body = nil
	rPost, size, err := s.frameHead(resp, responseFetchField, fetchSize)
	resp.Body = body
	if err != nil {
		return err
	}
	s.copySpan(fPre)
	for _, pe := range s.parts {
		s.tagLen(fetchPartitionField, pe.size)
		s.copySpan(pe.pre)
		for _, be := range s.batches[pe.from:pe.to] {
			s.tagLen(partitionBatchField, be.size)
			s.copySpan(be.pre)
			if be.records != nil {
				s.tagLen(batchRecordsField, len(be.records))
				s.ext(be.records)
			}
			s.copySpan(be.post)
		}
		s.copySpan(pe.post)
	}
	s.copySpan(fPost)
	s.copySpan(rPost)
	return s.laidOut(size, "answer")
}

// frameHead begins a frame whose outer message msg (its body cleared by
// the caller) carries, in field, a message of innerSize bytes that the
// caller lays out next: it marshals msg around field, checks the frame's
// size, and appends the length prefix, msg's bytes before field and
// field's tag and length to the head. It returns msg's bytes after field
// (the caller copies them last) and the frame's size without its prefix.
func (s *splicer) frameHead(msg proto.Message, field protowire.Number, innerSize int) (post span, size int, err error) {
	pre, post := s.marshalSplit(msg, field)
	if s.err != nil {
		return post, 0, s.err
	}
	size = pre.len() + lenField(field, innerSize) + post.len()
	if uint64(size) > uint64(^uint32(0)) {
		return post, 0, ErrTooLarge
	}
	s.head = binary.BigEndian.AppendUint32(s.head, uint32(size))
	s.copySpan(pre)
	s.tagLen(field, innerSize)
	return post, size, nil
}

// laidOut checks that the frame written holds the size frameHead
// promised (what names the frame in the error).
func (s *splicer) laidOut(size int, what string) error {
	if got := len(s.head) - s.base + s.spliced; got != LengthBytes+size {
		return fmt.Errorf("frame: spliced %s of %d bytes, laid out for %d", what, got, LengthBytes+size)
	}
	return nil
}

// partition lays out p and its batches.
func (s *splicer) partition(p *strandpb.FetchResponse_Partition) partEnc {
	pe := partEnc{from: len(s.batches)}
	batchesSize := 0
	for i, b := range p.GetBatches() {
		var be batchEnc
		if len(b.GetRecords()) < s.min {
			from := len(s.scratch)
			var err error
			s.scratch, err = proto.MarshalOptions{Deterministic: true}.MarshalAppend(s.scratch, b)
			if err != nil && s.err == nil {
				s.err = err
			}
			be.pre, be.post = span{from, len(s.scratch)}, span{len(s.scratch), len(s.scratch)}
			be.size = be.pre.len()
		} else {
			records := b.Records
			b.Records = nil
			be.pre, be.post = s.marshalSplit(b, batchRecordsField)
			b.Records = records
			if prev := len(s.batches) - 1; i > 0 && s.batches[prev].records != nil && bugSpliceStaleHead() {
				be.pre = s.batches[prev].pre // planted bug: the batch before's base offset and time
			}
			be.records = records
			be.size = be.pre.len() + lenField(batchRecordsField, len(records)) + be.post.len()
		}
		batchesSize += lenField(partitionBatchField, be.size)
		s.batches = append(s.batches, be)
	}
	pe.to = len(s.batches)
	batches := p.Batches
	p.Batches = nil
	pe.pre, pe.post = s.marshalSplit(p, partitionBatchField)
	p.Batches = batches
	pe.size = pe.pre.len() + batchesSize + pe.post.len()
	s.parts = append(s.parts, pe)
	return pe
}

func (sp span) len() int { return sp.to - sp.from }

// copySpan appends scratch's bytes in sp to the head.
func (s *splicer) copySpan(sp span) {
	s.head = append(s.head, s.scratch[sp.from:sp.to]...)
}

// tagLen appends a length-delimited field's tag and length.
func (s *splicer) tagLen(num protowire.Number, n int) {
	s.head = protowire.AppendTag(s.head, num, protowire.BytesType)
	s.head = protowire.AppendVarint(s.head, uint64(n))
}

// ext ends the head's current piece and adds b as a piece of its own.
func (s *splicer) ext(b []byte) {
	s.closePiece()
	s.pieces = append(s.pieces, piece{ext: b})
	s.spliced += len(b)
}

// closePiece records the head bytes since the last piece as a piece.
func (s *splicer) closePiece() {
	from := s.base
	for i := len(s.pieces) - 1; i >= 0; i-- {
		if s.pieces[i].ext == nil {
			from = s.pieces[i].to
			break
		}
	}
	if len(s.head) > from {
		s.pieces = append(s.pieces, piece{from: from, to: len(s.head)})
	}
}

// buffers is the frame in order as write vectors, appended to bufs.
func (s *splicer) buffers(bufs net.Buffers) net.Buffers {
	s.closePiece()
	for _, p := range s.pieces {
		if p.ext != nil {
			bufs = append(bufs, p.ext)
		} else {
			bufs = append(bufs, s.head[p.from:p.to])
		}
	}
	return bufs
}
