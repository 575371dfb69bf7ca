package listener

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/strandlog/strand/proto/frame"
)

// ErrClosedInHandshake: the client went away during the TLS handshake.
var ErrClosedInHandshake = errors.New("closed during the TLS handshake")

// PlaintextOnTLSError: a client spoke plaintext to a TLS listener. Raw
// is the connection under TLS, to answer it in the clear (nil when
// unknown).
type PlaintextOnTLSError struct {
	Raw net.Conn
}

func (e *PlaintextOnTLSError) Error() string {
	return "client speaks plaintext; this listener is TLS"
}

// HandshakeTLS completes a TLS connection's handshake within timeout and
// records its principal (User:<subject> of a verified client certificate);
// it returns the connection's TLS state (the zero state on plaintext).
// On a plaintext listener it refuses a client whose first bytes are a TLS
// ClientHello (frame.ErrTLSOnPlaintext); on a TLS listener, one whose
// first bytes are no TLS record (*PlaintextOnTLSError). br reads the
// connection; its deadlines are clear afterwards.
func (c *Conn) HandshakeTLS(br *bufio.Reader, timeout time.Duration) (tls.ConnectionState, error) {
	c.nc.SetDeadline(time.Now().Add(timeout))
	defer c.nc.SetDeadline(time.Time{})
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		if b, _ := br.Peek(3); frame.LooksLikeTLS(b) {
			return tls.ConnectionState{}, frame.ErrTLSOnPlaintext
		}
		return tls.ConnectionState{}, nil
	}
	err := tc.Handshake()
	var rh tls.RecordHeaderError
	switch {
	case err == nil:
	case errors.As(err, &rh):
		return tls.ConnectionState{}, &PlaintextOnTLSError{Raw: rh.Conn}
	case ReadFailure(err) == nil:
		return tls.ConnectionState{}, ErrClosedInHandshake
	default:
		return tls.ConnectionState{}, fmt.Errorf("TLS handshake: %v", err)
	}
	cs := tc.ConnectionState()
	if len(cs.VerifiedChains) > 0 && len(cs.VerifiedChains[0]) > 0 {
		c.SetPrincipal("User:" + cs.VerifiedChains[0][0].Subject.String())
	}
	return cs, nil
}
