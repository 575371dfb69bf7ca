package clientlib_test

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
	"github.com/strandlog/strand/proto/strandpb"
)

// DeleteTopic names the topic id the client's metadata knows, so a delete
// from a client that saw the topic before it was deleted and re-created
// does not delete the new topic: it fails with a *TopicIDChangedError
// (ErrUnknownTopicID) naming both ids, and the new topic stays. Deleted by
// name alone (before), the new topic was deleted.
func TestDeleteTopicNamesItsID(t *testing.T) {
	cluster, client, ctx := setup(t, nil)
	if err := client.CreateTopic(ctx, "t", 1, 3, nil); err != nil {
		t.Fatal(err)
	}
	waitLeaders(t, client, "t", 1) // the client's metadata has the topic and its id
	info, err := client.Metadata(ctx)
	if err != nil || len(info.Topics) != 1 || len(info.Topics[0].ID) == 0 {
		t.Fatalf("metadata: %+v %v", info, err)
	}
	old := info.Topics[0].ID
	if err := cluster.RecreateTopic("t"); err != nil {
		t.Fatal(err)
	}

	err = client.DeleteTopic(ctx, "t")
	var changed *clientlib.TopicIDChangedError
	if !errors.As(err, &changed) || !errors.Is(err, clientlib.ErrUnknownTopicID) || clientlib.IsRetriable(err) {
		t.Fatalf("delete with the old id cached: %v, want a *TopicIDChangedError (ErrUnknownTopicID, not retriable)", err)
	}
	if !bytes.Equal(changed.ID, old) || len(changed.NewID) == 0 || bytes.Equal(changed.NewID, old) {
		t.Fatalf("error names ids %x → %x, want the old %x and a new one", changed.ID, changed.NewID, old)
	}
	info, err = client.Metadata(ctx)
	if err != nil || len(info.Topics) != 1 || info.Topics[0].Err != nil || !bytes.Equal(info.Topics[0].ID, changed.NewID) {
		t.Fatalf("after the refused delete: %+v %v, want topic t with id %x", info, err, changed.NewID)
	}
	// The client now knows the new id: a delete removes the new topic.
	if err := client.DeleteTopic(ctx, "t"); err != nil {
		t.Fatalf("delete with the new id: %v", err)
	}
}

// DeleteTopic's own retry names the same id: the first attempt is applied
// but its answer lost (the connection drops), the topic is created again
// before the retry, and the retry is refused (*TopicIDChangedError)
// instead of deleting the new topic. Deleted by name alone (before), the
// retry deleted it.
func TestDeleteTopicRetryKeepsRecreated(t *testing.T) {
	cluster, client, ctx := setup(t, nil)
	if err := client.CreateTopic(ctx, "t", 1, 3, nil); err != nil {
		t.Fatal(err)
	}
	waitLeaders(t, client, "t", 1)
	var deletes atomic.Int32
	recreated := make(chan error, 1)
	cluster.Control(func(_ uint64, req *strandpb.Request) (fake.Action, bool) {
		if req.GetDeleteTopics() == nil {
			return fake.Action{}, false
		}
		switch deletes.Add(1) {
		case 1:
			return fake.Action{DropAfter: true}, true
		case 2: // the retry: the topic was created again meanwhile
			recreated <- cluster.CreateTopic("t", 1)
		}
		return fake.Action{}, false
	})

	err := client.DeleteTopic(ctx, "t")
	if deletes.Load() < 2 {
		t.Fatalf("DeleteTopic sent %d deletes (%v), want a retry after the dropped answer", deletes.Load(), err)
	}
	if err := <-recreated; err != nil {
		t.Fatal(err)
	}
	var changed *clientlib.TopicIDChangedError
	if !errors.As(err, &changed) {
		t.Fatalf("retried delete after the re-create: %v, want a *TopicIDChangedError", err)
	}
	info, err := client.Metadata(ctx)
	if err != nil || len(info.Topics) != 1 || info.Topics[0].Err != nil || bytes.Equal(info.Topics[0].ID, changed.ID) {
		t.Fatalf("after the retried delete: %+v %v, want the re-created topic t (not id %x)", info, err, changed.ID)
	}
}
