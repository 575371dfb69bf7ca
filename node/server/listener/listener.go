package listener

import (
	"bufio"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Config configures a Listener: the protocol's reader and the bounds its
// connections share.
type Config struct {
	// Serve is the protocol's reader, run on its own goroutine for each
	// accepted connection with a buffered reader of it: the handshakes,
	// then request after request until the connection fails. The
	// connection closes when it returns, with its error as the logged
	// reason (nil: nothing logged, as for a client's clean close).
	Serve func(c *Conn, br *bufio.Reader) error
	// TLS, when set, serves every connection over TLS (the protocol's
	// reader completes the handshake, see Conn.HandshakeTLS).
	TLS *tls.Config
	// ConnsMax bounds the open connections; one more is refused.
	ConnsMax int
	// InFlightMax bounds the requests of one connection awaiting their
	// answers (Conn.Take waits past it), so the answer queue of the same
	// capacity never fills and whoever answers never blocks.
	InFlightMax int
	// ConnAnswerBytesMax bounds the answer bytes one connection holds
	// reserved: past it Conn.Reserve waits until answers went out.
	ConnAnswerBytesMax int64
	// Answers, when set, bounds the answer bytes reserved over every
	// connection of the node (shared by its listeners).
	Answers *Budget
	// Logger receives accept failures, refusals and closes (nil: discard).
	Logger *slog.Logger
	// CloseMessage and CloseLevel log a connection's close with a reason
	// (Conn.SetCloseLog changes the level and adds attributes per
	// connection).
	CloseMessage string
	CloseLevel   slog.Level
}

// Listener accepts connections until Shutdown and runs each one's reader
// (Config.Serve) and writer.
type Listener struct {
	cfg    Config
	ln     net.Listener
	logger *slog.Logger

	mu      sync.Mutex
	conns   map[*Conn]struct{}
	stopped bool
	wg      sync.WaitGroup // the accept loop and every connection's goroutines
}

// Serve starts accepting connections on ln.
func Serve(ln net.Listener, cfg Config) *Listener {
	l := &Listener{cfg: cfg, ln: ln, logger: cfg.Logger, conns: make(map[*Conn]struct{})}
	if l.logger == nil {
		l.logger = slog.New(slog.DiscardHandler)
	}
	if l.cfg.CloseMessage == "" {
		l.cfg.CloseMessage = "closing connection"
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

// Addr is the listener's address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// acceptLoop accepts connections until the listener closes.
func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				l.logger.Error("accept failed; no longer accepting connections", slog.Any("err", err))
			}
			return
		}
		if l.cfg.TLS != nil {
			nc = tls.Server(nc, l.cfg.TLS)
		}
		c := newConn(l, nc)
		if refused := l.register(c); refused != "" {
			if refused == refusedFull {
				l.logger.Warn("refusing connection: too many open", slog.String("remote", nc.RemoteAddr().String()),
					slog.Int("open", l.cfg.ConnsMax))
			}
			nc.Close()
			continue
		}
		l.wg.Add(2)
		go c.readLoop()
		go c.writeLoop()
	}
}

// Why register refuses a connection.
const (
	refusedStopped = "stopped"
	refusedFull    = "full"
)

// register records c unless the listener is stopping or full; it says why
// not.
func (l *Listener) register(c *Conn) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.stopped:
		return refusedStopped
	case len(l.conns) >= l.cfg.ConnsMax:
		return refusedFull
	}
	l.conns[c] = struct{}{}
	return ""
}

// forget drops a closed connection.
func (l *Listener) forget(c *Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// Conns is a snapshot of the open connections, in no particular order.
func (l *Listener) Conns() []*Conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	conns := make([]*Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	return conns
}

// StopAccepting closes the listener: no connection is accepted or
// registered from now on; open ones carry on.
func (l *Listener) StopAccepting() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
	l.ln.Close()
}

// Shutdown stops accepting, lets each connection's writer send the answers
// that are ready until deadline (a graceful drain: an answer still to come
// is not waited for), closes every connection with reason (logged at
// debug; "": not logged) and waits for their goroutines.
func (l *Listener) Shutdown(deadline time.Time, reason string) {
	l.StopAccepting()
	conns := l.Conns()
	for _, c := range conns {
		c.drainUntil(deadline)
	}
	for _, c := range conns {
		c.closeAt(reason, slog.LevelDebug)
	}
	l.wg.Wait()
}
