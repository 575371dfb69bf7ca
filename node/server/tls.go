package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/node/server/listener"
	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
)

// TLSConfig turns TLS on for every listener of a node and for its peer
// transport. The files are read at Start and again by ReloadTLS (SIGHUP in
// strand serve); a file that fails to load then keeps the pair in use.
//
// Node identity: the node's certificate must carry the URI SAN
// strand://node/ID (NodeURI) of its own node id. Peers are always mutually
// authenticated: a peer connection presents that certificate, signed by
// CAFile, and the node it dials must present the one naming the id it
// dials; a Hello whose peer_node_id is not the id in the connection's
// verified certificate is refused (PEER_NOT_AUTHENTICATED).
type TLSConfig struct {
	// CertFile and KeyFile are the node's PEM certificate (chain) and key,
	// served to clients and presented to peers.
	CertFile, KeyFile string
	// CAFile holds the PEM CA certificates that sign peers' certificates
	// and clients' (when client certificates are asked for).
	CAFile string
	// ClientAuth says what client listeners ask of clients.
	ClientAuth ClientAuth
}

// ClientAuth is what a client listener asks of clients' certificates.
type ClientAuth int

const (
	// ClientAuthNone asks clients for no certificate. The native
	// listener still accepts one (peers present theirs there) and then
	// verifies it.
	ClientAuthNone ClientAuth = iota
	// ClientAuthRequest asks for a certificate and verifies one that is
	// given; a client without one is served, with no principal.
	ClientAuthRequest
	// ClientAuthRequire refuses clients without a certificate signed by
	// the CA.
	ClientAuthRequire
)

// ParseClientAuth parses none, request or require.
func ParseClientAuth(s string) (ClientAuth, error) {
	switch s {
	case "none", "":
		return ClientAuthNone, nil
	case "request":
		return ClientAuthRequest, nil
	case "require":
		return ClientAuthRequire, nil
	}
	return 0, fmt.Errorf("client auth %q: want none, request or require", s)
}

// NodeURI is the URI SAN a certificate carries to name node id.
func NodeURI(id node.NodeID) *url.URL {
	return &url.URL{Scheme: "strand", Host: "node", Path: "/" + strconv.FormatUint(uint64(id), 10)}
}

// certNodeID is the node id a certificate names by its strand://node/ID
// URI SAN; false when it names none (or more than one).
func certNodeID(cert *x509.Certificate) (node.NodeID, bool) {
	var found node.NodeID
	for _, u := range cert.URIs {
		if u.Scheme != "strand" || u.Host != "node" || len(u.Path) < 2 {
			continue
		}
		id, err := strconv.ParseUint(u.Path[1:], 10, 64)
		if err != nil || id == 0 || (found != 0 && node.NodeID(id) != found) {
			return 0, false
		}
		found = node.NodeID(id)
	}
	return found, found != 0
}

// tlsPair is what the files held at one load: the node's certificate and
// the CA pool. Swapped whole, so a handshake never sees a mix.
type tlsPair struct {
	cert *tls.Certificate
	pool *x509.CertPool
}

// tlsState holds the node's current pair and builds the tls.Configs of
// its listeners and of its peer dials; every handshake reads the pair
// then in use.
type tlsState struct {
	files  TLSConfig
	self   node.NodeID
	pair   atomic.Pointer[tlsPair]
	logger *slog.Logger
}

// newTLSState loads the files; nil, nil without TLS.
func newTLSState(cfg *TLSConfig, self node.NodeID, logger *slog.Logger) (*tlsState, error) {
	if cfg == nil {
		return nil, nil
	}
	s := &tlsState{files: *cfg, self: self, logger: logger}
	p, err := s.load()
	if err != nil {
		return nil, err
	}
	s.pair.Store(p)
	return s, nil
}

// load reads and checks the files: the key matches the certificate, the
// certificate names this node and chains to the CA.
func (s *tlsState) load() (*tlsPair, error) {
	f := s.files
	if f.CertFile == "" || f.KeyFile == "" || f.CAFile == "" {
		return nil, errors.New("node: TLS needs a certificate, a key and a CA file (--tls-cert, --tls-key, --tls-ca)")
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("node: TLS certificate %s and key %s: %w", f.CertFile, f.KeyFile, err)
	}
	caPEM, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, fmt.Errorf("node: TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("node: TLS CA %s holds no PEM certificate", f.CAFile)
	}
	leaf := cert.Leaf
	if id, ok := certNodeID(leaf); !ok || id != s.self {
		return nil, fmt.Errorf("node: TLS certificate %s does not name this node (want SAN URI %s; peers refuse it)",
			f.CertFile, NodeURI(s.self))
	}
	if err := verifyChain(leaf, cert.Certificate, pool); err != nil {
		return nil, fmt.Errorf("node: TLS certificate %s is not signed by the CA in %s: %w", f.CertFile, f.CAFile, err)
	}
	return &tlsPair{cert: &cert, pool: pool}, nil
}

// reload loads the files again and swaps them in; on failure the pair in
// use stays and the error is logged and returned.
func (s *tlsState) reload() error {
	p, err := s.load()
	if err != nil {
		s.logger.Error("TLS reload failed; keeping the certificate in use", slog.Any("err", err))
		return err
	}
	s.pair.Store(p)
	s.logger.Info("TLS certificate reloaded", slog.String("subject", p.cert.Leaf.Subject.String()),
		slog.Time("not_after", p.cert.Leaf.NotAfter))
	return nil
}

// verifyChain verifies leaf (with the intermediates in chain[1:]) against
// pool, for any key usage.
func verifyChain(leaf *x509.Certificate, chain [][]byte, pool *x509.CertPool) error {
	inter := x509.NewCertPool()
	for _, der := range chain[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return err
		}
		inter.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err
}

// listenerConfig is the tls.Config of a client listener. The native
// listener (peers included) never asks less than a verified certificate if
// one is given: peers present theirs there.
func (s *tlsState) listenerConfig(auth ClientAuth, native bool) *tls.Config {
	mode := tls.NoClientCert
	switch {
	case auth == ClientAuthRequire:
		mode = tls.RequireAndVerifyClientCert
	case auth == ClientAuthRequest || native:
		mode = tls.VerifyClientCertIfGiven
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			p := s.pair.Load()
			return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*p.cert},
				ClientCAs: p.pool, ClientAuth: mode}, nil
		},
	}
}

// peerDialConfig is the tls.Config of a dial to peer: it presents this
// node's certificate and accepts only a server certificate signed by the
// CA that names peer (host names play no part between nodes).
func (s *tlsState) peerDialConfig(peer node.NodeID) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // verified by VerifyConnection, by node id
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.pair.Load().cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPeer(cs.PeerCertificates, s.pair.Load().pool, peer)
		},
	}
}

// verifyPeer checks that certs chain to pool and name node want.
func verifyPeer(certs []*x509.Certificate, pool *x509.CertPool, want node.NodeID) error {
	if len(certs) == 0 {
		return errors.New("peer presented no certificate")
	}
	raw := make([][]byte, len(certs))
	for i, c := range certs {
		raw[i] = c.Raw
	}
	if err := verifyChain(certs[0], raw, pool); err != nil {
		return fmt.Errorf("peer certificate not signed by the cluster CA: %w", err)
	}
	id, ok := certNodeID(certs[0])
	if !ok {
		return fmt.Errorf("peer certificate %q names no node (want SAN URI %s)", certs[0].Subject, NodeURI(want))
	}
	if id != want {
		return fmt.Errorf("peer certificate names node %d, want node %d", id, want)
	}
	return nil
}

// connPrincipal is the subject of the verified client certificate of a TLS
// connection's completed handshake, and the node id it names (0: none).
// "" when there is none.
func connPrincipal(cs tls.ConnectionState) (string, node.NodeID) {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return "", 0
	}
	leaf := cs.VerifiedChains[0][0]
	id, _ := certNodeID(leaf)
	return leaf.Subject.String(), id
}

// ReloadTLS reads the TLS files again and serves the new pair to every
// handshake from now on (open connections keep theirs). A file that fails
// to load keeps the pair in use; the error says why. A no-op without TLS.
func (r *Server) ReloadTLS() error {
	if r.tls == nil {
		return nil
	}
	return r.tls.reload()
}

// dialPeer connects to peer at addr: plain TCP, or with TLS a completed
// mutual handshake that verified the peer's certificate names peer.
func (n *peerTransport) dialPeer(peer node.NodeID, addr string) (net.Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err != nil || n.tls == nil {
		return nc, err
	}
	tc := tls.Client(nc, n.tls.peerDialConfig(peer))
	tc.SetDeadline(time.Now().Add(dialTimeout))
	if err := tc.Handshake(); err != nil {
		nc.Close()
		return nil, fmt.Errorf("TLS handshake with peer %d: %w", peer, err)
	}
	return tc, nil
}

// tlsHandshake completes a TLS connection's handshake on the connection
// stack and records its principal and the node its certificate names. On
// a plaintext listener it refuses a client whose first bytes are a TLS
// ClientHello (read as a frame they would be a 369 MB length); on a TLS
// listener, a client whose first bytes are no TLS record. Either way the
// client is answered in the clear with a Strand error frame: a TLS client
// then fails its handshake on a record that is no TLS (definite), a
// plaintext one reads TLS_REQUIRED.
func (c *nativeConn) tlsHandshake(br *bufio.Reader) error {
	cs, err := c.lc.HandshakeTLS(br, helloTimeout)
	var plain *listener.PlaintextOnTLSError
	switch {
	case err == nil:
		var subject string
		subject, c.certNode = connPrincipal(cs)
		if subject != "" {
			c.principal = node.Principal("User:" + subject)
		}
		return nil
	case errors.Is(err, frame.ErrTLSOnPlaintext):
		return c.refuseMismatch(c.lc.Net(), strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, frame.ErrTLSOnPlaintext)
	case errors.As(err, &plain) && plain.Raw != nil:
		return c.refuseMismatch(plain.Raw, strandpb.ErrorCode_ERROR_CODE_TLS_REQUIRED, errPlaintextOnTLS)
	case errors.As(err, &plain):
		err = errPlaintextOnTLS
	}
	c.r.logRefusal(c.lc.RemoteAddr(), "refusing connection", err)
	return err
}

// errPlaintextOnTLS is the reason a TLS listener gives for a plaintext client.
var errPlaintextOnTLS = errors.New("client speaks plaintext; this listener is TLS (connect with --tls)")

// refuseMismatch logs reason, answers it on raw (in the clear) as a Strand
// error frame with code, and returns it.
func (c *nativeConn) refuseMismatch(raw net.Conn, code strandpb.ErrorCode, reason error) error {
	c.r.logRefusal(c.lc.RemoteAddr(), "refusing connection", reason)
	out, err := frame.Append(nil, &strandpb.Response{Error: &strandpb.Error{Code: code, Message: reason.Error()}})
	if err == nil {
		raw.SetWriteDeadline(time.Now().Add(helloTimeout))
		raw.Write(out)
	}
	return reason
}

// peerRefusal says why a Hello claiming node claims is refused on a
// connection whose verified certificate named node named (0: none).
func peerRefusal(claims, named node.NodeID, principal string) error {
	switch {
	case principal == "":
		return fmt.Errorf("peer hello claims node %d without a client certificate signed by the cluster CA", claims)
	case named == 0:
		return fmt.Errorf("peer hello claims node %d, but its certificate %q names no node (want SAN URI %s)",
			claims, principal, NodeURI(claims))
	}
	return fmt.Errorf("peer hello claims node %d, but its certificate names node %d", claims, named)
}

// refusalLogEvery bounds how often one remote host's refusals are logged
// at warn: a misconfigured peer redials every second; later refusals
// within the interval are logged at debug.
const refusalLogEvery = time.Minute

// refusalLog remembers when each remote host's refusal was last logged at
// warn; it is emptied when it reaches refusalLogHostsMax entries.
type refusalLog struct {
	mu   sync.Mutex
	last map[string]time.Time
}

const refusalLogHostsMax = 1024

// logRefusal logs why the connection from remote is refused: at warn the
// first time in refusalLogEvery for its host, else at debug.
func (r *Server) logRefusal(remote, msg string, reason error) {
	host, _, _ := net.SplitHostPort(remote)
	level := slog.LevelDebug
	l := &r.refusals
	l.mu.Lock()
	if now := time.Now(); now.Sub(l.last[host]) >= refusalLogEvery {
		if l.last == nil || len(l.last) >= refusalLogHostsMax {
			l.last = make(map[string]time.Time)
		}
		l.last[host] = now
		level = slog.LevelWarn
	}
	l.mu.Unlock()
	r.logger.Log(context.Background(), level, msg, slog.String("remote", remote), slog.String("reason", reason.Error()))
}
