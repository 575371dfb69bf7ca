package kafkaproto

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/sasl"
)

// Backend hands strandpb requests to a node. Submit blocks while the
// node's queue is full (backpressure) and fails once done closes or the
// node stops; reply is called exactly once per submitted request, from the
// node's loop, and must not block.
type Backend interface {
	Submit(done <-chan struct{}, req *strandpb.Request, reply func(*strandpb.Response)) error
}

// Config configures a Server.
type Config struct {
	// Backend receives the translated requests.
	Backend Backend
	// NodeID is this node's id (the Kafka broker id it answers as).
	NodeID int32
	// Logger receives connection problems (nil: discard).
	Logger *slog.Logger
	// TLS, when set, serves every connection over TLS with this
	// configuration (nil: plaintext; a plaintext listener refuses a TLS
	// ClientHello, saying so).
	TLS *tls.Config
	// SASL, when set, requires SASL/SCRAM on every connection and looks
	// credentials up with it (sasl.go).
	SASL sasl.Lookup
}

// Limits of the listener.
const (
	// RequestBytesMax bounds one Kafka request (after its size prefix): a
	// produce of many partitions' batches fits; a larger size closes the
	// connection (Kafka's socket.request.max.bytes is 100 MiB; Strand's
	// native frame limit is 9 MiB, so larger requests could not be
	// answered anyway).
	RequestBytesMax = 16 << 20
	// inFlightMax bounds the requests of one connection awaiting their
	// answers; the reader stops reading while it is reached.
	inFlightMax = 64
	// connsMax bounds the open Kafka connections of a node.
	connsMax = 4096
	// writeTimeout bounds one response write to a slow client.
	writeTimeout = 30 * time.Second
	// handshakeTimeout bounds a TLS handshake.
	handshakeTimeout = 10 * time.Second
)

// Server accepts Kafka connections on a listener until Close.
type Server struct {
	cfg     Config
	ln      net.Listener
	logger  *slog.Logger
	classic *classicState

	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Serve starts accepting Kafka connections on ln.
func Serve(ln net.Listener, cfg Config) *Server {
	s := &Server{cfg: cfg, ln: ln, conns: make(map[*conn]struct{}), logger: cfg.Logger, classic: newClassicState()}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	s.logger = s.logger.With(slog.String("listener", "kafka"))
	s.wg.Add(1)
	go s.acceptLoop()
	return s
}

// Addr is the listener's address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops accepting, closes every connection and waits for their
// goroutines.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.ln.Close()
	for _, c := range conns {
		c.close("")
	}
	s.wg.Wait()
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.logger.Error("accept failed; no longer accepting Kafka connections", slog.Any("err", err))
			}
			return
		}
		if s.cfg.TLS != nil {
			nc = tls.Server(nc, s.cfg.TLS)
		}
		c := &conn{s: s, nc: nc, done: make(chan struct{}), queue: make(chan *pending, inFlightMax), clientHost: hostOf(nc.RemoteAddr())}
		s.mu.Lock()
		full := len(s.conns) >= connsMax
		if !s.closed && !full {
			s.conns[c] = struct{}{}
		}
		refused := s.closed || full
		s.mu.Unlock()
		if refused {
			if full {
				s.logger.Warn("refusing Kafka connection: too many open", slog.Int("open", connsMax))
			}
			nc.Close()
			continue
		}
		s.wg.Add(2)
		go c.readLoop()
		go c.writeLoop()
	}
}

// conn is one Kafka client connection: the reader decodes and submits
// requests in order and queues their pending answers; the writer writes
// the answers in the same order.
type conn struct {
	s         *Server
	nc        net.Conn
	done      chan struct{}
	closeOnce sync.Once
	queue     chan *pending
	// SASL state (sasl.go), owned by the reader: the mechanism named by
	// SaslHandshake, the exchange in progress, and the principal once it
	// succeeded (a TLS listener may set principal from the client's
	// certificate before the first request).
	mechanism string
	exchange  *sasl.Exchange
	principal string
	// clientHost is the client's IP, as ACLs name hosts (set at accept).
	clientHost string
	// clientID is the client id of the request being served (its header).
	clientID string
	// throttleUntil (unix ns): the reader pauses until then, as Kafka mutes
	// a throttled client's channel (quota.go).
	throttleUntil atomic.Int64
	// answers holds the room reserved for fetch answers (answers.go).
	answers answers
	// calls collects the backend calls of the request being served, for
	// its pending answer (owned by the reader, like clientID).
	calls []*call
}

// pending is one request's answer to come.
type pending struct {
	corr int32
	// flexibleHeader: the response header carries a tag section (v1
	// response header; ApiVersions always answers with v0).
	flexibleHeader bool
	// noReply: acks=0 produce, which Kafka never answers.
	noReply bool
	// resp waits for the answer; nil when the connection closed first.
	resp func() kmsg.Response
	// closeAfter, when set, closes the connection once the answer is
	// written, with this reason (a failed SASL exchange).
	closeAfter string
	// calls are the backend calls the answer waits for.
	calls []*call
}

// answered says whether resp can run without waiting for the backend.
func (p *pending) answered() bool {
	for _, k := range p.calls {
		if k.err == nil && len(k.ch) == 0 {
			return false
		}
	}
	return true
}

// close closes the connection once, logging reason unless empty.
func (c *conn) close(reason string) {
	c.closeOnce.Do(func() {
		if reason != "" {
			c.s.logger.Warn("closing Kafka connection", slog.String("remote", c.nc.RemoteAddr().String()),
				slog.String("reason", reason))
		}
		close(c.done)
		c.nc.Close()
		c.answers.releaseAll()
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
	})
}

// readLoop reads size-prefixed requests until the connection fails.
func (c *conn) readLoop() {
	defer c.s.wg.Done()
	br := bufio.NewReaderSize(c.nc, 64<<10)
	if err := c.handshake(br); err != nil {
		c.close(err.Error())
		return
	}
	var size [4]byte
	for {
		c.waitThrottle()
		if _, err := io.ReadFull(br, size[:]); err != nil {
			c.close(readFailure(err))
			return
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < 8 || n > RequestBytesMax {
			c.close(fmt.Sprintf("request size %d outside [8, %d]", n, RequestBytesMax))
			return
		}
		// Grown as bytes arrive, so a size prefix alone cannot make the
		// node allocate RequestBytesMax.
		var req bytes.Buffer
		req.Grow(int(min(n, 64<<10)))
		if _, err := io.CopyN(&req, br, int64(n)); err != nil {
			c.close(readFailure(err))
			return
		}
		p, err := c.serve(req.Bytes())
		if err != nil {
			c.close(err.Error())
			return
		}
		select {
		case c.queue <- p:
		case <-c.done:
			return
		}
		if p.closeAfter != "" {
			return // the writer closes once the answer is out
		}
	}
}

// handshake completes a TLS connection's handshake and records its
// principal. On a plaintext connection it refuses a client whose first
// bytes are a TLS ClientHello, saying so (read as a size they are ≥ 369 MB).
func (c *conn) handshake(br *bufio.Reader) error {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		if b, _ := br.Peek(3); frame.LooksLikeTLS(b) {
			return frame.ErrTLSOnPlaintext
		}
		return nil
	}
	tc.SetDeadline(time.Now().Add(handshakeTimeout))
	defer tc.SetDeadline(time.Time{})
	if err := tc.Handshake(); err != nil {
		var rh tls.RecordHeaderError
		switch {
		case errors.As(err, &rh):
			return errors.New("client speaks plaintext; this listener is TLS (connect with security.protocol=SSL)")
		case readFailure(err) == "":
			return errors.New("closed during the TLS handshake")
		}
		return fmt.Errorf("TLS handshake: %v", err)
	}
	if cs := tc.ConnectionState(); len(cs.VerifiedChains) > 0 {
		c.principal = "User:" + cs.VerifiedChains[0][0].Subject.String()
	}
	return nil
}

// readFailure is the reason logged for a failed read: nothing for a clean
// close by the other side.
func readFailure(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return ""
	}
	return fmt.Sprintf("read: %v", err)
}

// writeLoop writes the answers in request order, flushing whenever no
// further answer is queued.
func (c *conn) writeLoop() {
	defer c.s.wg.Done()
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	var buf []byte
	for {
		var p *pending
		select {
		case p = <-c.queue:
		case <-c.done:
			return
		}
		if p.noReply {
			continue
		}
		if bw.Buffered() > 0 && !p.answered() {
			// Answers written so far go out now, not after this one (a
			// long poll may hold it for its whole max wait).
			if err := bw.Flush(); err != nil {
				c.close(fmt.Sprintf("write: %v", err))
				return
			}
		}
		resp := p.resp()
		if resp == nil {
			return
		}
		buf = appendResponse(buf[:0], p, resp)
		c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := bw.Write(buf); err != nil {
			c.close(fmt.Sprintf("write: %v", err))
			return
		}
		if len(c.queue) == 0 || p.closeAfter != "" {
			if err := bw.Flush(); err != nil {
				c.close(fmt.Sprintf("write: %v", err))
				return
			}
		}
		if p.closeAfter != "" {
			c.close(p.closeAfter)
			return
		}
	}
}

// appendResponse frames resp: size, correlation id, the header's empty tag
// section when flexible, the body.
func appendResponse(dst []byte, p *pending, resp kmsg.Response) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(p.corr))
	if p.flexibleHeader {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[:4], uint32(len(dst)-4))
	return dst
}

// ready wraps an answer known at once.
func ready(resp kmsg.Response) func() kmsg.Response {
	return func() kmsg.Response { return resp }
}

// call is one strandpb request submitted to the backend.
type call struct {
	ch  chan *strandpb.Response
	err error
}

// submit hands req to the backend now (keeping the connection's request
// order); wait returns its answer.
func (c *conn) submit(req *strandpb.Request) *call {
	k := &call{ch: make(chan *strandpb.Response, 1)}
	reply := func(resp *strandpb.Response) {
		select {
		case k.ch <- resp:
		default:
			panic("kafka: backend answered a request twice")
		}
	}
	if cb, ok := c.s.cfg.Backend.(CallerBackend); ok {
		k.err = cb.SubmitAs(c.done, c.principal, c.host(), req, reply)
	} else {
		k.err = c.s.cfg.Backend.Submit(c.done, req, reply)
	}
	c.calls = append(c.calls, k)
	return k
}

// wait returns the backend's answer, an UNAVAILABLE error answer when the
// submit failed, or nil when the connection closed first.
func (c *conn) wait(k *call) *strandpb.Response {
	if k.err != nil {
		return &strandpb.Response{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE, Message: k.err.Error()}}
	}
	select {
	case resp := <-k.ch:
		c.throttle(resp)
		return resp
	case <-c.done:
		return nil
	}
}
