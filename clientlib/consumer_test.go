package clientlib_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
	"github.com/strandlog/strand/proto/strandpb"
)

// produceValues writes values "0".."n-1" to partition 0 of topic.
func produceValues(t *testing.T, ctx context.Context, client *clientlib.Client, topic string, from, n int) {
	t.Helper()
	var rs []*clientlib.Record
	for i := from; i < from+n; i++ {
		rs = append(rs, &clientlib.Record{Topic: topic, Partition: 0, Value: []byte(fmt.Sprint(i))})
	}
	if err := client.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// pollUntil polls until it has n records or a non-retriable error.
func pollUntil(t *testing.T, ctx context.Context, k *clientlib.Consumer, n int) ([]*clientlib.Record, error) {
	t.Helper()
	var out []*clientlib.Record
	for len(out) < n {
		if ctx.Err() != nil {
			t.Fatalf("got %d of %d records before the deadline", len(out), n)
		}
		fs := k.Poll(ctx)
		out = append(out, fs.Records()...)
		if err := fs.FirstErr(); err != nil && !clientlib.IsRetriable(err) {
			return out, err
		}
	}
	return out, nil
}

// A position below the log start is, by default, a typed error carrying
// the log start and high-water mark, returned again by every Poll (never
// a silent seek) until Seek moves the position.
func TestConsumerOutOfRangeDefaultIsTypedError(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.ManualPartitioner())
	produceValues(t, ctx, client, "t", 0, 10)
	cluster.TrimLogStart("t", 0, 5)
	k := clientlib.NewConsumer(client, clientlib.FetchMaxWait(10*time.Millisecond))
	k.Assign("t", 0, clientlib.OffsetExact(2))
	var oorLogStart int64 // where a caller deciding where to resume would go
	for i := 0; i < 2; i++ {
		_, err := pollUntil(t, ctx, k, 1)
		var oor *clientlib.OffsetOutOfRangeError
		if !errors.As(err, &oor) || !errors.Is(err, clientlib.ErrOffsetOutOfRange) {
			t.Fatalf("poll %d: %v, want OffsetOutOfRangeError", i, err)
		}
		if oor.Offset != 2 || oor.LogStartOffset != 5 || oor.HighWatermark != 10 || clientlib.IsRetriable(err) {
			t.Fatalf("poll %d: %+v", i, oor)
		}
		if pos, _ := k.Position("t", 0); pos != 2 {
			t.Fatalf("position moved to %d without a Seek", pos)
		}
		oorLogStart = oor.LogStartOffset
	}
	k.Seek("t", 0, clientlib.OffsetExact(oorLogStart))
	got, err := pollUntil(t, ctx, k, 5)
	if err != nil || got[0].Offset != 5 || string(got[4].Value) != "9" {
		t.Fatalf("after Seek: %v %v", got, err)
	}
}

// ResetEarliest moves an out-of-range position to the log start; above
// the high-water mark too.
func TestConsumerResetEarliest(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.ManualPartitioner())
	produceValues(t, ctx, client, "t", 0, 10)
	cluster.TrimLogStart("t", 0, 5)
	k := clientlib.NewConsumer(client, clientlib.FetchMaxWait(10*time.Millisecond),
		clientlib.OffsetResetPolicy(clientlib.ResetEarliest))
	k.Assign("t", 0, clientlib.OffsetExact(1))
	got, err := pollUntil(t, ctx, k, 5)
	if err != nil || len(got) != 5 || got[0].Offset != 5 || got[4].Offset != 9 {
		t.Fatalf("got %d records from %v: %v", len(got), got, err)
	}
	k.Seek("t", 0, clientlib.OffsetExact(50))
	if got, err = pollUntil(t, ctx, k, 5); err != nil || got[0].Offset != 5 {
		t.Fatalf("above the high-water mark: %v %v", got, err)
	}
}

// ResetLatest moves an out-of-range position to the high-water mark: only
// records produced afterwards are read.
func TestConsumerResetLatest(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.ManualPartitioner())
	produceValues(t, ctx, client, "t", 0, 10)
	cluster.TrimLogStart("t", 0, 5)
	k := clientlib.NewConsumer(client, clientlib.FetchMaxWait(10*time.Millisecond),
		clientlib.OffsetResetPolicy(clientlib.ResetLatest))
	k.Assign("t", 0, clientlib.OffsetExact(0))
	for {
		fs := k.Poll(ctx)
		if len(fs.Records()) != 0 {
			t.Fatalf("read %v before the reset", fs.Records())
		}
		if pos, ok := k.Position("t", 0); ok && pos == 10 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("position never reset to the high-water mark")
		}
	}
	produceValues(t, ctx, client, "t", 10, 1)
	got, err := pollUntil(t, ctx, k, 1)
	if err != nil || got[0].Offset != 10 || string(got[0].Value) != "10" {
		t.Fatalf("after reset: %v %v", got, err)
	}
}

// Earliest, Latest and timestamp starts resolve through ListOffsets. The
// server resolves a timestamp to the first batch whose records reach it,
// so each record is produced as a batch of its own.
func TestConsumerStartOffsets(t *testing.T) {
	_, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.ManualPartitioner())
	base := time.UnixMilli(1_000_000)
	for i := 0; i < 6; i++ {
		r := &clientlib.Record{Topic: "t", Value: []byte(fmt.Sprint(i)), Timestamp: base.Add(time.Duration(i) * time.Second)}
		if err := client.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	k := clientlib.NewConsumer(client, clientlib.FetchMaxWait(10*time.Millisecond))
	k.Assign("t", 0, clientlib.OffsetAtTimestamp(base.Add(3*time.Second)))
	got, err := pollUntil(t, ctx, k, 3)
	if err != nil || got[0].Offset != 3 || !got[0].Timestamp.Equal(base.Add(3*time.Second)) {
		t.Fatalf("from timestamp: %v %v", got, err)
	}
	k.Seek("t", 0, clientlib.OffsetLatest())
	k.Poll(ctx)
	if pos, ok := k.Position("t", 0); !ok || pos != 6 {
		t.Fatalf("latest resolved to %d %v, want 6", pos, ok)
	}
}

// A consumer follows a leader move: the old leader's NOT_LEADER hint sends
// the next fetch to the new leader, and no record is skipped or repeated.
func TestConsumerFollowsLeaderMove(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.ManualPartitioner())
	produceValues(t, ctx, client, "t", 0, 5)
	k := clientlib.NewConsumer(client, clientlib.FetchMaxWait(10*time.Millisecond))
	k.Assign("t", 0, clientlib.OffsetEarliest())
	first, err := pollUntil(t, ctx, k, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.MoveLeader("t", 0); err != nil {
		t.Fatal(err)
	}
	produceValues(t, ctx, client, "t", 5, 5)
	rest, err := pollUntil(t, ctx, k, 5)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range append(first, rest...) {
		if r.Offset != int64(i) {
			t.Fatalf("record %d at offset %d", i, r.Offset)
		}
	}
}

// A fetch answered with a retriable error is reported as retriable and
// retried by the next Poll.
func TestConsumerRetriableFetchError(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.ManualPartitioner())
	produceValues(t, ctx, client, "t", 0, 3)
	cluster.Control(fake.FailTimes(2, strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE, fake.IsFetch))
	k := clientlib.NewConsumer(client, clientlib.FetchMaxWait(10*time.Millisecond))
	k.Assign("t", 0, clientlib.OffsetEarliest())
	fs := k.Poll(ctx)
	if err := fs.FirstErr(); !errors.Is(err, clientlib.ErrUnavailable) || !clientlib.IsRetriable(err) {
		t.Fatalf("first poll: %v, want a retriable UNAVAILABLE", err)
	}
	if got, err := pollUntil(t, ctx, k, 3); err != nil || len(got) != 3 {
		t.Fatalf("after the errors: %v %v", got, err)
	}
}

// A position the consumer legitimately reached that is above a new
// leader's (lagging) high-water mark is a transient, retriable condition,
// not an out-of-range error: the partition is not stopped.
func TestConsumerHighWatermarkBehindPositionIsTransient(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.ManualPartitioner())
	produceValues(t, ctx, client, "t", 0, 5)
	k := clientlib.NewConsumer(client, clientlib.FetchMaxWait(5*time.Millisecond))
	k.Assign("t", 0, clientlib.OffsetEarliest())
	if _, err := pollUntil(t, ctx, k, 5); err != nil {
		t.Fatal(err)
	}
	lagging := cluster.Control(func(_ uint64, req *strandpb.Request) (fake.Action, bool) {
		if req.GetFetch() == nil {
			return fake.Action{}, false
		}
		return fake.Action{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE,
			LogStartOffset: 0, HighWatermark: 3}}, true
	})
	err := k.Poll(ctx).FirstErr()
	if !clientlib.IsRetriable(err) || errors.Is(err, clientlib.ErrOffsetOutOfRange) {
		t.Fatalf("got %v, want a retriable error", err)
	}
	lagging()
	produceValues(t, ctx, client, "t", 5, 1)
	if got, err := pollUntil(t, ctx, k, 1); err != nil || got[0].Offset != 5 {
		t.Fatalf("after the leader caught up: %v %v", got, err)
	}
}

// Poll returns a leader's records without waiting for the other leaders'
// long polls, and an answer still in flight moves no position: with the
// fetches to one leader held (a node whose long poll has not answered),
// Poll hands out the other leader's record at once, the held partition's
// position stays put, and its record arrives by a later Poll once the
// node answers. Before, Poll waited for every leader's fetch, so a record
// at one leader waited up to FetchMaxWait behind another's long poll.
func TestPollDoesNotWaitForOtherLeaders(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Nodes(3), fake.Topic("t", 3)}, clientlib.ManualPartitioner())
	fast, slow := int32(-1), int32(-1)
	for try := 0; slow < 0; try++ {
		for p := int32(1); p < 3 && slow < 0; p++ {
			if cluster.Leader("t", p) != cluster.Leader("t", 0) {
				fast, slow = 0, p
			}
		}
		if slow >= 0 {
			break
		}
		// One node leads every partition: move leaders until two differ
		// (each move isolates the leader, and raft spreads its groups over
		// the other two nodes), rather than skip and pass untested.
		if try == 10 {
			t.Fatalf("one node still leads every partition after %d leader moves", try)
		}
		if _, err := cluster.MoveLeader("t", 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []int32{fast, slow} {
		rec := &clientlib.Record{Topic: "t", Partition: p, Value: []byte(fmt.Sprint("p", p))}
		if err := client.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	held := cluster.Leader("t", slow)
	release := make(chan struct{})
	cluster.Control(func(node uint64, req *strandpb.Request) (fake.Action, bool) {
		return fake.Action{Hold: release}, node == held && req.GetFetch() != nil
	})
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	// A long poll far beyond the test's deadline: waiting for the held
	// node would end only with ctx.
	k := clientlib.NewConsumer(client, clientlib.FetchMaxWait(time.Hour))
	k.Assign("t", fast, clientlib.OffsetExact(0))
	k.Assign("t", slow, clientlib.OffsetExact(0))
	var got []*clientlib.Record
	for len(got) == 0 && ctx.Err() == nil {
		got = k.Poll(ctx).Records()
	}
	if len(got) != 1 || got[0].Partition != fast {
		t.Fatalf("first records %v, want only partition %d's", got, fast)
	}
	if pos, _ := k.Position("t", slow); pos != 0 {
		t.Fatalf("held partition's position moved to %d before its records were handed out", pos)
	}
	close(release)
	released = true
	got = nil
	for len(got) == 0 && ctx.Err() == nil {
		got = k.Poll(ctx).Records()
	}
	if len(got) != 1 || got[0].Partition != slow || got[0].Offset != 0 {
		t.Fatalf("after the release %v, want partition %d offset 0", got, slow)
	}
}
