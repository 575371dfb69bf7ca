package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// A group whose Handle dead-lettered records shows the count per
// partition on /metrics (strand_group_dead_letters) and in /api/groups
// (what the console draws), read from the committed offset's metadata.
func TestAdminShowsDeadLetterCounts(t *testing.T) {
	servers := startTestCluster(t, 1)
	a := startTestAdmin(t, servers...)
	waitReady(t, a)
	c := newTestClient(t, servers[0])
	ctx, cancel := context.WithTimeout(context.Background(), adminTestWait)
	defer cancel()
	if err := c.CreateTopic(ctx, "orders", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	produceAndCommit(t, c, "orders", 1, 4, "", 0)
	g, err := clientlib.NewGroupConsumer(c, "billing", []string{"orders"})
	if err != nil {
		t.Fatal(err)
	}
	hctx, stop := context.WithCancel(ctx)
	dead := 0
	err = g.Handle(hctx, func(_ context.Context, r *clientlib.Record) error {
		if r.Offset == 1 || r.Offset == 2 {
			return errors.New("poison")
		}
		return nil
	}, clientlib.Handling{Retry: clientlib.RetryPolicy{MaxAttempts: 1}, OnDeadLetter: func(clientlib.DeadLetter, *clientlib.Record) {
		if dead++; dead == 2 {
			stop()
		}
	}})
	stop()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := 0.0
	for deadline := time.Now().Add(adminTestWait); time.Now().Before(deadline); {
		if got = sum(scrape(t, a), "strand_group_dead_letters", "group", "billing", "topic", "orders"); got == 2 {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling a convergence condition
	}
	if got != 2 {
		t.Fatalf("strand_group_dead_letters{group=billing,topic=orders} = %v, want 2", got)
	}
	var groups apiGroups
	getJSONInto(t, a.URL()+"api/groups", &groups)
	if len(groups.Groups) != 1 || groups.Groups[0].DeadLetters != 2 || groups.Groups[0].Partitions[0].DeadLetters != 2 {
		t.Fatalf("api/groups: %+v, want 2 dead letters", groups)
	}
}
