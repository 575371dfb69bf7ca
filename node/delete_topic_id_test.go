package node

import (
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

// A DeleteTopics that names the id of a topic since deleted and created
// again under the same name is refused with UNKNOWN_TOPIC_ID when it
// applies, and the new topic stays (simnet seed 516: a delete held by a
// paused node was carried out by name after the admin's retry had deleted
// the topic and created it again, and removed the new one). Without the
// id check the stale delete removes the new topic.
func TestDeleteTopicsByStaleIDKeepsNewTopic(t *testing.T) {
	c := newMetaCluster(t, 23, 3, nil)
	c.createTopic(1, "t", 1, 3)
	uuidOf := func() ([]byte, bool) {
		u, ok := c.cores[c.metaLeaderOf()].meta.meta.TopicUUID("t")
		return u[:], ok
	}
	del := func(corr uint64, id []byte) *strandpb.Error {
		t.Helper()
		resp, _ := c.handle(2, &strandpb.Request{CorrelationId: corr, Body: &strandpb.Request_DeleteTopics{DeleteTopics: &strandpb.DeleteTopicsRequest{
			Names: []string{"t"}, TopicIds: [][]byte{id}}}})
		if resp.GetError() != nil || len(resp.GetDeleteTopics().GetTopics()) != 1 {
			t.Fatalf("delete: %v", resp)
		}
		return resp.GetDeleteTopics().GetTopics()[0].GetError()
	}
	old, ok := uuidOf()
	if !ok {
		t.Fatal("topic t has no id")
	}
	if e := del(10, old); e != nil {
		t.Fatalf("delete by the current id: %v", e)
	}
	c.tick(2)
	c.createTopic(3, "t", 1, 3)
	fresh, ok := uuidOf()
	if !ok || string(fresh) == string(old) {
		t.Fatalf("re-created topic's id %x (ok %v), the old one %x", fresh, ok, old)
	}
	if e := del(11, old); e.GetCode() != strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID {
		t.Fatalf("stale delete answered %v, want UNKNOWN_TOPIC_ID", e)
	}
	c.tick(2)
	for _, id := range c.ids {
		if u, ok := c.cores[id].meta.meta.TopicUUID("t"); !ok || string(u[:]) != string(fresh) {
			t.Fatalf("node %d: topic t after the stale delete: id %x, exists %v; want %x", id, u, ok, fresh)
		}
	}
	if e := del(12, []byte{1, 2, 3}); e.GetCode() != strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST {
		t.Fatalf("delete naming a 3-byte id answered %v, want INVALID_REQUEST", e)
	}
	if e := del(13, fresh); e != nil {
		t.Fatalf("delete by the new id: %v", e)
	}
}
