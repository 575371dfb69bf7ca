package kafkaproto

import (
	"bufio"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// fakeBackend answers every request at once with a plausible answer: the
// produce's partitions at offset 0, one stored batch per fetched
// partition, one node and one topic for metadata.
type fakeBackend struct{}

func (fakeBackend) Submit(done <-chan struct{}, req *strandpb.Request, reply func(*strandpb.Response)) error {
	resp := &strandpb.Response{CorrelationId: req.GetCorrelationId()}
	switch b := req.GetBody().(type) {
	case *strandpb.Request_Metadata:
		resp.Body = &strandpb.Response_Metadata{Metadata: &strandpb.MetadataResponse{
			Nodes: []*strandpb.MetadataResponse_Node{{Id: 1, Address: "127.0.0.1:1", KafkaAddress: "127.0.0.1:2"}},
			Topics: []*strandpb.MetadataResponse_Topic{{Name: "t", TopicId: make([]byte, 16),
				Partitions: []*strandpb.MetadataResponse_Partition{{Partition: 0, LeaderId: 1, LeaderTerm: 2, Replicas: []uint64{1}}}}},
			ControllerId: 1, ClusterId: make([]byte, 16)}}
	case *strandpb.Request_Produce:
		out := &strandpb.ProduceResponse{}
		for _, p := range b.Produce.GetPartitions() {
			out.Partitions = append(out.Partitions, &strandpb.ProduceResponse_Partition{Topic: p.GetTopic(), Partition: p.GetPartition()})
		}
		resp.Body = &strandpb.Response_Produce{Produce: out}
	case *strandpb.Request_Fetch:
		batch, _ := recordbatch.Encode(nil, testRecords())
		out := &strandpb.FetchResponse{}
		for _, p := range b.Fetch.GetPartitions() {
			out.Partitions = append(out.Partitions, &strandpb.FetchResponse_Partition{Topic: p.GetTopic(), Partition: p.GetPartition(),
				HighWatermark: 4, Batches: []*strandpb.FetchResponse_Batch{{BaseOffset: 0, Records: batch}}})
		}
		resp.Body = &strandpb.Response_Fetch{Fetch: out}
	case *strandpb.Request_ListOffsets:
		out := &strandpb.ListOffsetsResponse{}
		for _, p := range b.ListOffsets.GetPartitions() {
			out.Partitions = append(out.Partitions, &strandpb.ListOffsetsResponse_Partition{Topic: p.GetTopic(), Partition: p.GetPartition(), Offset: 4})
		}
		resp.Body = &strandpb.Response_ListOffsets{ListOffsets: out}
	case *strandpb.Request_FindCoordinator:
		resp.Body = &strandpb.Response_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorResponse{NodeId: 1}}
	case *strandpb.Request_GroupHeartbeat:
		resp.Body = &strandpb.Response_GroupHeartbeat{GroupHeartbeat: &strandpb.ConsumerGroupHeartbeatResponse{
			MemberId: b.GroupHeartbeat.GetMemberId(), MemberEpoch: 3, Assigned: []*strandpb.GroupTopicPartitions{{Topic: "t", Partitions: []int32{0}}}}}
	case *strandpb.Request_DescribeGroups:
		out := &strandpb.DescribeGroupsResponse{}
		for _, g := range b.DescribeGroups.GetGroups() {
			out.Groups = append(out.Groups, &strandpb.DescribeGroupsResponse_Group{Group: g, State: "stable",
				Members: []*strandpb.GroupMember{{MemberId: "m", MemberEpoch: 3, Subscriptions: []string{"t"}}}})
		}
		resp.Body = &strandpb.Response_DescribeGroups{DescribeGroups: out}
	case *strandpb.Request_InitProducerId:
		resp.Body = &strandpb.Response_InitProducerId{InitProducerId: &strandpb.InitProducerIdResponse{ProducerId: 9}}
	case *strandpb.Request_TxnInitProducerId:
		resp.Body = &strandpb.Response_TxnInitProducerId{TxnInitProducerId: &strandpb.TxnInitProducerIdResponse{ProducerId: 9, ProducerEpoch: 1}}
	case *strandpb.Request_AddPartitionsToTxn:
		out := &strandpb.AddPartitionsToTxnResponse{}
		for _, tp := range b.AddPartitionsToTxn.GetTopics() {
			for _, p := range tp.GetPartitions() {
				out.Results = append(out.Results, &strandpb.AddPartitionsToTxnResponse_Result{Topic: tp.GetTopic(), Partition: p})
			}
		}
		resp.Body = &strandpb.Response_AddPartitionsToTxn{AddPartitionsToTxn: out}
	case *strandpb.Request_EndTxn:
		resp.Body = &strandpb.Response_EndTxn{EndTxn: &strandpb.EndTxnResponse{ProducerId: 9, ProducerEpoch: 2}}
	case *strandpb.Request_DescribeTransactions:
		out := &strandpb.DescribeTransactionsResponse{}
		for _, id := range b.DescribeTransactions.GetTransactionalIds() {
			out.Transactions = append(out.Transactions, &strandpb.DescribeTransactionsResponse_Transaction{TransactionalId: id, State: "Ongoing",
				Topics: []*strandpb.TxnPartitions{{Topic: "t", Partitions: []int32{0}}}})
		}
		resp.Body = &strandpb.Response_DescribeTransactions{DescribeTransactions: out}
	case *strandpb.Request_ListTransactions:
		resp.Body = &strandpb.Response_ListTransactions{ListTransactions: &strandpb.ListTransactionsResponse{
			Transactions: []*strandpb.ListTransactionsResponse_Transaction{{TransactionalId: "tx", ProducerId: 9, State: "Ongoing"}}}}
	default:
		resp.Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_TIMEOUT, Message: "fake"}
	}
	reply(resp)
	return nil
}

// startFake serves the Kafka protocol on 127.0.0.1 over fakeBackend.
func startFake(t *testing.T) *Server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := Serve(ln, Config{Backend: fakeBackend{}, NodeID: 1, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(s.Close)
	return s
}

// rawConn speaks framed Kafka requests.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, s *Server) *rawConn {
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// send writes a request with a v1 or v2 header (flexible adds the tags).
func (c *rawConn) send(key, version int16, corr int32, flexible bool, body []byte) {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if flexible {
		b = append(b, 0)
	}
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// recv reads one response, returning its body after the correlation id.
func (c *rawConn) recv() (int32, []byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil {
		return 0, nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.br, b); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(b)), b[4:], nil
}

// ApiVersions: a version newer than any the node knows is answered in v0
// with UNSUPPORTED_VERSION and the served list (KIP-511), on the same
// connection, which then serves a flexible v3 ApiVersions.
func TestApiVersionsNegotiation(t *testing.T) {
	c := dialRaw(t, startFake(t))
	c.send(18, 99, 1, true, []byte{0, 0, 0})
	corr, body, err := c.recv()
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	if err := resp.ReadFrom(body); err != nil || corr != 1 || resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != len(apis) {
		t.Fatalf("corr %d err %v: %+v", corr, err, resp)
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	c.send(18, 3, 2, true, req.AppendTo(nil))
	corr, body, err = c.recv()
	if err != nil {
		t.Fatal(err)
	}
	resp = kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	if err := resp.ReadFrom(body); err != nil || corr != 2 || resp.ErrorCode != 0 {
		t.Fatalf("v3: corr %d err %v: %+v", corr, err, resp)
	}
}

// A served API at a version outside the served range is answered with
// UNSUPPORTED_VERSION, per partition for a transactions API
// (TxnOffsetCommit v5, transactions v2's, not served), with a message where the
// version has one; the connection stays open for the next request.
func TestUnsupportedAnsweredNotDropped(t *testing.T) {
	c := dialRaw(t, startFake(t))
	toc := kmsg.NewPtrTxnOffsetCommitRequest()
	toc.SetVersion(5)
	toc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0}}}}
	for _, req := range []kmsg.Request{toc} {
		c.send(req.Key(), req.GetVersion(), 7, true, req.AppendTo(nil))
		_, body, err := c.recv()
		if err != nil {
			t.Fatalf("key %d dropped the connection: %v", req.Key(), err)
		}
		resp := req.ResponseKind()
		if req.IsFlexible() {
			body = body[1:] // the response header's tag section
		}
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("key %d answer: %v", req.Key(), err)
		}
		if code := unsupportedCode(resp); code != kerr.UnsupportedVersion.Code {
			t.Fatalf("key %d answered %+v", req.Key(), resp)
		}
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.SetVersion(0) // below the served 1
	c.send(2, 0, 8, false, lo.AppendTo(nil))
	_, body, err := c.recv()
	if err != nil {
		t.Fatalf("ListOffsets v0 dropped the connection: %v", err)
	}
	lr := kmsg.NewPtrListOffsetsResponse()
	lr.SetVersion(0)
	if err := lr.ReadFrom(body); err != nil {
		t.Fatalf("ListOffsets v0 answer: %v", err)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(9)
	c.send(3, 9, 9, true, md.AppendTo(nil))
	corr, body, err := c.recv()
	if err != nil {
		t.Fatal(err)
	}
	mr := kmsg.NewPtrMetadataResponse()
	mr.SetVersion(9)
	if _, err := skipTags(body); err != nil || corr != 9 {
		t.Fatalf("metadata header: %v", err)
	}
	if err := mr.ReadFrom(body[1:]); err != nil || len(mr.Brokers) != 1 || mr.Brokers[0].Port != 2 {
		t.Fatalf("metadata: %v %+v", err, mr)
	}
}

// A malformed request closes only its own connection: another connection
// keeps being answered.
func TestMalformedRequestClosesOnlyItsConnection(t *testing.T) {
	s := startFake(t)
	good, bad := dialRaw(t, s), dialRaw(t, s)
	bad.send(3, 9, 1, true, []byte{0xff, 0xff, 0xff}) // a topic array of garbage
	if _, _, err := bad.recv(); err == nil {
		t.Fatal("malformed metadata was answered")
	}
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(4)
	good.send(3, 4, 2, false, md.AppendTo(nil))
	if corr, _, err := good.recv(); err != nil || corr != 2 {
		t.Fatalf("the other connection: corr %d, %v", corr, err)
	}
}

// unsupportedCode is a transactions answer's error code: the top-level
// one, else the first partition's.
func unsupportedCode(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case *kmsg.AddPartitionsToTxnResponse:
		if len(r.Topics) > 0 && len(r.Topics[0].Partitions) > 0 {
			return r.Topics[0].Partitions[0].ErrorCode
		}
		return r.ErrorCode
	case *kmsg.AddOffsetsToTxnResponse:
		return r.ErrorCode
	case *kmsg.EndTxnResponse:
		return r.ErrorCode
	case *kmsg.TxnOffsetCommitResponse:
		if len(r.Topics) > 0 && len(r.Topics[0].Partitions) > 0 {
			return r.Topics[0].Partitions[0].ErrorCode
		}
	}
	return -2
}
