package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"github.com/strandlog/strand/node"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// testConnDeadline bounds every read and write of a test connection,
// so a broken runtime fails the test instead of hanging it.
const testConnDeadline = 20 * time.Second

// startTestServer starts a one-node runtime on a free loopback port.
func startTestServer(t *testing.T) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := Start(Config{
		Core:     node.Config{ID: 1, Nodes: []node.Peer{{ID: 1, Address: ln.Addr().String()}}},
		DataDir:  t.TempDir(),
		Listener: ln,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return rt
}

// testConn is a raw protocol connection.
type testConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialTest(t *testing.T, rt *Server) *testConn {
	t.Helper()
	nc, err := net.Dial("tcp", rt.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(testConnDeadline))
	t.Cleanup(func() { nc.Close() })
	return &testConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *testConn) send(m *strandpb.Request) {
	c.t.Helper()
	b, err := frame.Append(nil, m)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *testConn) receive() (*strandpb.Response, error) {
	var resp strandpb.Response
	_, err := frame.Decode(c.br, nil, frame.BytesMaxDefault, &resp)
	return &resp, err
}

func (c *testConn) hello(min, max uint32) *strandpb.Response {
	c.t.Helper()
	c.send(&strandpb.Request{Body: &strandpb.Request_Hello{Hello: &strandpb.HelloRequest{VersionMin: min, VersionMax: max}}})
	resp, err := c.receive()
	if err != nil {
		c.t.Fatalf("hello: %v", err)
	}
	return resp
}

// expectClosed checks that the server closed the connection.
func (c *testConn) expectClosed(what string) {
	c.t.Helper()
	if _, err := c.receive(); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		c.t.Fatalf("%s: connection not closed: read gave %v", what, err)
	}
}

// roundTrip checks that a request on c is still answered, with its id.
func (c *testConn) roundTrip(id uint64) {
	c.t.Helper()
	c.send(&strandpb.Request{CorrelationId: id, Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}})
	resp, err := c.receive()
	if err != nil {
		c.t.Fatalf("request %d: %v", id, err)
	}
	if resp.GetCorrelationId() != id {
		c.t.Fatalf("request %d answered with correlation id %d", id, resp.GetCorrelationId())
	}
}

// A malformed frame, an oversized frame, a raft frame from a client and an
// unsupported protocol version each close only their own connection: a
// healthy connection opened before keeps being answered.
func TestServerBadClientsCloseOnlyTheirConnection(t *testing.T) {
	rt := startTestServer(t)
	good := dialTest(t, rt)
	if h := good.hello(1, 1).GetHello(); h.GetVersion() != 1 || h.GetNodeId() != 1 || h.GetFrameBytesMax() != frame.BytesMaxDefault {
		t.Fatalf("hello answered %v", h)
	}
	good.roundTrip(1)

	malformed := dialTest(t, rt)
	malformed.hello(1, 1)
	malformed.nc.Write([]byte{0, 0, 0, 3, 0xff, 0xff, 0xff}) // not a protobuf message
	malformed.expectClosed("malformed frame")
	good.roundTrip(2)

	oversized := dialTest(t, rt)
	oversized.hello(1, 1)
	oversized.nc.Write([]byte{0x7f, 0xff, 0xff, 0xff})
	oversized.expectClosed("oversized frame")
	good.roundTrip(3)

	notPeer := dialTest(t, rt)
	notPeer.hello(1, 1)
	notPeer.send(&strandpb.Request{Body: &strandpb.Request_Raft{Raft: &strandpb.RaftFrame{FromNode: 2}}})
	notPeer.expectClosed("raft frame from a client")
	good.roundTrip(4)

	future := dialTest(t, rt)
	if code := future.hello(2, 3).GetError().GetCode(); code != strandpb.ErrorCode_ERROR_CODE_UNSUPPORTED_VERSION {
		t.Fatalf("hello for versions 2..3 answered %v", code)
	}
	future.expectClosed("unsupported version")

	noHello := dialTest(t, rt)
	noHello.send(&strandpb.Request{CorrelationId: 9, Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}})
	if resp, err := noHello.receive(); err != nil || resp.GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST {
		t.Fatalf("request before hello answered %v, %v", resp, err)
	}
	noHello.expectClosed("request before hello")
	good.roundTrip(5)
}

// Once the metadata group has fixed the cluster id, every Hello answer
// carries it, and it is the id Metadata names: a client that reconnects to
// a replaced cluster behind the same address sees the change at once.
func TestHelloCarriesClusterID(t *testing.T) {
	rt := startTestServer(t)
	deadline := time.Now().Add(testConnDeadline)
	for rt.ClusterID() == nil {
		if time.Now().After(deadline) {
			t.Fatal("no cluster id after the metadata group started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	c := dialTest(t, rt)
	hello := c.hello(1, 1).GetHello()
	if len(hello.GetClusterId()) != 16 {
		t.Fatalf("hello answered cluster id %x", hello.GetClusterId())
	}
	c.send(&strandpb.Request{CorrelationId: 1, Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}})
	resp, err := c.receive()
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetMetadata().GetClusterId(); !bytes.Equal(got, hello.GetClusterId()) {
		t.Fatalf("metadata names cluster %x, hello %x", got, hello.GetClusterId())
	}
}

// Many pipelined requests on one connection are all answered, each once,
// with its own correlation id.
func TestServerPipelinedRequestsAnswered(t *testing.T) {
	rt := startTestServer(t)
	c := dialTest(t, rt)
	c.hello(1, 1)
	const n = 3 * connInFlightMax
	go func() {
		var buf []byte
		for id := uint64(1); id <= n; id++ {
			buf, _ = frame.Append(buf, &strandpb.Request{CorrelationId: id,
				Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}})
		}
		c.nc.Write(buf)
	}()
	seen := make(map[uint64]bool, n)
	for range n {
		resp, err := c.receive()
		if err != nil {
			t.Fatalf("after %d answers: %v", len(seen), err)
		}
		id := resp.GetCorrelationId()
		if id < 1 || id > n || seen[id] {
			t.Fatalf("unexpected or repeated answer %d", id)
		}
		seen[id] = true
	}
}

// The raft envelope the transport writes by hand is a framed
// Request{raft} carrying the frame's bytes unchanged, and the server finds
// those bytes again without decoding the frame.
func TestServerRaftEnvelope(t *testing.T) {
	rf := &strandpb.RaftFrame{FromNode: 3, Messages: []*strandpb.RaftMessage{{Topic: "t", Partition: 2, Message: bytes.Repeat([]byte{7}, 300)}}}
	payload, err := proto.Marshal(rf)
	if err != nil {
		t.Fatal(err)
	}
	stream := append(raftEnvelope(nil, len(payload)), payload...)
	got, err := frame.Read(bytes.NewReader(stream), nil, frame.BytesMaxDefault)
	if err != nil {
		t.Fatal(err)
	}
	var req strandpb.Request
	if err := proto.Unmarshal(got, &req); err != nil || !proto.Equal(req.GetRaft(), rf) {
		t.Fatalf("envelope decodes as %v, %v", &req, err)
	}
	inner, ok := raftFrameOf(got)
	if !ok || !bytes.Equal(inner, payload) {
		t.Fatalf("raftFrameOf found %d bytes, ok %v", len(inner), ok)
	}
	meta, _ := proto.Marshal(&strandpb.Request{CorrelationId: 4, Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{Topics: []string{"x"}}}})
	if _, ok := raftFrameOf(meta); ok {
		t.Fatal("a metadata request taken for a raft frame")
	}
}

// failingDisk is a memdisk whose files' Sync fails once fail is set.
type failingDisk struct {
	*memdisk.Disk
	fail *atomic.Bool
}

func (d failingDisk) Open(name string) (raftlog.File, error) {
	f, err := d.Disk.Open(name)
	if err != nil {
		return nil, err
	}
	return failingFile{File: f, fail: d.fail}, nil
}

type failingFile struct {
	raftlog.File
	fail *atomic.Bool
}

func (f failingFile) Sync() error {
	if f.fail.Load() {
		return errors.New("injected sync failure")
	}
	return f.File.Sync()
}

// A failed sync inside Process stops the node (fail-stop): the server
// closes, Done fires and Err names the failure, and the listener is closed.
func TestServerFailStopOnSyncError(t *testing.T) {
	var fail atomic.Bool
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := Start(Config{
		Core: node.Config{ID: 1, Nodes: []node.Peer{{ID: 1, Address: ln.Addr().String()}},
			Disk: failingDisk{Disk: memdisk.New(), fail: &fail}},
		Listener: ln,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	fail.Store(true)
	// The node's metadata group (one voter) writes on its own when it
	// elects itself and registers the node; a topic creation makes sure a
	// write comes after the failure was armed. The node may stop before it
	// answers anything: send until the connection breaks (bounded by the
	// count and the connection's deadline).
	nc, err := net.Dial("tcp", rt.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(testConnDeadline))
	br := bufio.NewReader(nc)
	requests := []*strandpb.Request{{Body: &strandpb.Request_Hello{Hello: &strandpb.HelloRequest{VersionMin: 1, VersionMax: 1}}}}
	for id := uint64(1); id <= 1000; id++ {
		requests = append(requests, &strandpb.Request{CorrelationId: id, Body: &strandpb.Request_CreateTopics{CreateTopics: &strandpb.CreateTopicsRequest{
			Topics: []*strandpb.CreateTopicsRequest_Topic{{Name: fmt.Sprintf("t%d", id), Partitions: 1, ReplicationFactor: 1}}}}})
	}
	for _, req := range requests {
		b, err := frame.Append(nil, req)
		if err != nil {
			t.Fatal(err)
		}
		var resp strandpb.Response
		if _, err := nc.Write(b); err != nil {
			break
		}
		if _, err := frame.Decode(br, nil, frame.BytesMaxDefault, &resp); err != nil {
			break
		}
	}
	select {
	case <-rt.Done():
	case <-time.After(testConnDeadline):
		t.Fatal("runtime did not stop after a sync failure")
	}
	if err := rt.Err(); err == nil || !strings.Contains(err.Error(), "injected sync failure") {
		t.Fatalf("Err() = %v, want the injected sync failure", err)
	}
	if nc, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		nc.Close()
		t.Fatal("listener still accepting after fail-stop")
	}
}
