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
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/node/server/listener"
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
	// SASLConfirm, when set, confirms SASL's lookup current before a
	// refusal (sasl.Exchange.Unconfirmed): it blocks until the node's
	// credentials are confirmed (nil) or cannot be (an error: the
	// connection closes without an answer, which clients retry), bounded
	// by itself and by done (the connection closing). nil: the lookup is
	// taken as current.
	SASLConfirm func(done <-chan struct{}) error
	// Answers, when set, bounds the fetch answer bytes reserved over every
	// connection: the node passes the budget its native fetches reserve
	// from, so Kafka consumers are bounded as native ones are.
	Answers *listener.Budget
	// Down, when set, reports a node this one has not reached for a
	// while: Metadata leaves it out of its brokers, as Kafka leaves out a
	// fenced broker, so clients drop what they cached on it (franz-go
	// finds a new transaction coordinator only once the old one's broker
	// is gone from Metadata). The answering node is never left out.
	Down func(node uint64) bool
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
	// connAnswerBytesMax bounds the fetch answer bytes one connection
	// holds reserved: past it the reader takes no new request until
	// answers went out. Without it, 64 long-polling fetches of up to
	// 7 MiB each could pin 448 MiB per connection (the native listener's
	// bound is the same).
	connAnswerBytesMax = 32 << 20
	// handshakeTimeout bounds a TLS handshake.
	handshakeTimeout = 10 * time.Second
)

// Server accepts Kafka connections on a listener until Close.
type Server struct {
	cfg     Config
	l       *listener.Listener
	logger  *slog.Logger
	classic *classicState
}

// Serve starts accepting Kafka connections on ln, on the connection stack
// the node's native listener runs on too (node/server/listener).
func Serve(ln net.Listener, cfg Config) *Server {
	s := &Server{cfg: cfg, logger: cfg.Logger, classic: newClassicState()}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	s.logger = s.logger.With(slog.String("listener", "kafka"))
	s.l = listener.Serve(ln, listener.Config{
		Serve: s.serveConn, TLS: cfg.TLS, ConnsMax: connsMax, InFlightMax: inFlightMax,
		ConnAnswerBytesMax: connAnswerBytesMax, Answers: cfg.Answers, Logger: s.logger,
		CloseMessage: "closing Kafka connection", CloseLevel: slog.LevelWarn,
	})
	return s
}

// brokerDown says whether Metadata leaves node out of its brokers
// (Config.Down); never the answering node itself.
func (s *Server) brokerDown(node uint64) bool {
	return s.cfg.Down != nil && node != uint64(s.cfg.NodeID) && s.cfg.Down(node)
}

// Addr is the listener's address.
func (s *Server) Addr() net.Addr { return s.l.Addr() }

// Close stops accepting, closes every connection and waits for their
// goroutines.
func (s *Server) Close() { s.l.Shutdown(time.Now(), "") }

// StopAccepting closes the listener; open connections carry on.
func (s *Server) StopAccepting() { s.l.StopAccepting() }

// Shutdown stops accepting, lets each connection write the answers that
// are in until deadline, then closes every connection and waits for their
// goroutines.
func (s *Server) Shutdown(deadline time.Time) { s.l.Shutdown(deadline, "") }

// conn is one Kafka client connection: the reader decodes and submits
// requests in order and sends their pending answers; the connection
// stack's writer writes them in the same order.
type conn struct {
	s *Server
	// lc is the connection in the stack (nil for Translate's conn).
	lc   *listener.Conn
	done <-chan struct{}
	// draining closes when the connection drains at shutdown (nil for
	// Translate's conn: never).
	draining <-chan struct{}
	// gate is the connection's SASL state (sasl.go), owned by the
	// reader: its principal once the exchange succeeded (a TLS listener
	// sets it from the client's certificate before the first request).
	gate SASLGate
	// clientHost is the client's IP, as ACLs name hosts (set at accept).
	clientHost string
	// clientID is the client id of the request being served (its header).
	clientID string
	// slot is what the request being served holds until its answer is
	// written: its place in flight and, for a fetch, its answer bytes
	// (owned by the reader, like clientID).
	slot listener.Slot
	// calls collects the backend calls of the request being served, for
	// its pending answer (owned by the reader, like clientID).
	calls []*call
}

// pending is one request's answer to come: the Answer the connection's
// writer writes.
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
	// fetch: a Fetch's answer, written in pieces (splicedPending).
	fetch bool
}

// Ready says whether AppendTo can run without waiting for the backend.
func (p *pending) Ready() bool {
	if p.noReply {
		return true
	}
	for _, k := range p.calls {
		if k.err == nil && len(k.ch) == 0 {
			return false
		}
	}
	return true
}

// AppendTo appends the framed answer, once it came; nothing for acks=0.
func (p *pending) AppendTo(dst []byte) ([]byte, error) {
	if p.noReply {
		return dst, nil
	}
	resp := p.resp()
	if resp == nil {
		return dst, listener.ErrStopped // the connection closed or drains first
	}
	return appendResponse(dst, p, resp), nil
}

// serveConn is the reader of one accepted connection: the TLS handshake,
// then size-prefixed requests until the connection fails.
func (s *Server) serveConn(lc *listener.Conn, br *bufio.Reader) error {
	c := &conn{s: s, lc: lc, done: lc.Done(), draining: lc.Draining(), clientHost: lc.Host(), gate: SASLGate{lookup: s.cfg.SASL}}
	if err := c.handshake(br); err != nil {
		return err
	}
	var size [4]byte
	for {
		lc.WaitThrottle()
		if _, err := io.ReadFull(br, size[:]); err != nil {
			return listener.ReadFailure(err)
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < 8 || n > RequestBytesMax {
			return fmt.Errorf("request size %d outside [8, %d]", n, RequestBytesMax)
		}
		// Grown as bytes arrive, so a size prefix alone cannot make the
		// node allocate RequestBytesMax.
		var req bytes.Buffer
		req.Grow(int(min(n, 64<<10)))
		if _, err := io.CopyN(&req, br, int64(n)); err != nil {
			return listener.ReadFailure(err)
		}
		var ok bool
		if c.slot, ok = lc.Take(); !ok {
			return nil
		}
		p, err := c.serve(req.Bytes())
		if err != nil {
			return err
		}
		if p.closeAfter != "" {
			lc.SendLast(c.slot, p, p.closeAfter)
			return nil // the writer closes once the answer is out
		}
		if p.fetch {
			lc.Send(c.slot, splicedPending{p})
			continue
		}
		lc.Send(c.slot, p)
	}
}

// handshake completes a TLS connection's handshake and records its
// principal. On a plaintext connection it refuses a client whose first
// bytes are a TLS ClientHello, saying so (read as a size they are ≥ 369 MB).
func (c *conn) handshake(br *bufio.Reader) error {
	_, err := c.lc.HandshakeTLS(br, handshakeTimeout)
	var plain *listener.PlaintextOnTLSError
	switch {
	case errors.As(err, &plain):
		return errors.New("client speaks plaintext; this listener is TLS (connect with security.protocol=SSL)")
	case err != nil:
		return err
	}
	c.gate.Authenticate(c.lc.Principal())
	return nil
}

// appendResponse frames resp: size, correlation id, the header's empty tag
// section when flexible, the body. A fetch answer goes through
// appendFetchFrame with every stored Kafka batch spliced, then joined, so
// Translate's callers (the simulator) run the splicing the listener
// serves fetches with.
func appendResponse(dst []byte, p *pending, resp kmsg.Response) []byte {
	if f, ok := resp.(*fetchAnswer); ok {
		start := len(dst)
		head, bufs := appendFetchFrame(dst, nil, p.corr, p.flexibleHeader, f, 1)
		out := head[:start:start]
		for _, b := range bufs {
			out = append(out, b...)
		}
		return out
	}
	return appendFrame(dst, p.corr, p.flexibleHeader, resp)
}

// appendFrame frames resp as kmsg marshals it.
func appendFrame(dst []byte, corr int32, flexibleHeader bool, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if flexibleHeader {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// splicedPending is a fetch's pending answer, which the listener's writer
// takes in pieces (listener.SplicedAnswer): the stored Kafka batches of
// SpliceBytesMin bytes or more written from where the node stores them.
type splicedPending struct{ *pending }

// AppendSpliced appends the framed answer's own bytes to head and the
// whole answer to bufs (appendFetchFrame); any answer but a fetch answer
// (a refusal) is one piece.
func (p splicedPending) AppendSpliced(head []byte, bufs net.Buffers) ([]byte, net.Buffers, error) {
	if p.noReply {
		return head, bufs, nil
	}
	resp := p.resp()
	if resp == nil {
		return head, bufs, listener.ErrStopped // the connection closed or drains first
	}
	if f, ok := resp.(*fetchAnswer); ok {
		head, bufs = appendFetchFrame(head, bufs, p.corr, p.flexibleHeader, f, SpliceBytesMin)
		return head, bufs, nil
	}
	start := len(head)
	head = appendFrame(head, p.corr, p.flexibleHeader, resp)
	return head, append(bufs, head[start:]), nil
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
	k := c.send(req)
	c.calls = append(c.calls, k)
	return k
}

// send hands req to the backend without recording it in c.calls (owned
// by the reader): for a second request submitted from an answer's wait,
// which runs on the writer.
func (c *conn) send(req *strandpb.Request) *call {
	k := &call{ch: make(chan *strandpb.Response, 1)}
	reply := func(resp *strandpb.Response) {
		select {
		case k.ch <- resp:
		default:
			panic("kafka: backend answered a request twice")
		}
	}
	if cb, ok := c.s.cfg.Backend.(CallerBackend); ok {
		k.err = cb.SubmitAs(c.done, c.gate.principal, c.host(), req, reply)
	} else {
		k.err = c.s.cfg.Backend.Submit(c.done, req, reply)
	}
	return k
}

// wait returns the backend's answer, an UNAVAILABLE error answer when the
// submit failed, or nil when the connection closed first (or drains at
// shutdown without the answer in).
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
	case <-c.draining:
		// The node is stopping: it answered what it had before the
		// connections drain, so an answer not in now never comes.
		select {
		case resp := <-k.ch:
			return resp
		default:
			return nil
		}
	}
}
