package node

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/strandlog/strand/engine/tier"
	"github.com/strandlog/strand/objstore/memstore"
	"github.com/strandlog/strand/proto/strandpb"
)

// createTopicErr creates a one-partition topic with configs and answers
// the topic's error (nil: created).
func (c *cluster) createTopicErr(id NodeID, name string, configs map[string]string) *strandpb.Error {
	c.t.Helper()
	topic := &strandpb.CreateTopicsRequest_Topic{Name: name, Partitions: 1, ReplicationFactor: int32(len(c.ids))}
	for _, k := range []string{"remote.storage.enable", "cleanup.policy", "local.retention.ms"} {
		if v, ok := configs[k]; ok {
			topic.Configs = append(topic.Configs, &strandpb.ConfigEntry{Name: k, Value: v})
		}
	}
	resp, _ := c.handle(id, &strandpb.Request{CorrelationId: 9, Body: &strandpb.Request_CreateTopics{CreateTopics: &strandpb.CreateTopicsRequest{
		Topics: []*strandpb.CreateTopicsRequest_Topic{topic}}}})
	if resp.GetError() != nil {
		return resp.GetError()
	}
	return resp.GetCreateTopics().GetTopics()[0].GetError()
}

// TestTieringGate shows remote.storage.enable=true refused, before any
// proposal, on a node with no object store and, while tiered storage is
// unfinished, on one without Config.TieredStorageUnfinished, each saying
// why; taken with both; and on a compacted topic refused by the metadata
// rules whatever the node.
func TestTieringGate(t *testing.T) {
	for _, tc := range []struct {
		name        string
		store, gate bool
		says        string
	}{
		{"no store", false, true, "no object store configured"},
		{"gated", true, false, "not enforced yet"},
		{"open", true, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newMetaCluster(t, 27, 1, func(cfg *Config) {
				if tc.store {
					cfg.ObjectStore = memstore.New(nil)
				}
				cfg.TieredStorageUnfinished = tc.gate
			})
			e := c.createTopicErr(c.metaLeaderOf(), "t", map[string]string{"remote.storage.enable": "true"})
			if tc.says == "" {
				if e != nil {
					t.Fatalf("refused: %v", e)
				}
				if e := c.createTopicErr(c.metaLeaderOf(), "k", map[string]string{"remote.storage.enable": "true", "cleanup.policy": "compact"}); e == nil ||
					!strings.Contains(e.GetMessage(), "a compacted topic cannot be tiered") {
					t.Fatalf("compacted and tiered: %v", e)
				}
				return
			}
			if e == nil || e.GetCode() != strandpb.ErrorCode_ERROR_CODE_INVALID_CONFIG || !strings.Contains(e.GetMessage(), tc.says) {
				t.Fatalf("answered %v, want INVALID_CONFIG saying %q", e, tc.says)
			}
			if e := c.createTopicErr(c.metaLeaderOf(), "plain", map[string]string{"remote.storage.enable": "false"}); e != nil {
				t.Fatalf("remote.storage.enable=false refused: %v", e)
			}
		})
	}
}

// TestTierUploadsAndDeletes shows steps 2 and 3 on three nodes sharing one
// bucket: the leader uploads the sealed segments of a tiered topic, every
// replica holds the same manifest, each listed object decodes to exactly
// the batches the log holds there (VerifyTier); a TRIM deletes the
// dropped segments' objects; a stray object of an older term under the
// partition's prefix is swept, one of another partition left alone; a
// topic without remote storage uploads nothing.
func TestTierUploadsAndDeletes(t *testing.T) {
	store := memstore.New(nil)
	c := newMetaCluster(t, 27, 3, func(cfg *Config) {
		retentionConfig(cfg)
		cfg.ObjectStore, cfg.TieredStorageUnfinished = store, true
	})
	c.createTopicWith(c.metaLeaderOf(), "tiered", 1, 3, map[string]string{"segment.bytes": "4096", "remote.storage.enable": "true", "retention.ms": "-1"})
	c.createTopicWith(c.metaLeaderOf(), "plain", 1, 3, map[string]string{"segment.bytes": "4096"})
	tp, plain := TopicPartition{Topic: "tiered"}, TopicPartition{Topic: "plain"}
	c.fillPartition(tp, 60)
	c.fillPartition(plain, 20)
	c.tick(80)
	lead := c.leader(tp)
	m, _, _, _ := c.cores[lead].TierManifest(tp)
	if len(m.Segments()) < 2 || m.Start() != 0 {
		t.Fatalf("manifest %+v: want the sealed segments uploaded from 0", m.Segments())
	}
	hw := statusOf(c.cores[lead], tp).HighWatermark
	if m.Next() >= hw {
		t.Fatalf("remote log ends at %d, at or past the high-water mark %d: the active segment was uploaded", m.Next(), hw)
	}
	check := func() int {
		t.Helper()
		var total int
		for _, id := range c.ids {
			got, _, _, _ := c.cores[id].TierManifest(tp)
			if !equalSegments(got.Segments(), m.Segments()) {
				t.Fatalf("node %d manifest %+v, leader's %+v", id, got.Segments(), m.Segments())
			}
			n, err := c.cores[id].VerifyTier(tp, store.Bytes)
			if err != nil {
				t.Fatalf("node %d: %v", id, err)
			}
			total += n
		}
		return total
	}
	if n := check(); n == 0 {
		t.Fatal("no batch compared")
	}
	if pm, _, _, _ := c.cores[lead].TierManifest(plain); pm.Active() {
		t.Fatalf("plain topic uploaded %+v", pm.Segments())
	}
	prefix, _ := c.cores[lead].TierPrefix(tp)
	stray := tier.SegmentKey(prefix, tier.Segment{Base: 1 << 40, End: 1<<40 + 1, Term: 0})
	other := tier.SegmentKey(prefix+"0", tier.Segment{Base: 0, End: 1, Term: 0})
	for _, k := range []string{stray, other} {
		if err := store.Put(context.Background(), k, strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
	}
	cut := m.Segments()[0].End // a trim past the first segment: its object goes
	if e := c.alterTopic(c.metaLeaderOf(), "tiered", map[string]string{"retention.bytes": "4096"}); e != nil {
		t.Fatal(e)
	}
	c.tick(tierSweepTicks + 100)
	m, _, _, _ = c.cores[c.leader(tp)].TierManifest(tp)
	if m.Start() < cut {
		t.Fatalf("remote start %d, want at least %d after the trim", m.Start(), cut)
	}
	check()
	keys := store.Keys()
	for _, k := range keys {
		if seg, ok := tier.ParseSegmentKey(prefix, k); ok && seg.End <= m.Start() {
			t.Errorf("object %s of a trimmed segment left in the bucket", k)
		}
	}
	has := func(k string) bool { _, ok := store.Bytes(k); return ok }
	if has(stray) || !has(other) {
		t.Fatalf("after the sweep: stray %v (want gone), other partition's %v (want kept); keys %v", has(stray), has(other), keys)
	}
	st := c.cores[c.leader(tp)].Stats()
	t.Logf("manifest %d segments from %d; stats %d uploads, %d deletes, %d orphans", len(m.Segments()), m.Start(), st.TierUploads, st.TierDeletes, st.TierOrphans)
}

// equalSegments reports whether two segment lists are equal.
func equalSegments(a, b []tier.Segment) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTierLocalRetentionAndRemoteRead shows steps 4 and 5 on three nodes
// sharing one bucket: with local.retention.bytes set, every replica drops
// the raft segments the remote log holds, keeps the log start at 0 (the
// local start moves up), holds every record in one tier or the other
// (VerifyTierLocal), and a read from offset 0 answers, through remote
// reads, the batches it answered before local retention, byte for byte.
func TestTierLocalRetentionAndRemoteRead(t *testing.T) {
	store := memstore.New(nil)
	c := newMetaCluster(t, 27, 3, func(cfg *Config) {
		retentionConfig(cfg)
		cfg.ObjectStore, cfg.TieredStorageUnfinished = store, true
	})
	c.createTopicWith(c.metaLeaderOf(), "tiered", 1, 3, map[string]string{"segment.bytes": "4096", "remote.storage.enable": "true", "retention.ms": "-1"})
	tp := TopicPartition{Topic: "tiered"}
	c.fillPartition(tp, 60)
	c.tick(80)
	before, hw := c.fetchAll(c.leader(tp), tp)
	if e := c.alterTopic(c.metaLeaderOf(), "tiered", map[string]string{"local.retention.bytes": "4096"}); e != nil {
		t.Fatal(e)
	}
	c.tick(100)
	lead := c.leader(tp)
	for _, id := range c.ids {
		st := statusOf(c.cores[id], tp)
		g := c.cores[id].byTP[tp]
		if st.LogStartOffset != 0 || g.part.LocalStart() == 0 {
			t.Fatalf("node %d: log start %d, local start %d: want 0 and above 0", id, st.LogStartOffset, g.part.LocalStart())
		}
		if err := c.cores[id].VerifyTierLocal(tp); err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
	}
	after, hw2 := c.fetchAll(lead, tp)
	if hw2 != hw || len(after) != len(before) {
		t.Fatalf("read %d batches to %d after local retention, %d to %d before", len(after), hw2, len(before), hw)
	}
	for i := range before {
		a, b := after[i], before[i]
		if a.BaseOffset != b.BaseOffset || a.AppendTimeMs != b.AppendTimeMs || a.Producer != b.Producer || !bytes.Equal(a.Batch, b.Batch) {
			t.Fatalf("batch %d: read %d (%d bytes) after local retention, %d (%d bytes) before", i, a.BaseOffset, len(a.Batch), b.BaseOffset, len(b.Batch))
		}
	}
	if st := c.cores[lead].Stats(); st.TierReads == 0 {
		t.Fatal("no remote read")
	}
	checkTierView(t, c, tp, lead)
}

// checkTierView shows the figures of both tiers after the read above: the
// leader's view names the remote log from offset 0 (its bytes and objects
// the manifest's), counts its uploads and the remote reads and their
// bytes, and its upload lag covers what is not remote: the records from
// the remote log's end (the active segment at least) with an age.
func checkTierView(t *testing.T, c *cluster, tp TopicPartition, lead NodeID) {
	t.Helper()
	g := c.cores[lead].byTP[tp]
	v := c.cores[lead].tierView(g)
	m := g.part.Tier()
	if !v.Tiered || v.RemoteStart != 0 || v.RemoteEnd != m.Next() || v.RemoteBytes != m.Bytes() || v.RemoteSegments != len(m.Segments()) || v.RemoteSegments == 0 {
		t.Fatalf("leader's tier view %+v, manifest %d segments [%d, %d) of %d bytes", v, len(m.Segments()), m.Start(), m.Next(), m.Bytes())
	}
	if v.LocalBytes != g.log.SizeBytes() || v.Uploads == 0 || v.UploadedBytes == 0 || v.RemoteReads == 0 || v.RemoteReadBytes == 0 {
		t.Fatalf("leader's tier view %+v: want its raft log's size, uploads and remote reads counted", v)
	}
	if hw := g.part.HighWatermark(); m.Next() < hw && (v.UploadLagBytes <= 0 || v.UploadLagSeconds < 0) {
		t.Fatalf("records [%d, %d) not remote, upload lag %d bytes %v s", m.Next(), hw, v.UploadLagBytes, v.UploadLagSeconds)
	}
	for _, id := range c.ids {
		if fv := c.cores[id].tierView(c.cores[id].byTP[tp]); fv.RemoteStart != 0 || fv.RemoteSegments == 0 {
			t.Fatalf("node %d: tier view %+v: every replica shows the replicated manifest", id, fv)
		}
	}
}
