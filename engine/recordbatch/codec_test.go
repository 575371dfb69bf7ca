package recordbatch

import (
	"bytes"
	"errors"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// zstdFrame compresses b the way segmentio/kafka-go's encoder does: a
// streaming frame declaring an 8 MiB window, whatever b's size.
func zstdFrame(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := zstd.NewWriter(&out, zstd.WithWindowSize(8<<20), zstd.WithSingleSegment(false))
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
// encoder declared: an 8 MiB window over 200 KB inflates, and the same
// window over more than InflatedBytesMax is refused as too large.
func TestZstdDeclaredWindowPastBound(t *testing.T) {
	small := bytes.Repeat([]byte("strand record "), 200_000/14)
	got, err := inflate(nil, CodecZstd, zstdFrame(t, small))
	if err != nil || !bytes.Equal(got, small) {
		t.Fatalf("inflate of 200 KB under an 8 MiB window: %d bytes, %v", len(got), err)
	}
	prefix := []byte("kept")
	got, err = inflate(prefix, CodecZstd, zstdFrame(t, small))
	if err != nil || !bytes.Equal(got, append([]byte("kept"), small...)) {
		t.Fatalf("inflate after a prefix: %d bytes, %v", len(got), err)
	}
	bomb := make([]byte, InflatedBytesMax+1)
	if _, err := inflate(nil, CodecZstd, zstdFrame(t, bomb)); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("inflate past InflatedBytesMax under an 8 MiB window: %v, want ErrBatchTooLarge", err)
	}
}
