package clientlib

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/internal/clientcore"
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

// brokerConn is one pipelined connection to a node. A caller writes its
// own request under the connection's write lock (franz-go's way: no writer
// goroutine to hand it to); one reader goroutine matches answers to calls
// by correlation id (in any order) and completes each where it waits: a
// done channel, or a callback run on the reader (the producer's requests,
// the consumer's fetches: no goroutine per request). One watchdog
// goroutine per connection keeps every call's deadline and the stall rule
// on a single timer (no timer per call). slots bounds calls in flight. Any
// stream error kills the connection and fails every pending call with a
// *ConnError; the next request dials again.
type brokerConn struct {
	addr     string
	nodeID   uint64
	frameMax int // the smaller of the node's announced frame limit and ours
	// clusterID is the cluster id the node named in its Hello (nil: none).
	clusterID []byte
	nc        net.Conn
	slots     chan struct{}

	// wlock serializes writes (a channel of one: held when full): a call
	// is numbered and written whole under it, so calls begun one after
	// another are written in that order. It is a channel, not a mutex, so
	// a caller waiting for it gives up when its ctx ends or the
	// connection dies (lockWrites); it is never held while waiting out a
	// throttle.
	wlock chan struct{}
	wbuf  []byte      // the frame being written, reused (under wlock)
	wvec  net.Buffers // its pieces (under wlock)
	// writev: the connection writes net.Buffers in one writev (a TCP
	// socket; a TLS connection would write each piece as a record).
	writev bool

	// Stall detection (Stalled): the time every read last returned bytes,
	// in ns since born; stall is StallTimeout; onStall is told the node's
	// id when a call gives up on it.
	born     time.Time
	lastRead *atomic.Int64
	stall    time.Duration
	onStall  func(node uint64)
	// throttleUntil is when the node's quota throttle on this connection
	// ends, in ns since born (0: never throttled): writes are held until
	// then, and the watchdog does not count the pause
	// (clientcore.Throttle). Only the reader raises it.
	throttleUntil atomic.Int64
	// armed is when the watchdog wakes next, in ns since born; a call
	// whose deadline comes earlier kicks it.
	armed atomic.Int64
	kick  chan struct{}

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
	sentAt   atomic.Int64 // ns since the connection's born, once written
	// begun is when the call was begun (ns since born); timeout bounds the
	// wait for its answer from then (past a throttle), wait is how long
	// the node may legitimately hold it (a fetch's long poll). The
	// watchdog reads them.
	begun   time.Duration
	timeout time.Duration
	wait    time.Duration
	// onDone, when set, is called once with the outcome, on whichever
	// goroutine finishes the call (the reader, the watchdog, a writer that
	// fails); else done is closed.
	onDone func(*strandpb.Response, error)
	slots  chan struct{} // the connection's, freed once when finished
	done   chan struct{}
	once   sync.Once
	resp   *strandpb.Response
	err    error
}

func (cl *call) finish(resp *strandpb.Response, err error) {
	cl.once.Do(func() {
		cl.resp, cl.err = resp, err
		<-cl.slots
		if cl.onDone != nil {
			cl.onDone(resp, err)
			return
		}
		close(cl.done)
	})
}

// dialConn connects to addr and performs the handshake.
// onStall is told the node's id when a call gives up on it (Stalled);
// stallBound gives the node's bound once its id is known.
func dialConn(ctx context.Context, cfg *config, addr string, onStall func(node uint64),
	stallBound func(node uint64) time.Duration) (*brokerConn, error) {
	dctx, cancel := context.WithTimeout(ctx, cfg.dialTimeout)
	defer cancel()
	nc, err := cfg.dial(dctx, addr)
	if err != nil {
		return nil, &ConnError{Addr: addr, Err: err}
	}
	// The handshakes (TLS, then Hello) wait at most StallTimeout for an
	// answer: a paused node accepts connections (its kernel does) but
	// answers nothing.
	deadline, _ := dctx.Deadline()
	if t := time.Now().Add(cfg.stallTimeout); cfg.stallTimeout > 0 && t.Before(deadline) {
		deadline = t
	}
	if cfg.tls != nil {
		hctx, cancel := context.WithDeadline(dctx, deadline)
		nc, err = tlsHandshake(hctx, cfg.tls, nc, addr)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	nc.SetDeadline(deadline)
	born := time.Now()
	lastRead := new(atomic.Int64)
	r := bufio.NewReader(activityReader{r: nc, born: born, last: lastRead})
	hello, err := handshake(nc, r, cfg.clientID)
	if err == nil && cfg.sasl != nil {
		err = authenticate(nc, r, cfg.sasl)
	}
	if err != nil {
		nc.Close()
		return nil, dialFailure(cfg, addr, err)
	}
	nc.SetDeadline(time.Time{})
	c := &brokerConn{
		addr:      addr,
		nodeID:    hello.GetNodeId(),
		frameMax:  frameBytesMax(hello),
		clusterID: hello.GetClusterId(),
		born:      born,
		lastRead:  lastRead,
		stall:     stallBound(hello.GetNodeId()),
		onStall:   onStall,
		nc:        nc,
		slots:     make(chan struct{}, cfg.inFlightPerConn),
		wlock:     make(chan struct{}, 1),
		writev:    isTCP(nc),
		kick:      make(chan struct{}, 1),
		calls:     make(map[uint64]*call),
		nextCorr:  1,
		dead:      make(chan struct{}),
	}
	c.armed.Store(int64(watchIdle))
	go c.watch()
	go c.readLoop(r)
	return c, nil
}

// isTCP reports whether nc is a TCP socket (net.Buffers are written with
// writev).
func isTCP(nc net.Conn) bool {
	_, ok := nc.(*net.TCPConn)
	return ok
}

// activityReader records when a read last returned bytes, for Stalled.
type activityReader struct {
	r    io.Reader
	born time.Time
	last *atomic.Int64
}

func (a activityReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.last.Store(int64(time.Since(a.born)))
	}
	return n, err
}

// notStrand is a handshake answer that is no Strand frame; cause is what
// the answer looked like.
type notStrand struct{ cause error }

func (n *notStrand) Error() string { return "not a Strand frame: " + n.cause.Error() }

// handshake sends Hello (correlation id 0) and checks the answer. An
// answer that does not decode as a Strand frame (an HTTP page read as a
// length of 1 GB, bytes that are no Response, a Response without a hello)
// fails with a *notStrand carrying the cause; a network failure is
// returned as is.
func handshake(nc net.Conn, r *bufio.Reader, clientID string) (*strandpb.HelloResponse, error) {
	buf, err := frame.Append(nil, helloRequest(clientID))
	if err != nil {
		return nil, err
	}
	if _, err := nc.Write(buf); err != nil {
		return nil, err
	}
	var resp strandpb.Response
	if _, err := frame.Decode(r, nil, frame.BytesMaxDefault, &resp); err != nil {
		if errors.Is(err, frame.ErrTooLarge) || errors.Is(err, frame.ErrEmpty) || errors.Is(err, frame.ErrMalformed) {
			return nil, &notStrand{cause: err}
		}
		return nil, err
	}
	return checkHello(&resp)
}

// helloRequest is a connection's first request: the protocol versions the
// client speaks, and its id.
func helloRequest(clientID string) *strandpb.Request {
	return &strandpb.Request{Body: &strandpb.Request_Hello{Hello: &strandpb.HelloRequest{
		VersionMin: protocolVersionMin, VersionMax: protocolVersionMax, ClientId: clientID}}}
}

// checkHello judges the answer to a Hello: the node's Hello, or why the
// connection cannot be used (the node refused, speaks another version, or
// is not a Strand node).
func checkHello(resp *strandpb.Response) (*strandpb.HelloResponse, error) {
	if err := errorFromWire(resp.GetError()); err != nil {
		return nil, err
	}
	h := resp.GetHello()
	if h == nil {
		return nil, &notStrand{cause: errors.New("the answer to hello is not a hello")}
	}
	if h.GetVersion() < protocolVersionMin || h.GetVersion() > protocolVersionMax {
		return nil, &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNSUPPORTED_VERSION,
			Message: fmt.Sprintf("node speaks protocol version %d, this client %d..%d", h.GetVersion(), protocolVersionMin, protocolVersionMax)}
	}
	return h, nil
}

// dialFailure is the error of a dial whose handshake or authentication
// failed with err: the node's definite refusal as it is (TLS required as a
// TLSError), a peer that is no Strand node, or else a *ConnError, not sent.
func dialFailure(cfg *config, addr string, err error) error {
	var se *Error
	if errors.As(err, &se) {
		if se.Code == strandpb.ErrorCode_ERROR_CODE_TLS_REQUIRED {
			return definiteTLS(&TLSError{Addr: addr, NodeWantsTLS: true, Err: err})
		}
		return err
	}
	if cfg.tls != nil && isRemoteAlert(err) {
		return definiteTLS(&TLSError{Addr: addr, Err: err})
	}
	var ns *notStrand
	if errors.As(err, &ns) {
		return &NotStrandError{Addr: addr, Err: &ConnError{Addr: addr, Err: ns.cause}}
	}
	return &ConnError{Addr: addr, Err: err}
}

// frameBytesMax is the frame limit both ends of a connection accept: ours,
// or the node's announced one when smaller (0: a node that announces none
// uses the default).
func frameBytesMax(h *strandpb.HelloResponse) int {
	if n := int(h.GetFrameBytesMax()); n > 0 && n < frame.BytesMaxDefault {
		return n
	}
	return frame.BytesMaxDefault
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
		cl.finish(nil, connFailure(c.addr, cl.sent.Load(), err))
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

func (c *brokerConn) readLoop(r *bufio.Reader) {
	var buf []byte
	for {
		resp := &strandpb.Response{}
		var err error
		if buf, err = frame.Decode(r, buf, frame.BytesMaxDefault, resp); err != nil {
			c.kill(err)
			return
		}
		if d := clientcore.Throttle(resp); d > 0 && !bugIgnoresThrottle() {
			c.throttleUntil.Store(max(c.throttleUntil.Load(), int64(time.Since(c.born)+d)))
		}
		if cl := c.unregister(resp.GetCorrelationId()); cl != nil {
			cl.finish(resp, nil)
		}
		// An answer nobody waits for (acks=0, a call given up on) is dropped.
	}
}

// lockUnthrottled takes the write lock once the node no longer
// throttles the connection: it waits out a throttle first, without the
// lock, so that a throttle held by one call (a fetch goroutine's, with no
// ctx to end it) never holds another's lock wait past that one's ctx, nor
// a noWait caller (the consumer's Poll, the producer's loop) at all.
// Before, the throttle was waited out under the lock: a heartbeat or
// metadata request sent on the connection waited for the lock, deaf to
// its ctx, until a fetch throttle ended (30 s; a Poll whose ctx was
// cancelled did not return meanwhile). noWait: errWouldBlock instead of
// waiting out a throttle.
func (c *brokerConn) lockUnthrottled(ctx context.Context, noWait bool) error {
	for {
		if noWait && c.throttled() {
			return errWouldBlock
		}
		if err := c.holdForThrottle(ctx); err != nil {
			return err
		}
		if err := c.lockWrites(ctx); err != nil {
			return err
		}
		if !c.throttled() {
			return nil
		}
		c.unlockWrites() // a throttle came meanwhile: wait it out unlocked
	}
}

// throttled reports whether the node throttles the connection now.
func (c *brokerConn) throttled() bool {
	return time.Duration(c.throttleUntil.Load()) > time.Since(c.born)
}

// lockWrites takes the write lock; an error when ctx ends or the
// connection dies first.
func (c *brokerConn) lockWrites(ctx context.Context) error {
	select {
	case c.wlock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.dead:
		return &ConnError{Addr: c.addr, Err: c.deadErr} // set before dead closed
	}
}

// unlockWrites releases the write lock.
func (c *brokerConn) unlockWrites() { <-c.wlock }

// holdForThrottle waits while the node throttles the connection (it
// reads nothing until then); an error when the connection died or ctx
// ended meanwhile.
func (c *brokerConn) holdForThrottle(ctx context.Context) error {
	d := time.Duration(c.throttleUntil.Load()) - time.Since(c.born)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.dead:
		return &ConnError{Addr: c.addr, Err: c.deadErr}
	}
}

func (c *brokerConn) unregister(corr uint64) *call {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.calls[corr]
	delete(c.calls, corr)
	return cl
}

// roundTrip sends req and waits for its answer, ctx, or timeout; wait is
// how long the node may legitimately hold it (a fetch's long poll).
func (c *brokerConn) roundTrip(ctx context.Context, req *strandpb.Request, noAnswer bool, timeout, wait time.Duration) (*strandpb.Response, error) {
	cl, err := c.begin(ctx, req, noAnswer, timeout, wait, nil)
	if err != nil {
		return nil, err
	}
	select {
	case <-cl.done:
		return cl.resp, cl.err
	case <-ctx.Done():
		if c.unregister(cl.req.GetCorrelationId()) != nil {
			cl.finish(nil, ctx.Err())
		}
		<-cl.done
		return cl.resp, cl.err
	}
}

// begin numbers req, registers its call and writes it, in the caller's
// goroutine; req itself is never modified. Calls begun one after another
// from one goroutine are written in that order. It blocks while the
// connection's in-flight slots are all taken, while the node throttles the
// connection, and while an earlier call is being written. The outcome
// reaches onDone when it is set (called at most once, maybe before begin
// returns, on the goroutine that finishes the call), else the call's done
// channel; an error returned means the call was never registered (onDone
// is not called). timeout bounds the wait for the answer (the watchdog
// kills the connection past it and fails the call with a TIMEOUT *Error:
// its outcome unknown); a stall (Stalled: nothing arrived on the
// connection for StallTimeout beyond the call's own wait) fails it with a
// *ConnError, sent, and tells onStall.
func (c *brokerConn) begin(ctx context.Context, req *strandpb.Request, noAnswer bool, timeout, wait time.Duration,
	onDone func(*strandpb.Response, error)) (*call, error) {
	return c.beginCall(ctx, req, callSpec{noAnswer: noAnswer, timeout: timeout, wait: wait, onDone: onDone})
}

// callSpec is how a call is begun (begin's arguments).
type callSpec struct {
	noAnswer      bool
	timeout, wait time.Duration
	onDone        func(*strandpb.Response, error)
	// noWait: fail with errWouldBlock rather than wait for a slot or a
	// throttle (tryBegin).
	noWait bool
	// owned: the request's body is the caller's alone, read by no one else
	// until begin returns, so a produce's large batches may be written as
	// they are, beside the marshalled rest (frame.AppendProduceSpliced,
	// writev), not copied into the frame. The producer's requests are.
	owned bool
}

// errWouldBlock is tryBegin's refusal: no slot is free, or the node
// throttles the connection. Nothing was registered or sent.
var errWouldBlock = errors.New("connection busy")

// tryBegin is begin that never waits for a slot or a throttle: it fails
// with errWouldBlock instead (the caller then begins on a goroutine of its
// own).
func (c *brokerConn) tryBegin(req *strandpb.Request, timeout, wait time.Duration,
	onDone func(*strandpb.Response, error)) error {
	_, err := c.beginCall(context.Background(), req, callSpec{timeout: timeout, wait: wait, onDone: onDone, noWait: true})
	return err
}

// beginCall is begin as spec says.
func (c *brokerConn) beginCall(ctx context.Context, req *strandpb.Request, spec callSpec) (*call, error) {
	if spec.noWait {
		select {
		case c.slots <- struct{}{}:
		default:
			return nil, errWouldBlock
		}
	} else {
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.dead:
			return nil, &ConnError{Addr: c.addr, Err: c.deadErr}
		}
	}
	if err := c.lockUnthrottled(ctx, spec.noWait); err != nil {
		<-c.slots
		return nil, err
	}
	defer c.unlockWrites()
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
	// another connection at the same time.
	cl := &call{req: &strandpb.Request{CorrelationId: corr, Body: req.GetBody()}, noAnswer: spec.noAnswer,
		begun: time.Since(c.born), timeout: spec.timeout, wait: spec.wait, onDone: spec.onDone, slots: c.slots}
	if spec.onDone == nil {
		cl.done = make(chan struct{})
	}
	c.calls[corr] = cl
	c.mu.Unlock()
	if deadline, _ := clientcore.PastThrottle(cl.begun, 0, time.Duration(c.throttleUntil.Load())); deadline+spec.timeout < time.Duration(c.armed.Load()) {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	var err error
	if spec.owned && c.writev {
		c.wbuf, c.wvec, err = frame.AppendProduceSpliced(c.wbuf[:0], c.wvec[:0], cl.req, frame.SpliceBytesMin)
	} else {
		c.wbuf, err = frame.Append(c.wbuf[:0], cl.req)
		c.wvec = append(c.wvec[:0], c.wbuf)
	}
	if err != nil {
		c.unregister(corr)
		cl.finish(nil, fmt.Errorf("clientlib: cannot frame request: %w", err))
		return cl, nil
	}
	cl.sentAt.Store(int64(time.Since(c.born)))
	cl.sent.Store(true)
	vec := c.wvec // WriteTo consumes its copy of the slice, clearing the pieces written
	if _, err := vec.WriteTo(c.nc); err != nil {
		c.kill(err)
		return cl, nil
	}
	if cap(c.wbuf) > wbufKeepMax {
		c.wbuf = nil // a large request's buffer is not kept for the small ones
	}
	if spec.noAnswer && c.unregister(corr) != nil {
		cl.finish(nil, nil)
	}
	return cl, nil
}

// wbufKeepMax is the largest write buffer a connection keeps between
// writes.
const wbufKeepMax = 1 << 20

// watchIdle is how long the watchdog sleeps with no deadline to keep (its
// stall checks come every StallTimeout/4 regardless).
const watchIdle = time.Second

// watch is the connection's watchdog: one timer, armed for the earliest
// call deadline or the next stall check, whichever is first. A call past
// its deadline fails with a TIMEOUT *Error and kills the connection (as
// Kafka does: the outcome is unknown); a stalled call kills it with a
// stall (the calls fail with a *ConnError, sent) and tells onStall.
func (c *brokerConn) watch() {
	timer := time.NewTimer(watchIdle)
	defer timer.Stop()
	for {
		select {
		case <-c.dead:
			return
		case <-c.kick:
		case <-timer.C:
		}
		// While it looks, a call begun meanwhile kicks it again: it may
		// not have seen that call.
		c.armed.Store(math.MaxInt64)
		now := time.Since(c.born)
		next, done := c.check(now)
		if done {
			return
		}
		c.armed.Store(int64(next))
		timer.Stop()
		select {
		case <-timer.C:
		default:
		}
		timer.Reset(max(next-time.Since(c.born), 0))
	}
}

// check judges every pending call at now; it returns when to look again
// and whether the connection died.
func (c *brokerConn) check(now time.Duration) (time.Duration, bool) {
	next := now + watchIdle
	if c.stall > 0 {
		next = now + max(c.stall/4, time.Millisecond)
	}
	until := time.Duration(c.throttleUntil.Load())
	lastRead := time.Duration(c.lastRead.Load())
	var expired []*call
	stalled := false
	c.mu.Lock()
	if c.deadErr != nil {
		c.mu.Unlock()
		return 0, true
	}
	for corr, cl := range c.calls {
		// The deadline counts from when the node could read the call: a
		// throttle's pause (PastThrottle) moves it on.
		start, _ := clientcore.PastThrottle(cl.begun, 0, until)
		if end := start + cl.timeout; now >= end {
			delete(c.calls, corr)
			expired = append(expired, cl)
			continue
		} else {
			next = min(next, end)
		}
		sentAt := time.Duration(cl.sentAt.Load())
		if !cl.sent.Load() {
			sentAt = cl.begun // still waiting to be written: count from the call
		}
		sentAt, heard := clientcore.PastThrottle(sentAt, lastRead, until)
		if clientcore.Stalled(now, sentAt, heard, cl.wait, c.stall) {
			stalled = true
		}
	}
	c.mu.Unlock()
	for _, cl := range expired {
		cl.finish(nil, &Error{Code: strandpb.ErrorCode_ERROR_CODE_TIMEOUT,
			Message: fmt.Sprintf("no answer from %s within %v", c.addr, cl.timeout)})
	}
	switch {
	case stalled:
		// The node is suspect before any call hears of the stall: a
		// producer retrying at once must already steer around it.
		if c.onStall != nil {
			c.onStall(c.nodeID)
		}
		c.kill(fmt.Errorf("%w: nothing received for %v", errStalled, c.stall))
		return 0, true
	case len(expired) > 0:
		c.kill(fmt.Errorf("no answer within %v", expired[0].timeout))
		return 0, true
	}
	return next, false
}

// errStalled is the cause of calls failed by a stall.
var errStalled = errors.New("node unresponsive")

// connFailure is the error of a call its connection failed with cause
// (a stall, a timeout, a lost stream): sent says whether the request was
// written, so whether it may have been applied. A simulated Client's
// verdicts (sim_watch.go) fail calls with it too.
func connFailure(addr string, sent bool, cause error) *ConnError {
	if bugStallNotSent() && errors.Is(cause, errStalled) {
		sent = false
	}
	return &ConnError{Addr: addr, Sent: sent, Err: cause}
}
