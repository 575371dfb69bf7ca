package clientlib

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// TestSimulatedGroupConsumerBacksOffAnUnavailableCoordinator: a member
// whose coordinator answers not_coordinator to every heartbeat (a group
// whose offsets partition has no quorum) heart-beats again after a
// growing backoff, not at the first backoff step each time, and a Poll
// that owns nothing waits for the next heartbeat instead of returning at
// once: over a second of virtual time it sends a few dozen heartbeats and
// returns a few dozen Polls, not hundreds (the simulator's seed 253 spent
// its event budget on two such members during a 40 s coordinator outage).
func TestSimulatedGroupConsumerBacksOffAnUnavailableCoordinator(t *testing.T) {
	w := &scriptedWorld{}
	beats := 0
	w.answer = func(addr string, req *strandpb.Request) *strandpb.Response {
		switch {
		case req.GetMetadata() != nil:
			return twoNodeMetadata()
		case req.GetFindCoordinator() != nil:
			return &strandpb.Response{Body: &strandpb.Response_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorResponse{Address: "n1"}}}
		case req.GetGroupHeartbeat() != nil:
			beats++
			return &strandpb.Response{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_COORDINATOR, Message: "not the group's coordinator"}}
		}
		t.Fatalf("unexpected request %T", req.GetBody())
		return nil
	}
	c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(1), RetryBackoff(5*time.Millisecond, 160*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGroupConsumer(c, "g", []string{"t"})
	if err != nil {
		t.Fatal(err)
	}
	polls := 0
	c.SimRun(func(ctx context.Context) {
		for i := 0; i < 100000 && w.now < time.Second; i++ {
			g.Poll(ctx)
			polls++
		}
	}, func() {})
	w.run(t, 1000000)
	if w.now < time.Second {
		t.Fatalf("virtual time %v: the polls did not last a second", w.now)
	}
	t.Logf("%d heartbeats, %d Polls", beats, polls)
	if beats > 40 || polls > 40 {
		t.Fatalf("%d heartbeats and %d Polls in %v of an unavailable coordinator: want at most 40 each (a growing backoff)", beats, polls, w.now)
	}
	if beats < 5 {
		t.Fatalf("%d heartbeats in %v: want it to keep trying", beats, w.now)
	}
}

// TestSimulatedGroupConsumerAsksAnotherNodeAfterAStaleCoordinator: a node
// whose metadata is stale keeps naming a coordinator that refuses the
// group (NOT_COORDINATOR); after that refusal the member asks another node
// first, so it reaches the real coordinator at its next lookup. Before,
// a client whose random lookup order kept starting at the stale node sat
// outside the group (the simulator's seed 59: 8 s after the heal, one
// member of four still held nothing).
func TestSimulatedGroupConsumerAsksAnotherNodeAfterAStaleCoordinator(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		w := &scriptedWorld{}
		var finds []string // the node each FindCoordinator went to
		refused := 0
		w.answer = func(addr string, req *strandpb.Request) *strandpb.Response {
			switch {
			case req.GetMetadata() != nil:
				return twoNodeMetadata()
			case req.GetFindCoordinator() != nil:
				finds = append(finds, addr)
				// n1 is stale: it names itself; n2 names n2.
				return coordinatorAt(0, addr)
			case req.GetGroupHeartbeat() != nil && addr == "n1":
				refused++
				return &strandpb.Response{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_COORDINATOR, Message: "not the group's coordinator"}}
			case req.GetGroupHeartbeat() != nil:
				return heartbeatJoined(req)
			}
			t.Fatalf("unexpected request %T", req.GetBody())
			return nil
		}
		g := pollGroupMember(t, w, seed)
		requireN1NotAskedTwiceInARow(t, seed, finds, "n1's coordinator refused")
		if g.Epoch() != 1 {
			t.Fatalf("seed %d: epoch %d after %v (lookups %v, %d refusals): never joined at n2", seed, g.Epoch(), w.now, finds, refused)
		}
	}
}

// TestSimulatedGroupConsumerAsksAnotherNodeAfterCoordinatorNotAvailable: a
// node that cannot name the coordinator (a removed node that still runs,
// its metadata stale: COORDINATOR_NOT_AVAILABLE to every lookup) is asked
// last at the member's next lookup, so it reaches the coordinator another
// node names. Before, a client whose lookup order started at that node
// (its seeds in order, no node in its metadata) asked it alone for good
// (the simulator's seed 59 after a decommission: member 3 asked the
// removed node 1 88 times in 10 s after the heal and held nothing).
func TestSimulatedGroupConsumerAsksAnotherNodeAfterCoordinatorNotAvailable(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		w := &scriptedWorld{}
		var finds []string // the node each FindCoordinator went to
		w.answer = func(addr string, req *strandpb.Request) *strandpb.Response {
			switch {
			case req.GetMetadata() != nil:
				return twoNodeMetadata()
			case req.GetFindCoordinator() != nil && addr == "n1":
				finds = append(finds, addr)
				return &strandpb.Response{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE, Message: "group coordinator not available yet"}}
			case req.GetFindCoordinator() != nil:
				finds = append(finds, addr)
				return coordinatorAt(0, "n2")
			case req.GetGroupHeartbeat() != nil:
				return heartbeatJoined(req)
			}
			t.Fatalf("unexpected request %T", req.GetBody())
			return nil
		}
		g := pollGroupMember(t, w, seed)
		requireN1NotAskedTwiceInARow(t, seed, finds, "n1 could not name the coordinator")
		if g.Epoch() != 1 {
			t.Fatalf("seed %d: epoch %d after %v (lookups %v): never joined at n2", seed, g.Epoch(), w.now, finds)
		}
	}
}

// pollGroupMember runs a simulated group member of group "g" over w (seeds
// n1, n2) for 500 ms of virtual time, at most 1,000 Polls.
func pollGroupMember(t *testing.T, w *scriptedWorld, seed uint64) *GroupConsumer {
	t.Helper()
	c, err := NewClient(Simulated(w), SeedAddresses("n1", "n2"), RandSeed(seed), RetryBackoff(5*time.Millisecond, 160*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGroupConsumer(c, "g", []string{"t"})
	if err != nil {
		t.Fatal(err)
	}
	c.SimRun(func(ctx context.Context) {
		for i := 0; i < 1000 && w.now < 500*time.Millisecond; i++ {
			g.Poll(ctx)
		}
	}, func() {})
	w.run(t, 1000000)
	return g
}

// requireN1NotAskedTwiceInARow fails when two coordinator lookups in a row
// went to n1: after what, n1 must be asked last.
func requireN1NotAskedTwiceInARow(t *testing.T, seed uint64, finds []string, after string) {
	t.Helper()
	for i := 1; i < len(finds); i++ {
		if finds[i-1] == "n1" && finds[i] == "n1" {
			t.Fatalf("seed %d: lookups went to %v: after %s, n1 was asked first again", seed, finds, after)
		}
	}
}

// heartbeatJoined answers a member's heartbeat: joined at epoch 1, no
// partitions, the next heartbeat in 100 ms.
func heartbeatJoined(req *strandpb.Request) *strandpb.Response {
	return &strandpb.Response{Body: &strandpb.Response_GroupHeartbeat{GroupHeartbeat: &strandpb.ConsumerGroupHeartbeatResponse{
		MemberId: req.GetGroupHeartbeat().GetMemberId(), MemberEpoch: 1, HeartbeatIntervalMs: 100}}}
}

// coordinatorAt answers a FindCoordinator: the coordinator is node id at
// addr.
func coordinatorAt(id uint64, addr string) *strandpb.Response {
	return &strandpb.Response{Body: &strandpb.Response_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorResponse{NodeId: id, Address: addr}}}
}

// A group coordinator that never answers (its process gone without
// closing the connection) is looked up again after the client's own
// deadline, as the transaction coordinator is
// (TestSimulatedTransactionalTimeoutFindsCoordinatorAgain): FetchOffsets
// reaches the coordinator FindCoordinator names next instead of the
// silent node on every retry.
func TestSimulatedGroupTimeoutFindsCoordinatorAgain(t *testing.T) {
	w := &scriptedWorld{}
	var fetches []string // the node each OffsetFetch went to
	finds := 0
	w.silent = func(addr string, req *strandpb.Request) bool { return addr == "n1" && req.GetOffsetFetch() != nil }
	w.answer = func(addr string, req *strandpb.Request) *strandpb.Response {
		switch {
		case req.GetMetadata() != nil:
			return twoNodeMetadata()
		case req.GetFindCoordinator() != nil:
			finds++
			if finds == 1 {
				return coordinatorAt(1, "n1") // before its process died
			}
			return coordinatorAt(2, "n2")
		case req.GetOffsetFetch() != nil:
			fetches = append(fetches, addr)
			return &strandpb.Response{Body: &strandpb.Response_OffsetFetch{OffsetFetch: &strandpb.OffsetFetchResponse{}}}
		}
		t.Fatalf("unexpected request %v", req)
		return nil
	}
	c, err := NewClient(Simulated(w), SeedAddresses("n1", "n2"), RandSeed(1),
		RequestTimeout(800*time.Millisecond), RetryBackoff(5*time.Millisecond, 160*time.Millisecond), MaxRetries(20))
	if err != nil {
		t.Fatal(err)
	}
	var fetchErr error
	c.SimRun(func(ctx context.Context) { _, fetchErr = c.FetchOffsets(ctx, "g") }, func() {})
	w.run(t, 1000000)
	if fetchErr != nil {
		t.Fatalf("FetchOffsets: %v (FindCoordinator asked %d times)", fetchErr, finds)
	}
	if !slices.Equal(fetches, []string{"n2"}) || finds != 2 {
		t.Fatalf("OffsetFetch answered by %v after %d lookups, want by n2 after the second lookup", fetches, finds)
	}
}

// threeNodeMetadata names n1, n2 and n3.
func threeNodeMetadata() *strandpb.Response {
	return &strandpb.Response{Body: &strandpb.Response_Metadata{Metadata: &strandpb.MetadataResponse{
		Nodes: []*strandpb.MetadataResponse_Node{{Id: 1, Address: "n1"}, {Id: 2, Address: "n2"}, {Id: 3, Address: "n3"}},
	}}}
}

// A coordinator lookup goes on past nodes that name no coordinator
// (COORDINATOR_NOT_AVAILABLE: two removed nodes that still run) to one
// that names it, in the same lookup: no node is asked twice before the
// coordinator is found. Before, the lookup ended at the first such answer
// and the next one asked only that node last, so a client alternated
// between the two (simnet seed 351).
func TestSimulatedLookupSkipsNodesNamingNoCoordinator(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		w := &scriptedWorld{}
		var finds []string // the node each FindCoordinator went to, before the first OffsetFetch
		fetched := false
		w.answer = func(addr string, req *strandpb.Request) *strandpb.Response {
			switch {
			case req.GetMetadata() != nil:
				return threeNodeMetadata()
			case req.GetFindCoordinator() != nil:
				if !fetched {
					finds = append(finds, addr)
				}
				if addr != "n3" {
					return &strandpb.Response{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE, Message: "removed"}}
				}
				return coordinatorAt(3, "n3")
			case req.GetOffsetFetch() != nil:
				fetched = true
				return &strandpb.Response{Body: &strandpb.Response_OffsetFetch{OffsetFetch: &strandpb.OffsetFetchResponse{}}}
			}
			t.Fatalf("unexpected request %v", req)
			return nil
		}
		c, err := NewClient(Simulated(w), SeedAddresses("n1", "n2"), RandSeed(seed),
			RetryBackoff(5*time.Millisecond, 160*time.Millisecond), MaxRetries(20))
		if err != nil {
			t.Fatal(err)
		}
		var fetchErr error
		c.SimRun(func(ctx context.Context) {
			if err := c.RefreshMetadata(ctx); err != nil {
				fetchErr = err
				return
			}
			_, fetchErr = c.FetchOffsets(ctx, "g")
		}, func() {})
		w.run(t, 1000000)
		if fetchErr != nil {
			t.Fatalf("seed %d: FetchOffsets: %v (lookups %v)", seed, fetchErr, finds)
		}
		seen := map[string]bool{}
		for _, a := range finds {
			if seen[a] {
				t.Fatalf("seed %d: lookups went to %v: %s asked again before n3 was", seed, finds, a)
			}
			seen[a] = true
		}
	}
}
