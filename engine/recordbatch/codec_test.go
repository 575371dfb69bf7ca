package recordbatch

import (
	"bytes"
	"errors"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// zstdFrame compresses b the way segmentio/kafka-go's encoder does: a
// streaming frame declaring a window (8 MiB for kafka-go) whatever b's
// size.
func zstdFrame(t *testing.T, b []byte, window int) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := zstd.NewWriter(&out, zstd.WithWindowSize(window), zstd.WithSingleSegment(false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// A zstd frame is bounded by what it inflates to, not by the window its
// encoder declared: windows of 8 MiB (kafka-go) and 64 MiB (past
// InflatedBytesMax) over 200 KB inflate, and the same windows over more
// than InflatedBytesMax are refused as too large.
func TestZstdDeclaredWindowPastBound(t *testing.T) {
	small := bytes.Repeat([]byte("strand record "), 200_000/14)
	bomb := make([]byte, InflatedBytesMax+1)
	for _, window := range []int{8 << 20, 64 << 20} {
		got, err := inflate(nil, CodecZstd, zstdFrame(t, small, window))
		if err != nil || !bytes.Equal(got, small) {
			t.Fatalf("inflate of 200 KB under a %d-byte window: %d bytes, %v", window, len(got), err)
		}
		got, err = inflate([]byte("kept"), CodecZstd, zstdFrame(t, small, window))
		if err != nil || !bytes.Equal(got, append([]byte("kept"), small...)) {
			t.Fatalf("inflate after a prefix: %d bytes, %v", len(got), err)
		}
		if _, err := inflate(nil, CodecZstd, zstdFrame(t, bomb, window)); !errors.Is(err, ErrBatchTooLarge) {
			t.Fatalf("inflate past InflatedBytesMax under a %d-byte window: %v, want ErrBatchTooLarge", window, err)
		}
	}
}

// A gzip batch of three 1 MiB records of zeros (a few KiB as sent)
// inflates: the inflation bound is separate from the sizes checked on
// the batch as sent and per record.
func TestInflateCompressibleBatch(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(make([]byte, 3<<20+100))
	zw.Close()
	got, err := inflate(nil, CodecGzip, buf.Bytes())
	if err != nil || len(got) != 3<<20+100 {
		t.Fatalf("inflate of %d gzip bytes: %d bytes, %v", buf.Len(), len(got), err)
	}
}
