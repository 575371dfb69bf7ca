package node

import (
	"fmt"
	"slices"
	"testing"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/proto/strandpb"
)

// deleteRecordsBefore is DeleteRecords of tp before offset on its leader;
// it fails the test unless the log start reaches offset.
func (c *cluster) deleteRecordsBefore(tp TopicPartition, offset int64) {
	c.t.Helper()
	resp, _ := c.handle(c.leader(tp), &strandpb.Request{CorrelationId: 11, Body: &strandpb.Request_DeleteRecords{DeleteRecords: &strandpb.DeleteRecordsRequest{
		Partitions: []*strandpb.DeleteRecordsRequest_Partition{{Topic: tp.Topic, Partition: tp.Partition, BeforeOffset: offset}}}}})
	got := resp.GetDeleteRecords().GetPartitions()[0]
	if got.GetError() != nil || got.GetLogStartOffset() < offset {
		c.t.Fatalf("delete records of %v before %d: %v", tp, offset, got)
	}
}

// firstPrefixBatchEnd is the last offset of the first batch of node id's
// compacted prefix of tp (-1: an empty prefix).
func (c *cluster) firstPrefixBatchEnd(id NodeID, tp TopicPartition) int64 {
	c.t.Helper()
	for b, err := range c.cores[id].byTP[tp].pass.store.Batches() {
		if err != nil {
			c.t.Fatalf("node %d: prefix: %v", id, err)
		}
		dec, err := compact.DecodeHeader(b)
		if err != nil {
			c.t.Fatalf("node %d: prefix batch: %v", id, err)
		}
		return dec.LastOffset()
	}
	return -1
}

// since is written without the records below offset.
func since(written []kvRecord, offset int64) []kvRecord {
	return slices.DeleteFunc(slices.Clone(written), func(r kvRecord) bool { return r.offset < offset })
}

// TestCompactDeleteTrimCutsPrefix shows cleanup.policy=compact,delete with
// DeleteRecords (a TRIM) inside the compacted prefix, in the middle of a
// batch, and then past the prefix's end: the passes go on (no replica
// stuck), each next generation is cut at the new log start on every
// replica (same end and digest as the record, no batch wholly below the
// log start), a read from the log start returns per key its latest record
// at or past it, and a replica restarted after the trims ends with the
// same prefix. Before the fix the alter to compact,delete was refused and
// a log start past a replica's prefix stopped its passes.
func TestCompactDeleteTrimCutsPrefix(t *testing.T) {
	c := newMetaCluster(t, 31, 3, func(cfg *Config) {
		retentionConfig(cfg)
		cfg.CheckpointEntries = 16
	})
	c.createTopicWith(c.metaLeaderOf(), "kv", 1, 3, map[string]string{"cleanup.policy": "compact,delete", "segment.bytes": "4096",
		"retention.ms": "-1", "retention.bytes": "-1", "delete.retention.ms": "0", "min.cleanable.dirty.ratio": "0.1"})
	kv := TopicPartition{Topic: "kv"}
	var written []kvRecord
	ts := int64(2_000_000)
	round := 0
	write := func() {
		for k := range 5 {
			written = append(written, c.kvWrite(kv, ts, fmt.Sprintf("k%d", k), fmt.Sprintf("k%d.r%d", k, round),
				fmt.Sprintf("j%d", round%7), fmt.Sprintf("j.r%d", round))...)
			ts += 10
		}
		round++
	}
	record := func() (uint64, int64, int64) {
		st := c.cores[c.ids[0]].byTP[kv].part.Compaction()
		return st.DoneGeneration, st.CleanedTo, st.Decision.LogStart
	}
	// passPast writes until a reported pass decided at log start at least
	// logStart cleaned past offset past.
	passPast := func(logStart, past int64) {
		for i := 0; ; i++ {
			if gen, cleaned, start := record(); gen > 0 && start >= logStart && cleaned > past {
				c.tick(20) // the followers' passes
				return
			}
			if i == 60 {
				gen, cleaned, start := record()
				t.Fatalf("no pass from log start %d past %d: generation %d cleaned to %d from %d", logStart, past, gen, cleaned, start)
			}
			write()
			c.tick(10)
		}
	}
	check := func(logStart int64) {
		t.Helper()
		st := c.checkPrefixesAgree(kv, 1)
		for _, id := range c.ids {
			if end := c.firstPrefixBatchEnd(id, kv); end >= 0 && end < st.Decision.LogStart {
				t.Fatalf("node %d: a prefix batch ending at %d, wholly below the log start %d", id, end, st.Decision.LogStart)
			}
		}
		want := latestBelow(since(written, logStart), st.CleanedTo, false)
		got, _ := c.readNativeFrom(kv, 0, 1<<20, logStart)
		// Records the last pass has not reached yet are all read; the
		// prefix's are the latest per key: compare the whole read.
		written := since(written, logStart)
		if last := written[len(written)-1].offset; !slices.Equal(got, want) {
			t.Fatalf("read from log start %d (prefix end %d, last write %d):\n got %v\nwant %v", logStart, st.CleanedTo, last, got, want)
		}
	}

	passPast(0, 60)
	_, cleaned, _ := record()
	inside := cleaned/2 + 1 // inside the prefix; batches are two records, so mid-batch when odd
	if inside%2 == 0 {
		inside++
	}
	c.deleteRecordsBefore(kv, inside)
	passPast(inside, cleaned)
	check(inside)

	_, cleaned, _ = record()
	hw := c.cores[c.leader(kv)].byTP[kv].part.HighWatermark()
	for range 4 {
		write() // a dirty section past the prefix, then a trim past it all
	}
	past := hw + 3
	c.deleteRecordsBefore(kv, past)
	if past <= cleaned {
		t.Fatalf("trim at %d not past the prefix's end %d", past, cleaned)
	}
	passPast(past, past)
	check(past)

	id := c.ids[1]
	c.crash(id)
	c.start(id)
	write()
	c.tick(60)
	_, cleaned, _ = record()
	passPast(past, cleaned)
	check(past)
}

// TestCompactAlteredToDeleteAndBack shows a compacted topic altered to
// delete, trimmed past its prefix, then altered to compact,delete: on
// delete a drop pass removes what the trim left below the log start and
// compacts nothing past it (every record from the log start is read; no
// batch below the log start is left uncovered, so the raft log may go),
// and back on
// compact,delete the passes go on, every replica with the record's prefix.
func TestCompactAlteredToDeleteAndBack(t *testing.T) {
	c := newMetaCluster(t, 32, 3, func(cfg *Config) {
		retentionConfig(cfg)
		cfg.CheckpointEntries = 16
	})
	lead := c.metaLeaderOf()
	c.createTopicWith(lead, "kv", 1, 3, map[string]string{"cleanup.policy": "compact", "segment.bytes": "4096",
		"retention.ms": "-1", "retention.bytes": "-1", "delete.retention.ms": "0", "min.cleanable.dirty.ratio": "0.1"})
	kv := TopicPartition{Topic: "kv"}
	var written []kvRecord
	ts := int64(2_000_000)
	write := func(n int) {
		for i := range n {
			written = append(written, c.kvWrite(kv, ts, fmt.Sprintf("k%d", i%5), fmt.Sprintf("v%d", len(written)))...)
			ts += 10
		}
	}
	record := func() (uint64, int64, int64) {
		st := c.cores[c.ids[0]].byTP[kv].part.Compaction()
		return st.DoneGeneration, st.CleanedTo, st.Decision.LogStart
	}
	for i := 0; ; i++ {
		if gen, cleaned, _ := record(); gen > 0 && cleaned > 40 {
			break
		}
		if i == 60 {
			t.Fatalf("no pass: %+v", c.cores[c.ids[0]].byTP[kv].part.Compaction())
		}
		write(10)
		c.tick(10)
	}
	if e := c.alterTopic(lead, "kv", map[string]string{"cleanup.policy": "delete"}); e != nil {
		t.Fatalf("alter to delete: %v", e)
	}
	c.tick(20)
	write(40)
	past := c.cores[c.leader(kv)].byTP[kv].part.HighWatermark() - 20
	c.deleteRecordsBefore(kv, past)
	for i := 0; ; i++ {
		if _, cleaned, start := record(); start >= past && cleaned >= past {
			break
		}
		if i == 60 {
			t.Fatalf("no drop pass past %d: %+v", past, c.cores[c.ids[0]].byTP[kv].part.Compaction())
		}
		c.tick(10)
	}
	c.tick(20)
	st := c.checkPrefixesAgree(kv, 1)
	var want []string
	for _, r := range since(written, past) {
		want = append(want, r.String())
	}
	if got, _ := c.readNativeFrom(kv, 0, 1<<20, past); !slices.Equal(got, want) {
		t.Fatalf("delete topic read from %d (record %+v):\n got %v\nwant %v", past, st, got, want)
	}
	for _, id := range c.ids {
		g := c.cores[id].byTP[kv]
		if first := g.part.AppendPassLocations(nil, st.CleanedTo, 1); len(first) > 0 && first[0].BaseOffset+int64(first[0].RecordCount) <= past {
			t.Fatalf("node %d: batch at %d no pass covers still indexed below the log start %d", id, first[0].BaseOffset, past)
		}
	}

	if e := c.alterTopic(lead, "kv", map[string]string{"cleanup.policy": "compact,delete"}); e != nil {
		t.Fatalf("alter to compact,delete: %v", e)
	}
	gen0, _, _ := record()
	for i := 0; ; i++ {
		if gen, cleaned, _ := record(); gen > gen0 && cleaned > past+20 {
			break
		}
		if i == 60 {
			t.Fatalf("no pass after the alter back: %+v", c.cores[c.ids[0]].byTP[kv].part.Compaction())
		}
		write(10)
		c.tick(10)
	}
	c.tick(20)
	st = c.checkPrefixesAgree(kv, gen0+1)
	want = latestBelow(since(written, past), st.CleanedTo, false)
	if got, _ := c.readNativeFrom(kv, 0, 1<<20, past); !slices.Equal(got, want) {
		t.Fatalf("compact,delete read from %d (record %+v):\n got %v\nwant %v", past, st, got, want)
	}
}

// TestCompactDeleteRetentionWeighsPrefix shows retention.ms on a
// compact,delete topic weighs the compacted prefix as Kafka weighs cleaned
// segments: with old records (older than retention.ms) and then young ones
// compacted into the prefix, the leader trims to the first prefix batch
// holding a young record, not past the young ones; the next pass cuts
// every replica's prefix there and a read from the log start gives each
// young key's latest record. Before, retention weighed only the raft log
// and never trimmed the old records the prefix held (log start 0).
func TestCompactDeleteRetentionWeighsPrefix(t *testing.T) {
	c := newMetaCluster(t, 33, 3, func(cfg *Config) {
		retentionConfig(cfg)
		cfg.CheckpointEntries = 16
	})
	lead := c.metaLeaderOf()
	c.createTopicWith(lead, "kv", 1, 3, map[string]string{"cleanup.policy": "compact,delete", "segment.bytes": "4096",
		"retention.ms": "-1", "retention.bytes": "-1", "delete.retention.ms": "0", "min.cleanable.dirty.ratio": "0.1"})
	kv := TopicPartition{Topic: "kv"}
	now := testClock{}.Realtime().UnixMilli()
	var written []kvRecord
	write := func(prefix string, ts int64, n int) {
		for i := range n {
			written = append(written, c.kvWrite(kv, ts, fmt.Sprintf("%s%d", prefix, i%20), fmt.Sprintf("v%d", len(written)))...)
		}
	}
	cleanedPast := func(offset int64) {
		for i := 0; ; i++ {
			if st := c.cores[c.ids[0]].byTP[kv].part.Compaction(); st.DoneGeneration > 0 && st.CleanedTo > offset {
				c.tick(20)
				return
			}
			if i == 60 {
				t.Fatalf("no pass past %d: %+v", offset, c.cores[c.ids[0]].byTP[kv].part.Compaction())
			}
			write("pad", now, 5)
			c.tick(10)
		}
	}
	write("old", now-10_000_000, 60)
	young := c.cores[c.leader(kv)].byTP[kv].part.HighWatermark()
	write("young", now-1000, 60)
	cleanedPast(young + 60)
	if e := c.alterTopic(lead, "kv", map[string]string{"retention.ms": "1000000"}); e != nil {
		t.Fatalf("alter retention.ms: %v", e)
	}
	c.tick(40)
	logStart := c.cores[c.leader(kv)].byTP[kv].part.LogStartOffset()
	if firstLive := young + 40; logStart == 0 || logStart > firstLive {
		t.Fatalf("log start %d: want past the old records, at most the first young survivor %d", logStart, firstLive)
	}
	cleanedPast(c.cores[c.leader(kv)].byTP[kv].part.HighWatermark())
	st := c.checkPrefixesAgree(kv, 1)
	if st.Decision.LogStart != logStart {
		t.Fatalf("record %+v: the last pass was not decided at log start %d", st, logStart)
	}
	want := latestBelow(since(written, logStart), st.CleanedTo, false)
	if got, _ := c.readNativeFrom(kv, 0, 1<<20, logStart); !slices.Equal(got, want) {
		t.Fatalf("read from log start %d:\n got %v\nwant %v", logStart, got, want)
	}
}
