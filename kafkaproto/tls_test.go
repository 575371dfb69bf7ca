package kafkaproto

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"log/slog"
	"math/big"
	"net"
	"testing"
	"time"
)

// testCert is a certificate for cn signed by parent (self-signed when nil).
func testCert(t *testing.T, cn string, parent *tls.Certificate, isCA bool) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: isCA, BasicConstraintsValid: true, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	if isCA {
		tmpl.KeyUsage = x509.KeyUsageCertSign
	}
	signer, signerKey := tmpl, any(key)
	if parent != nil {
		signer, signerKey = parent.Leaf, parent.PrivateKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// A TLS Kafka listener keeps the subject of the client certificate it
// verified as the connection's principal, and serves the connection.
func TestTLSConnectionKeepsPrincipal(t *testing.T) {
	ca := testCert(t, "ca", nil, true)
	srvCert := testCert(t, "node", &ca, false)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Leaf)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := Serve(ln, Config{Backend: fakeBackend{}, NodeID: 1, Logger: slog.New(slog.DiscardHandler),
		TLS: &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}})
	t.Cleanup(s.Close)
	nc, err := tls.Dial("tcp", s.Addr().String(), &tls.Config{RootCAs: pool,
		Certificates: []tls.Certificate{testCert(t, "carol", &ca, false)}})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	c := &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
	c.send(18, 0, 7, false, nil) // ApiVersions v0
	if corr, _, err := c.recv(); err != nil || corr != 7 {
		t.Fatalf("ApiVersions over TLS: corr %d, %v", corr, err)
	}
	conns := s.l.Conns()
	for _, conn := range conns {
		if p := conn.Principal(); p != "User:CN=carol" {
			t.Errorf("principal %q, want User:CN=carol", p)
		}
	}
	if len(conns) != 1 {
		t.Errorf("%d connections, want 1", len(conns))
	}
}
