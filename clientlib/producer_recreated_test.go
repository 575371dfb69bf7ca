package clientlib

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// recreatingNode plays one node leading t/0 through the topic's
// incarnations: ids[inc] is the topic's id now (nil: deleted), logs[inc]
// the values written to each incarnation. A produce naming another id
// than the one the node knows (known, which may lag behind inc) is
// answered UNKNOWN_TOPIC_ID before anything is written, as node's
// checkTopicID does.
type recreatingNode struct {
	t     *testing.T
	ids   [][]byte
	inc   int // the topic's incarnation in the cluster's metadata
	known int // the incarnation the node's produce check knows
	logs  [][]string
	seqs  []map[int32]int64 // per incarnation: base sequence -> base offset
	// lose, when set, is asked before answering a produce that was
	// written: true loses the answer (the call times out after a second).
	lose    func() bool
	sent    []*strandpb.ProduceRequest_Partition
	version uint64
	// stale, when set, makes metadata answers those of a lagging node:
	// the first incarnation at version 1.
	stale bool
}

func newRecreatingNode(t *testing.T, incarnations int) *recreatingNode {
	n := &recreatingNode{t: t, version: 1}
	for i := 0; i < incarnations; i++ {
		n.ids = append(n.ids, bytes.Repeat([]byte{byte(i + 1)}, 16))
		n.logs = append(n.logs, nil)
		n.seqs = append(n.seqs, map[int32]int64{})
	}
	return n
}

// recreate deletes the topic (and creates it again when again is set):
// metadata and the node's check move on at once.
func (n *recreatingNode) recreate(again bool) {
	n.version++
	n.known = n.inc + 1
	if again {
		n.inc++
		n.known = n.inc
		return
	}
	n.ids = append(n.ids[:n.inc+1], nil) // deleted: no id at all
	n.inc++
	n.known = n.inc
}

func (n *recreatingNode) answer(_ string, req *strandpb.Request) *strandpb.Response {
	switch {
	case req.GetMetadata() != nil:
		m := &strandpb.MetadataResponse{Nodes: []*strandpb.MetadataResponse_Node{{Id: 1, Address: "n1"}},
			MetadataVersion: n.version}
		id := n.ids[n.inc]
		if n.stale {
			m.MetadataVersion, id = 1, n.ids[0]
		}
		switch {
		case id != nil:
			m.Topics = []*strandpb.MetadataResponse_Topic{{Name: "t", TopicId: id,
				Partitions: []*strandpb.MetadataResponse_Partition{{Partition: 0, LeaderId: 1, LeaderTerm: 1}}}}
		case len(req.GetMetadata().GetTopics()) > 0:
			m.Topics = []*strandpb.MetadataResponse_Topic{{Name: "t",
				Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION}}}
		}
		return &strandpb.Response{Body: &strandpb.Response_Metadata{Metadata: m}}
	case req.GetInitProducerId() != nil:
		return &strandpb.Response{Body: &strandpb.Response_InitProducerId{InitProducerId: &strandpb.InitProducerIdResponse{ProducerId: 7}}}
	}
	out := &strandpb.ProduceResponse{}
	written := false
	for _, p := range req.GetProduce().GetPartitions() {
		n.sent = append(n.sent, p)
		a := &strandpb.ProduceResponse_Partition{Topic: p.GetTopic(), Partition: p.GetPartition()}
		out.Partitions = append(out.Partitions, a)
		inc := n.known
		if id := p.GetTopicId(); len(id) > 0 && !bytes.Equal(id, n.ids[inc]) || n.ids[inc] == nil {
			a.Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID}
			continue
		}
		base, dup := n.seqs[inc][p.GetBaseSequence()]
		if !dup {
			base = int64(len(n.logs[inc]))
			n.seqs[inc][p.GetBaseSequence()] = base
			err := recordbatch.Decode(p.GetBatch(), func(_ int, r recordbatch.Record) error {
				n.logs[inc] = append(n.logs[inc], string(r.Value))
				return nil
			})
			if err != nil {
				n.t.Fatalf("batch: %v", err)
			}
			written = true
		}
		a.BaseOffset, a.Duplicate = base, dup
	}
	if written && n.lose != nil && n.lose() {
		return nil
	}
	return &strandpb.Response{Body: &strandpb.Response_Produce{Produce: out}}
}

// produceOne produces value to t/0 and runs the world until its promise
// ran; it returns the promise's record and error.
func produceOne(t *testing.T, w *scriptedWorld, c *Client, value string) (*Record, error) {
	t.Helper()
	var got *Record
	var gotErr error
	done := false
	c.Produce(context.Background(), &Record{Topic: "t", Value: []byte(value)}, func(r *Record, err error) {
		got, gotErr, done = r, err, true
	})
	w.run(t, 10000)
	if !done {
		t.Fatalf("record %s: promise never ran", value)
	}
	return got, gotErr
}

// TestProducerFailsBatchOfRecreatedTopic: a batch written to a topic whose
// answer was lost, then the topic deleted and re-created before the
// resend: the resend names the old topic id, the node refuses it, and the
// record fails with a *TopicGoneError that says the topic was re-created
// and that the record may be in the deleted one, and nothing is written to
// the new topic. The next record goes to the new topic from sequence 0,
// and its promise names the new id. Before the producer named topic ids
// the resend was written into the new topic (a record in both) and its
// promise succeeded.
func TestProducerFailsBatchOfRecreatedTopic(t *testing.T) {
	n := newRecreatingNode(t, 2)
	w := &scriptedWorld{answer: n.answer}
	c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(1), Linger(0))
	if err != nil {
		t.Fatal(err)
	}
	r, err := produceOne(t, w, c, "a")
	if err != nil || r.Offset != 0 || !bytes.Equal(r.TopicID, n.ids[0]) {
		t.Fatalf("first record: offset %d topic id %x, %v; want offset 0 under %x", r.Offset, r.TopicID, err, n.ids[0])
	}
	lost := false
	n.lose = func() bool {
		if lost {
			return false
		}
		lost = true
		w.After(100*time.Millisecond, func() { n.recreate(true) })
		return true
	}
	r, err = produceOne(t, w, c, "b")
	var gone *TopicGoneError
	if !errors.As(err, &gone) {
		t.Fatalf("record written before the re-create, answer lost: %v (offset %d); want a *TopicGoneError", err, r.Offset)
	}
	if !gone.MaybeWritten || !MaybeWritten(err) || !bytes.Equal(gone.OldID, n.ids[0]) || !bytes.Equal(gone.NewID, n.ids[1]) ||
		!errors.Is(err, ErrUnknownTopicID) || IsRetriable(err) {
		t.Fatalf("error %+v: want maybe written, id %x → %x, matching ErrUnknownTopicID, not retriable", gone, n.ids[0], n.ids[1])
	}
	if len(n.logs[1]) != 0 {
		t.Fatalf("the new topic holds %v; a batch of the old one must never be written there", n.logs[1])
	}
	r, err = produceOne(t, w, c, "c")
	if err != nil || r.Offset != 0 || !bytes.Equal(r.TopicID, n.ids[1]) {
		t.Fatalf("record after the re-create: offset %d topic id %x, %v; want offset 0 under %x", r.Offset, r.TopicID, err, n.ids[1])
	}
	last := n.sent[len(n.sent)-1]
	if last.GetBaseSequence() != 0 || !bytes.Equal(last.GetTopicId(), n.ids[1]) {
		t.Fatalf("first batch of the new topic sent with sequence %d under %x; want 0 under %x",
			last.GetBaseSequence(), last.GetTopicId(), n.ids[1])
	}
	for _, p := range n.sent {
		if len(p.GetTopicId()) == 0 {
			t.Fatalf("a produce named no topic id: %v", p)
		}
	}
}

// TestProducerFailsBatchOfDeletedTopic: as above with the topic deleted
// and not created again: the metadata asked by name says no such topic,
// and the record fails with a *TopicGoneError without a new id (before,
// it was retried until its attempts ran out).
func TestProducerFailsBatchOfDeletedTopic(t *testing.T) {
	n := newRecreatingNode(t, 1)
	w := &scriptedWorld{answer: n.answer}
	c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(1), Linger(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := produceOne(t, w, c, "a"); err != nil {
		t.Fatal(err)
	}
	lost := false
	n.lose = func() bool {
		if lost {
			return false
		}
		lost = true
		w.After(100*time.Millisecond, func() { n.recreate(false) })
		return true
	}
	_, err = produceOne(t, w, c, "b")
	var gone *TopicGoneError
	if !errors.As(err, &gone) || !gone.MaybeWritten || gone.NewID != nil || !bytes.Equal(gone.OldID, n.ids[0]) {
		t.Fatalf("record of a deleted topic failed with %v; want a *TopicGoneError, maybe written, no new id", err)
	}
}

// TestProducerRetriesLaggingNodeTopicID: a node whose metadata lags
// refuses the id the client's (fresh) metadata names; the metadata asked
// again still names it, so the batch is retried, not failed, and is
// written once the node catches up.
func TestProducerRetriesLaggingNodeTopicID(t *testing.T) {
	n := newRecreatingNode(t, 2)
	n.inc, n.version = 1, 2 // the client sees the new topic ...
	n.known = 0             // ... the node's produce check does not yet
	w := &scriptedWorld{answer: n.answer}
	w.After(50*time.Millisecond, func() { n.known = 1 })
	c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(1), Linger(0), MaxRetries(20))
	if err != nil {
		t.Fatal(err)
	}
	r, err := produceOne(t, w, c, "a")
	if err != nil || !bytes.Equal(r.TopicID, n.ids[1]) || len(n.logs[1]) != 1 {
		t.Fatalf("record: topic id %x, %v, new topic holds %v; want written once under %x", r.TopicID, err, n.logs[1], n.ids[1])
	}
	if len(n.sent) < 2 {
		t.Fatalf("%d produce attempts; want the refused one and the retry", len(n.sent))
	}
}

// TestProducerKeepsNewerTopicIDOverStaleMetadata: a client that started
// after the topic was re-created (it never used the old id) gets a lagging
// node's metadata naming the old id at an older metadata version; its next
// batch still names the new id and is written to the new topic. Without
// the version comparison the window moved to the old id, the node refused
// it, and the record failed.
func TestProducerKeepsNewerTopicIDOverStaleMetadata(t *testing.T) {
	n := newRecreatingNode(t, 2)
	n.inc, n.known, n.version = 1, 1, 2
	w := &scriptedWorld{answer: n.answer}
	c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(1), Linger(0), MetadataMaxAge(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := produceOne(t, w, c, "a"); err != nil || !bytes.Equal(r.TopicID, n.ids[1]) {
		t.Fatalf("first record: topic id %x, %v; want written under %x", r.TopicID, err, n.ids[1])
	}
	n.stale = true
	w.now += time.Second // the metadata is old: the next record refreshes it
	if _, err := produceOne(t, w, c, "b"); err != nil {
		t.Fatal(err)
	}
	r, err := produceOne(t, w, c, "c")
	if err != nil || !bytes.Equal(r.TopicID, n.ids[1]) || len(n.logs[1]) != 3 {
		t.Fatalf("record after a stale metadata answer: topic id %x, %v, new topic holds %v; want written under %x",
			r.TopicID, err, n.logs[1], n.ids[1])
	}
	for _, p := range n.sent {
		if !bytes.Equal(p.GetTopicId(), n.ids[1]) {
			t.Fatalf("a produce named id %x; want only the new id %x", p.GetTopicId(), n.ids[1])
		}
	}
}
