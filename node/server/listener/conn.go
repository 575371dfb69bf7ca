package listener

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// writeTimeout bounds one answer write to a slow client.
const writeTimeout = 30 * time.Second

// ioBufferBytes is the size of a connection's read and write buffers.
const ioBufferBytes = 64 << 10

// Answer is one answer for a connection's writer, which writes answers in
// the order they were sent.
type Answer interface {
	// Ready reports whether AppendTo returns without waiting: before it
	// waits, the writer flushes the answers written so far, so none waits
	// behind a long poll.
	Ready() bool
	// AppendTo appends the answer's bytes to dst (none: the request has
	// no answer), waiting for the answer when need be, at most until the
	// connection closes or drains (then ErrStopped). An error closes the
	// connection with it as the reason (ErrStopped: none logged).
	AppendTo(dst []byte) ([]byte, error)
}

// SplicedAnswer is an Answer that can also give its bytes in pieces:
// pieces of head, and stored bytes between them that are written as they
// are (a fetch answer's record batches), with writev on a TCP connection.
// The writer calls AppendSpliced instead of AppendTo.
type SplicedAnswer interface {
	Answer
	// AppendSpliced appends the answer's own bytes to head and the whole
	// answer, in order, to bufs (pieces of head and stored slices; bufs
	// must be written before head is appended to again).
	AppendSpliced(head []byte, bufs net.Buffers) ([]byte, net.Buffers, error)
}

// ErrStopped is what Answer.AppendTo returns when the connection closed or
// drains at shutdown before the answer came: the writer stops, closing the
// connection without logging a reason.
var ErrStopped = errors.New("connection stopped before the answer came")

// Slot is what one request holds until its answer is written: a place
// among its connection's requests in flight (Take), and the answer bytes
// reserved for it (Reserve). The zero Slot holds nothing.
type Slot struct {
	bytes int64
	units int
	taken bool
}

// outgoing is an answer queued for the writer with what it holds.
type outgoing struct {
	answer     Answer
	slot       Slot
	closeAfter string // close once written, with this reason
}

// Conn is one accepted connection: the protocol's reader (Config.Serve)
// takes a Slot for each request, reserves the answer bytes of a fetch
// before serving it, and sends its Answer; the writer writes the answers
// in the order sent and gives back each one's Slot once written. Bounded
// so a slow or stalled client holds at most InFlightMax requests and
// ConnAnswerBytesMax answer bytes of its node (fetch answers are up to
// 7 MiB each, and 1,024 of them queued for a slow reader pinned gigabytes;
// fan-out bench, 1,000 groups: 3-6 GB per node).
type Conn struct {
	l      *Listener
	nc     net.Conn
	out    chan outgoing
	slots  chan struct{}
	remote string
	vecs   net.Buffers // the writer's write vectors, reused

	// mu guards the answer room held, the principal and the close log.
	mu          sync.Mutex
	answerBytes int64 // reserved by the requests in flight, not yet written
	answerUnits int   // of the node's Answers budget
	closed      bool  // everything held was given back; later releases are no-ops
	principal   string
	closeLevel  slog.Level
	closeAttrs  []slog.Attr
	drained     chan struct{} // poked (capacity 1) when answerBytes falls to the bound

	// throttleUntil (unix ns) pauses the reader: a quota throttle.
	throttleUntil atomic.Int64
	lastSent      atomic.Bool // SendLast was called: the writer closes

	done      chan struct{} // closed by close
	closeOnce sync.Once
	draining  chan struct{} // closed by drainUntil
	drainOnce sync.Once
	flushed   chan struct{} // closed by the writer once drained
}

// newConn is an accepted connection of l, not yet running.
func newConn(l *Listener, nc net.Conn) *Conn {
	return &Conn{
		l: l, nc: nc,
		out:        make(chan outgoing, l.cfg.InFlightMax),
		slots:      make(chan struct{}, l.cfg.InFlightMax),
		remote:     nc.RemoteAddr().String(),
		closeLevel: l.cfg.CloseLevel,
		drained:    make(chan struct{}, 1),
		done:       make(chan struct{}),
		draining:   make(chan struct{}),
		flushed:    make(chan struct{}),
	}
}

// Net is the underlying connection (for handshakes before the writer is
// used, and deadlines).
func (c *Conn) Net() net.Conn { return c.nc }

// RemoteAddr is the other side's address, as a string.
func (c *Conn) RemoteAddr() string { return c.remote }

// Host is the other side's IP, as ACLs name hosts.
func (c *Conn) Host() string {
	if tcp, ok := c.nc.RemoteAddr().(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	host, _, err := net.SplitHostPort(c.remote)
	if err != nil {
		return c.remote
	}
	return host
}

// Done is closed once the connection closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Draining is closed once the listener shuts down: the writer sends the
// answers that are in, then the connection closes. An answer waiting for
// the node stops waiting (AppendTo returns ErrStopped).
func (c *Conn) Draining() <-chan struct{} { return c.draining }

// Principal is who the connection authenticated as ("": nobody yet).
func (c *Conn) Principal() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.principal
}

// SetPrincipal records who the connection authenticated as.
func (c *Conn) SetPrincipal(p string) {
	c.mu.Lock()
	c.principal = p
	c.mu.Unlock()
}

// SetCloseLog sets the level a close with a reason is logged at (except
// at shutdown: debug), and attributes its record carries.
func (c *Conn) SetCloseLog(level slog.Level, attrs ...slog.Attr) {
	c.mu.Lock()
	c.closeLevel, c.closeAttrs = level, attrs
	c.mu.Unlock()
}

// Close closes the connection once, logging why unless reason is "", and
// gives back everything its requests hold.
func (c *Conn) Close(reason string) {
	c.mu.Lock()
	level := c.closeLevel
	c.mu.Unlock()
	c.closeAt(reason, level)
}

// closeAt is Close, logging at level.
func (c *Conn) closeAt(reason string, level slog.Level) {
	c.closeOnce.Do(func() {
		if reason != "" {
			c.mu.Lock()
			attrs := append([]slog.Attr{slog.String("remote", c.remote)}, c.closeAttrs...)
			c.mu.Unlock()
			attrs = append(attrs, slog.String("reason", reason))
			c.l.logger.LogAttrs(context.Background(), level, c.l.cfg.CloseMessage, attrs...)
		}
		close(c.done)
		c.nc.Close()
		c.releaseAll()
		c.l.forget(c)
	})
}

// ReadFailure is the reason for a failed read: nil for a clean close by
// the other side.
func ReadFailure(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return fmt.Errorf("read: %v", err)
}

// readLoop runs the protocol's reader, then closes the connection (unless
// SendLast left the close to the writer).
func (c *Conn) readLoop() {
	defer c.l.wg.Done()
	err := c.l.cfg.Serve(c, bufio.NewReaderSize(c.nc, ioBufferBytes))
	if err == nil && c.lastSent.Load() {
		return
	}
	reason := ""
	if err != nil {
		reason = err.Error()
	}
	c.Close(reason)
}
