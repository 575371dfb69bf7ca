package node

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

var tp0 = TopicPartition{Topic: "orders", Partition: 0}

// checkFetched asserts that fetched holds exactly want's batches, byte for
// byte, at dense offsets from 0, and that hwm follows the last.
func checkFetched(t *testing.T, fetched []FetchedBatch, hwm int64, want [][]byte, counts []int64) {
	t.Helper()
	if len(fetched) != len(want) {
		t.Fatalf("fetched %d batches, want %d", len(fetched), len(want))
	}
	offset := int64(0)
	for i, b := range fetched {
		if b.BaseOffset != offset {
			t.Fatalf("batch %d at offset %d, want %d", i, b.BaseOffset, offset)
		}
		if !bytes.Equal(b.Batch, want[i]) {
			t.Fatalf("batch %d bytes differ from what was produced", i)
		}
		offset += counts[i]
	}
	if hwm != offset {
		t.Fatalf("high-water mark %d, want %d", hwm, offset)
	}
}

// Three nodes elect a leader; acks=all produces get dense offsets; a fetch
// returns the very bytes produced, with the high-water mark.
func TestProduceFetchDenseOffsets(t *testing.T) {
	c := newCluster(t, 1, 3, replicated(3, "orders", 2), nil)
	lead := c.leader(tp0)
	var want [][]byte
	var counts []int64
	next := int64(0)
	for i := range 20 {
		batch := testBatch(t, fmt.Sprintf("b%d", i), 1+i%4)
		res := c.produce(lead, ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1, Batch: batch})
		if res.Err != nil || res.BaseOffset != next {
			t.Fatalf("produce %d: %+v, want base offset %d", i, res, next)
		}
		next += int64(1 + i%4)
		want = append(want, batch)
		counts = append(counts, int64(1+i%4))
	}
	fetched, hwm := c.fetchAll(lead, tp0)
	checkFetched(t, fetched, hwm, want, counts)

	// A fetch from the middle of a batch starts with the batch holding it.
	res := c.fetch(lead, FetchRequest{TopicPartition: tp0, Offset: 2, MaxBytes: 1})
	if res.Err != nil || len(res.Batches) != 1 || res.Batches[0].BaseOffset != 1 {
		t.Fatalf("fetch at 2 with 1 byte: %+v", res)
	}
	res = c.fetch(lead, FetchRequest{TopicPartition: tp0, Offset: next + 1, MaxBytes: 1 << 20})
	if !errors.Is(res.Err, ErrOffsetOutOfRange) || res.HighWatermark != next {
		t.Fatalf("fetch past the high-water mark: %+v", res)
	}
	res = c.fetch(lead, FetchRequest{TopicPartition: tp0, Offset: next, MaxBytes: 1 << 20})
	if res.Err != nil || len(res.Batches) != 0 {
		t.Fatalf("fetch at the high-water mark: %+v", res)
	}
	for _, id := range c.ids {
		for _, st := range c.cores[id].Status() {
			if st.TopicPartition == tp0 && st.HighWatermark != next {
				t.Fatalf("node %d high-water mark %d, want %d", id, st.HighWatermark, next)
			}
		}
	}
}

// A follower refuses produce and fetch with ErrNotLeader naming the leader;
// unknown partitions are refused as such.
func TestFollowerRefusesWithLeaderHint(t *testing.T) {
	c := newCluster(t, 2, 3, replicated(3, "orders", 1), nil)
	lead := c.leader(tp0)
	follower := c.ids[0]
	if follower == lead {
		follower = c.ids[1]
	}
	res := c.produce(follower, ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "x", 1)})
	if !errors.Is(res.Err, ErrNotLeader) || res.Leader != lead {
		t.Fatalf("produce on follower: %+v, want ErrNotLeader naming %d", res, lead)
	}
	fres := c.fetch(follower, FetchRequest{TopicPartition: tp0, MaxBytes: 100})
	if !errors.Is(fres.Err, ErrNotLeader) || fres.Leader != lead {
		t.Fatalf("fetch on follower: %+v, want ErrNotLeader naming %d", fres, lead)
	}
	res = c.produce(lead, ProduceRequest{TopicPartition: TopicPartition{Topic: "nope"}, Acks: AcksAll, Batch: testBatch(t, "x", 1)})
	if !errors.Is(res.Err, ErrUnknownTopicPartition) {
		t.Fatalf("produce to unknown partition: %+v", res)
	}
}

// A record over 1 MiB is refused with ErrRecordTooLarge, a corrupt batch
// with ErrCorruptBatch (also an ErrInvalidRequest), and neither reaches
// the log.
func TestRefusesLargeAndCorruptBatches(t *testing.T) {
	c := newCluster(t, 3, 3, replicated(3, "orders", 1), nil)
	lead := c.leader(tp0)
	res := c.produce(lead, ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1, Batch: oversizedBatch(1<<20 + 1)})
	if !errors.Is(res.Err, ErrRecordTooLarge) {
		t.Fatalf("1 MiB + 1 record: %+v", res)
	}
	res = c.produce(lead, ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1, Batch: oversizedBatch(2 << 20)})
	if !errors.Is(res.Err, ErrRecordTooLarge) {
		t.Fatalf("2 MiB batch: %+v", res)
	}
	corrupt := testBatch(t, "c", 2)
	corrupt[len(corrupt)-1] ^= 1
	res = c.produce(lead, ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1, Batch: corrupt})
	if !errors.Is(res.Err, ErrInvalidRequest) || !errors.Is(res.Err, ErrCorruptBatch) {
		t.Fatalf("corrupt batch: %+v", res)
	}
	// A maximal record is accepted.
	res = c.produce(lead, ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1, Batch: oversizedBatch(1<<20 - 16)})
	if res.Err != nil || res.BaseOffset != 0 {
		t.Fatalf("record just under 1 MiB: %+v", res)
	}
}

// An idempotent producer's retry (same id, epoch, sequence) is written
// once and answered with the original offset.
func TestIdempotentRetryWrittenOnce(t *testing.T) {
	c := newCluster(t, 4, 3, replicated(3, "orders", 1), nil)
	lead := c.leader(tp0)
	first := testBatch(t, "a", 3)
	req := ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: 7, ProducerEpoch: 0, BaseSequence: 0, Batch: first}
	r1 := c.produce(lead, req)
	r2 := c.produce(lead, req)
	if r1.Err != nil || r2.Err != nil || r1.BaseOffset != 0 || r2.BaseOffset != 0 {
		t.Fatalf("first %+v, retry %+v: want both at offset 0", r1, r2)
	}
	second := testBatch(t, "b", 2)
	r3 := c.produce(lead, ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: 7, BaseSequence: 3, Batch: second})
	if r3.Err != nil || r3.BaseOffset != 3 {
		t.Fatalf("next batch: %+v, want offset 3", r3)
	}
	gap := c.produce(lead, ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: 7, BaseSequence: 9, Batch: second})
	if !errors.Is(gap.Err, ErrOutOfOrderSequence) {
		t.Fatalf("sequence gap: %+v", gap)
	}
	fetched, hwm := c.fetchAll(lead, tp0)
	checkFetched(t, fetched, hwm, [][]byte{first, second}, []int64{3, 2})
}

// A producer the partition has no state for, sending a sequence other
// than 0, is answered UNKNOWN_PRODUCER_ID (Kafka's code for it), not the
// OUT_OF_ORDER_SEQUENCE of a gap, and nothing is written.
func TestUnknownProducerAnswered(t *testing.T) {
	c := newCluster(t, 4, 3, replicated(3, "orders", 1), nil)
	lead := c.leader(tp0)
	res := c.produce(lead, ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: 9, BaseSequence: 5, Batch: testBatch(t, "u", 2)})
	if !errors.Is(res.Err, ErrUnknownProducer) {
		t.Fatalf("unknown producer: %+v", res)
	}
	if code := c.cores[lead].wireError(res.Err, lead, &tp0).GetCode(); code != strandpb.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID {
		t.Errorf("unknown producer answered %v, want UNKNOWN_PRODUCER_ID", code)
	}
	if fetched, hwm := c.fetchAll(lead, tp0); len(fetched) != 0 || hwm != 0 {
		t.Errorf("refused batch written: %d batches, high-water mark %d", len(fetched), hwm)
	}
}

// A leader with PendingRequestsMax produces waiting refuses the next with
// BUSY: retriable, nothing written, and no metadata refresh (the leader has
// not moved), where it used to answer UNAVAILABLE, which sends every client
// to refresh metadata. The waiting produce completes.
func TestBusyLeaderAnswersBusy(t *testing.T) {
	c := newCluster(t, 4, 3, replicated(3, "orders", 1), nil)
	lead := c.leader(tp0)
	c.cores[lead].cfg.PendingRequestsMax = 1 // after setup, which needs more
	var first, second *ProduceResult
	c.cores[lead].produceNow(ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "a", 1)},
		func(r ProduceResult) { first = &r })
	c.cores[lead].produceNow(ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "b", 1)},
		func(r ProduceResult) { second = &r })
	c.settle()
	if first == nil || first.Err != nil || second == nil || !errors.Is(second.Err, ErrBusy) {
		t.Fatalf("first %+v, second %+v: want the second refused busy", first, second)
	}
	code := c.cores[lead].wireError(second.Err, lead, &tp0).GetCode()
	if info := code.Info(); code != strandpb.ErrorCode_ERROR_CODE_BUSY || !info.Retriable || info.RefreshMetadata || info.MaybeWritten {
		t.Errorf("busy leader answered %v %+v, want BUSY: retriable, no refresh, not written", code, info)
	}
	if _, hwm := c.fetchAll(lead, tp0); hwm != 1 {
		t.Errorf("high-water mark %d, want 1 (the refused batch not written)", hwm)
	}
}

// acks=0 completes at once and acks=1 once the leader synced; both report
// offset -1 and the records become readable.
func TestAcksNoneAndLeader(t *testing.T) {
	c := newCluster(t, 5, 3, replicated(3, "orders", 1), nil)
	lead := c.leader(tp0)
	var none *ProduceResult
	c.cores[lead].produceNow(ProduceRequest{TopicPartition: tp0, Acks: AcksNone, ProducerID: -1, Batch: testBatch(t, "n", 1)},
		func(r ProduceResult) { none = &r })
	if none == nil || none.Err != nil || none.BaseOffset != -1 {
		t.Fatalf("acks=0 did not complete at once: %+v", none)
	}
	var one *ProduceResult
	c.cores[lead].produceNow(ProduceRequest{TopicPartition: tp0, Acks: AcksLeader, ProducerID: -1, Batch: testBatch(t, "l", 2)},
		func(r ProduceResult) { one = &r })
	if one != nil {
		t.Fatalf("acks=1 completed before the leader synced")
	}
	syncs := c.cores[lead].Stats().Syncs
	if err := c.cores[lead].Process(); err != nil {
		t.Fatal(err)
	}
	if one != nil {
		t.Fatalf("acks=1 completed before the leader's sync job returned")
	}
	c.runJobs(c.cores[lead])
	if one == nil || one.Err != nil || one.BaseOffset != -1 || c.cores[lead].Stats().Syncs == syncs {
		t.Fatalf("acks=1 after the leader's sync: %+v", one)
	}
	c.settle()
	_, hwm := c.fetchAll(lead, tp0)
	if hwm != 3 {
		t.Fatalf("high-water mark %d, want 3", hwm)
	}
}

// A leader cut off from its followers never acknowledges acks=all: the
// proposed produce ends with ErrTimeout (ErrLeadershipLost once CheckQuorum
// deposes it), never with a refusal a client would take as "not written".
func TestIsolatedLeaderNeverAcks(t *testing.T) {
	c := newCluster(t, 6, 3, replicated(3, "orders", 1), nil)
	lead := c.leader(tp0)
	c.drop = func(e envelope) bool { return e.from == lead || e.to == lead }
	res := c.produce(lead, ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "x", 1)})
	if !errors.Is(res.Err, ErrTimeout) || errors.Is(res.Err, ErrNotLeader) {
		t.Fatalf("isolated leader: %+v, want an indefinite ErrTimeout", res)
	}
}

// Every node crashes in turn, losing unsynced bytes, and reopens on its
// disk (from a checkpoint, then by replay); all acknowledged data stays,
// byte for byte, at the same offsets, and writes continue.
func TestRestartKeepsData(t *testing.T) {
	small := func(cfg *Config) { cfg.CheckpointEntries = 4 }
	c := newCluster(t, 7, 3, replicated(3, "orders", 1), small)
	var want [][]byte
	var counts []int64
	produce := func(n int) {
		for range n {
			batch := testBatch(t, fmt.Sprintf("r%d", len(want)), 2)
			seq := int32(2 * len(want))
			for attempt := 0; ; attempt++ {
				if attempt == 20 {
					t.Fatalf("batch %d never acknowledged", len(want))
				}
				lead := c.leader(tp0)
				res := c.produce(lead, ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: 1, BaseSequence: seq, Batch: batch})
				if res.Err != nil {
					continue // indefinite: retry the same sequence
				}
				if res.BaseOffset != int64(seq) {
					t.Fatalf("offset %d, want %d", res.BaseOffset, seq)
				}
				break
			}
			want = append(want, batch)
			counts = append(counts, 2)
		}
	}
	produce(10)
	for _, id := range c.ids {
		c.crash(id)
		c.start(id)
		c.tick(30)
		produce(5)
	}
	lead := c.leader(tp0)
	if c.cores[lead].Stats().Checkpoints == 0 {
		t.Fatalf("no checkpoint written: the restart path was not exercised")
	}
	fetched, hwm := c.fetchAll(lead, tp0)
	checkFetched(t, fetched, hwm, want, counts)

	// All three down at once, then back: nothing acknowledged is lost.
	for _, id := range c.ids {
		c.crash(id)
	}
	for _, id := range c.ids {
		c.start(id)
	}
	lead = c.leader(tp0)
	fetched, hwm = c.fetchAll(lead, tp0)
	checkFetched(t, fetched, hwm, want, counts)
}

// A damaged checkpoint is skipped on restart: the replica replays its raft
// log instead and ends in the same state.
func TestDamagedCheckpointFallsBackToReplay(t *testing.T) {
	c := newCluster(t, 8, 3, replicated(3, "orders", 1), func(cfg *Config) { cfg.CheckpointEntries = 4 })
	lead := c.leader(tp0)
	for i := range 10 {
		if r := c.produce(lead, ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "k", 2)}); r.Err != nil || r.BaseOffset != int64(2*i) {
			t.Fatalf("produce %d: %+v", i, r)
		}
	}
	c.settle()
	follower := c.ids[0]
	if follower == lead {
		follower = c.ids[1]
	}
	dir := c.replicaDir(follower, tp0) + "/checkpoint"
	names, err := c.disks[follower].List(dir)
	if err != nil || len(names) != 1 {
		t.Fatalf("checkpoints %v (%v): want exactly one, older ones removed", names, err)
	}
	c.crash(follower)
	c.disks[follower].FlipBit(dir+"/"+names[0], 40, 3)
	c.start(follower)
	if got := c.cores[follower].byTP[tp0].appliedRaft; got != 0 {
		t.Fatalf("restored applied index %d from a damaged checkpoint, want a full replay", got)
	}
	c.tick(5)
	if hwm := c.cores[follower].Status()[0].HighWatermark; hwm != 20 {
		t.Fatalf("replayed follower high-water mark %d, want 20", hwm)
	}
}

// A failed fsync is returned by Process: the node must fail-stop.
func TestSyncFailureIsFatal(t *testing.T) {
	c := newCluster(t, 9, 3, replicated(3, "orders", 1), nil)
	lead := c.leader(tp0)
	c.cores[lead].produceNow(ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "f", 1)},
		func(ProduceResult) {})
	c.disks[lead].FailSync(true)
	if err := c.cores[lead].Process(); err != nil {
		t.Fatalf("Process failed before the sync job ran: %v", err)
	}
	c.runJobs(c.cores[lead])
	if err := c.cores[lead].Process(); err == nil {
		t.Fatalf("Process succeeded although the sync failed")
	}
}

// The same seed gives the same frames, byte for byte, in the same order:
// the core adds no nondeterminism of its own.
func TestSameSeedSameFrames(t *testing.T) {
	run := func() uint32 {
		c := newCluster(t, 10, 3, replicated(3, "orders", 3), func(cfg *Config) { cfg.CheckpointEntries = 3 })
		var digest uint32
		c.drop = func(e envelope) bool {
			digest = crc32.Update(digest, crc32.IEEETable, []byte{byte(e.from), byte(e.to)})
			digest = crc32.Update(digest, crc32.IEEETable, e.frame)
			return false
		}
		for p := range 3 {
			tp := TopicPartition{Topic: "orders", Partition: int32(p)}
			for i := range 4 {
				c.produce(c.leader(tp), ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, fmt.Sprint(i), 1)})
			}
		}
		c.crash(2)
		c.start(2)
		c.tick(20)
		return digest
	}
	if a, b := run(), run(); a != b {
		t.Fatalf("frame digests differ: %08x, %08x", a, b)
	}
}

// A leader that cannot read a committed entry back from its own log fails
// the fetch with ErrStorage and then fail-stops (Process returns the error)
// rather than lead on and fail every such fetch forever.
func TestUnreadableCommittedEntryIsFatal(t *testing.T) {
	c := newCluster(t, 11, 3, replicated(3, "orders", 1), nil)
	lead := c.leader(tp0)
	if r := c.produce(lead, ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "u", 3)}); r.Err != nil {
		t.Fatalf("produce: %+v", r)
	}
	c.settle()
	for _, id := range c.ids { // restart everyone: reads now come from disk, not the tail cache
		c.crash(id)
		c.start(id)
	}
	lead = c.leader(tp0)
	logDir := c.replicaDir(lead, tp0) + "/log"
	names, err := c.disks[lead].List(logDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		c.disks[lead].FailReads(logDir+"/"+name, true)
	}
	var res *FetchResult
	c.cores[lead].fetchNow(FetchRequest{TopicPartition: tp0, Offset: 0, MaxBytes: 1 << 20}, func(r FetchResult) { res = &r })
	for range 200 {
		for _, id := range c.ids {
			if err := c.cores[id].Process(); err != nil {
				if id != lead || !errors.Is(err, ErrStorage) {
					t.Fatalf("node %d: process: %v", id, err)
				}
				if res == nil || !errors.Is(res.Err, ErrStorage) {
					t.Fatalf("fetch result %+v, want ErrStorage", res)
				}
				return
			}
			c.runJobs(c.cores[id]) // the cold read is a storage job (fetch_cold.go)
		}
		queue := c.queue
		c.queue = nil
		for _, e := range queue {
			c.cores[e.to].Receive(e.frame)
		}
		for _, id := range c.ids {
			c.cores[id].Tick()
		}
	}
	t.Fatalf("leader never fail-stopped; fetch result %+v", res)
}
