package clientlib

import "math/bits"

// batchPool is the producer's free list of batch buffers, owned by the
// loop goroutine. A resolved batch's buffer comes back here when nothing
// can read it any more (sealedBatch.writing), and the next batch is built
// in it: a full-speed producer allocated (and the runtime zeroed) a new
// 256 KiB buffer per batch, 13-15% of the client's CPU in the zeroing and
// the collector. Buffers are kept by size class (class k: capacity in
// [2^k, 2^(k+1))), at most batchPoolBytesMax bytes in all, so a producer
// of many partitions keeps no more than that once it goes quiet.
type batchPool struct {
	classes [bits.UintSize][][]byte
	bytes   int
}

// batchPoolBytesMax bounds the bytes a batchPool keeps: room for a few
// full batches at the bench's 256 KiB, a tiny share of what a producer
// buffers (MaxBufferedRecords records).
const batchPoolBytesMax = 4 << 20

// get is an empty buffer of capacity at least n: a kept one when one of n
// or more bytes is kept in n's class or the one above, else a new one.
func (bp *batchPool) get(n int) []byte {
	c := max(bits.Len(uint(n)), 1) // class c and up all hold n; c-1 may
	if free := bp.classes[c-1]; len(free) > 0 && cap(free[len(free)-1]) >= n {
		return bp.take(c - 1)
	}
	for k := c; k < min(c+2, len(bp.classes)); k++ {
		if len(bp.classes[k]) > 0 {
			return bp.take(k)
		}
	}
	return make([]byte, 0, n)
}

// take pops class k's last buffer.
func (bp *batchPool) take(k int) []byte {
	free := bp.classes[k]
	buf := free[len(free)-1]
	free[len(free)-1] = nil
	bp.classes[k] = free[:len(free)-1]
	bp.bytes -= cap(buf)
	return buf[:0]
}

// put keeps buf for a later batch unless the pool is full. The caller
// must hold the only reference that will ever read or write buf again.
func (bp *batchPool) put(buf []byte) {
	n := cap(buf)
	if n == 0 || bp.bytes+n > batchPoolBytesMax {
		return
	}
	k := bits.Len(uint(n)) - 1
	bp.classes[k] = append(bp.classes[k], buf[:0])
	bp.bytes += n
}
