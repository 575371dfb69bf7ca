package tier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// ErrCorrupt: an object's bytes are not what EncodeObject writes.
var ErrCorrupt = errors.New("tier: corrupt segment object")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Batch is one stored batch or marker as a segment object keeps it: what a
// fetch serves (node.FetchedBatch's fields), so a remote read answers the
// same bytes as a local one.
type Batch struct {
	// BaseOffset is the batch's first offset; NextOffset the one after it.
	BaseOffset, NextOffset int64
	// AppendTimeMs is the leader's append time.
	AppendTimeMs int64
	// ProducerID, ProducerEpoch, BaseSequence: the producer fields (ID -1:
	// none).
	ProducerID    int64
	ProducerEpoch int32
	BaseSequence  int32
	// Transactional: written in its producer's transaction.
	Transactional bool
	// Marker: a transaction marker (Data empty); Commit and
	// CoordinatorEpoch are its.
	Marker           bool
	Commit           bool
	CoordinatorEpoch int32
	// MaxTimeMs is the batch's largest record timestamp (the index keeps
	// it for remote time lookups).
	MaxTimeMs int64
	// Data is the batch as stored (Strand's or Kafka's form).
	Data []byte
}

const (
	frameHeader  = 61 // through max_time_ms
	indexEntry   = 24
	footerBytes  = 32
	objectMagic  = "STRT"
	objectVer    = 1
	flagTxn      = 1
	flagMarker   = 2
	flagCommit   = 4
	flagsKnown   = flagTxn | flagMarker | flagCommit
	maxFrameData = 1 << 30
)

// IndexEntry locates one frame in an object.
type IndexEntry struct {
	// BaseOffset is the frame's batch's first offset.
	BaseOffset int64
	// Position is the frame's first byte in the object.
	Position int64
	// MaxTimeMs is the largest timestamp up to this batch (running
	// maximum), for a remote OffsetForTimestamp.
	MaxTimeMs int64
}

// Footer is an object's last FooterBytes bytes, decoded.
type Footer struct {
	// Frames is how many batches the object holds.
	Frames int
	// IndexPos is where the index starts; it runs to the footer.
	IndexPos int64
	crc      uint32
}

// FooterBytes is the length of an object's footer.
const FooterBytes = footerBytes

// EncodeObject writes the segment object holding batches (in offset order,
// dense: each starts at the previous one's NextOffset).
func EncodeObject(batches []Batch) ([]byte, error) {
	var out []byte
	index := make([]IndexEntry, 0, len(batches))
	runMax := int64(-1)
	for i, b := range batches {
		if err := checkBatch(b); err != nil {
			return nil, fmt.Errorf("batch %d: %w", i, err)
		}
		if i > 0 && b.BaseOffset != batches[i-1].NextOffset {
			return nil, fmt.Errorf("%w: batch %d starts at %d after one ending at %d", ErrInvalid, i, b.BaseOffset, batches[i-1].NextOffset)
		}
		runMax = max(runMax, b.MaxTimeMs)
		index = append(index, IndexEntry{BaseOffset: b.BaseOffset, Position: int64(len(out)), MaxTimeMs: runMax})
		out = appendFrame(out, b)
	}
	indexPos := int64(len(out))
	for _, e := range index {
		out = binary.LittleEndian.AppendUint64(out, uint64(e.BaseOffset))
		out = binary.LittleEndian.AppendUint64(out, uint64(e.Position))
		out = binary.LittleEndian.AppendUint64(out, uint64(e.MaxTimeMs))
	}
	footer := make([]byte, footerBytes)
	copy(footer, objectMagic)
	binary.LittleEndian.PutUint32(footer[4:], objectVer)
	binary.LittleEndian.PutUint32(footer[8:], uint32(len(batches)))
	binary.LittleEndian.PutUint64(footer[16:], uint64(indexPos))
	crc := crc32.Update(crc32.Checksum(out[indexPos:], castagnoli), castagnoli, footer[:24])
	binary.LittleEndian.PutUint32(footer[24:], crc)
	return append(out, footer...), nil
}

func checkBatch(b Batch) error {
	switch {
	case b.BaseOffset < 0 || b.NextOffset <= b.BaseOffset:
		return fmt.Errorf("%w: offsets [%d, %d)", ErrInvalid, b.BaseOffset, b.NextOffset)
	case b.Marker && (len(b.Data) != 0 || b.NextOffset != b.BaseOffset+1):
		return fmt.Errorf("%w: a marker holds one offset and no data", ErrInvalid)
	case !b.Marker && (len(b.Data) == 0 || b.Commit || b.CoordinatorEpoch != 0):
		return fmt.Errorf("%w: a batch holds data and no marker fields", ErrInvalid)
	case b.MaxTimeMs < -1:
		return fmt.Errorf("%w: max timestamp %d", ErrInvalid, b.MaxTimeMs)
	case len(b.Data) > maxFrameData:
		return fmt.Errorf("%w: batch of %d bytes", ErrInvalid, len(b.Data))
	}
	return nil
}

func appendFrame(out []byte, b Batch) []byte {
	start := len(out)
	out = binary.LittleEndian.AppendUint32(out, uint32(frameHeader-4+len(b.Data)))
	out = binary.LittleEndian.AppendUint32(out, 0) // crc, below
	out = binary.LittleEndian.AppendUint64(out, uint64(b.BaseOffset))
	out = binary.LittleEndian.AppendUint64(out, uint64(b.AppendTimeMs))
	out = binary.LittleEndian.AppendUint64(out, uint64(b.ProducerID))
	out = binary.LittleEndian.AppendUint32(out, uint32(b.ProducerEpoch))
	out = binary.LittleEndian.AppendUint32(out, uint32(b.BaseSequence))
	var flags byte
	if b.Transactional {
		flags |= flagTxn
	}
	if b.Marker {
		flags |= flagMarker
	}
	if b.Commit {
		flags |= flagCommit
	}
	out = append(out, flags)
	out = binary.LittleEndian.AppendUint32(out, uint32(b.CoordinatorEpoch))
	out = binary.LittleEndian.AppendUint64(out, uint64(b.NextOffset))
	out = binary.LittleEndian.AppendUint64(out, uint64(b.MaxTimeMs))
	out = append(out, b.Data...)
	binary.LittleEndian.PutUint32(out[start+4:], crc32.Checksum(out[start+8:], castagnoli))
	return out
}

// DecodeFooter reads an object's footer from its last FooterBytes bytes;
// size is the object's length (the index must fit before the footer).
func DecodeFooter(b []byte, size int64) (Footer, error) {
	if len(b) != footerBytes {
		return Footer{}, fmt.Errorf("%w: footer of %d bytes", ErrCorrupt, len(b))
	}
	if string(b[:4]) != objectMagic || binary.LittleEndian.Uint32(b[4:]) != objectVer ||
		binary.LittleEndian.Uint32(b[12:]) != 0 || binary.LittleEndian.Uint32(b[28:]) != 0 {
		return Footer{}, fmt.Errorf("%w: bad magic, version or reserved bytes", ErrCorrupt)
	}
	f := Footer{
		Frames:   int(binary.LittleEndian.Uint32(b[8:])),
		IndexPos: int64(binary.LittleEndian.Uint64(b[16:])),
		crc:      binary.LittleEndian.Uint32(b[24:]),
	}
	if f.IndexPos < 0 || f.IndexPos+int64(f.Frames)*indexEntry+footerBytes != size {
		return Footer{}, fmt.Errorf("%w: index of %d frames at %d does not end at the footer of a %d-byte object", ErrCorrupt, f.Frames, f.IndexPos, size)
	}
	if f.Frames > 0 && f.IndexPos < int64(f.Frames)*frameHeader {
		return Footer{}, fmt.Errorf("%w: %d frames cannot fit in %d bytes", ErrCorrupt, f.Frames, f.IndexPos)
	}
	return f, nil
}

// DecodeIndex reads the index (the object's bytes [IndexPos, size -
// FooterBytes)) and checks it against the footer's CRC: positions
// increasing from 0 and inside the frames, offsets increasing, the
// timestamps a running maximum.
func DecodeIndex(f Footer, footer, b []byte) ([]IndexEntry, error) {
	if len(b) != f.Frames*indexEntry || len(footer) != footerBytes {
		return nil, fmt.Errorf("%w: index of %d bytes for %d frames", ErrCorrupt, len(b), f.Frames)
	}
	if crc32.Update(crc32.Checksum(b, castagnoli), castagnoli, footer[:24]) != f.crc {
		return nil, fmt.Errorf("%w: index checksum mismatch", ErrCorrupt)
	}
	out := make([]IndexEntry, f.Frames)
	for i := range out {
		e := IndexEntry{
			BaseOffset: int64(binary.LittleEndian.Uint64(b[i*indexEntry:])),
			Position:   int64(binary.LittleEndian.Uint64(b[i*indexEntry+8:])),
			MaxTimeMs:  int64(binary.LittleEndian.Uint64(b[i*indexEntry+16:])),
		}
		switch {
		case i == 0 && e.Position != 0,
			i > 0 && (e.Position < out[i-1].Position+frameHeader || e.BaseOffset <= out[i-1].BaseOffset || e.MaxTimeMs < out[i-1].MaxTimeMs),
			e.Position+frameHeader > f.IndexPos, e.BaseOffset < 0:
			return nil, fmt.Errorf("%w: index entry %d (offset %d at %d) out of order", ErrCorrupt, i, e.BaseOffset, e.Position)
		}
		out[i] = e
	}
	return out, nil
}

// FrameLen answers the length of the frame starting with b's first 4
// bytes, for a reader sizing its next range read.
func FrameLen(b []byte) (int, error) {
	if len(b) < 4 {
		return 0, fmt.Errorf("%w: frame length cut short", ErrCorrupt)
	}
	n := int(binary.LittleEndian.Uint32(b))
	if n < frameHeader-4 || n > frameHeader-4+maxFrameData {
		return 0, fmt.Errorf("%w: frame length %d", ErrCorrupt, n)
	}
	return 4 + n, nil
}

// DecodeFrame reads one frame from the start of b and answers the batch
// (Data aliases b) and the frame's length.
func DecodeFrame(b []byte) (Batch, int, error) {
	n, err := FrameLen(b)
	if err != nil {
		return Batch{}, 0, err
	}
	if len(b) < n {
		return Batch{}, 0, fmt.Errorf("%w: frame of %d bytes cut to %d", ErrCorrupt, n, len(b))
	}
	f := b[:n]
	if crc32.Checksum(f[8:], castagnoli) != binary.LittleEndian.Uint32(f[4:]) {
		return Batch{}, 0, fmt.Errorf("%w: frame checksum mismatch", ErrCorrupt)
	}
	flags := f[40]
	if flags&^flagsKnown != 0 {
		return Batch{}, 0, fmt.Errorf("%w: unknown frame flags %#x", ErrCorrupt, flags)
	}
	bt := Batch{
		BaseOffset:       int64(binary.LittleEndian.Uint64(f[8:])),
		AppendTimeMs:     int64(binary.LittleEndian.Uint64(f[16:])),
		ProducerID:       int64(binary.LittleEndian.Uint64(f[24:])),
		ProducerEpoch:    int32(binary.LittleEndian.Uint32(f[32:])),
		BaseSequence:     int32(binary.LittleEndian.Uint32(f[36:])),
		Transactional:    flags&flagTxn != 0,
		Marker:           flags&flagMarker != 0,
		Commit:           flags&flagCommit != 0,
		CoordinatorEpoch: int32(binary.LittleEndian.Uint32(f[41:])),
		NextOffset:       int64(binary.LittleEndian.Uint64(f[45:])),
		MaxTimeMs:        int64(binary.LittleEndian.Uint64(f[53:])),
		Data:             f[frameHeader:n:n],
	}
	if err := checkBatch(bt); err != nil {
		return Batch{}, 0, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return bt, n, nil
}

// DecodeObject reads a whole object (a recovery's or a check's read):
// footer, index and every frame, each frame where the index puts it and
// starting where the previous one ended.
func DecodeObject(b []byte) ([]Batch, error) {
	if len(b) < footerBytes {
		return nil, fmt.Errorf("%w: %d bytes, shorter than a footer", ErrCorrupt, len(b))
	}
	footer := b[len(b)-footerBytes:]
	f, err := DecodeFooter(footer, int64(len(b)))
	if err != nil {
		return nil, err
	}
	index, err := DecodeIndex(f, footer, b[f.IndexPos:len(b)-footerBytes])
	if err != nil {
		return nil, err
	}
	out := make([]Batch, 0, len(index))
	pos, runMax := int64(0), int64(-1)
	for i, e := range index {
		if e.Position != pos {
			return nil, fmt.Errorf("%w: frame %d at %d, index says %d", ErrCorrupt, i, pos, e.Position)
		}
		bt, n, err := DecodeFrame(b[pos:f.IndexPos])
		if err != nil {
			return nil, fmt.Errorf("frame %d: %w", i, err)
		}
		if bt.BaseOffset != e.BaseOffset || (i > 0 && bt.BaseOffset != out[i-1].NextOffset) {
			return nil, fmt.Errorf("%w: frame %d at offset %d, index says %d", ErrCorrupt, i, bt.BaseOffset, e.BaseOffset)
		}
		if runMax = max(runMax, bt.MaxTimeMs); e.MaxTimeMs != runMax {
			return nil, fmt.Errorf("%w: index entry %d says max time %d, the frames %d", ErrCorrupt, i, e.MaxTimeMs, runMax)
		}
		out = append(out, bt)
		pos += int64(n)
	}
	if pos != f.IndexPos {
		return nil, fmt.Errorf("%w: %d bytes between the last frame and the index", ErrCorrupt, f.IndexPos-pos)
	}
	return out, nil
}

// Seek answers the index of the frame holding offset (the last frame whose
// base is at or below it), or -1 when offset is below the first.
func Seek(index []IndexEntry, offset int64) int {
	lo, hi := 0, len(index)
	for lo < hi {
		mid := (lo + hi) / 2
		if index[mid].BaseOffset <= offset {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1
}
