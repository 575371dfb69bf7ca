package clientlib

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// groupWorld scripts a one-partition group on the scriptedWorld: n1
// coordinates the group and leads t/0, whose log holds offsets 0..4; the
// group's committed offset starts at 2. calls lists every request, with
// its virtual time.
type groupWorld struct {
	scriptedWorld
	committed int64
	commits   []int64
	calls     []string
}

func newGroupWorld(t *testing.T) *groupWorld {
	w := &groupWorld{committed: 2}
	w.answer = func(addr string, req *strandpb.Request) *strandpb.Response {
		w.calls = append(w.calls, fmt.Sprintf("%v %s %T", w.now, addr, req.GetBody()))
		switch {
		case req.GetMetadata() != nil:
			return twoNodeMetadata()
		case req.GetFindCoordinator() != nil:
			return &strandpb.Response{Body: &strandpb.Response_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorResponse{Address: "n1"}}}
		case req.GetGroupHeartbeat() != nil:
			return &strandpb.Response{Body: &strandpb.Response_GroupHeartbeat{GroupHeartbeat: &strandpb.ConsumerGroupHeartbeatResponse{
				MemberEpoch: 1, HeartbeatIntervalMs: 100, SessionTimeoutMs: 1000,
				Assigned: []*strandpb.GroupTopicPartitions{{Topic: "t", Partitions: []int32{0}}}}}}
		case req.GetOffsetFetch() != nil:
			return &strandpb.Response{Body: &strandpb.Response_OffsetFetch{OffsetFetch: &strandpb.OffsetFetchResponse{
				Offsets: []*strandpb.GroupCommittedOffset{{Topic: "t", Partition: 0, Offset: w.committed}}}}}
		case req.GetOffsetCommit() != nil:
			for _, o := range req.GetOffsetCommit().GetOffsets() {
				w.committed = o.GetOffset()
				w.commits = append(w.commits, o.GetOffset())
			}
			return &strandpb.Response{Body: &strandpb.Response_OffsetCommit{OffsetCommit: &strandpb.OffsetCommitResponse{}}}
		case req.GetFetch() != nil:
			return w.fetch(t, req.GetFetch())
		}
		t.Fatalf("unexpected request %T", req.GetBody())
		return nil
	}
	return w
}

// fetch answers with the records from the asked offset to the end (5).
func (w *groupWorld) fetch(t *testing.T, req *strandpb.FetchRequest) *strandpb.Response {
	out := &strandpb.FetchResponse{}
	for _, p := range req.GetPartitions() {
		a := &strandpb.FetchResponse_Partition{Topic: p.GetTopic(), Partition: p.GetPartition(), HighWatermark: 5}
		if p.GetOffset() < 5 {
			var recs []recordbatch.Record
			for i := p.GetOffset(); i < 5; i++ {
				recs = append(recs, recordbatch.Record{Value: []byte{byte(i)}})
			}
			enc, err := recordbatch.Encode(nil, recs)
			if err != nil {
				t.Fatal(err)
			}
			a.Batches = []*strandpb.FetchResponse_Batch{{BaseOffset: p.GetOffset(), Records: enc}}
		}
		out.Partitions = append(out.Partitions, a)
	}
	return &strandpb.Response{Body: &strandpb.Response_Fetch{Fetch: out}}
}

// runGroupMember joins as a simulated GroupConsumer with auto-commit,
// polls until it has the records, "processes" them for 200 ms of virtual
// time, and polls once more.
// early are the commits made before the processing pause.
func runGroupMember(t *testing.T) (w *groupWorld, got, early []int64) {
	w = newGroupWorld(t)
	c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGroupConsumer(c, "g", []string{"t"}, AutoCommitInterval(50*time.Millisecond),
		GroupConsumerOpts(FetchMaxWait(100*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	c.SimRun(func(ctx context.Context) {
		for i := 0; i < 10 && len(got) < 3; i++ {
			for _, r := range g.Poll(ctx).Records() {
				got = append(got, r.Offset)
			}
		}
	}, func() {
		early = slices.Clone(w.commits)
		w.After(200*time.Millisecond, func() { c.SimRun(func(ctx context.Context) { g.Poll(ctx) }, func() {}) })
	})
	w.run(t, 10000)
	return w, got, early
}

// TestSimulatedGroupConsumerRunsOnTransport: a GroupConsumer on a
// simulated Client joins, starts at the committed offset, gets the records
// and auto-commits their end only at the Poll after them, all in virtual
// time through the Transport; the same world twice makes the same calls
// at the same virtual times.
func TestSimulatedGroupConsumerRunsOnTransport(t *testing.T) {
	w, got, early := runGroupMember(t)
	if !slices.Equal(got, []int64{2, 3, 4}) {
		t.Fatalf("records %v, want offsets 2..4 (from the committed offset)", got)
	}
	if len(early) > 0 {
		t.Fatalf("committed %v before the application processed anything", early)
	}
	if !slices.Equal(w.commits, []int64{5}) {
		t.Fatalf("commits %v, want [5] at the Poll after the records", w.commits)
	}
	if w.now < 200*time.Millisecond {
		t.Fatalf("virtual time %v: the processing pause did not pass", w.now)
	}
	again, _, _ := runGroupMember(t)
	if !slices.Equal(again.calls, w.calls) {
		t.Fatalf("second run called\n%v\nfirst\n%v", again.calls, w.calls)
	}
}
