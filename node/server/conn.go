package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/strandlog/strand/node"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
)

// raftField is the field number of Request.raft (wire.proto).
const raftField = 30

// connAnswerBytesMax bounds the fetch answer bytes reserved for one
// connection before its reader stops taking requests;
// fetchAnswerBytesMax bounds them over all connections (a fetch
// waits for room; other requests never do, so producers are not held up
// by slow readers).
const (
	connAnswerBytesMax  = 32 << 20
	fetchAnswerBytesMax = 512 << 20
)

// reservation is what one fetch holds until its answer is written: bytes
// of the connection's bound and units of the node's fetch budget.
type reservation struct {
	bytes int64
	units int
}

// reserve takes the answer bytes req may need, waiting for room in the
// connection's and the node's bounds: a fetch's max_bytes (at most what
// one answer can carry); other requests take nothing. False when the
// connection closed meanwhile.
func (c *nativeConn) reserve(req *strandpb.Request) bool {
	f := req.GetFetch()
	if f == nil {
		return true
	}
	for c.queued.Load() > connAnswerBytesMax {
		select {
		case <-c.drained:
		case <-c.done:
			return false
		}
	}
	n := int64(frame.FetchBytesMax(frame.BytesMaxDefault))
	if m := int64(f.GetMaxBytes()); m > 0 && m < n {
		n = m
	}
	units, ok := c.r.fetchAnswers.acquire(int(n), c.done)
	if !ok {
		return false
	}
	c.reservedMu.Lock()
	defer c.reservedMu.Unlock()
	if c.reservedClosed {
		c.r.fetchAnswers.release(units)
		return false
	}
	if c.reserved == nil {
		c.reserved = make(map[uint64]reservation)
	}
	id := req.GetCorrelationId()
	c.reserved[id] = reservation{bytes: c.reserved[id].bytes + n, units: c.reserved[id].units + units}
	c.queued.Add(n)
	return true
}

// release gives back what the request answered by resp reserved, once the
// answer is written.
func (c *nativeConn) release(resp *strandpb.Response) {
	c.reservedMu.Lock()
	res, ok := c.reserved[resp.GetCorrelationId()]
	delete(c.reserved, resp.GetCorrelationId())
	c.reservedMu.Unlock()
	if !ok {
		return
	}
	c.r.fetchAnswers.release(res.units)
	if c.queued.Add(-res.bytes) <= connAnswerBytesMax {
		select {
		case c.drained <- struct{}{}:
		default:
		}
	}
}

// releaseAll gives back every reservation of a closed connection.
func (c *nativeConn) releaseAll() {
	c.reservedMu.Lock()
	defer c.reservedMu.Unlock()
	c.reservedClosed = true
	for id, res := range c.reserved {
		c.r.fetchAnswers.release(res.units)
		c.queued.Add(-res.bytes)
		delete(c.reserved, id)
	}
}

// nativeConn is one accepted connection, from a client or a peer node. Its
// reader decodes frames and hands them to the loop; its writer sends the
// answers the loop queues. slots bounds the requests awaiting an answer, so
// the answer queue (of the same capacity) never fills and the loop never
// blocks on a slow client: a client that does not read stops being read.
// queued bounds the bytes of those answers too: each fetch taken reserves
// its max_bytes until its answer is written, and past
// connAnswerBytesMax reserved the reader takes no new request until
// the writer drained below it (fetch answers are up to 7 MiB each, and
// 1,024 of them queued for a slow reader pinned gigabytes; fan-out bench,
// 1,000 groups: 3-6 GB per node).
type nativeConn struct {
	r       *Server
	nc      net.Conn
	out     chan *strandpb.Response
	slots   chan struct{}
	queued  atomic.Int64  // bytes reserved by the fetches taken and not yet written
	drained chan struct{} // poked (capacity 1) when queued falls to the bound
	// reserved is each fetch's reservation by correlation id (a repeated
	// id adds to it); closed once the connection released them all.
	reservedMu     sync.Mutex
	reserved       map[uint64]reservation
	reservedClosed bool
	peer           node.NodeID // set by a peer's Hello: its raft frames are accepted
	// principal is who authenticated (SASL, auth.go; or a verified TLS
	// client certificate: User:<subject>); empty: anonymous. Set before
	// the first request. certNode is the node id that certificate names
	// (0: none); a peer's Hello must claim exactly it.
	principal node.Principal
	certNode  node.NodeID
	host      string // the client's IP, for ACLs (set before the first request)
	// throttleUntil (unix ns) pauses the reader: a quota throttle (quota.go).
	throttleUntil atomic.Int64

	done      chan struct{} // closed by close
	closeOnce sync.Once
	draining  chan struct{} // closed by closeAfterFlush
	drainOnce sync.Once
	flushed   chan struct{} // closed by the writer once drained
}

// acceptLoop accepts connections until the listener closes.
func (r *Server) acceptLoop() {
	defer r.wg.Done()
	for {
		nc, err := r.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				r.logger.Error("accept failed; no longer accepting connections", slog.Any("err", err))
			}
			return
		}
		if r.tls != nil {
			nc = tls.Server(nc, r.tlsListen)
		}
		c := &nativeConn{
			r: r, nc: nc,
			out:      make(chan *strandpb.Response, connInFlightMax),
			slots:    make(chan struct{}, connInFlightMax),
			drained:  make(chan struct{}, 1),
			done:     make(chan struct{}),
			draining: make(chan struct{}),
			flushed:  make(chan struct{}),
		}
		if !r.register(c) {
			r.logger.Warn("refusing connection: too many open", slog.String("remote", nc.RemoteAddr().String()),
				slog.Int("open", connsMax))
			nc.Close()
			continue
		}
		r.wg.Add(2)
		go c.readLoop()
		go c.writeLoop()
	}
}

// register records c unless the server is stopping or full.
func (r *Server) register(c *nativeConn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.stop:
		return false
	default:
	}
	if len(r.conns) >= connsMax {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

// close closes the connection once, logging why unless reason is "": at
// warn for a peer node's connection (its raft traffic stops until it
// reconnects), at debug for a client's (the client sees it and retries).
func (c *nativeConn) close(reason string) {
	c.closeOnce.Do(func() {
		if reason != "" {
			level := slog.LevelDebug
			if c.peer != 0 && reason != reasonShutdown {
				level = slog.LevelWarn
			}
			c.r.logger.Log(context.Background(), level, "closing connection", slog.String("remote", c.nc.RemoteAddr().String()),
				slog.Uint64("peer", uint64(c.peer)), slog.String("reason", reason))
		}
		close(c.done)
		c.nc.Close()
		c.releaseAll()
		c.r.mu.Lock()
		delete(c.r.conns, c)
		c.r.mu.Unlock()
	})
}

// closeAfterFlush waits until the writer has sent what is queued, or the
// deadline passes.
func (c *nativeConn) closeAfterFlush(deadline time.Time) {
	c.drainOnce.Do(func() { close(c.draining) })
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-c.flushed:
	case <-c.done:
	case <-timer.C:
	}
}

// answer queues resp for the writer. Called on the loop; never blocks: the
// slot taken by the request guarantees room.
func (c *nativeConn) answer(resp *strandpb.Response) {
	select {
	case c.out <- resp:
	default:
		c.close("answer queue full (more answers than requests)")
	}
}

// readLoop performs the handshake, then decodes frames until the
// connection fails or the server stops.
func (c *nativeConn) readLoop() {
	defer c.r.wg.Done()
	br := bufio.NewReaderSize(c.nc, 64<<10)
	if err := c.handshake(br); err != nil {
		c.close(err.Error())
		return
	}
	if err := c.authenticate(br); err != nil {
		c.close(err.Error())
		return
	}
	var buf []byte
	for {
		if c.peer != 0 {
			// A peer's frame goes to the loop as is, so each is read into
			// a buffer of its own, which the loop gives back to
			// peerBufs once Core.Receive returned.
			buf = getPeerBuf()
		}
		c.waitThrottle()
		payload, err := frame.Read(br, buf, frame.BytesMaxDefault)
		if err != nil {
			c.close(readFailure(err))
			return
		}
		buf = payload
		if err := c.dispatch(payload); err != nil {
			c.close(err.Error())
			return
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

// readFailure is the reason logged for a failed read: nothing for a clean
// close by the other side.
func readFailure(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return ""
	}
	return fmt.Sprintf("read: %v", err)
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
		c.r.net.faults.wait(c.done)
		tokens, ok := c.r.budget.acquire(len(raftFrame), c.done)
		if !ok {
			return nil
		}
		select {
		case c.r.frames <- peerFrame{frame: raftFrame, buf: payload, tokens: tokens}: // payload is the loop's now: see readLoop
		case <-c.done:
			c.r.budget.release(tokens)
			putPeerBuf(payload)
		}
		return nil
	}
	if c.r.cfg.SASL && c.principal == "" {
		return errSASLRequired // a peer's connection sends raft frames only
	}
	req := &strandpb.Request{}
	if err := proto.Unmarshal(payload, req); err != nil {
		return fmt.Errorf("malformed request: %v", err)
	}
	select {
	case c.slots <- struct{}{}:
	case <-c.done:
		return nil
	}
	if !c.reserve(req) {
		return nil
	}
	tokens, ok := c.r.budget.acquire(len(payload), c.done)
	if !ok {
		return nil
	}
	select {
	case c.r.requests <- loopRequest{req: req, conn: c, tokens: tokens, caller: c.caller()}:
	case <-c.done:
		c.r.budget.release(tokens)
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
	c.nc.SetReadDeadline(time.Now().Add(helloTimeout))
	if err := c.tlsHandshake(br); err != nil {
		return err
	}
	var req strandpb.Request
	if _, err := frame.Decode(br, nil, frame.BytesMaxDefault, &req); err != nil {
		if readFailure(err) == "" {
			return errors.New("closed before hello")
		}
		return fmt.Errorf("hello: %v", err)
	}
	c.nc.SetReadDeadline(time.Time{})
	hello := req.GetHello()
	resp := &strandpb.Response{CorrelationId: req.GetCorrelationId()}
	var refused error
	switch {
	case hello == nil:
		refused = errors.New("first frame is not a hello")
		resp.Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: refused.Error()}
	case hello.GetVersionMin() > protocolVersion || hello.GetVersionMax() < protocolVersion:
		refused = fmt.Errorf("unsupported protocol versions %d..%d (node speaks %d)",
			hello.GetVersionMin(), hello.GetVersionMax(), protocolVersion)
		resp.Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_UNSUPPORTED_VERSION, Message: refused.Error()}
	case hello.GetPeerNodeId() != 0 && c.r.tls != nil && node.NodeID(hello.GetPeerNodeId()) != c.certNode:
		refused = peerRefusal(node.NodeID(hello.GetPeerNodeId()), c.certNode, string(c.principal))
		resp.Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_PEER_NOT_AUTHENTICATED, Message: refused.Error()}
		c.logRefusal("refusing peer", refused)
	default:
		c.peer = node.NodeID(hello.GetPeerNodeId())
		if c.peer != 0 {
			c.r.net.learnPeer(c.peer, hello.GetPeerAddress())
		}
		resp.Body = &strandpb.Response_Hello{Hello: &strandpb.HelloResponse{
			Version: protocolVersion, NodeId: uint64(c.r.cfg.Core.ID), FrameBytesMax: frame.BytesMaxDefault,
			ClusterId: c.r.ClusterID()}}
	}
	out, err := frame.Append(nil, resp)
	if err != nil {
		return err
	}
	c.nc.SetWriteDeadline(time.Now().Add(helloTimeout))
	if _, err := c.nc.Write(out); err != nil {
		return fmt.Errorf("hello answer: %v", err)
	}
	c.nc.SetWriteDeadline(time.Time{})
	return refused
}

// writeLoop sends queued answers, flushing whenever the queue runs empty,
// so pipelined answers share writes.
func (c *nativeConn) writeLoop() {
	defer c.r.wg.Done()
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	var buf []byte
	for {
		select {
		case <-c.done:
			return
		case <-c.draining:
			c.drain(bw, buf)
			return
		case resp := <-c.out:
			var err error
			if buf, err = c.write(bw, buf, resp); err != nil {
				c.close(err.Error())
				return
			}
		}
	}
}

// write frames one answer and frees its slot; flushes when nothing else waits.
func (c *nativeConn) write(bw *bufio.Writer, buf []byte, resp *strandpb.Response) ([]byte, error) {
	buf, err := frame.Append(buf[:0], resp)
	if err != nil {
		return buf, fmt.Errorf("cannot frame answer %d: %v", resp.GetCorrelationId(), err)
	}
	<-c.slots
	c.nc.SetWriteDeadline(time.Now().Add(responseWriteTimeout))
	if _, err := bw.Write(buf); err != nil {
		return buf, fmt.Errorf("write: %v", err)
	}
	if len(c.out) == 0 {
		if err := bw.Flush(); err != nil {
			return buf, fmt.Errorf("write: %v", err)
		}
	}
	c.release(resp)
	return buf, nil
}

// drain writes what is queued at shutdown, then signals flushed.
func (c *nativeConn) drain(bw *bufio.Writer, buf []byte) {
	defer close(c.flushed)
	for {
		select {
		case resp := <-c.out:
			var err error
			if buf, err = c.write(bw, buf, resp); err != nil {
				return
			}
		default:
			bw.Flush()
			return
		}
	}
}
