// Package frame reads and writes Strand's length-prefixed frames: a 4-byte
// big-endian length N, then N bytes of a marshalled protobuf message. Clients,
// servers and peer nodes share it so that every decoder of bytes from the
// network is this one, fuzzed.
package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"
)

// Limits of the framing.
const (
	// LengthBytes is the size of the length prefix.
	LengthBytes = 4
	// BytesMaxDefault bounds a frame's payload unless a reader says
	// otherwise: a fetch answer of 8 MiB plus room for its envelope.
	BytesMaxDefault = 9 << 20
	// FetchSlackBytes is what a fetch answer may hold beyond its max_bytes:
	// the first batch goes out whole (up to recordbatch.BatchBytesMax,
	// 1 MiB + 64 KiB) and every partition adds its envelope (under 100
	// bytes, 10000 partitions at most).
	FetchSlackBytes = 2 << 20
	// ProduceSlackBytes is room a produce request keeps for its envelope
	// beyond the per-partition bytes a client counts (ProducePartitionBytes).
	ProduceSlackBytes = 4 << 10
	// PeerFrameBytesTarget bounds the raft messages a node packs into one
	// frame to a peer: it starts a new frame rather than pass it. A frame
	// holds at least one message, and a raft message is at most raft's
	// per-message bound (1 MiB of entries) or one entry of at most one
	// record batch, so a peer frame stays under about 3.2 MiB, well below
	// BytesMaxDefault, the limit a peer reads with. Several smaller frames
	// also let the receiver start on the first while the rest arrive.
	PeerFrameBytesTarget = 2 << 20
)

// FetchBytesMax is the largest response-wide max_bytes a fetch may ask for
// so that its answer fits a frame of frameBytesMax (7 MiB for the default).
func FetchBytesMax(frameBytesMax int) int { return max(frameBytesMax-FetchSlackBytes, 1<<20) }

// ProduceBytesMax is the most ProducePartitionBytes one produce request may
// carry so that it fits a frame of frameBytesMax.
func ProduceBytesMax(frameBytesMax int) int { return frameBytesMax - ProduceSlackBytes }

// ProducePartitionBytes bounds the encoded size of one partition of a
// produce request: its batch, its topic name and the fixed fields with
// their tags and lengths.
func ProducePartitionBytes(topic string, batchBytes int) int { return batchBytes + len(topic) + 64 }

// Errors of Read. A connection that returns one of them is closed: the stream
// can no longer be trusted to be aligned on frames.
var (
	ErrTooLarge = errors.New("frame: frame larger than the limit")
	ErrEmpty    = errors.New("frame: empty frame")
	// ErrMalformed wraps Decode's failure to unmarshal a payload.
	ErrMalformed = errors.New("frame: malformed message")
)

// Read reads one frame's payload from r into buf (grown when too small) and
// returns it. It fails with ErrTooLarge before reading a payload longer than
// bytesMax, so a hostile length cannot make it allocate.
func Read(r io.Reader, buf []byte, bytesMax int) ([]byte, error) {
	var prefix [LengthBytes]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	length := binary.BigEndian.Uint32(prefix[:])
	if length == 0 {
		return nil, ErrEmpty
	}
	if uint64(length) > uint64(bytesMax) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, length, bytesMax)
	}
	if cap(buf) < int(length) {
		buf = make([]byte, length)
	}
	buf = buf[:length]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// Append appends m's frame (length prefix and marshalled bytes) to dst.
func Append(dst []byte, m proto.Message) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, m)
	if err != nil {
		return dst[:start], err
	}
	length := len(dst) - start - LengthBytes
	if length == 0 {
		// An empty message marshals to no bytes; frames are never empty, so
		// such a message cannot be sent. Every Strand envelope has a
		// correlation id or body, so this is a caller bug.
		return dst[:start], ErrEmpty
	}
	if uint64(length) > uint64(^uint32(0)) {
		return dst[:start], ErrTooLarge
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(length))
	return dst, nil
}

// Decode reads one frame from r and unmarshals it into m.
func Decode(r io.Reader, buf []byte, bytesMax int, m proto.Message) ([]byte, error) {
	payload, err := Read(r, buf, bytesMax)
	if err != nil {
		return buf, err
	}
	if err := proto.Unmarshal(payload, m); err != nil {
		return payload, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return payload, nil
}
