package server

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/node/server/listener"
	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/sasl"
)

// raftField is the field number of Request.raft (wire.proto).
const raftField = 30

// connAnswerBytesMax bounds the fetch answer bytes reserved for one
// connection before its reader stops taking requests;
// fetchAnswerBytesMax bounds them over all connections, of both
// listeners (a fetch waits for room; other requests never do, so
// producers are not held up by slow readers).
const (
	connAnswerBytesMax  = 32 << 20
	fetchAnswerBytesMax = 512 << 20
)

// nativeConn is the native protocol's state of one accepted connection,
// from a client or a peer node, on the connection stack (package
// listener: accept, TLS, reader and writer, slots, answer byte budgets,
// throttle, close and drain). Its reader decodes frames and hands them to
// the loop; the loop's answers go to the stack's writer, each giving back
// its request's slot and reserved answer bytes once written.
type nativeConn struct {
	r    *Server
	lc   *listener.Conn
	peer node.NodeID // set by a peer's Hello: its raft frames are accepted
	// principal is who authenticated (SASL, auth.go; or a verified TLS
	// client certificate: User:<subject>); empty: anonymous. Set before
	// the first request. certNode is the node id that certificate names
	// (0: none); a peer's Hello must claim exactly it.
	principal node.Principal
	certNode  node.NodeID
	host      string // the client's IP, for ACLs (set before the first request)
}

// nativeAnswer is one loop answer for the stack's writer.
type nativeAnswer struct{ resp *strandpb.Response }

// Ready is true: the loop queues an answer once it has it.
func (a nativeAnswer) Ready() bool { return true }

// AppendTo frames the answer.
func (a nativeAnswer) AppendTo(dst []byte) ([]byte, error) {
	buf, err := frame.Append(dst, a.resp)
	if err != nil {
		return buf, fmt.Errorf("cannot frame answer %d: %v", a.resp.GetCorrelationId(), err)
	}
	return buf, nil
}

// AppendSpliced frames the answer without copying a fetch answer's
// record batches of frame.SpliceBytesMin bytes or more: the writer writes
// them from where the node stores them (the loop hands the answer over
// and never touches it again).
func (a nativeAnswer) AppendSpliced(head []byte, bufs net.Buffers) ([]byte, net.Buffers, error) {
	head, bufs, err := frame.AppendSpliced(head, bufs, a.resp, frame.SpliceBytesMin)
	if err != nil {
		return head, bufs, fmt.Errorf("cannot frame answer %d: %v", a.resp.GetCorrelationId(), err)
	}
	return head, bufs, nil
}

// answer queues resp, the answer to a request holding slot, for the
// writer. Called on the loop; never blocks: the slot guarantees room.
func (c *nativeConn) answer(slot listener.Slot, resp *strandpb.Response) {
	c.lc.Send(slot, nativeAnswer{resp})
}

// serveNative is the native listener's reader of one connection: it
// performs the handshake, then decodes frames until the connection fails
// or the server stops.
func (r *Server) serveNative(lc *listener.Conn, br *bufio.Reader) error {
	c := &nativeConn{r: r, lc: lc, host: lc.Host()}
	lc.SetCloseLog(slog.LevelDebug, slog.Uint64("peer", 0))
	if err := c.handshake(br); err != nil {
		return err
	}
	if err := c.authenticate(br); err != nil {
		return err
	}
	var buf []byte
	for {
		if c.peer != 0 {
			// A peer's frame goes to the loop as is, so each is read into
			// a buffer of its own, which the loop gives back to
			// peerBufs once Core.Receive returned.
			buf = getPeerBuf()
		}
		lc.WaitThrottle()
		payload, err := frame.Read(br, buf, frame.BytesMaxDefault)
		if err != nil {
			return listener.ReadFailure(err)
		}
		buf = payload
		if err := c.dispatch(payload); err != nil {
			return err
		}
	}
}

// peerBufs recycles the buffers peer frames are read into: the loop
// returns each after Core.Receive (which keeps no reference to a frame), so
// a busy peer link does not allocate and zero a fresh buffer per frame.
// Buffers above peerBufBytesMax are left to the GC.
var peerBufs sync.Pool

// peerBufBytesMax bounds the capacity of a pooled peer buffer.
const peerBufBytesMax = 4 << 20

// getPeerBuf returns a pooled buffer (length 0), or nil.
func getPeerBuf() []byte {
	if p, ok := peerBufs.Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return nil
}

// putPeerBuf gives a peer frame's buffer back once nothing refers to it.
func putPeerBuf(buf []byte) {
	if cap(buf) == 0 || cap(buf) > peerBufBytesMax {
		return
	}
	peerBufs.Put(&buf)
}

// dispatch hands one frame to the loop: a raft frame from a peer, else a
// client request (which takes a slot until answered). It blocks while the
// loop's queue or the connection's slots are full: backpressure.
func (c *nativeConn) dispatch(payload []byte) error {
	if raftFrame, ok := raftFrameOf(payload); ok {
		if c.peer == 0 {
			return errors.New("raft frame on a connection that is not from a peer")
		}
		if c.r.net.faults.isolated() {
			putPeerBuf(payload)
			return nil
		}
		c.r.net.faults.wait(c.lc.Done())
		tokens, ok := c.r.budget.Acquire(len(raftFrame), c.lc.Done())
		if !ok {
			return nil
		}
		select {
		case c.r.frames <- peerFrame{frame: raftFrame, buf: payload, tokens: tokens}: // payload is the loop's now: see readLoop
		case <-c.lc.Done():
			c.r.budget.Release(tokens)
			putPeerBuf(payload)
		}
		return nil
	}
	if c.r.cfg.SASL && c.principal == "" {
		return sasl.ErrRequired // a peer's connection sends raft frames only
	}
	req := &strandpb.Request{}
	if err := proto.Unmarshal(payload, req); err != nil {
		return fmt.Errorf("malformed request: %v", err)
	}
	slot, ok := c.lc.Take()
	if !ok {
		return nil
	}
	if f := req.GetFetch(); f != nil && !c.lc.Reserve(&slot, listener.FetchAnswerBytes(f.GetMaxBytes())) {
		return nil
	}
	tokens, ok := c.r.budget.Acquire(len(payload), c.lc.Done())
	if !ok {
		return nil
	}
	select {
	case c.r.requests <- loopRequest{req: req, conn: c, slot: slot, tokens: tokens, caller: c.caller()}:
	case <-c.lc.Done():
		c.r.budget.Release(tokens)
	}
	return nil
}

// raftFrameOf finds the RaftFrame bytes of a Request{raft} without
// decoding them (the Core decodes them once, in Receive).
func raftFrameOf(b []byte) ([]byte, bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
		if num == raftField && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			return v, m >= 0
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return nil, false
		}
		b = b[m:]
	}
	return nil, false
}

// handshake reads the Hello and answers it; an unsupported version or a
// first frame that is not a Hello is answered with an error, then closed.
func (c *nativeConn) handshake(br *bufio.Reader) error {
	if err := c.tlsHandshake(br); err != nil {
		return err
	}
	c.lc.Net().SetReadDeadline(time.Now().Add(helloTimeout))
	var req strandpb.Request
	if _, err := frame.Decode(br, nil, frame.BytesMaxDefault, &req); err != nil {
		if listener.ReadFailure(err) == nil {
			return errors.New("closed before hello")
		}
		return fmt.Errorf("hello: %v", err)
	}
	c.lc.Net().SetReadDeadline(time.Time{})
	hello := req.GetHello()
	resp, refused := node.AnswerHello(&req, c.r.cfg.Core.ID, c.r.ClusterID())
	switch {
	case refused != nil:
	case hello.GetPeerNodeId() != 0 && c.r.tls != nil && node.NodeID(hello.GetPeerNodeId()) != c.certNode:
		refused = peerRefusal(node.NodeID(hello.GetPeerNodeId()), c.certNode, string(c.principal))
		resp = &strandpb.Response{CorrelationId: req.GetCorrelationId(), Error: &strandpb.Error{
			Code: strandpb.ErrorCode_ERROR_CODE_PEER_NOT_AUTHENTICATED, Message: refused.Error()}}
		c.r.logRefusal(c.lc.RemoteAddr(), "refusing peer", refused)
	default:
		c.peer = node.NodeID(hello.GetPeerNodeId())
		if c.peer != 0 {
			c.r.net.learnPeer(c.peer, hello.GetPeerAddress())
			// A peer's close stops its raft traffic until it reconnects.
			c.lc.SetCloseLog(slog.LevelWarn, slog.Uint64("peer", uint64(c.peer)))
		}
	}
	out, err := frame.Append(nil, resp)
	if err != nil {
		return err
	}
	nc := c.lc.Net()
	nc.SetWriteDeadline(time.Now().Add(helloTimeout))
	if _, err := nc.Write(out); err != nil {
		return fmt.Errorf("hello answer: %v", err)
	}
	nc.SetWriteDeadline(time.Time{})
	return refused
}
