package node

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/kafkaproto"
	"github.com/strandlog/strand/proto/strandpb"
)

// kvRecord is one record a prefix test wrote: offset, key, value,
// timestamp and whether its transaction aborted.
type kvRecord struct {
	offset  int64
	key     string
	value   string
	ts      int64
	aborted bool
}

func (r kvRecord) String() string { return fmt.Sprintf("%s=%s@%d", r.key, r.value, r.offset) }

// kvWrite appends one plain batch of keyed records (key, value, ...) with
// timestamps from ts on, and returns them with their offsets.
func (c *cluster) kvWrite(tp TopicPartition, ts int64, kv ...string) []kvRecord {
	c.t.Helper()
	var recs []recordbatch.Record
	var out []kvRecord
	for i := 0; i < len(kv); i += 2 {
		recs = append(recs, recordbatch.Record{TimestampMs: ts + int64(i/2), Key: []byte(kv[i]), Value: []byte(kv[i+1])})
		out = append(out, kvRecord{key: kv[i], value: kv[i+1], ts: ts + int64(i/2)})
	}
	batch, err := recordbatch.Encode(nil, recs)
	if err != nil {
		c.t.Fatalf("encode: %v", err)
	}
	res := c.produce(c.leader(tp), ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: batch})
	if res.Err != nil {
		c.t.Fatalf("produce: %v", res.Err)
	}
	for i := range out {
		out[i].offset = res.BaseOffset + int64(i)
	}
	return out
}

// latestBelow is what a read of the whole partition must return after a
// pass that cleaned to cleanedTo: per key, its latest record below
// cleanedTo that no aborted transaction wrote, then every record from
// cleanedTo on (the aborted ones only at read_uncommitted), in offset
// order.
func latestBelow(written []kvRecord, cleanedTo int64, committedOnly bool) []string {
	latest := map[string]kvRecord{}
	var out []kvRecord
	for _, r := range written {
		switch {
		case r.offset < cleanedTo && !r.aborted:
			latest[r.key] = r
		case r.offset >= cleanedTo && (!r.aborted || !committedOnly):
			out = append(out, r)
		}
	}
	for _, r := range latest {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b kvRecord) int { return int(a.offset - b.offset) })
	s := make([]string, len(out))
	for i, r := range out {
		s[i] = r.String()
	}
	return s
}

// readNative reads tp from offset 0 to its high-water mark over the native
// wire at isolation iso, following next_offset, and decodes every batch as
// clientlib does (a compacted batch: its records at their own offsets).
func (c *cluster) readNative(tp TopicPartition, iso int32, maxBytes int32) (recs []string, prefixBatches int) {
	c.t.Helper()
	return c.readNativeFrom(tp, iso, maxBytes, 0)
}

// readNativeFrom is readNative from offset from (a log start).
func (c *cluster) readNativeFrom(tp TopicPartition, iso int32, maxBytes int32, from int64) (recs []string, prefixBatches int) {
	c.t.Helper()
	offset := from
	for range 200 {
		p := c.fetchWireMax(tp, offset, iso, maxBytes)
		for _, b := range p.GetBatches() {
			if compact.IsCompacted(b.GetRecords()) {
				prefixBatches++
				dec, err := compact.DecodeBatch(b.GetRecords())
				if err != nil {
					c.t.Fatalf("batch at %d: %v", b.GetBaseOffset(), err)
				}
				if dec.BaseOffset != b.GetBaseOffset() {
					c.t.Fatalf("batch served at %d holds base offset %d", b.GetBaseOffset(), dec.BaseOffset)
				}
				for _, r := range dec.Records {
					if !dec.Control && r.Offset >= offset {
						recs = append(recs, fmt.Sprintf("%s=%s@%d", r.Key, r.Value, r.Offset))
					}
				}
				continue
			}
			err := recordbatch.Decode(b.GetRecords(), func(i int, r recordbatch.Record) error {
				if o := b.GetBaseOffset() + int64(i); o >= offset {
					recs = append(recs, fmt.Sprintf("%s=%s@%d", r.Key, r.Value, o))
				}
				return nil
			})
			if err != nil {
				c.t.Fatalf("batch at %d: %v", b.GetBaseOffset(), err)
			}
		}
		if len(p.GetBatches()) == 0 {
			return recs, prefixBatches // the end, or only markers left (a native read skips them)
		}
		if p.GetNextOffset() <= offset {
			c.t.Fatalf("read at %d did not move (high-water mark %d, LSO %d)", offset, p.GetHighWatermark(), p.GetLastStableOffset())
		}
		offset = p.GetNextOffset()
	}
	c.t.Fatalf("read of %v did not end", tp)
	return nil, 0
}

// readKafka reads tp from offset 0 through the Kafka listener's
// translation (Fetch v11, markers and aborted transactions as Kafka
// serves them) and franz-go's own fetch processing at isolation iso, until
// the records reach the high-water mark.
func (c *cluster) readKafka(tp TopicPartition, iso int8) []string {
	c.t.Helper()
	var recs []string
	offset := int64(0)
	for range 200 {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxBytes, req.IsolationLevel = 11, 1<<20, iso
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = tp.Topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = tp.Partition, offset, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("test")).AppendRequest(nil, req, 5)
		tr, err := kafkaproto.Translate(frame[4:])
		if err != nil || tr.Request == nil {
			c.t.Fatalf("translate: %v", err)
		}
		resp, _ := c.handle(c.leader(tp), tr.Request)
		answer := tr.Answer(resp)
		out := kmsg.NewPtrFetchResponse()
		out.Version = 11
		if err := out.ReadFrom(answer[8:]); err != nil { // size, correlation id
			c.t.Fatalf("fetch response: %v", err)
		}
		part := &out.Topics[0].Partitions[0]
		if part.ErrorCode != 0 {
			c.t.Fatalf("fetch at %d: error %d", offset, part.ErrorCode)
		}
		level := kgo.ReadUncommitted()
		if iso == 1 {
			level = kgo.ReadCommitted()
		}
		fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: offset, IsolationLevel: level,
			Topic: tp.Topic, Partition: tp.Partition}, part, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			c.t.Fatalf("franz-go at %d: %v", offset, fp.Err)
		}
		for _, r := range fp.Records {
			recs = append(recs, fmt.Sprintf("%s=%s@%d", r.Key, r.Value, r.Offset))
		}
		limit := part.HighWatermark
		if iso == 1 {
			limit = part.LastStableOffset
		}
		// Where franz-go goes on: past the last batch it was served.
		next := offset
		for rest := part.RecordBatches; len(rest) >= 61; {
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(rest); err != nil {
				c.t.Fatalf("batch: %v", err)
			}
			next = rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
			rest = rest[12+int(rb.Length):]
		}
		if next <= offset {
			if offset >= limit {
				return recs
			}
			c.t.Fatalf("Kafka read at %d did not move (limit %d)", offset, limit)
		}
		offset = next
	}
	c.t.Fatalf("Kafka read of %v did not end", tp)
	return nil
}

// checkReads reads tp from offset 0 over the native wire (a budget that
// splits the read) and through the Kafka translation, at both isolation
// levels, and fails unless each returns latestBelow(written, cleanedTo).
func (c *cluster) checkReads(tp TopicPartition, written []kvRecord, cleanedTo int64) {
	c.t.Helper()
	for _, iso := range []int32{0, 1} {
		want := latestBelow(written, cleanedTo, iso == 1)
		got, prefixBatches := c.readNative(tp, iso, 300)
		if !slices.Equal(got, want) {
			c.t.Fatalf("native read at isolation %d (prefix end %d):\n got %v\nwant %v", iso, cleanedTo, got, want)
		}
		if prefixBatches == 0 {
			c.t.Fatalf("native read at isolation %d served no compacted batch", iso)
		}
		if got := c.readKafka(tp, int8(iso)); !slices.Equal(got, want) {
			c.t.Fatalf("Kafka read at isolation %d (prefix end %d):\n got %v\nwant %v", iso, cleanedTo, got, want)
		}
	}
}

// listByTime is ListOffsets of tp by timestamp ts on its leader.
func (c *cluster) listByTime(tp TopicPartition, ts int64) (int64, int64) {
	c.t.Helper()
	resp, _ := c.handle(c.leader(tp), &strandpb.Request{CorrelationId: 9, Body: &strandpb.Request_ListOffsets{ListOffsets: &strandpb.ListOffsetsRequest{
		Partitions: []*strandpb.ListOffsetsRequest_Partition{{Topic: tp.Topic, Partition: tp.Partition, TimestampMs: ts}}}}})
	ps := resp.GetListOffsets().GetPartitions()
	if len(ps) != 1 || ps[0].GetError() != nil {
		c.t.Fatalf("list offsets: %v", resp)
	}
	return ps[0].GetOffset(), ps[0].GetTimestampMs()
}

// TestFetchServesCompactedPrefix shows reads of a compacted topic after
// passes: keyed updates over a few keys, an aborted transaction (key k1)
// then a committed one of the same producer (key k2), more updates; two
// passes, the second past the abort marker's delete horizon, so the
// prefix holds neither the aborted record nor its marker while the
// engine's aborted index still lists it; between them the producer
// aborts a third transaction (key k3). After each pass a read from offset 0
// returns exactly the latest value per key below the prefix end, at its
// original offset, then every record after it:
//   - over the native wire at both isolation levels, with a budget that
//     splits the read (the prefix's batches and then the raft log's, the
//     read crossing the prefix end seamlessly);
//   - over the Kafka translation through franz-go's fetch processing at
//     both isolation levels: the compacted batches decode (fewer records
//     than their offset range), and the aborted transaction whose marker
//     is gone is not listed (else franz-go drops the producer's later
//     committed record k2), while one whose marker is still in the
//     prefix stays listed, as Kafka keeps a cleaned segment's
//     transaction index entry while its marker stays, and the third
//     transaction, in the raft log after the prefix, stays hidden.
//
// ListOffsets by a timestamp of a removed record answers the first
// surviving record at or after it. Checked to fail without each piece:
// the fetch reading only the raft log (every old value comes back),
// next_offset counting a compacted batch's records instead of its range
// (the read goes past the high-water mark), the Kafka listener without AppendCompacted (no record decodes), the aborted
// list unfiltered (k2=k2-0 missing at read_committed), the lookup by
// timestamp in the engine's index only (a removed record's offset).
// Leaving out every aborted transaction below the prefix end is not
// caught: franz-go pops an abort only at a marker at or past the first
// offset listed, so a marker with no entry is harmless to it (and to the
// Java client); the listing follows Kafka's rule all the same.
func TestFetchServesCompactedPrefix(t *testing.T) {
	ms := int64(1_700_000_000_000)
	c := newMetaCluster(t, 26, 3, func(cfg *Config) {
		retentionConfig(cfg)
		cfg.CheckpointEntries = 16
		cfg.Clock = stepClock{ms: &ms}
		txnTestConfig(PartitionMarkers{})(cfg)
	})
	c.createTopicWith(c.metaLeaderOf(), "kv", 1, 3, map[string]string{"cleanup.policy": "compact", "segment.bytes": "4096",
		"delete.retention.ms": "0", "min.cleanable.dirty.ratio": "0.1"})
	kv := TopicPartition{Topic: "kv"}
	var written []kvRecord
	ts := int64(2_000_000)
	write := func(kvs ...string) {
		written = append(written, c.kvWrite(kv, ts, kvs...)...)
		ts += 10
	}
	for r := range 6 {
		write("k0", fmt.Sprintf("k0.r%d", r), "k1", fmt.Sprintf("k1.r%d", r), "k3", fmt.Sprintf("k3.r%d", r))
		write("k2", fmt.Sprintf("k2.r%d", r))
	}

	p := c.initTxn("app")
	if r := c.txnCall("app", addPartitionsReq("app", p, "kv", 0)); r.GetError() != nil {
		t.Fatalf("add partitions: %v", r.GetError())
	}
	seq := txnSeq{}
	ab := c.produceTxn("app", p, kv, seq, "k1", 1)
	if ab.GetError() != nil {
		t.Fatalf("transactional write: %v", ab)
	}
	written = append(written, kvRecord{offset: ab.GetBaseOffset(), key: "k1", value: "k1-0", ts: 1000, aborted: true})
	if r := c.txnCall("app", endTxnReq("app", p, false)); r.GetError() != nil {
		t.Fatalf("abort: %v", r.GetError())
	}
	c.waitTxnState("app", "CompleteAbort")
	next := txn.Producer{ID: p.ID, Epoch: p.Epoch + 1}
	if r := c.txnRetry("app", addPartitionsReq("app", next, "kv", 0)); r.GetError() != nil {
		t.Fatalf("add partitions: %v", r.GetError())
	}
	seq = txnSeq{}
	cm := c.produceTxn("app", next, kv, seq, "k2", 1)
	if cm.GetError() != nil {
		t.Fatalf("transactional write: %v", cm)
	}
	written = append(written, kvRecord{offset: cm.GetBaseOffset(), key: "k2", value: "k2-0", ts: 1000})
	if r := c.txnCall("app", endTxnReq("app", next, true)); r.GetError() != nil {
		t.Fatalf("commit: %v", r.GetError())
	}
	c.waitTxnState("app", "CompleteCommit")

	// Fill with other keys until a pass cleans past the commit marker,
	// then once more after the abort marker's horizon.
	passed := func(gen uint64, past int64) bool {
		st := c.cores[c.ids[0]].byTP[kv].part.Compaction()
		return st.DoneGeneration >= gen && st.CleanedTo > past
	}
	fill := func(gen uint64, past int64) {
		for i := 0; !passed(gen, past); i++ {
			if i == 40 {
				t.Fatalf("no pass of generation %d past %d: %+v", gen, past, c.cores[c.ids[0]].byTP[kv].part.Compaction())
			}
			for range 10 {
				write(fmt.Sprintf("f%d", i%3), fmt.Sprintf("f.%d", i))
			}
			c.tick(20)
		}
	}
	fill(1, cm.GetBaseOffset()+1)
	st := c.checkPrefixesAgree(kv, 1)
	// The first pass keeps the abort marker (its horizon has not passed):
	// the transaction stays listed, and reads come out the same.
	if !slices.ContainsFunc(storedPrefix(t, c.cores[c.leader(kv)].byTP[kv].pass.store), func(b compact.Input) bool {
		dec, _ := compact.DecodeBatch(b.Data)
		return dec.Control && !dec.MarkerCommits()
	}) {
		t.Fatalf("the first pass removed the abort marker")
	}
	// A third transaction of the producer, aborted, in the raft log after
	// the prefix: hidden from read_committed beside the prefix's marker.
	third := txn.Producer{ID: p.ID, Epoch: p.Epoch + 2}
	if r := c.txnRetry("app", addPartitionsReq("app", third, "kv", 0)); r.GetError() != nil {
		t.Fatalf("add partitions: %v", r.GetError())
	}
	seq = txnSeq{}
	ab3 := c.produceTxn("app", third, kv, seq, "k3", 1)
	if ab3.GetError() != nil {
		t.Fatalf("transactional write: %v", ab3)
	}
	written = append(written, kvRecord{offset: ab3.GetBaseOffset(), key: "k3", value: "k3-0", ts: 1000, aborted: true})
	if r := c.txnCall("app", endTxnReq("app", third, false)); r.GetError() != nil {
		t.Fatalf("abort: %v", r.GetError())
	}
	c.waitTxnState("app", "CompleteAbort")
	c.checkReads(kv, written, st.CleanedTo)
	ms += 1000 // past the horizon the first pass stamped on the abort marker
	// A pass decided from now on: one decided before (a quiet partition's
	// early checkpoint lets the leader decide sooner) keeps the marker.
	fill(c.cores[c.leader(kv)].byTP[kv].part.Compaction().Decision.Generation+1, st.CleanedTo)
	c.tick(40)
	st = c.checkPrefixesAgree(kv, st.DoneGeneration+1)
	lead := c.leader(kv)
	g := c.cores[lead].byTP[kv]
	for _, b := range storedPrefix(t, g.pass.store) {
		// The first transaction's abort marker (before the commit): its
		// horizon passed. The third's, if this pass reached it, was
		// stamped by this pass and stays.
		if dec, _ := compact.DecodeBatch(b.Data); dec.Control && !dec.MarkerCommits() && dec.BaseOffset < cm.GetBaseOffset() {
			t.Fatalf("the abort marker at %d is still in the prefix", dec.BaseOffset)
		}
	}
	// The aborted index still lists every aborted transaction below the
	// prefix end (dropping those whose marker went is still to do): the
	// first, and the third if this pass reached it.
	abortedBelow := 0
	for _, r := range written {
		if r.aborted && r.offset < st.CleanedTo {
			abortedBelow++
		}
	}
	if ab := g.part.AppendAbortedTxns(nil, 0, st.CleanedTo); len(ab) != abortedBelow {
		t.Fatalf("aborted index below the prefix end: %+v, want %d transactions", ab, abortedBelow)
	}
	hwm := g.part.HighWatermark()
	if st.CleanedTo >= hwm {
		t.Fatalf("prefix end %d at the high-water mark %d: no raft-log part to read", st.CleanedTo, hwm)
	}

	c.checkReads(kv, written, st.CleanedTo)

	// k0's first value is gone: the lookup by its timestamp answers the
	// first surviving record at or after it.
	first := written[0]
	var want kvRecord
	for _, r := range written {
		if slices.Contains(latestBelow(written, st.CleanedTo, true), r.String()) && r.ts >= first.ts {
			want = r
			break
		}
	}
	if off, ts := c.listByTime(kv, first.ts); off != want.offset || ts != want.ts {
		t.Fatalf("offset for timestamp %d: %d (time %d), want %v (time %d)", first.ts, off, ts, want, want.ts)
	}
	t.Logf("record %+v, high-water mark %d, %d records written", st, hwm, len(written))
}

// TestCorruptPrefixInstalledAgain shows a replica whose prefix fails a
// read: a bit flipped in the leader's prefix segment makes the read
// ErrCorrupt; the raft log no longer holds what the prefix covers (it is
// trimmed up to it), so the fetch fails retriably (REPLICA_RECOVERING),
// never skipping records, and the replica stops its passes and installs
// the record's generation again from a peer (compaction_install.go), after
// which it serves the compacted view: the prefix's batches, then the raft
// log's, offsets increasing to the high-water mark.
func TestCorruptPrefixInstalledAgain(t *testing.T) {
	c, kv := compactedCluster(t, 27)
	c.fillPartition(kv, 60)
	c.tick(40)
	st := c.checkPrefixesAgree(kv, 1)
	c.fillKeys(kv, 30, 4) // rolls segments past the COMPACT_DONE (the trim waits for one)
	c.tick(40)
	lead := c.leader(kv)
	g := c.cores[lead].byTP[kv]
	st = g.part.Compaction()
	if first, _ := g.log.FirstIndex(); first <= 1 {
		t.Fatalf("node %d's raft log starts at %d: not trimmed up to its prefix (end %d)", lead, first, st.CleanedTo)
	}
	names, err := c.disks[lead].List(g.dir + compactedDir)
	if err != nil {
		t.Fatal(err)
	}
	var seg string
	for _, n := range names {
		if strings.HasSuffix(n, ".seg") {
			seg = n
			break
		}
	}
	if seg == "" {
		t.Fatalf("no segment in %v", names)
	}
	c.disks[lead].FlipBit(g.dir+compactedDir+"/"+seg, 30, 3) // inside the first batch's header
	res := c.fetch(lead, FetchRequest{TopicPartition: kv, Offset: 0, MaxBytes: 1 << 20})
	if !errors.Is(res.Err, ErrReplicaRecovering) || len(res.Batches) != 0 || g.pass.stuck == "" {
		t.Fatalf("fetch at 0 from a damaged prefix: %d batches, err %v, stuck %q", len(res.Batches), res.Err, g.pass.stuck)
	}
	c.tick(40)
	if c.cores[lead].Stats().PrefixInstalls == 0 || g.pass.stuck != "" {
		t.Fatalf("node %d: %d installs, stuck %q", lead, c.cores[lead].Stats().PrefixInstalls, g.pass.stuck)
	}
	recs, prefixBatches := c.readNative(kv, 0, 1<<20)
	hwm := g.part.HighWatermark()
	if prefixBatches == 0 || len(recs) == 0 || !strings.HasSuffix(recs[len(recs)-1], fmt.Sprintf("@%d", hwm-1)) {
		t.Fatalf("read %d records (%d prefix batches) to %v, high-water mark %d", len(recs), prefixBatches, recs[len(recs)-1:], hwm)
	}
}
