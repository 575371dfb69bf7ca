package frame

import (
	"net"

	"github.com/strandlog/strand/proto/strandpb"
)

// Field numbers AppendProduceSpliced writes itself (wire.proto).
const (
	requestProduceField   = 12 // Request.produce
	producePartitionField = 3  // ProduceRequest.partitions
	produceBatchField     = 6  // ProduceRequest.Partition.batch
)

// AppendProduceSpliced is AppendSpliced for a produce request, the
// client's side of one copy: the frame's own bytes go to head, and each
// partition's batch of spliceMin bytes or more is a piece of bufs as it is
// (the producer's sealed batch, written with writev), not copied into the
// request. The bytes of bufs are exactly Append's. Any other request, and
// a produce request without a batch of spliceMin bytes, is appended whole.
// req is read and, while it runs, changed and restored (its partitions'
// batches and its body cleared around the marshalling): no one else may
// read it meanwhile. bufs refers to head: head must not be appended to
// before bufs is written.
func AppendProduceSpliced(head []byte, bufs net.Buffers, req *strandpb.Request, spliceMin int) ([]byte, net.Buffers, error) {
	pr := req.GetProduce()
	if pr == nil || !hasProduceSplice(pr, spliceMin) || len(req.ProtoReflect().GetUnknown()) > 0 {
		return appendWhole(head, bufs, req)
	}
	s := newSplicer(head, spliceMin)
	if err := s.produce(req, pr); err != nil {
		return head, bufs, err
	}
	return s.head, s.buffers(bufs), nil
}

// hasProduceSplice reports whether pr holds a batch of spliceMin bytes or
// more.
func hasProduceSplice(pr *strandpb.ProduceRequest, spliceMin int) bool {
	for _, p := range pr.GetPartitions() {
		if len(p.GetBatch()) >= max(spliceMin, 1) {
			return true
		}
	}
	return false
}

// produce lays out req, whose body is the produce request pr: each
// partition is a batchEnc (pre and post around its batch; records holds
// the batch when spliced).
func (s *splicer) produce(req *strandpb.Request, pr *strandpb.ProduceRequest) error {
	partsSize := 0
	for _, p := range pr.GetPartitions() {
		var pe batchEnc
		if len(p.GetBatch()) < s.min {
			pe.pre, pe.post = s.marshalSplit(p, 1<<29) // all of it
			pe.size = pe.pre.len() + pe.post.len()
		} else {
			batch := p.Batch
			p.Batch = nil
			pe.pre, pe.post = s.marshalSplit(p, produceBatchField)
			p.Batch = batch
			pe.records = batch
			pe.size = pe.pre.len() + lenField(produceBatchField, len(batch)) + pe.post.len()
		}
		partsSize += lenField(producePartitionField, pe.size)
		s.batches = append(s.batches, pe)
	}
	parts := pr.Partitions
	pr.Partitions = nil
	pPre, pPost := s.marshalSplit(pr, producePartitionField)
	pr.Partitions = parts
	produceSize := pPre.len() + partsSize + pPost.len()

	body := req.Body
	req.Body = nil
	rPost, size, err := s.frameHead(req, requestProduceField, produceSize)
	req.Body = body
	if err != nil {
		return err
	}
	s.copySpan(pPre)
	for _, pe := range s.batches {
		s.tagLen(producePartitionField, pe.size)
		s.copySpan(pe.pre)
		if pe.records != nil {
			s.tagLen(produceBatchField, len(pe.records))
			s.ext(pe.records)
		}
		s.copySpan(pe.post)
	}
	s.copySpan(pPost)
	s.copySpan(rPost)
	return s.laidOut(size, "produce request")
}
