package groupsvc

import (
	"errors"
	"testing"

	"github.com/strandlog/strand/engine/groups"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/proto/strandpb"
)

var errInvalid = errors.New("invalid request")

// fakeHost is one coordinator whose replica applies each command at once.
type fakeHost struct {
	co       *Coordinator
	ticks    uint64
	proposed int
}

func (h *fakeHost) CoordinatorOf(string) (*Coordinator, Replica, error) {
	return h.co, fakeReplica{h}, nil
}
func (h *fakeHost) Error(err error) *strandpb.Error {
	code := strandpb.ErrorCode_ERROR_CODE_INTERNAL
	if errors.Is(err, errInvalid) {
		code = strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST
	}
	return &strandpb.Error{Code: code, Message: err.Error()}
}
func (h *fakeHost) Metadata() *metadata.State { return nil }
func (h *fakeHost) StampTopicIDs(req *strandpb.OffsetCommitRequest) (*strandpb.OffsetCommitRequest, error) {
	return req, nil
}
func (h *fakeHost) Ticks() uint64              { return h.ticks }
func (h *fakeHost) LedCoordinators() []Replica { return []Replica{fakeReplica{h}} }

type fakeReplica struct{ h *fakeHost }

func (r fakeReplica) Propose(cmd *strandpb.GroupCommand, done func(Applied)) {
	r.h.proposed++
	done(Apply(r.h.co.State, cmd))
}
func (r fakeReplica) Read(serve func(*groups.State), _ func(*strandpb.Error)) { serve(r.h.co.State) }

// TestServiceOverAHost shows the group requests served from a Host alone:
// a joining heartbeat is proposed, starts its member's timer at the
// host's tick and is no longer counted in flight once answered; an
// unchanged heartbeat in the member's epoch is answered from the state
// without a write; a commit over the bound is refused before anything is
// proposed.
func TestServiceOverAHost(t *testing.T) {
	h := &fakeHost{co: New(1, 1, 0), ticks: 7}
	s := Service{Host: h, HeartbeatIntervalMs: 5000, SessionTimeoutMs: 45000, PartitionsMax: 2, ErrInvalidRequest: errInvalid}
	var resp *strandpb.ConsumerGroupHeartbeatResponse
	hb := &strandpb.ConsumerGroupHeartbeatRequest{Group: "g", MemberId: "m", Seq: 1}
	s.GroupHeartbeat(hb, func(r *strandpb.ConsumerGroupHeartbeatResponse, e *strandpb.Error) {
		if e != nil {
			t.Fatalf("join refused: %v", e)
		}
		resp = r
	})
	key := LiveKey("g", "m")
	if resp.GetMemberEpoch() <= 0 || resp.GetHeartbeatIntervalMs() != 5000 || h.co.Live[key] != 7 || h.co.Heartbeating[key] != 0 || h.proposed != 1 {
		t.Fatalf("join: %v, timer %d, in flight %d, proposed %d", resp, h.co.Live[key], h.co.Heartbeating[key], h.proposed)
	}
	h.ticks = 9
	again := &strandpb.ConsumerGroupHeartbeatRequest{Group: "g", MemberId: "m", MemberEpoch: resp.GetMemberEpoch(), Seq: 2}
	s.GroupHeartbeat(again, func(r *strandpb.ConsumerGroupHeartbeatResponse, e *strandpb.Error) { resp = r })
	if h.proposed != 1 || h.co.Live[key] != 9 {
		t.Fatalf("unchanged heartbeat: proposed %d (want no write), timer %d", h.proposed, h.co.Live[key])
	}
	var list *strandpb.Response
	s.ListGroups(func(r *strandpb.Response) { list = r })
	if gs := list.GetListGroups().GetGroups(); len(gs) != 1 || gs[0].GetGroup() != "g" || gs[0].GetMembers() != 1 {
		t.Fatalf("listed %v, want g with one member", gs)
	}
	var got *strandpb.Error
	s.OffsetCommit(&strandpb.OffsetCommitRequest{Group: "g", MemberEpoch: -1, Offsets: make([]*strandpb.OffsetCommitPartition, 3)},
		func(e *strandpb.Error) { got = e })
	if got.GetCode() != strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST || h.proposed != 1 {
		t.Fatalf("commit of 3 partitions with a bound of 2: %v, proposed %d", got, h.proposed)
	}
}
