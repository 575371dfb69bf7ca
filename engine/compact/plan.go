package compact

import (
	"encoding/binary"
	"fmt"

	"github.com/strandlog/strand/engine/recordbatch"
)

// plan is what the first pass learns: where the pass ends, the offset map
// of the dirty section up to there, and each producer's last data batch.
type plan struct {
	cleanedTo int64
	mapFull   bool
	offsets   *offsetMap
	// lastData maps a producer id to the base offset of its last data
	// batch below cleanedTo: that batch is kept, empty if need be, so the
	// producer's idempotence state survives (Kafka's rule). Lookups only.
	lastData map[int64]int64
}

// head is what the first pass needs of one input batch.
type head struct {
	end        int64 // offset after its last
	producerID int64 // -1: none
	control    bool
	dirty      bool
	keys       []keyHash // dirty data batches not aborted: one per record, noKey for a keyless one
}

// noKey stands in h.keys for a record without a key (rule 3: it goes and
// hides nothing). A real key hashing to all zeros (SHA-256's first 128
// bits) is not a concern: finding one is a preimage attack.
var noKey = keyHash{}

// planBatch is one batch of the first walk (the map's): it fills the
// offset map with the dirty section's keys until the next batch would not
// fit (Kafka's buildOffsetMap stops the same way, at a batch boundary here
// so every replica stops alike), and reports when the walk stops.
func (p *Pass) planBatch(in Input) (stop bool, err error) {
	if in.BaseOffset < p.prevEnd || in.BaseOffset < 0 {
		return true, fmt.Errorf("%w: batch at %d after one ending at %d", ErrInput, in.BaseOffset, p.prevEnd)
	}
	h, err := readHead(in, p.log.FirstDirty, p.tracker, p.scratch[:0])
	if err != nil {
		return true, err
	}
	if h.dirty {
		if stop, err := p.plan.admitDirty(in, &h, p.d, p.tracker); stop || err != nil {
			return true, err
		}
	}
	p.scratch = h.keys
	if !h.control && h.producerID >= 0 && h.end > p.d.LogStart {
		p.plan.lastData[h.producerID] = in.BaseOffset
	}
	p.prevEnd = h.end
	return false, nil
}

// admitDirty adds a dirty batch's keys to the map, or reports the pass
// stops before it: it ends past the cleanable end, or the map is full.
func (p *plan) admitDirty(in Input, h *head, d Decision, tracker *abortedTracker) (stop bool, err error) {
	if in.BaseOffset != p.cleanedTo {
		return true, fmt.Errorf("%w: raft batch at %d, but the log before it ends at %d", ErrInput, in.BaseOffset, p.cleanedTo)
	}
	if h.end > d.CleanableEnd {
		return true, nil
	}
	if !h.control && h.end > d.LogStart { // rule 8: a batch wholly below the log start hides nothing
		if err := readKeys(in, h, tracker); err != nil {
			return true, err
		}
	}
	if len(h.keys) > p.offsets.room() {
		if p.offsets.entries == 0 {
			return true, fmt.Errorf("%w: %d records at offset %d, the map holds %d", ErrOffsetMapTooSmall,
				len(h.keys), in.BaseOffset, p.offsets.capacity)
		}
		p.mapFull = true
		return true, nil
	}
	for i, k := range h.keys {
		if k != noKey {
			p.offsets.put(k, in.BaseOffset+int64(i))
		}
	}
	p.cleanedTo = h.end
	return false, nil
}

// readHead reads what the first pass needs of in from its header; keys is
// the scratch slice readKeys will append to.
func readHead(in Input, firstDirty int64, tracker *abortedTracker, keys []keyHash) (head, error) {
	if IsCompacted(in.Data) {
		b, _, err := decodeHeader(in.Data)
		switch {
		case err != nil:
			return head{}, fmt.Errorf("compacted batch at %d: %w", in.BaseOffset, err)
		case b.BaseOffset != in.BaseOffset || b.LastOffset() >= firstDirty:
			return head{}, fmt.Errorf("%w: compacted batch [%d, %d] read at %d, first dirty offset %d",
				ErrInput, b.BaseOffset, b.LastOffset(), in.BaseOffset, firstDirty)
		}
		return head{end: b.LastOffset() + 1, producerID: b.ProducerID, control: b.Control, keys: keys}, nil
	}
	if in.BaseOffset < firstDirty {
		return head{}, fmt.Errorf("%w: raft batch at %d below the first dirty offset %d", ErrInput, in.BaseOffset, firstDirty)
	}
	producer := normalProducer(in)
	if in.Marker != nil {
		if producer.ID < 0 {
			return head{}, fmt.Errorf("%w: marker at %d without a producer", ErrInput, in.BaseOffset)
		}
		tracker.marker(producer.ID, in.BaseOffset)
		return head{end: in.BaseOffset + 1, producerID: producer.ID, control: true, dirty: true, keys: keys}, nil
	}
	if in.Transactional && producer.ID < 0 {
		return head{}, fmt.Errorf("%w: transactional batch at %d without a producer", ErrInput, in.BaseOffset)
	}
	count, err := raftRecordCount(in.Data)
	if err != nil {
		return head{}, fmt.Errorf("raft batch at %d: %w", in.BaseOffset, err)
	}
	return head{end: in.BaseOffset + count, producerID: producer.ID, dirty: true, keys: keys}, nil
}

// raftRecordCount is a raft batch's record count from its header alone,
// so a batch past the cleanable end is never read; readKeys checks it.
func raftRecordCount(data []byte) (int64, error) {
	if recordbatch.IsKafka(data) {
		h, err := recordbatch.ParseKafkaHeader(data)
		return int64(h.RecordCount), err
	}
	if len(data) < recordbatch.HeaderBytes || data[0] != recordbatch.Magic {
		_, err := recordbatch.Validate(data)
		return 0, err
	}
	return int64(binary.LittleEndian.Uint32(data[8:12])), nil
}

// readKeys appends the key hashes of a dirty raft batch's records to
// h.keys (none for an aborted transaction's, which must not hide older
// committed values; noKey for a record without a key, which the pass
// drops, as Kafka's cleaner does).
func readKeys(in Input, h *head, tracker *abortedTracker) error {
	skip := in.Transactional && tracker.aborted(h.producerID, in.BaseOffset)
	n := int64(0)
	it := recordbatch.NewIterator(in.Data)
	for ; it.Next(); n++ {
		r := it.Record()
		switch {
		case skip:
		case r.Key == nil:
			h.keys = append(h.keys, noKey)
		default:
			h.keys = append(h.keys, hashKey(r.Key))
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("raft batch at %d: %w", in.BaseOffset, err)
	}
	if in.BaseOffset+n != h.end {
		return fmt.Errorf("raft batch at %d: %w: %d records, header says %d", in.BaseOffset, recordbatch.ErrCorrupt, n, h.end-in.BaseOffset)
	}
	return nil
}

// normalProducer is in's producer with every field -1 when it has no id,
// as the compacted form spells it.
func normalProducer(in Input) Producer {
	if in.Producer.ID < 0 {
		return Producer{ID: -1, Epoch: -1, BaseSequence: -1}
	}
	return in.Producer
}
