package simnet

import (
	"fmt"
	"math/rand/v2"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
)

// Bytes corrupted in flight on client connections (Faults.ClientCorrupt).
//
// A client frame, either way, is damaged with probability ClientCorrupt:
//   - three times in four a bit flips inside a record batch the frame
//     carries (a produce request's batch, a fetch answer's batches): the
//     damage TCP's checksum missed and only the batch's CRC32C can catch.
//     A node must refuse such a produce with CORRUPT_BATCH before anything
//     reaches the log; a client must refuse such a fetch answer and retry,
//     never deliver its records;
//   - otherwise the frame is cut short: it does not decode (framing tells
//     the receiver), which closes that connection only: the call fails
//     with a connection error at once, every other call goes on.
//
// The checks: a node's answer to a damaged produce is never a success,
// an INVALID_REQUEST or a maybe-written error, and an undamaged one is
// never CORRUPT_BATCH (deliver); no committed entry holds a batch that
// fails its CRC (the reference replay, digests.go); a fetched record is
// always one a producer sent, with its key (onFetch); a fetch answer that
// does not decode is a failure unless the world damaged it.
//
// Rejected: flipping bits anywhere in a frame: a flipped partition number
// or producer sequence outside the batch is not covered by any checksum
// of Strand's (TCP's covers it in practice), so the run would fail on
// damage the design leaves to TCP.

// streamCorrupt draws which client frames are damaged and how.
const streamCorrupt uint64 = 8

// corruptKind is what happened to a frame in flight.
type corruptKind uint8

const (
	corruptNone     corruptKind = iota
	corruptBatchBit             // a bit of a carried batch flipped
	corruptTruncate             // cut short: does not decode
)

// corrupter damages client frames at the seed's rate.
type corrupter struct {
	// damaged is the partition of the last request damaged by a bit flip
	// (a request of clientlib's producer may carry several).
	damaged *strandpb.ProduceRequest_Partition
	w       *world
	rng     *rand.Rand
	rate    float64
}

func newCorrupter(w *world) *corrupter {
	return &corrupter{w: w, rng: newStream(w.opts.Seed, streamCorrupt), rate: w.opts.Faults.ClientCorrupt}
}

// request returns the frame to send for req and what was done to it.
func (cr *corrupter) request(req *strandpb.Request) ([]byte, corruptKind) {
	kind := cr.draw(len(req.GetProduce().GetPartitions()) > 0)
	switch kind {
	case corruptBatchBit:
		damaged := proto.Clone(req).(*strandpb.Request)
		ps := damaged.GetProduce().GetPartitions()
		p := ps[cr.rng.IntN(len(ps))]
		p.Batch = cr.flip(p.GetBatch())
		cr.damaged = p
		cr.w.coverage.Inc("fault/client-corrupt-produce")
		return marshalWire(damaged), kind
	case corruptTruncate:
		cr.w.coverage.Inc("fault/client-truncate")
		return nil, kind
	}
	return marshalWire(req), kind
}

// response returns the frame to send for resp and what was done to it.
func (cr *corrupter) response(resp *strandpb.Response) ([]byte, corruptKind) {
	kind := cr.draw(fetchBatches(resp) > 0)
	switch kind {
	case corruptBatchBit:
		damaged := proto.Clone(resp).(*strandpb.Response)
		i := cr.rng.IntN(fetchBatches(damaged))
		for _, p := range damaged.GetFetch().GetPartitions() {
			if i < len(p.GetBatches()) {
				b := p.GetBatches()[i]
				b.Records = cr.flip(b.GetRecords())
				break
			}
			i -= len(p.GetBatches())
		}
		cr.w.coverage.Inc("fault/client-corrupt-fetch")
		return marshalWire(damaged), kind
	case corruptTruncate:
		cr.w.coverage.Inc("fault/client-truncate")
		return nil, kind
	}
	return answerFrame(resp), kind
}

// answerFrame is an undamaged native answer's bytes as a node's listener
// writes them: a fetch answer through frame.AppendSpliced with every batch
// spliced (the listener splices those of SpliceBytesMin or more), so the
// simulator runs the splicing a real node serves fetches with; the bytes
// are marshalWire's.
func answerFrame(resp *strandpb.Response) []byte {
	if resp.GetFetch() == nil {
		return marshalWire(resp)
	}
	_, bufs, err := frame.AppendSpliced(nil, nil, resp, 1)
	if err != nil {
		panic(fmt.Sprintf("simnet: splice response: %v", err))
	}
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	out := make([]byte, 0, n) // one allocation, not one per growth
	for _, b := range bufs {
		out = append(out, b...)
	}
	return out[frame.LengthBytes:]
}

// draw decides a frame's fate; a batch flip needs a batch to flip.
func (cr *corrupter) draw(hasBatch bool) corruptKind {
	if !chance(cr.rng, cr.rate) {
		return corruptNone
	}
	if cr.rng.IntN(4) == 0 {
		return corruptTruncate
	}
	if !hasBatch {
		return corruptNone
	}
	return corruptBatchBit
}

// flip returns a copy of b with one bit flipped.
func (cr *corrupter) flip(b []byte) []byte {
	out := append([]byte(nil), b...)
	if len(out) > 0 {
		out[cr.rng.IntN(len(out))] ^= 1 << cr.rng.IntN(8)
	}
	return out
}

// fetchBatches counts the batches a fetch answer carries.
func fetchBatches(resp *strandpb.Response) int {
	n := 0
	for _, p := range resp.GetFetch().GetPartitions() {
		n += len(p.GetBatches())
	}
	return n
}

// errConnClosed is the cause of a call whose connection closed because a
// frame on it did not decode.
var errConnClosed = fmt.Errorf("simnet: connection closed: a frame did not decode")

// closedConn is the error a client sees when its connection to target
// closed under a call: sent, so it may have been written.
func (ww *wireWorkload) closedConn(target int) error {
	return &clientlib.ConnError{Addr: ww.peers[target].Address, Sent: true, Err: errConnClosed}
}

// checkCorruptProduce checks a node's answer to a produce request: one
// whose batch was damaged in flight must be refused before it is written
// (CORRUPT_BATCH, or an error the node gives before looking at the
// batch), one that was not damaged must never be called corrupt.
func (w *world) checkCorruptProduce(n *simNode, damagedPart *strandpb.ProduceRequest_Partition, resp *strandpb.ProduceResponse) {
	if resp == nil {
		return
	}
	for _, p := range resp.GetPartitions() {
		code := p.GetError().GetCode()
		damaged := damagedPart != nil && damagedPart.GetTopic() == p.GetTopic() && damagedPart.GetPartition() == p.GetPartition()
		switch {
		case !damaged && code == strandpb.ErrorCode_ERROR_CODE_CORRUPT_BATCH:
			w.fail("node %d refused an intact produce batch to %s/%d as corrupt: %s", n.id, p.GetTopic(),
				p.GetPartition(), p.GetError().GetMessage())
		case !damaged:
		case code == strandpb.ErrorCode_ERROR_CODE_CORRUPT_BATCH:
			w.coverage.Inc("event/corrupt-batch-refused")
		case code == strandpb.ErrorCode_ERROR_CODE_NONE:
			w.fail("node %d accepted a produce batch to %s/%d damaged in flight (its CRC does not match)", n.id,
				p.GetTopic(), p.GetPartition())
		case code == strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST || strandpb.ErrorCode_ERROR_CODE_TIMEOUT == code ||
			clientlib.Classify(code).MaybeWritten:
			w.fail("node %d answered a produce batch to %s/%d damaged in flight with %v, not CORRUPT_BATCH before writing",
				n.id, p.GetTopic(), p.GetPartition(), code)
		}
	}
}

// checkProduced: every record a fetch delivers is one a producer sent,
// with the key it was sent with; anything else is damage that got past
// the batch CRCs (or a record made up).
func (ww *wireWorkload) checkProduced(p, target int, r *reply) {
	for _, rec := range r.records {
		if key, ok := ww.produced[rec.value]; !ok || key != rec.key {
			ww.w.fail("partition %d: fetch from node %d delivered record %d (key %q, value %.40q) that no producer sent",
				p, target+1, rec.offset, rec.key, rec.value)
			return
		}
	}
}
