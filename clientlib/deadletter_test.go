package clientlib_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
)

// A dead letter carries the source record and its coordinates in headers
// that ParseDeadLetter reads back; Redrive restores the source record
// (its own headers, without the dead-letter ones).
func TestDeadLetterHeadersRoundTrip(t *testing.T) {
	src := &clientlib.Record{Topic: "orders", Partition: 3, Offset: 41, Key: []byte("k1"), Value: []byte("v"),
		Timestamp: time.UnixMilli(1700000000123), Headers: []clientlib.Header{{Key: "trace", Value: []byte("t1")}}}
	d := clientlib.DeadLetter{Source: src, Group: "billing", Attempts: 3, Err: "parse: bad line"}
	out := d.Record("orders.dlq")
	if out.Topic != "orders.dlq" || out.Partition != 3 || string(out.Key) != "k1" || string(out.Value) != "v" {
		t.Fatalf("dead letter %+v", out)
	}
	want := map[string]string{clientlib.HeaderDLQTopic: "orders", clientlib.HeaderDLQPartition: "3",
		clientlib.HeaderDLQOffset: "41", clientlib.HeaderDLQTimestamp: "1700000000123", clientlib.HeaderDLQKey: "k1",
		clientlib.HeaderDLQGroup: "billing", clientlib.HeaderDLQAttempts: "3", clientlib.HeaderDLQError: "parse: bad line",
		"trace": "t1"}
	got := map[string]string{}
	for _, h := range out.Headers {
		got[h.Key] = string(h.Value)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("headers\n got %v\nwant %v", got, want)
	}
	info, err := clientlib.ParseDeadLetter(out)
	if err != nil {
		t.Fatal(err)
	}
	if info.Source != (clientlib.TopicPartition{Topic: "orders", Partition: 3}) || info.Offset != 41 || info.Attempts != 3 ||
		info.Group != "billing" || info.Err != "parse: bad line" || !info.Timestamp.Equal(src.Timestamp) {
		t.Fatalf("parsed %+v", info)
	}
	back := info.Redrive(out, "")
	if back.Topic != "orders" || back.Partition != 3 || len(back.Headers) != 1 || back.Headers[0].Key != "trace" ||
		string(back.Value) != "v" || !back.Timestamp.Equal(src.Timestamp) {
		t.Fatalf("redriven %+v", back)
	}
	// A redriven record failing again gets fresh dead-letter headers, not two sets.
	again := clientlib.DeadLetter{Source: &clientlib.Record{Topic: "orders", Headers: out.Headers}, Attempts: 1, Err: "x"}.Record("orders.dlq")
	n := 0
	for _, h := range again.Headers {
		if h.Key == clientlib.HeaderDLQAttempts {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d attempts headers, want 1", n)
	}
	if _, err := clientlib.ParseDeadLetter(&clientlib.Record{Value: []byte("plain")}); !errors.Is(err, clientlib.ErrNotDeadLetter) {
		t.Fatalf("plain record: %v, want ErrNotDeadLetter", err)
	}
}

// Handle retries a failing record, dead-letters it to <topic>.dlq
// (created on first use) with its coordinates, keeps the partition going
// in order, and commits past everything handled or dead-lettered.
func TestHandleDeadLettersFailingRecords(t *testing.T) {
	_, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 2)}, clientlib.ManualPartitioner(), groupRetries)
	produceSpread(t, ctx, client, "t", 2, 0, 5) // values p-i
	bad := map[string]bool{"0-3": true, "1-1": true}
	g, err := clientlib.NewGroupConsumer(client, "g", []string{"t"},
		clientlib.GroupConsumerOpts(clientlib.FetchMaxWait(20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	hctx, stop := context.WithCancel(ctx)
	var order []string
	attempts := map[string]int{}
	handled, dead := 0, 0
	pol := clientlib.RetryPolicy{MaxAttempts: 3, Backoff: clientlib.Backoff{Base: time.Millisecond, Max: 2 * time.Millisecond}}
	err = g.Handle(hctx, func(_ context.Context, r *clientlib.Record) error {
		attempts[string(r.Value)]++
		if bad[string(r.Value)] {
			return fmt.Errorf("cannot parse %q", r.Value)
		}
		order = append(order, string(r.Value))
		if handled++; handled+dead == 10 {
			stop()
		}
		return nil
	}, clientlib.Handling{Retry: pol, OnDeadLetter: func(clientlib.DeadLetter, *clientlib.Record) {
		if dead++; handled+dead == 10 {
			stop()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if attempts["0-3"] != 3 || attempts["1-1"] != 3 || attempts["0-2"] != 1 {
		t.Fatalf("attempts %v: want 3 for each bad record, 1 for good ones", attempts)
	}
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var letters []*clientlib.Record
	for p := int32(0); p < 2; p++ {
		letters = append(letters, consumeAll(t, ctx, client, "t.dlq", p, countIn(bad, p))...)
	}
	for _, l := range letters {
		info, err := clientlib.ParseDeadLetter(l)
		if err != nil {
			t.Fatal(err)
		}
		if !bad[string(l.Value)] || info.Source.Topic != "t" || info.Group != "g" || info.Attempts != 3 ||
			!strings.Contains(info.Err, "cannot parse") {
			t.Fatalf("dead letter %q: %+v", l.Value, info)
		}
	}
	offs, err := client.FetchOffsets(ctx, "g", clientlib.TopicPartition{Topic: "t", Partition: 0}, clientlib.TopicPartition{Topic: "t", Partition: 1})
	if err != nil || len(offs) != 2 || offs[0].Offset != 5 || offs[1].Offset != 5 {
		t.Fatalf("committed %v, %v; want 5 in both partitions", offs, err)
	}
	// Each partition's commit carries its dead-letter count, which GroupLag reads.
	lag, err := client.GroupLag(ctx, "g", time.Now())
	if err != nil || len(lag) != 2 || lag[0].DeadLetters != 1 || lag[1].DeadLetters != 1 {
		t.Fatalf("GroupLag %+v, %v; want 1 dead letter in each partition", lag, err)
	}
	if offs[0].Metadata != clientlib.DeadLetterMetadata(1) {
		t.Fatalf("metadata %q, want %q", offs[0].Metadata, clientlib.DeadLetterMetadata(1))
	}
}

// A partition's dead-letter count survives a change of member: the next
// Handle adds to the count committed before it.
func TestHandleDeadLetterCountAccumulates(t *testing.T) {
	_, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.ManualPartitioner(), groupRetries)
	pol := clientlib.RetryPolicy{MaxAttempts: 1}
	for round := 1; round <= 2; round++ {
		produceValues(t, ctx, client, "t", 2*round, 2) // one good, one bad per round
		g, err := clientlib.NewGroupConsumer(client, "g", []string{"t"}, clientlib.GroupConsumerOpts(clientlib.FetchMaxWait(20*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		hctx, stop := context.WithCancel(ctx)
		err = g.Handle(hctx, func(_ context.Context, r *clientlib.Record) error {
			if r.Offset%2 == 1 {
				return errors.New("bad")
			}
			return nil
		}, clientlib.Handling{Retry: pol, OnDeadLetter: func(clientlib.DeadLetter, *clientlib.Record) { stop() }})
		stop()
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Close(ctx); err != nil {
			t.Fatal(err)
		}
		lag, err := client.GroupLag(ctx, "g", time.Now())
		if err != nil || len(lag) != 1 || lag[0].DeadLetters != int64(round) || lag[0].Committed != int64(2*round) {
			t.Fatalf("round %d: %+v, %v; want %d dead letters, committed %d", round, lag, err, round, 2*round)
		}
	}
}

// countIn is how many values of bad produceSpread put in partition p.
func countIn(bad map[string]bool, p int32) int {
	n := 0
	for v := range bad {
		if strings.HasPrefix(v, fmt.Sprintf("%d-", p)) {
			n++
		}
	}
	return n
}

// Bad input is refused before anything is read: a dead-letter topic
// equal to the source, no attempts at all.
func TestHandleRefusesBadPolicy(t *testing.T) {
	_, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.ManualPartitioner(), groupRetries)
	g, err := clientlib.NewGroupConsumer(client, "g", []string{"t"})
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, *clientlib.Record) error { return nil }
	var oe *clientlib.OptionError
	if err := g.Handle(ctx, h, clientlib.Handling{DeadLetterTopic: func(s string) string { return s }}); !errors.As(err, &oe) {
		t.Fatalf("dead-letter topic = source: %v, want an OptionError", err)
	}
	if err := g.Handle(ctx, h, clientlib.Handling{Retry: clientlib.RetryPolicy{MaxAttempts: 0, AttemptTimeout: time.Second}}); !errors.As(err, &oe) {
		t.Fatalf("MaxAttempts 0: %v, want an OptionError", err)
	}
}

// A dead letter that cannot be written (its partition does not exist in
// the dead-letter topic) stops Handle with a DeadLetterError naming the
// record, and nothing from that record on is committed.
func TestHandleUnwritableDeadLetterLosesNothing(t *testing.T) {
	_, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 2), fake.Topic("t.dlq", 1)}, clientlib.ManualPartitioner(),
		groupRetries, clientlib.UnknownTopicRetries(2), clientlib.DeliveryTimeout(2*time.Second))
	produceSpread(t, ctx, client, "t", 2, 0, 3) // partition 1 holds 1-0, 1-1, 1-2
	g, err := clientlib.NewGroupConsumer(client, "g", []string{"t"},
		clientlib.GroupConsumerOpts(clientlib.FetchMaxWait(20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	err = g.Handle(ctx, func(_ context.Context, r *clientlib.Record) error {
		if string(r.Value) == "1-1" {
			return errors.New("poison")
		}
		return nil
	}, clientlib.Handling{Retry: clientlib.RetryPolicy{MaxAttempts: 1}})
	var de *clientlib.DeadLetterError
	if !errors.As(err, &de) || de.Source.Partition != 1 || de.Offset != 1 || de.Topic != "t.dlq" {
		t.Fatalf("err %v, want a DeadLetterError for t/1 offset 1", err)
	}
	offs, err := client.FetchOffsets(ctx, "g", clientlib.TopicPartition{Topic: "t", Partition: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offs {
		if o.Offset > 1 {
			t.Fatalf("committed %d in t/1, past the record that was not dead-lettered", o.Offset)
		}
	}
}

// writeDeadLetters puts n dead letters of source partition p into
// "t.dlq": values p-0..p-(n-1), errors alternating "timeout" and "parse".
func writeDeadLetters(t *testing.T, ctx context.Context, client *clientlib.Client, p int32, n int) {
	t.Helper()
	var rs []*clientlib.Record
	for i := 0; i < n; i++ {
		src := &clientlib.Record{Topic: "t", Partition: p, Offset: int64(10 + i), Value: []byte(fmt.Sprintf("%d-%d", p, i)),
			Timestamp: time.UnixMilli(1700000000000)}
		why := []string{"timeout", "parse"}[i%2]
		rs = append(rs, clientlib.DeadLetter{Source: src, Group: "g", Attempts: 2, Err: why}.Record("t.dlq"))
	}
	if err := client.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// Redrive writes dead letters back to their source partition, filtered,
// and records them: running it again writes nothing; a redrive that
// crashed after writing but before recording is finished by the next one
// without a duplicate (it finds the records by HeaderRedriveFrom).
func TestRedriveIsIdempotent(t *testing.T) {
	_, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 2), fake.Topic("t.dlq", 2)}, clientlib.ManualPartitioner(), groupRetries)
	writeDeadLetters(t, ctx, client, 0, 4)
	writeDeadLetters(t, ctx, client, 1, 2)
	writeDeadLetters(t, ctx, client, 0, 1) // 0-0 dead-lettered twice (a member died before committing)
	onlyParse := func(i clientlib.DeadLetterInfo) bool { return i.Err == "parse" }
	rep, err := client.Redrive(ctx, "t.dlq", clientlib.RedriveOptions{Filter: onlyParse})
	if err != nil || rep.Redriven != 3 || rep.Skipped != 4 {
		t.Fatalf("filtered redrive: %+v, %v; want 3 redriven, 4 skipped", rep, err)
	}
	// A crash after the records were written, before they were recorded.
	func() {
		defer func() { _ = recover() }()
		_, _ = client.Redrive(ctx, "t.dlq", clientlib.RedriveOptions{OnEach: func(clientlib.DeadLetterEntry, int64) { panic("crash") }})
	}()
	rep, err = client.Redrive(ctx, "t.dlq", clientlib.RedriveOptions{})
	if err != nil || rep.Redriven != 0 || rep.Recovered != 3 || rep.Already != 4 {
		t.Fatalf("after the crash: %+v, %v; want the 3 written found (recovered), 4 already done (3 + 0-0's twin), none written", rep, err)
	}
	rep, err = client.Redrive(ctx, "t.dlq", clientlib.RedriveOptions{})
	if err != nil || rep.Redriven != 0 || rep.Already != 7 {
		t.Fatalf("again: %+v, %v; want all 7 already redriven", rep, err)
	}
	offs, err := client.ListOffsets(ctx, "t", nil, clientlib.OffsetLatest())
	if err != nil || len(offs) != 2 || offs[0].HighWatermark != 4 || offs[1].HighWatermark != 2 {
		t.Fatalf("source high-water marks %+v, %v; want 4 and 2 (each dead letter once)", offs, err)
	}
	got := map[string]int{}
	for p := int32(0); p < 2; p++ {
		for _, r := range consumeAll(t, ctx, client, "t", p, []int{4, 2}[p]) {
			if !strings.HasPrefix(string(r.Value), fmt.Sprintf("%d-", p)) || r.Timestamp.UnixMilli() != 1700000000000 {
				t.Fatalf("partition %d got %q at %v", p, r.Value, r.Timestamp)
			}
			got[string(r.Value)]++
		}
	}
	if len(got) != 6 {
		t.Fatalf("redriven %v, want each of the 6 dead letters", got)
	}
	for v, n := range got {
		if n != 1 {
			t.Fatalf("%s redriven %d times", v, n)
		}
	}
	entries, err := client.ReadDeadLetters(ctx, "t.dlq")
	if err != nil || len(entries) != 7 {
		t.Fatalf("ReadDeadLetters: %d, %v", len(entries), err)
	}
	for _, e := range entries {
		if !e.Redriven {
			t.Fatalf("%+v not marked redriven", e.Info)
		}
	}
}

// Handle stopped while a record is being retried leaves it uncommitted,
// and Close afterwards does not commit it either (Handle turned
// auto-commit off for good: Poll's position is past the record).
func TestHandleStoppedMidRetryCommitsNothingPastIt(t *testing.T) {
	_, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.ManualPartitioner(), groupRetries)
	produceValues(t, ctx, client, "t", 0, 3)
	g, err := clientlib.NewGroupConsumer(client, "g", []string{"t"}, clientlib.GroupConsumerOpts(clientlib.FetchMaxWait(20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	hctx, stop := context.WithCancel(ctx)
	err = g.Handle(hctx, func(_ context.Context, r *clientlib.Record) error {
		if r.Offset == 1 {
			stop() // shut down while offset 1 fails
			return errors.New("bad")
		}
		return nil
	}, clientlib.Handling{Retry: clientlib.RetryPolicy{MaxAttempts: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}
	offs, err := client.FetchOffsets(ctx, "g", clientlib.TopicPartition{Topic: "t", Partition: 0})
	if err != nil || len(offs) != 1 || offs[0].Offset != 1 {
		t.Fatalf("committed %+v, %v; want 1 (offset 1 neither handled nor dead-lettered)", offs, err)
	}
}

// HandleBatches retries a failing batch whole, then narrows it to its
// records: only the record that fails alone is dead-lettered, the others
// are handled, and the partition is committed past all of them.
func TestHandleBatchesNarrowsToTheBadRecord(t *testing.T) {
	_, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.ManualPartitioner(), groupRetries)
	produceValues(t, ctx, client, "t", 0, 6) // values 0..5; "3" is bad
	g, err := clientlib.NewGroupConsumer(client, "g", []string{"t"}, clientlib.GroupConsumerOpts(clientlib.FetchMaxWait(20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	hctx, stop := context.WithCancel(ctx)
	handled := map[string]int{}
	batches := 0
	err = g.HandleBatches(hctx, func(_ context.Context, rs []*clientlib.Record) error {
		batches++
		for _, r := range rs {
			if string(r.Value) == "3" {
				return errors.New("bad 3")
			}
		}
		for _, r := range rs {
			handled[string(r.Value)]++
			if r.Offset == 5 {
				stop()
			}
		}
		return nil
	}, clientlib.Handling{Retry: clientlib.RetryPolicy{MaxAttempts: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(handled) != 5 || handled["3"] != 0 {
		t.Fatalf("handled %v (in %d batch calls), want every record but 3", handled, batches)
	}
	letters := consumeAll(t, ctx, client, "t.dlq", 0, 1)
	if info, err := clientlib.ParseDeadLetter(letters[0]); err != nil || info.Offset != 3 || info.Attempts != 2 || info.Err != "bad 3" {
		t.Fatalf("dead letter %+v, %v; want offset 3 after 2 attempts alone", info, err)
	}
	offs, err := client.FetchOffsets(ctx, "g", clientlib.TopicPartition{Topic: "t", Partition: 0})
	if err != nil || len(offs) != 1 || offs[0].Offset != 6 {
		t.Fatalf("committed %+v, %v; want 6", offs, err)
	}
}

// With a retry topic, a failing record does not hold its partition: the
// records after it are handled first, the record is retried from
// t.retry when due (the handler sees its source coordinates), and one
// that keeps failing is dead-lettered with its source offset after
// MaxAttempts attempts. Both partitions end up committed to their ends.
func TestHandleRetryTopicKeepsThePartitionFlowing(t *testing.T) {
	_, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.ManualPartitioner(), groupRetries)
	produceValues(t, ctx, client, "t", 0, 6) // "2" fails twice then works; "4" always fails
	g, err := clientlib.NewGroupConsumer(client, "g", []string{"t"}, clientlib.GroupConsumerOpts(clientlib.FetchMaxWait(20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	hctx, stop := context.WithCancel(ctx)
	var order []string
	tries := map[string]int{}
	dead := 0
	done := func() {
		if len(order)+dead == 6 {
			stop()
		}
	}
	err = g.Handle(hctx, func(ctx context.Context, r *clientlib.Record) error {
		v := string(r.Value)
		if r.Topic != "t" || r.Offset != int64(v[0]-'0') {
			t.Errorf("handler saw %s/%d@%d for %q, want the source coordinates", r.Topic, r.Partition, r.Offset, v)
		}
		if n := clientlib.HandlerAttempt(ctx); n != tries[v]+1 {
			t.Errorf("%q: HandlerAttempt %d on try %d", v, n, tries[v]+1)
		}
		if tries[v]++; v == "4" || (v == "2" && tries[v] < 3) {
			return errors.New("fails " + v)
		}
		order = append(order, v)
		done()
		return nil
	}, clientlib.Handling{Retry: clientlib.RetryPolicy{MaxAttempts: 3, Backoff: clientlib.Backoff{Base: 30 * time.Millisecond, Max: 60 * time.Millisecond}},
		RetryTopic:   func(s string) string { return s + ".retry" },
		OnDeadLetter: func(clientlib.DeadLetter, *clientlib.Record) { dead++; done() }})
	if err != nil {
		t.Fatal(err)
	}
	// A second Handle on the same consumer knows t.retry is a retry topic
	// (it does not make a t.retry.retry).
	how := clientlib.Handling{RetryTopic: func(s string) string { return s + ".retry" }, Done: func() bool { return true }}
	if err := g.Handle(ctx, func(context.Context, *clientlib.Record) error { return nil }, how); err != nil {
		t.Fatal(err)
	}
	if names, err := client.ListTopics(ctx); err != nil || slices.Contains(names, "t.retry.retry") {
		t.Fatalf("topics %v, %v: a second Handle made a retry topic of the retry topic", names, err)
	}
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if strings.Join(order, ",") != "0,1,3,5,2" || tries["2"] != 3 || tries["4"] != 3 {
		t.Fatalf("handled %v, tries %v; want 0,1,3,5 first and 2 on its third try, 4 tried 3 times", order, tries)
	}
	letters := consumeAll(t, ctx, client, "t.dlq", 0, 1)
	if info, err := clientlib.ParseDeadLetter(letters[0]); err != nil || info.Offset != 4 || info.Attempts != 3 || info.Source.Topic != "t" {
		t.Fatalf("dead letter %+v, %v; want t offset 4 after 3 attempts", info, err)
	}
	lag, err := client.GroupLag(ctx, "g", time.Now())
	if err != nil || len(lag) != 2 {
		t.Fatalf("lag %+v, %v; want t and t.retry", lag, err)
	}
	for _, l := range lag {
		if l.Lag != 0 {
			t.Fatalf("%s/%d: lag %d, want everything committed", l.Topic, l.Partition, l.Lag)
		}
	}
}

// HandleBatches with a retry topic tries a failed batch once, then record
// by record through the retry topic: the bad record is dead-lettered
// after MaxAttempts, the others handled without waiting for it.
func TestHandleBatchesWithRetryTopic(t *testing.T) {
	_, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.ManualPartitioner(), groupRetries)
	produceValues(t, ctx, client, "t", 0, 4) // "1" is bad
	g, err := clientlib.NewGroupConsumer(client, "g", []string{"t"}, clientlib.GroupConsumerOpts(clientlib.FetchMaxWait(20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	hctx, stop := context.WithCancel(ctx)
	wholeBatches, handled := 0, []string{}
	err = g.HandleBatches(hctx, func(_ context.Context, rs []*clientlib.Record) error {
		if len(rs) > 1 {
			wholeBatches++
		}
		for _, r := range rs {
			if string(r.Value) == "1" {
				return errors.New("bad 1")
			}
		}
		for _, r := range rs {
			handled = append(handled, string(r.Value))
		}
		return nil
	}, clientlib.Handling{Retry: clientlib.RetryPolicy{MaxAttempts: 2, Backoff: clientlib.Backoff{Base: 10 * time.Millisecond}},
		RetryTopic:   func(s string) string { return s + ".retry" },
		OnDeadLetter: func(clientlib.DeadLetter, *clientlib.Record) { stop() }})
	if err != nil {
		t.Fatal(err)
	}
	if wholeBatches != 1 || strings.Join(handled, ",") != "0,2,3" {
		t.Fatalf("%d whole-batch calls, handled %v; want 1 and 0,2,3", wholeBatches, handled)
	}
	letters := consumeAll(t, ctx, client, "t.dlq", 0, 1)
	if info, err := clientlib.ParseDeadLetter(letters[0]); err != nil || info.Offset != 1 || info.Attempts != 2 {
		t.Fatalf("dead letter %+v, %v; want offset 1 after 2 attempts", info, err)
	}
}
