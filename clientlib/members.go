package clientlib

import (
	"context"
	"sort"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// Membership sentinels, matched with errors.Is.
var (
	// ErrNodeRemoved: the node was removed from the cluster; its id is not
	// reused.
	ErrNodeRemoved = &Error{Code: strandpb.ErrorCode_ERROR_CODE_NODE_REMOVED}
	// ErrUnknownNode: no registered node has the id.
	ErrUnknownNode = &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_NODE}
	// ErrMembershipRefused: a state change out of order, or removing a
	// node that still holds replicas.
	ErrMembershipRefused = &Error{Code: strandpb.ErrorCode_ERROR_CODE_MEMBERSHIP_REFUSED}
)

// Member is one registered node's membership.
type Member struct {
	ID      uint64
	Address string
	Rack    string
	// State: "active", "joining" (registered, not yet in the metadata
	// group), "decommissioning" or "removed".
	State string
	// Role in the metadata raft group: "voter", "learner" (an observer)
	// or "none".
	Role             string
	Fenced           bool
	Replicas         int32 // partition replicas placed on it
	PreferredLeaders int32 // partitions it is the first replica of
	// Down: the answering node (the metadata leader) has not heard from it
	// for three election timeouts; LastContact is the time since its last
	// frame there (0 for the answering node); DiskFull: its disk refuses
	// produce; DiskStalled: a storage job of its disk hangs, so it leads
	// nothing and refuses produce (the node says both in its liveness
	// frames).
	Down        bool
	LastContact time.Duration
	DiskFull    bool
	DiskStalled bool
}

// Members is the cluster's membership as the answering node applied it.
type Members struct {
	Members        []Member // sorted by id
	MetadataLeader uint64
	AnsweredBy     uint64
}

// ClusterMembers asks the metadata leader (else any node) for every
// registered node's membership; only the leader knows whether a learner
// has caught up.
func (c *Client) ClusterMembers(ctx context.Context) (Members, error) {
	var resp *strandpb.Response
	err := c.withRetries(ctx, func() error {
		var err error
		resp, err = c.controllerRequest(ctx, &strandpb.Request{Body: &strandpb.Request_ClusterMembers{ClusterMembers: &strandpb.ClusterMembersRequest{}}}, nil)
		if err == nil {
			err = errorFromWire(resp.GetError())
		}
		return err
	})
	if err != nil {
		return Members{}, err
	}
	m := resp.GetClusterMembers()
	out := Members{MetadataLeader: m.GetMetadataLeader(), AnsweredBy: m.GetAnsweredBy()}
	for _, x := range m.GetMembers() {
		out.Members = append(out.Members, Member{ID: x.GetId(), Address: x.GetAddress(), Rack: x.GetRack(),
			State: memberStateName(x.GetState()), Role: metadataRoleName(x.GetRole()), Fenced: x.GetFenced(),
			Replicas: x.GetReplicas(), PreferredLeaders: x.GetPreferredLeaders(),
			Down: x.GetDown(), LastContact: time.Duration(x.GetLastContactMs()) * time.Millisecond, DiskFull: x.GetDiskFull(),
			DiskStalled: x.GetDiskStalled()})
	}
	sort.Slice(out.Members, func(i, j int) bool { return out.Members[i].ID < out.Members[j].ID })
	return out, nil
}

func memberStateName(s strandpb.MemberState) string {
	switch s {
	case strandpb.MemberState_MEMBER_STATE_ACTIVE:
		return "active"
	case strandpb.MemberState_MEMBER_STATE_JOINING:
		return "joining"
	case strandpb.MemberState_MEMBER_STATE_DECOMMISSIONING:
		return "decommissioning"
	case strandpb.MemberState_MEMBER_STATE_REMOVED:
		return "removed"
	}
	return "unknown"
}

func metadataRoleName(r strandpb.MetadataRole) string {
	switch r {
	case strandpb.MetadataRole_METADATA_ROLE_VOTER:
		return "voter"
	case strandpb.MetadataRole_METADATA_ROLE_LEARNER:
		return "learner"
	}
	return "none"
}

// nodeAdmin sends one membership change through the metadata group.
func (c *Client) nodeAdmin(ctx context.Context, req *strandpb.NodeAdminRequest) error {
	var unsure bool
	return c.withRetriesUnsure(ctx, &unsure, func() error {
		resp, err := c.controllerRequest(ctx, &strandpb.Request{Body: &strandpb.Request_NodeAdmin{NodeAdmin: req}}, &unsure)
		if err != nil {
			return err
		}
		return errorFromWire(resp.GetError())
	})
}

// AddNode registers node id at address (host:port, what clients and peers
// dial) in rack: the metadata leader then adds it to the metadata group.
// Registering the same values again is a success.
func (c *Client) AddNode(ctx context.Context, id uint64, address, rack string) error {
	return c.nodeAdmin(ctx, &strandpb.NodeAdminRequest{Action: strandpb.NodeAction_NODE_ACTION_ADD, NodeId: id, Address: address, Rack: rack})
}

// SetNodeDecommissioning fences node id for good: no new replicas, and a
// re-registration does not unfence it.
func (c *Client) SetNodeDecommissioning(ctx context.Context, id uint64) error {
	return c.nodeAdmin(ctx, &strandpb.NodeAdminRequest{Action: strandpb.NodeAction_NODE_ACTION_DECOMMISSION, NodeId: id})
}

// ActivateNode cancels a decommission.
func (c *Client) ActivateNode(ctx context.Context, id uint64) error {
	return c.nodeAdmin(ctx, &strandpb.NodeAdminRequest{Action: strandpb.NodeAction_NODE_ACTION_ACTIVATE, NodeId: id})
}

// RemoveNode marks a decommissioned node that holds no replica removed; the
// metadata leader takes it out of the metadata group.
func (c *Client) RemoveNode(ctx context.Context, id uint64) error {
	return c.nodeAdmin(ctx, &strandpb.NodeAdminRequest{Action: strandpb.NodeAction_NODE_ACTION_REMOVE, NodeId: id})
}

// LeaderTransfer is one preferred-leader election a node started.
type LeaderTransfer struct {
	Topic     string
	Partition int32
	From, To  uint64
}

// ElectPreferredLeaders asks the node at addr to hand each partition it
// leads to the partition's preferred replica when that one is caught up.
// It returns the transfers started and how many partitions were left
// because their preferred replica lags.
func (c *Client) ElectPreferredLeaders(ctx context.Context, addr string) ([]LeaderTransfer, int32, error) {
	resp, err := c.request(ctx, addr, &strandpb.Request{Body: &strandpb.Request_ElectLeaders{ElectLeaders: &strandpb.ElectLeadersRequest{}}}, 0)
	if err != nil {
		return nil, 0, err
	}
	if err := errorFromWire(resp.GetError()); err != nil {
		return nil, 0, err
	}
	var out []LeaderTransfer
	for _, t := range resp.GetElectLeaders().GetTransfers() {
		out = append(out, LeaderTransfer{Topic: t.GetTopic(), Partition: t.GetPartition(), From: t.GetFrom(), To: t.GetTo()})
	}
	return out, resp.GetElectLeaders().GetSkippedLagging(), nil
}
