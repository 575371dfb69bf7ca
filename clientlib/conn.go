package clientlib

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
)

// Protocol versions this client speaks in its Hello.
const (
	protocolVersionMin = 1
	protocolVersionMax = 1
)

// errConnClosed is the cause of calls failed because the client closed.
var errConnClosed = errors.New("connection closed")

// brokerConn is one pipelined connection to a node: a writer goroutine
// sends frames in order, a reader goroutine matches answers to calls by
// correlation id (in any order). slots bounds calls in flight. Any stream
// error kills the connection and fails every pending call with a
// *ConnError; the next request dials again.
type brokerConn struct {
	addr   string
	nodeID uint64
	// clusterID is the cluster id the node named in its Hello (nil: none).
	clusterID []byte
	nc        net.Conn
	slots     chan struct{}
	writes    chan *call

	mu       sync.Mutex
	calls    map[uint64]*call
	nextCorr uint64
	dead     chan struct{}
	deadErr  error
}

// call is one request waiting for its answer.
type call struct {
	req      *strandpb.Request
	noAnswer bool // acks=0 produce: done once written
	sent     atomic.Bool
	done     chan struct{}
	once     sync.Once
	resp     *strandpb.Response
	err      error
}

func (cl *call) finish(resp *strandpb.Response, err error) {
	cl.once.Do(func() {
		cl.resp, cl.err = resp, err
		close(cl.done)
	})
}

// dialConn connects to addr and performs the handshake.
func dialConn(ctx context.Context, cfg *config, addr string) (*brokerConn, error) {
	dctx, cancel := context.WithTimeout(ctx, cfg.dialTimeout)
	defer cancel()
	nc, err := cfg.dial(dctx, addr)
	if err != nil {
		return nil, &ConnError{Addr: addr, Err: err}
	}
	deadline, _ := dctx.Deadline()
	nc.SetDeadline(deadline)
	r := bufio.NewReader(nc)
	nodeID, clusterID, err := handshake(nc, r, cfg.clientID)
	if err != nil {
		nc.Close()
		var se *Error
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, &ConnError{Addr: addr, Err: err}
	}
	nc.SetDeadline(time.Time{})
	c := &brokerConn{
		addr:      addr,
		nodeID:    nodeID,
		clusterID: clusterID,
		nc:        nc,
		slots:     make(chan struct{}, cfg.inFlightPerConn),
		writes:    make(chan *call, cfg.inFlightPerConn),
		calls:     make(map[uint64]*call),
		nextCorr:  1,
		dead:      make(chan struct{}),
	}
	go c.writeLoop()
	go c.readLoop(r)
	return c, nil
}

// handshake sends Hello (correlation id 0) and checks the answer; it
// returns the node's id and its cluster's id (nil when it names none).
func handshake(nc net.Conn, r *bufio.Reader, clientID string) (uint64, []byte, error) {
	hello := &strandpb.Request{Body: &strandpb.Request_Hello{Hello: &strandpb.HelloRequest{
		VersionMin: protocolVersionMin, VersionMax: protocolVersionMax, ClientId: clientID}}}
	buf, err := frame.Append(nil, hello)
	if err != nil {
		return 0, nil, err
	}
	if _, err := nc.Write(buf); err != nil {
		return 0, nil, err
	}
	var resp strandpb.Response
	if _, err := frame.Decode(r, nil, frame.BytesMaxDefault, &resp); err != nil {
		return 0, nil, err
	}
	if err := errorFromWire(resp.GetError()); err != nil {
		return 0, nil, err
	}
	h := resp.GetHello()
	if h == nil || h.GetVersion() < protocolVersionMin || h.GetVersion() > protocolVersionMax {
		return 0, nil, fmt.Errorf("handshake: node answered %v", &resp)
	}
	return h.GetNodeId(), h.GetClusterId(), nil
}

// kill closes the connection once and fails every pending call.
func (c *brokerConn) kill(err error) {
	c.mu.Lock()
	if c.deadErr != nil {
		c.mu.Unlock()
		return
	}
	c.deadErr = err
	close(c.dead)
	calls := c.calls
	c.calls = map[uint64]*call{}
	c.mu.Unlock()
	c.nc.Close()
	for _, cl := range calls {
		cl.finish(nil, &ConnError{Addr: c.addr, Sent: cl.sent.Load(), Err: err})
	}
}

func (c *brokerConn) isDead() bool {
	select {
	case <-c.dead:
		return true
	default:
		return false
	}
}

func (c *brokerConn) writeLoop() {
	var buf []byte
	for {
		select {
		case <-c.dead:
			return
		case cl := <-c.writes:
			var err error
			if buf, err = frame.Append(buf[:0], cl.req); err != nil {
				c.unregister(cl.req.GetCorrelationId())
				cl.finish(nil, fmt.Errorf("clientlib: cannot frame request: %w", err))
				continue
			}
			cl.sent.Store(true)
			if _, err := c.nc.Write(buf); err != nil {
				c.kill(err)
				return
			}
			if cl.noAnswer {
				c.unregister(cl.req.GetCorrelationId())
				cl.finish(nil, nil)
			}
		}
	}
}

func (c *brokerConn) readLoop(r *bufio.Reader) {
	var buf []byte
	for {
		resp := &strandpb.Response{}
		var err error
		if buf, err = frame.Decode(r, buf, frame.BytesMaxDefault, resp); err != nil {
			c.kill(err)
			return
		}
		if cl := c.unregister(resp.GetCorrelationId()); cl != nil {
			cl.finish(resp, nil)
		}
		// An answer nobody waits for (acks=0, a call given up on) is dropped.
	}
}

func (c *brokerConn) unregister(corr uint64) *call {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.calls[corr]
	delete(c.calls, corr)
	return cl
}

// roundTrip sends req and waits for its answer, ctx, or timeout.
func (c *brokerConn) roundTrip(ctx context.Context, req *strandpb.Request, noAnswer bool, timeout time.Duration) (*strandpb.Response, error) {
	cl, err := c.begin(ctx, req, noAnswer)
	if err != nil {
		return nil, err
	}
	return c.await(ctx, cl, timeout)
}

// begin queues req for the writer and returns its call; req itself is
// never modified. Calls begun one
// after another from one goroutine are written in that order. It blocks
// while the connection's in-flight slots are all taken; the slot is freed
// by await.
func (c *brokerConn) begin(ctx context.Context, req *strandpb.Request, noAnswer bool) (*call, error) {
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.dead:
		return nil, &ConnError{Addr: c.addr, Err: c.deadErr}
	}
	c.mu.Lock()
	if c.deadErr != nil {
		err := c.deadErr
		c.mu.Unlock()
		<-c.slots
		return nil, &ConnError{Addr: c.addr, Err: err}
	}
	corr := c.nextCorr
	c.nextCorr++
	// A shallow copy per send: the caller's request may be sent again on
	// another connection while this one's writer still reads it.
	cl := &call{req: &strandpb.Request{CorrelationId: corr, Body: req.GetBody()}, noAnswer: noAnswer, done: make(chan struct{})}
	c.calls[corr] = cl
	c.mu.Unlock()
	c.writes <- cl // never blocks: capacity equals the slots
	return cl, nil
}

// await waits for a begun call's answer, ctx, or timeout, and frees its
// slot. A timeout kills the connection (as Kafka does) and returns a
// TIMEOUT *Error: the outcome is unknown.
func (c *brokerConn) await(ctx context.Context, cl *call, timeout time.Duration) (*strandpb.Response, error) {
	defer func() { <-c.slots }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-cl.done:
		return cl.resp, cl.err
	case <-ctx.Done():
		c.unregister(cl.req.GetCorrelationId())
		return nil, ctx.Err()
	case <-timer.C:
		c.kill(fmt.Errorf("no answer within %v", timeout))
		<-cl.done
		if cl.err == nil {
			return cl.resp, nil
		}
		return nil, &Error{Code: strandpb.ErrorCode_ERROR_CODE_TIMEOUT,
			Message: fmt.Sprintf("no answer from %s within %v", c.addr, timeout)}
	}
}
