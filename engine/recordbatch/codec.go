package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compression codecs of a Kafka batch's attributes (bits 0-2).
const (
	CodecNone   = 0
	CodecGzip   = 1
	CodecSnappy = 2
	CodecLZ4    = 3
	CodecZstd   = 4
)

// InflatedBytesMax bounds what one compressed batch may inflate to: 16
// MiB. Sizes are checked as Kafka checks them, on the batch as sent (at
// most BatchBytesMax, and the topic's max.message.bytes) and per record
// (RecordBytesMax); this is a separate bound on inflation alone, so a
// batch of highly compressible records (three 1 MiB records of zeros
// gzip to a few KiB) is taken, while a records section past it is refused
// as it is inflated (decompression bombs never reach memory).
const InflatedBytesMax = 16 << 20

// xerialMagic starts the Java client's framed snappy (snappy-java).
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// zstdDecoder is shared: DecodeAll is safe for concurrent use and, at
// concurrency 1, runs on the caller's goroutine.
var zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(InflatedBytesMax))
	if err != nil {
		panic(err) // only for invalid options
	}
	return d
})

// zstdWideDecoder inflates frames whose declared window is past
// InflatedBytesMax (segmentio/kafka-go's encoder declares 8 MiB for any
// batch, which once was past it; another encoder may declare more). The window an encoder declares bounds how far back it may
// refer, not what the frame inflates to, and DecodeAll keeps its history
// in the output, so any window is accepted and the output is bounded
// instead, by the capacity of the buffer it decodes into (zstdWide).
var zstdWideDecoder = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(zstd.MaxWindowSize),
		zstd.WithDecoderMaxWindow(zstd.MaxWindowSize), zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		panic(err) // only for invalid options
	}
	return d
})

// zstdWide inflates b after dst with zstdWideDecoder, at most
// InflatedBytesMax: first into room for 16 times b (at least 1 MiB), then,
// when that is too small, into room for the whole bound, so a small batch
// does not cost a buffer of InflatedBytesMax.
func zstdWide(dst, b []byte) ([]byte, error) {
	for room := min(InflatedBytesMax, max(1<<20, 16*len(b))); ; room = InflatedBytesMax {
		dst = slices.Grow(dst, room)
		out, err := zstdWideDecoder().DecodeAll(b, dst[:len(dst):len(dst)+room])
		switch {
		case errors.Is(err, zstd.ErrDecoderSizeExceeded) && room < InflatedBytesMax:
			continue
		case errors.Is(err, zstd.ErrDecoderSizeExceeded):
			return nil, errInflatedTooLarge
		case err != nil:
			return nil, fmt.Errorf("%w: zstd: %v", ErrCorrupt, err)
		}
		return out, nil
	}
}

// Decompressors kept for reuse: each holds buffers a fresh one allocates.
var (
	gzipReaders sync.Pool // *gzip.Reader
	lz4Readers  = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
)

// errInflatedTooLarge is the refusal of a batch inflating past the bound.
var errInflatedTooLarge = fmt.Errorf("%w: records inflate past %d bytes", ErrBatchTooLarge, InflatedBytesMax)

// inflate decompresses a records section with codec, appending to dst,
// refusing more than InflatedBytesMax. The codecs are klauspost/compress
// (gzip, snappy raw and xerial-framed, zstd) and pierrec/lz4 (frame), the
// ones franz-go uses; decompression is deterministic.
func inflate(dst []byte, codec int, b []byte) ([]byte, error) {
	switch codec {
	case CodecNone:
		return append(dst, b...), nil
	case CodecGzip:
		zr, _ := gzipReaders.Get().(*gzip.Reader)
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(bytes.NewReader(b))
		} else {
			err = zr.Reset(bytes.NewReader(b))
		}
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrCorrupt, err)
		}
		defer gzipReaders.Put(zr)
		hint := 4 * len(b)
		if len(b) >= 4 { // gzip's trailer holds the inflated size (mod 2^32)
			hint = int(binary.LittleEndian.Uint32(b[len(b)-4:]))
		}
		return readLimited(dst, zr, "gzip", hint)
	case CodecSnappy:
		if bytes.HasPrefix(b, xerialMagic) {
			return unxerial(dst, b)
		}
		return snappyBlock(dst, b)
	case CodecLZ4:
		zr := lz4Readers.Get().(*lz4.Reader)
		zr.Reset(bytes.NewReader(b))
		defer lz4Readers.Put(zr)
		return readLimited(dst, zr, "lz4", 4*len(b))
	case CodecZstd:
		out, err := zstdDecoder().DecodeAll(b, dst)
		if errors.Is(err, zstd.ErrWindowSizeExceeded) {
			return zstdWide(dst, b)
		}
		if err != nil {
			if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
				return nil, errInflatedTooLarge
			}
			return nil, fmt.Errorf("%w: zstd: %v", ErrCorrupt, err)
		}
		if len(out)-len(dst) > InflatedBytesMax {
			return nil, errInflatedTooLarge
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: compression codec %d", ErrCorrupt, codec)
}

// snappyBlock inflates one raw snappy block.
func snappyBlock(dst, b []byte) ([]byte, error) {
	n, err := s2.DecodedLen(b)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrCorrupt, err)
	}
	if n > InflatedBytesMax {
		return nil, errInflatedTooLarge
	}
	start := len(dst)
	dst = append(dst, make([]byte, n)...)
	out, err := s2.Decode(dst[start:], b)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrCorrupt, err)
	}
	return dst[:start+len(out)], nil
}

// readLimited reads r to the end after dst, at most InflatedBytesMax;
// hint, the expected inflated size, sizes the buffer once (a wrong hint
// costs only growth).
func readLimited(dst []byte, r io.Reader, name string, hint int) ([]byte, error) {
	if hint = min(hint, InflatedBytesMax) + bytes.MinRead; cap(dst)-len(dst) < hint {
		dst = append(make([]byte, 0, len(dst)+hint), dst...)
	}
	w := bytes.NewBuffer(dst)
	n, err := w.ReadFrom(io.LimitReader(r, InflatedBytesMax+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, name, err)
	}
	if n > InflatedBytesMax {
		return nil, errInflatedTooLarge
	}
	return w.Bytes(), nil
}

// unxerial inflates snappy-java's framing: the 16-byte header, then
// chunks of a big-endian length and a snappy block.
func unxerial(dst, b []byte) ([]byte, error) {
	if len(b) < 16 {
		return nil, fmt.Errorf("%w: snappy: short xerial header", ErrCorrupt)
	}
	start := len(dst)
	for b = b[16:]; len(b) > 0; {
		if len(b) < 4 {
			return nil, fmt.Errorf("%w: snappy: short xerial chunk", ErrCorrupt)
		}
		n := binary.BigEndian.Uint32(b)
		b = b[4:]
		if uint64(n) > uint64(len(b)) {
			return nil, fmt.Errorf("%w: snappy: xerial chunk of %d bytes, %d left", ErrCorrupt, n, len(b))
		}
		dl, err := s2.DecodedLen(b[:n])
		if err != nil {
			return nil, fmt.Errorf("%w: snappy: %v", ErrCorrupt, err)
		}
		if len(dst)-start+dl > InflatedBytesMax {
			return nil, errInflatedTooLarge
		}
		if dst, err = snappyBlock(dst, b[:n]); err != nil {
			return nil, err
		}
		b = b[n:]
	}
	return dst, nil
}
