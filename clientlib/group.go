package clientlib

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// Sentinels of the consumer-group codes, for errors.Is.
var (
	ErrNotCoordinator         = &Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_COORDINATOR}
	ErrUnknownMemberID        = &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_MEMBER_ID}
	ErrFencedMemberEpoch      = &Error{Code: strandpb.ErrorCode_ERROR_CODE_FENCED_MEMBER_EPOCH}
	ErrStaleMemberEpoch       = &Error{Code: strandpb.ErrorCode_ERROR_CODE_STALE_MEMBER_EPOCH}
	ErrGroupNotEmpty          = &Error{Code: strandpb.ErrorCode_ERROR_CODE_GROUP_NOT_EMPTY}
	ErrGroupNotFound          = &Error{Code: strandpb.ErrorCode_ERROR_CODE_GROUP_NOT_FOUND}
	ErrCoordinatorUnavailable = &Error{Code: strandpb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE}
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// CommittedOffset is a group's committed position in one partition.
type CommittedOffset struct {
	TopicPartition
	Offset     int64
	Metadata   string
	CommitTime time.Time
	// TopicID is the id of the topic the offset was committed for (nil
	// when none was recorded). A group member never starts a topic of
	// another id there: its namesake was deleted and re-created.
	TopicID []byte
}

// GroupListing is one group as ListGroups shows it.
type GroupListing struct {
	Group   string
	State   string // empty, reconciling or stable
	Members int
}

// GroupMember is one member as DescribeGroup shows it.
type GroupMember struct {
	MemberID, InstanceID, Rack string
	Epoch                      int32
	Subscriptions              []string
	Assigned, Revoking, Target []TopicPartition
	// LeftStatic: a static member away for a restart, keeping its partitions.
	LeftStatic bool
}

// GroupDescription is one group's members and committed offsets.
type GroupDescription struct {
	Group       string
	State       string
	Epoch       int32
	TargetEpoch int32
	Members     []GroupMember
	Offsets     []CommittedOffset
}

// coordinators caches each group's coordinator address, the node whose
// FindCoordinator answer named it (from), and the node whose answer named
// a node that refused to coordinate or named none (stale): the next
// lookup asks that one last, so a node with stale metadata cannot keep
// answering with a coordinator that is not one, or with none.
type coordinators struct {
	mu          sync.Mutex
	addr        map[string]string
	from, stale map[string]string
}

func (c *Client) coords() *coordinators {
	c.groupCoords.mu.Lock()
	if c.groupCoords.addr == nil {
		c.groupCoords.addr = make(map[string]string)
		c.groupCoords.from = make(map[string]string)
		c.groupCoords.stale = make(map[string]string)
	}
	c.groupCoords.mu.Unlock()
	return &c.groupCoords
}

// findCoordinator asks any node which node coordinates group.
func (c *Client) findCoordinator(ctx context.Context, group string) (string, error) {
	cs := c.coords()
	cs.mu.Lock()
	addr, ok := cs.addr[group]
	stale := cs.stale[group]
	cs.mu.Unlock()
	if ok {
		return addr, nil
	}
	resp, from, err := c.anyRequestLast(ctx, &strandpb.Request{Body: &strandpb.Request_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorRequest{Group: group}}}, stale)
	if err != nil {
		return "", err
	}
	if err := errorFromWire(resp.GetError()); err != nil {
		// The node could not name the coordinator (COORDINATOR_NOT_AVAILABLE
		// from a node whose metadata is stale, a removed node that still
		// runs): asked last next time, as a node that named a refusing one.
		cs.mu.Lock()
		cs.stale[group] = from
		cs.mu.Unlock()
		return "", err
	}
	addr = resp.GetFindCoordinator().GetAddress()
	cs.mu.Lock()
	cs.addr[group], cs.from[group] = addr, from
	cs.mu.Unlock()
	return addr, nil
}

// forgetCoordinator drops the cached coordinator of group; refused: the
// node named refused to coordinate it, so the node that named it is asked
// last next time.
func (c *Client) forgetCoordinator(group string, refused bool) {
	cs := c.coords()
	cs.mu.Lock()
	if refused {
		cs.stale[group] = cs.from[group]
	}
	delete(cs.addr, group)
	cs.mu.Unlock()
}

// groupRequest sends req to group's coordinator once, on its coordinator
// connection (coordconn.go): a NOT_COORDINATOR
// answer, a connection failure or a timeout (coordinatorLost) forgets the
// coordinator, so a retry finds it again. The answer's whole-request error is returned.
func (c *Client) groupRequest(ctx context.Context, group string, req *strandpb.Request) (*strandpb.Response, error) {
	addr, err := c.findCoordinator(ctx, group)
	if err != nil {
		return nil, err
	}
	resp, err := c.coordRequest(ctx, addr, req)
	if err == nil {
		err = errorFromWire(resp.GetError())
	}
	if coordinatorLost(err) || ClassifyErr(err).RefreshMetadata {
		c.forgetCoordinator(group, errors.Is(err, ErrNotCoordinator))
	}
	return resp, err
}

// coordinatorLost reports whether a request to a (group or transaction)
// coordinator that failed with err says the node is not, or may no longer
// be, the coordinator: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a lost
// connection, or TIMEOUT (the client's own deadline closed the connection,
// or the node could not complete the request in time). The next attempt
// then looks the coordinator up again, as Kafka's clients do after a
// coordinator request that timed out or was disconnected. Before TIMEOUT
// counted, a client whose coordinator's process was gone without closing
// its connections (a power loss) sent every retry to it until its retries
// ran out, while FindCoordinator would have named the new one (simnet
// seed 202: three transactional producers spent 12-24 s that way).
func coordinatorLost(err error) bool {
	return err != nil && (errors.Is(err, ErrNotCoordinator) || errors.Is(err, ErrCoordinatorUnavailable) ||
		errors.Is(err, ErrTimeout) || isConnErr(err))
}

func isConnErr(err error) bool {
	var ce *ConnError
	return errors.As(err, &ce)
}

// groupCall is groupRequest with the client's retries.
func (c *Client) groupCall(ctx context.Context, group string, req *strandpb.Request) (*strandpb.Response, error) {
	var resp *strandpb.Response
	err := c.withRetries(ctx, func() error {
		var err error
		resp, err = c.groupRequest(ctx, group, req)
		return err
	})
	return resp, err
}

// FetchOffsets returns group's committed offsets (all of them when
// partitions is empty), sorted; linearizable: every commit acknowledged
// before the call is seen.
func (c *Client) FetchOffsets(ctx context.Context, group string, partitions ...TopicPartition) ([]CommittedOffset, error) {
	req := &strandpb.OffsetFetchRequest{Group: group, Partitions: partitionsToWire(partitions)}
	resp, err := c.groupCall(ctx, group, &strandpb.Request{Body: &strandpb.Request_OffsetFetch{OffsetFetch: req}})
	if err != nil {
		return nil, err
	}
	return offsetsFromWire(resp.GetOffsetFetch().GetOffsets()), nil
}

// CommitOffsets commits offsets for a group without members (an
// operator's reset, or a consumer that manages its own assignment): it
// fails with ErrGroupNotEmpty while the group has members.
func (c *Client) CommitOffsets(ctx context.Context, group string, offsets map[TopicPartition]int64) error {
	return c.commitAs(ctx, group, "", -1, offsets, nil, nil)
}

// commitAs commits offsets as a member (memberID "" for none); ids gives
// the topic id a partition's offset was read from (nil: the coordinator
// stamps its topic's current one); meta, when set, its metadata string.
func (c *Client) commitAs(ctx context.Context, group, memberID string, epoch int32, offsets map[TopicPartition]int64,
	ids func(TopicPartition) []byte, meta func(TopicPartition) string) error {
	req := &strandpb.OffsetCommitRequest{Group: group, MemberId: memberID, MemberEpoch: epoch}
	tps := make([]TopicPartition, 0, len(offsets))
	for tp := range offsets {
		tps = append(tps, tp)
	}
	sortPartitions(tps)
	for _, tp := range tps {
		o := &strandpb.OffsetCommitPartition{Topic: tp.Topic, Partition: tp.Partition, Offset: offsets[tp]}
		if ids != nil {
			o.TopicId = ids(tp)
		}
		if meta != nil {
			o.Metadata = meta(tp)
		}
		req.Offsets = append(req.Offsets, o)
	}
	_, err := c.groupCall(ctx, group, &strandpb.Request{Body: &strandpb.Request_OffsetCommit{OffsetCommit: req}})
	return err
}

// ListGroups lists every group of the cluster: each node lists the groups
// it coordinates, and the answers are merged, sorted by group id.
func (c *Client) ListGroups(ctx context.Context) ([]GroupListing, error) {
	info, err := c.Metadata(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]GroupListing{}
	for _, n := range info.Nodes {
		resp, err := c.request(ctx, n.Address, &strandpb.Request{Body: &strandpb.Request_ListGroups{ListGroups: &strandpb.ListGroupsRequest{}}}, 0)
		if err == nil {
			err = errorFromWire(resp.GetError())
		}
		if err != nil {
			return nil, err
		}
		for _, g := range resp.GetListGroups().GetGroups() {
			seen[g.GetGroup()] = GroupListing{Group: g.GetGroup(), State: g.GetState(), Members: int(g.GetMembers())}
		}
	}
	out := make([]GroupListing, 0, len(seen))
	for _, g := range seen {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, nil
}

// DescribeGroup returns a group's members and committed offsets; a group
// that does not exist is ErrGroupNotFound.
func (c *Client) DescribeGroup(ctx context.Context, group string) (GroupDescription, error) {
	req := &strandpb.DescribeGroupsRequest{Groups: []string{group}}
	resp, err := c.groupCall(ctx, group, &strandpb.Request{Body: &strandpb.Request_DescribeGroups{DescribeGroups: req}})
	if err != nil {
		return GroupDescription{}, err
	}
	gs := resp.GetDescribeGroups().GetGroups()
	if len(gs) != 1 {
		return GroupDescription{}, &Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: "describe answer lacks group " + group}
	}
	g := gs[0]
	if err := errorFromWire(g.GetError()); err != nil {
		return GroupDescription{}, err
	}
	d := GroupDescription{Group: g.GetGroup(), State: g.GetState(), Epoch: g.GetEpoch(), TargetEpoch: g.GetTargetEpoch(), Offsets: offsetsFromWire(g.GetOffsets())}
	for _, m := range g.GetMembers() {
		d.Members = append(d.Members, GroupMember{
			MemberID: m.GetMemberId(), InstanceID: m.GetInstanceId(), Rack: m.GetRack(), Epoch: m.GetMemberEpoch(),
			Subscriptions: m.GetSubscriptions(), Assigned: partitionsFromWire(m.GetAssigned()),
			Revoking: partitionsFromWire(m.GetRevoking()), Target: partitionsFromWire(m.GetTarget()), LeftStatic: m.GetLeftStatic(),
		})
	}
	return d, nil
}

// DeleteGroup deletes a group without members, with its offsets. A
// retry after an attempt whose outcome is unknown (its answer lost) that
// finds no such group succeeds: the group is gone, as asked, most likely
// deleted by that attempt (before, the call failed "group not found", a
// definite failure for a delete that had happened).
func (c *Client) DeleteGroup(ctx context.Context, group string) error {
	req := &strandpb.DeleteGroupsRequest{Groups: []string{group}}
	unsure := false // an attempt may have deleted the group
	return c.withRetries(ctx, func() error {
		resp, err := c.groupRequest(ctx, group, &strandpb.Request{Body: &strandpb.Request_DeleteGroups{DeleteGroups: req}})
		if err == nil {
			rs := resp.GetDeleteGroups().GetResults()
			if len(rs) != 1 {
				return &Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: "delete answer lacks group " + group}
			}
			err = errorFromWire(rs[0].GetError())
		}
		if unsure && errors.Is(err, ErrGroupNotFound) {
			return nil
		}
		if a := ClassifyErr(err); a.MaybeWritten {
			unsure = true
		}
		return err
	})
}

// sortPartitions sorts by topic, then partition.
func sortPartitions(ps []TopicPartition) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Topic != ps[j].Topic {
			return ps[i].Topic < ps[j].Topic
		}
		return ps[i].Partition < ps[j].Partition
	})
}

// partitionsToWire groups partitions by topic, sorted.
func partitionsToWire(ps []TopicPartition) []*strandpb.GroupTopicPartitions {
	ps = append([]TopicPartition(nil), ps...)
	sortPartitions(ps)
	var out []*strandpb.GroupTopicPartitions
	for _, p := range ps {
		if n := len(out); n == 0 || out[n-1].Topic != p.Topic {
			out = append(out, &strandpb.GroupTopicPartitions{Topic: p.Topic})
		}
		last := out[len(out)-1]
		last.Partitions = append(last.Partitions, p.Partition)
	}
	return out
}

// partitionsFromWire flattens per-topic lists.
func partitionsFromWire(in []*strandpb.GroupTopicPartitions) []TopicPartition {
	var out []TopicPartition
	for _, tp := range in {
		for _, p := range tp.GetPartitions() {
			out = append(out, TopicPartition{Topic: tp.GetTopic(), Partition: p})
		}
	}
	return out
}

// offsetsFromWire converts committed offsets.
func offsetsFromWire(in []*strandpb.GroupCommittedOffset) []CommittedOffset {
	out := make([]CommittedOffset, len(in))
	for i, o := range in {
		out[i] = CommittedOffset{TopicPartition: TopicPartition{o.GetTopic(), o.GetPartition()}, Offset: o.GetOffset(),
			Metadata: o.GetMetadata(), CommitTime: time.UnixMilli(o.GetCommitTimeMs()), TopicID: o.GetTopicId()}
	}
	return out
}
