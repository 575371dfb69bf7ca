package clientlib

import (
	"bufio"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
)

// throttleNode is a one-node cluster on a loopback port, played frame by
// frame: it leads t/0 and coordinates every group, answers every fetch
// throttled for throttle (empty: the log holds nothing) and then reads
// nothing more on that connection until the throttle ends, as
// node/server's listener pauses its reader. It tells beats of each
// heartbeat it reads and throttled of each throttled answer.
type throttleNode struct {
	ln        net.Listener
	addr      string
	throttle  time.Duration
	beats     chan struct{}
	throttled chan struct{}
	done      chan struct{}

	mu       sync.Mutex
	accepted int
	// id is the node's id (1 unless set); nodes, when set, are the nodes
	// its metadata names (else itself alone); metas counts the metadata
	// requests it read.
	id    uint64
	nodes []*strandpb.MetadataResponse_Node
	metas int
}

func startThrottleNode(t *testing.T, throttle time.Duration) *throttleNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &throttleNode{ln: ln, addr: ln.Addr().String(), throttle: throttle,
		beats: make(chan struct{}, 1000), throttled: make(chan struct{}, 1000), done: make(chan struct{}), id: 1}
	go n.accept()
	t.Cleanup(func() { close(n.done); ln.Close() })
	return n
}

func (n *throttleNode) accept() {
	for {
		nc, err := n.ln.Accept()
		if err != nil {
			return
		}
		n.mu.Lock()
		n.accepted++
		n.mu.Unlock()
		go n.serve(nc)
	}
}

// member makes n the node with id of a cluster of nodes (its metadata
// names them all).
func (n *throttleNode) member(id uint64, nodes []*strandpb.MetadataResponse_Node) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.id, n.nodes = id, nodes
}

// metadataReads is how many metadata requests the node read.
func (n *throttleNode) metadataReads() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.metas
}

func (n *throttleNode) connections() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.accepted
}

// serve reads and answers one connection's requests in order.
func (n *throttleNode) serve(nc net.Conn) {
	defer nc.Close()
	r := bufio.NewReader(nc)
	for {
		var req strandpb.Request
		if _, err := frame.Decode(r, nil, frame.BytesMaxDefault, &req); err != nil {
			return
		}
		resp, pause := n.answer(&req)
		resp.CorrelationId = req.GetCorrelationId()
		buf, err := frame.Append(nil, resp)
		if err != nil {
			return
		}
		if _, err := nc.Write(buf); err != nil {
			return
		}
		if pause > 0 {
			select { // the node reads nothing on a throttled connection
			case <-time.After(pause):
			case <-n.done:
				return
			}
		}
	}
}

// answer is the node's answer to req and how long it then pauses the
// connection.
func (n *throttleNode) answer(req *strandpb.Request) (*strandpb.Response, time.Duration) {
	switch {
	case req.GetHello() != nil:
		n.mu.Lock()
		id := n.id
		n.mu.Unlock()
		return &strandpb.Response{Body: &strandpb.Response_Hello{Hello: &strandpb.HelloResponse{NodeId: id, Version: protocolVersionMin}}}, 0
	case req.GetMetadata() != nil:
		n.mu.Lock()
		n.metas++
		nodes := n.nodes
		n.mu.Unlock()
		if nodes == nil {
			nodes = []*strandpb.MetadataResponse_Node{{Id: 1, Address: n.addr}}
		}
		return &strandpb.Response{Body: &strandpb.Response_Metadata{Metadata: &strandpb.MetadataResponse{
			Nodes: nodes,
			Topics: []*strandpb.MetadataResponse_Topic{{Name: "t",
				Partitions: []*strandpb.MetadataResponse_Partition{{Partition: 0, LeaderId: 1}}}},
		}}}, 0
	case req.GetFindCoordinator() != nil:
		return &strandpb.Response{Body: &strandpb.Response_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorResponse{Address: n.addr}}}, 0
	case req.GetGroupHeartbeat() != nil:
		n.beats <- struct{}{}
		return &strandpb.Response{Body: &strandpb.Response_GroupHeartbeat{GroupHeartbeat: &strandpb.ConsumerGroupHeartbeatResponse{
			MemberId: "m", MemberEpoch: 1, HeartbeatIntervalMs: 50, SessionTimeoutMs: 1000,
			Assigned: []*strandpb.GroupTopicPartitions{{Topic: "t", Partitions: []int32{0}}}}}}, 0
	case req.GetOffsetFetch() != nil:
		return &strandpb.Response{Body: &strandpb.Response_OffsetFetch{OffsetFetch: &strandpb.OffsetFetchResponse{
			Offsets: []*strandpb.GroupCommittedOffset{{Topic: "t", Partition: 0, Offset: 0}}}}}, 0
	case req.GetOffsetCommit() != nil:
		return &strandpb.Response{Body: &strandpb.Response_OffsetCommit{OffsetCommit: &strandpb.OffsetCommitResponse{}}}, 0
	case req.GetFetch() != nil:
		out := &strandpb.FetchResponse{ThrottleMs: int32(n.throttle.Milliseconds())}
		for _, p := range req.GetFetch().GetPartitions() {
			out.Partitions = append(out.Partitions, &strandpb.FetchResponse_Partition{Topic: p.GetTopic(), Partition: p.GetPartition()})
		}
		n.throttled <- struct{}{}
		return &strandpb.Response{Body: &strandpb.Response_Fetch{Fetch: out}}, n.throttle
	}
	return &strandpb.Response{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST}}, 0
}

// Over real connections: a group member whose coordinator also answers
// its fetches throttled for 30 s (a fetch quota, at its bound) keeps
// heart-beating during the throttle, on its coordinator connection
// (coordconn.go), and keeps its partition; the client opens two
// connections to the node, no more. Before, its heartbeats waited on the
// one shared connection behind the throttle (conn.go's holdForThrottle)
// and its 1 s session lapsed. The only clock bound is a generous one:
// the heartbeats come every 50 ms, the wait allows 10 s.
func TestCoordinatorConnectionNotHeldByFetchThrottle(t *testing.T) {
	n := startThrottleNode(t, 30*time.Second)
	c, err := NewClient(SeedAddresses(n.addr), RandSeed(1), StallTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mu sync.Mutex
	var lost []TopicPartition
	g, err := NewGroupConsumer(c, "g", []string{"t"}, AutoCommitInterval(0),
		GroupConsumerOpts(FetchMaxWait(20*time.Millisecond)), OnLost(func(ps []TopicPartition) {
			mu.Lock()
			lost = append(lost, ps...)
			mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for ctx.Err() == nil {
			g.Poll(ctx)
		}
	}()
	defer func() { cancel(); <-polled }()
	bound := time.After(10 * time.Second)
	select {
	case <-n.throttled:
	case <-bound:
		t.Fatal("no fetch reached the node")
	}
	for drain := true; drain; { // count only the heartbeats read after the throttle began
		select {
		case <-n.beats:
		default:
			drain = false
		}
	}
	for i := range 30 { // 1.5 s of heartbeats at 50 ms: past the 1 s session
		select {
		case <-n.beats:
		case <-bound:
			t.Fatalf("%d heartbeats read in the fetch throttle, want 30: held behind it", i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lost) > 0 {
		t.Fatalf("the member lost %v: its session lapsed", lost)
	}
	if got := n.connections(); got != 2 {
		t.Fatalf("%d connections to the node; want 2 (data and coordinator)", got)
	}
}
