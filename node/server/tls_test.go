package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
)

// testPKI is a throwaway CA with its files in a temporary directory.
type testPKI struct {
	t      *testing.T
	ca     *DevCA
	dir    string
	caFile string
}

func newTestPKI(t *testing.T, name string) *testPKI {
	t.Helper()
	ca, err := NewDevCA(name)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caFile, err := ca.WriteCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &testPKI{t: t, ca: ca, dir: dir, caFile: caFile}
}

// nodeConfig issues node id's certificate and returns its TLSConfig.
func (p *testPKI) nodeConfig(id node.NodeID) *TLSConfig {
	p.t.Helper()
	cert, key, err := p.ca.IssueFiles(p.dir, fmt.Sprintf("node-%d", id), fmt.Sprintf("node-%d", id), id, "127.0.0.1")
	if err != nil {
		p.t.Fatal(err)
	}
	return &TLSConfig{CertFile: cert, KeyFile: key, CAFile: p.caFile, ClientAuth: ClientAuthRequest}
}

// pair issues a certificate (naming node id unless 0) as a tls.Certificate.
func (p *testPKI) pair(cn string, id node.NodeID) tls.Certificate {
	p.t.Helper()
	certPEM, keyPEM, err := p.ca.Issue(cn, id)
	if err != nil {
		p.t.Fatal(err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

// clientConfig trusts the CA and presents a client certificate for cn.
func (p *testPKI) clientConfig(cn string) *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.ca.PEM)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{p.pair(cn, 0)}}
}

// logBuffer collects a server's log for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitLog polls (bounded) until one line of the log contains every want.
func (b *logBuffer) waitLog(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !b.hasLine(want) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line has all of %q:\n%s", want, b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (b *logBuffer) hasLine(want []string) bool {
	for _, line := range strings.Split(b.String(), "\n") {
		all := true
		for _, w := range want {
			all = all && strings.Contains(line, w)
		}
		if all {
			return true
		}
	}
	return false
}

// startTLSCluster starts n nodes on loopback ports, node i with tlsFor(i)
// (nil: plaintext); each also serves Kafka. Logs go to the returned buffer.
func startTLSCluster(t *testing.T, n int, tlsFor func(node.NodeID) *TLSConfig) ([]*Server, *logBuffer) {
	t.Helper()
	lns := make([]net.Listener, n)
	peers := make([]node.Peer, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		peers[i] = node.Peer{ID: node.NodeID(i + 1), Address: ln.Addr().String()}
	}
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var rts []*Server
	for i := range n {
		id := node.NodeID(i + 1)
		cfg := Config{Core: node.Config{ID: id, Nodes: peers}, DataDir: t.TempDir(), Listener: lns[i],
			TLS: tlsFor(id), Logger: logger, KafkaListen: "127.0.0.1:0"}
		rt, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rts = append(rts, rt)
		t.Cleanup(func() { rt.Close() })
	}
	return rts, logs
}

// waitMetadataLeader polls (bounded) until every node knows a metadata
// leader and every registration.
func waitMetadataLeader(t *testing.T, rts []*Server) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ready := 0
		for _, rt := range rts {
			if leader, registered := rt.MetadataLeader(); leader != 0 && registered == len(rts) {
				ready++
			}
		}
		if ready == len(rts) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s, %d of %d nodes know a metadata leader and every node", ready, len(rts))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A three-node cluster with TLS everywhere elects over mutual-TLS peer
// links; a clientlib client with WithTLS creates a topic, produces and
// reads back; franz-go produces and fetches over TLS on the Kafka
// listener; the connection's principal is the client certificate's subject.
func TestTLSClusterClientAndKafka(t *testing.T) {
	pki := newTestPKI(t, "test CA")
	rts, _ := startTLSCluster(t, 3, pki.nodeConfig)
	waitMetadataLeader(t, rts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	client, err := clientlib.NewClient(clientlib.SeedAddresses(rts[0].Addr().String()),
		clientlib.WithTLS(pki.clientConfig("alice")))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.CreateTopic(ctx, "secure", 1, 3, nil); err != nil {
		t.Fatal(err)
	}
	r := &clientlib.Record{Topic: "secure", Value: []byte("over tls")}
	if err := client.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	consumer := clientlib.NewConsumer(client)
	consumer.Assign("secure", 0, clientlib.OffsetExact(r.Offset))
	if got := consumer.Poll(ctx).Records(); len(got) != 1 || string(got[0].Value) != "over tls" {
		t.Fatalf("read back %v", got)
	}
	if !hasPrincipal(rts, "User:CN=alice,O=strand") {
		t.Errorf("no connection carries the principal User:CN=alice,O=strand")
	}

	kcl, err := kgo.NewClient(kgo.SeedBrokers(rts[0].KafkaAddr().String()), kgo.DialTLSConfig(pki.clientConfig("bob")),
		kgo.DefaultProduceTopic("secure"))
	if err != nil {
		t.Fatal(err)
	}
	defer kcl.Close()
	if err := kcl.ProduceSync(ctx, &kgo.Record{Value: []byte("kafka over tls")}).FirstErr(); err != nil {
		t.Fatalf("franz-go produce over TLS: %v", err)
	}
	fcl, err := kgo.NewClient(kgo.SeedBrokers(rts[0].KafkaAddr().String()), kgo.DialTLSConfig(pki.clientConfig("bob")),
		kgo.ConsumeTopics("secure"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer fcl.Close()
	var values []string
	for len(values) < 2 && ctx.Err() == nil {
		fcl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { values = append(values, string(r.Value)) })
	}
	if strings.Join(values, ",") != "over tls,kafka over tls" {
		t.Fatalf("franz-go fetched %q", values)
	}
}

// hasPrincipal reports whether some native connection of rts carries principal.
func hasPrincipal(rts []*Server, principal string) bool {
	for _, rt := range rts {
		for _, c := range rt.native.Conns() {
			if c.Principal() == principal {
				return true
			}
		}
	}
	return false
}

// dialPeerAs dials node addr over TLS presenting cert (none when nil),
// trusting roots, and says Hello as peer claims. It returns the Hello
// answer, or the error that ended the handshake.
func dialPeerAs(t *testing.T, addr string, roots *x509.CertPool, cert *tls.Certificate, claims node.NodeID) (*strandpb.Response, net.Conn, error) {
	t.Helper()
	cfg := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
	if cert != nil {
		// Sent whatever CAs the node names as acceptable, as the
		// transport does (tls.Config.Certificates would hold it back).
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	nc, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(testConnDeadline))
	hello := &strandpb.Request{Body: &strandpb.Request_Hello{Hello: &strandpb.HelloRequest{
		VersionMin: protocolVersion, VersionMax: protocolVersion, PeerNodeId: uint64(claims)}}}
	out, _ := frame.Append(nil, hello)
	if _, err := nc.Write(out); err != nil {
		return nil, nc, err
	}
	var resp strandpb.Response
	if _, err := frame.Decode(bufio.NewReader(nc), nil, frame.BytesMaxDefault, &resp); err != nil {
		return nil, nc, err
	}
	return &resp, nc, nil
}

// A peer is refused unless its certificate is signed by the cluster CA
// and names the node its Hello claims: a certificate from another CA fails
// the TLS handshake, a right-CA certificate naming node 3 (or no node)
// claiming node 2 gets PEER_NOT_AUTHENTICATED and its raft frame is not
// taken (the connection closes), no certificate at all is refused; each
// refusal is logged with its reason. Meanwhile the good cluster elects and
// serves.
func TestTLSPeerWithWrongCertificateRefused(t *testing.T) {
	pki := newTestPKI(t, "cluster CA")
	rts, logs := startTLSCluster(t, 3, pki.nodeConfig)
	waitMetadataLeader(t, rts)
	addr := rts[0].Addr().String()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pki.ca.PEM)

	other := newTestPKI(t, "other CA")
	foreign := other.pair("node-2", 2)
	if resp, _, err := dialPeerAs(t, addr, roots, &foreign, 2); err == nil {
		t.Fatalf("a certificate from another CA got hello answer %v", resp)
	}
	logs.waitLog(t, "certificate signed by unknown authority")

	for _, tc := range []struct {
		name   string
		cert   *tls.Certificate
		reason string
	}{
		{"names node 3", ptr(pki.pair("node-3", 3)), "certificate names node 3"},
		{"names no node", ptr(pki.pair("someone", 0)), "names no node"},
		{"no certificate", nil, "without a client certificate"},
	} {
		resp, nc, err := dialPeerAs(t, addr, roots, tc.cert, 2)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := resp.GetError().GetCode(); got != strandpb.ErrorCode_ERROR_CODE_PEER_NOT_AUTHENTICATED {
			t.Fatalf("%s: hello answered %v, want PEER_NOT_AUTHENTICATED", tc.name, resp)
		}
		// A raft frame after the refusal finds the connection closed.
		nc.Write(raftEnvelope(nil, 0))
		if _, err := nc.Read(make([]byte, 1)); err == nil {
			t.Fatalf("%s: connection still open after the refused hello", tc.name)
		}
		logs.waitLog(t, tc.reason)
	}

	good := pki.pair("node-2", 2)
	if resp, _, err := dialPeerAs(t, addr, roots, &good, 2); err != nil || resp.GetHello() == nil {
		t.Fatalf("the right certificate was refused: %v %v", resp, err)
	}
	client, err := clientlib.NewClient(clientlib.SeedAddresses(addr), clientlib.WithTLS(pki.clientConfig("c")))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client.CreateTopic(ctx, "still-works", 1, 3, nil); err != nil {
		t.Fatalf("the good cluster stopped serving: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// A node dialing a peer accepts only a certificate signed by the CA that
// names the node it dials.
func TestTLSPeerDialVerifiesNodeID(t *testing.T) {
	pki := newTestPKI(t, "cluster CA")
	other := newTestPKI(t, "other CA")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pki.ca.PEM)
	leaf := func(c tls.Certificate) []*x509.Certificate { return []*x509.Certificate{c.Leaf} }
	if err := verifyPeer(leaf(pki.pair("n2", 2)), pool, 2); err != nil {
		t.Errorf("right node refused: %v", err)
	}
	if err := verifyPeer(leaf(pki.pair("n3", 3)), pool, 2); err == nil || !strings.Contains(err.Error(), "names node 3") {
		t.Errorf("node 3's certificate for node 2: %v", err)
	}
	if err := verifyPeer(leaf(other.pair("n2", 2)), pool, 2); err == nil {
		t.Errorf("another CA's certificate accepted")
	}
	if err := verifyPeer(nil, pool, 2); err == nil {
		t.Errorf("no certificate accepted")
	}
}

// servedCert dials addr over TLS and returns the serial of the
// certificate the node serves.
func servedCert(t *testing.T, addr string, pki *testPKI) string {
	t.Helper()
	cfg := pki.clientConfig("probe")
	nc, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	return nc.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// ReloadTLS serves a new certificate to new connections without a
// restart; a bad file then keeps the certificate in use and says why.
func TestTLSReloadKeepsOldPairOnBadFile(t *testing.T) {
	pki := newTestPKI(t, "cluster CA")
	cfg := pki.nodeConfig(1)
	rts, logs := startTLSCluster(t, 1, func(node.NodeID) *TLSConfig { return cfg })
	addr := rts[0].Addr().String()
	first := servedCert(t, addr, pki)

	certPEM, keyPEM, err := pki.ca.Issue("node-1", 1, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, cfg.CertFile, certPEM)
	writeFile(t, cfg.KeyFile, keyPEM)
	if err := rts[0].ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	second := servedCert(t, addr, pki)
	if second == first {
		t.Fatalf("still serving serial %s after the reload", first)
	}

	writeFile(t, cfg.CertFile, []byte("not a certificate"))
	if err := rts[0].ReloadTLS(); err == nil {
		t.Fatal("reload of a bad certificate file succeeded")
	}
	logs.waitLog(t, "TLS reload failed; keeping the certificate in use")
	if got := servedCert(t, addr, pki); got != second {
		t.Fatalf("after a failed reload the node serves %s, want the kept %s", got, second)
	}
	// A certificate naming another node is refused at reload too.
	certPEM, keyPEM, _ = pki.ca.Issue("node-2", 2, "127.0.0.1")
	writeFile(t, cfg.CertFile, certPEM)
	writeFile(t, cfg.KeyFile, keyPEM)
	if err := rts[0].ReloadTLS(); err == nil || !strings.Contains(err.Error(), "does not name this node") {
		t.Fatalf("reload of another node's certificate: %v", err)
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Start refuses TLS files that cannot work: a certificate naming another
// node, a certificate from another CA, a missing file.
func TestTLSStartRefusesBadFiles(t *testing.T) {
	pki := newTestPKI(t, "cluster CA")
	other := newTestPKI(t, "other CA")
	wrongNode := pki.nodeConfig(2)
	wrongCA := other.nodeConfig(1)
	wrongCA.CAFile = pki.caFile
	missing := pki.nodeConfig(1)
	missing.KeyFile = filepath.Join(t.TempDir(), "absent.key")
	for name, cfg := range map[string]*TLSConfig{"names node 2": wrongNode, "other CA": wrongCA, "missing key": missing} {
		_, err := Start(Config{Core: node.Config{ID: 1, Nodes: []node.Peer{{ID: 1, Address: "127.0.0.1:0"}}},
			DataDir: t.TempDir(), Listen: "127.0.0.1:0", TLS: cfg})
		if err == nil {
			t.Errorf("%s: Start succeeded", name)
		}
	}
}

// A TLS client on a plaintext listener and a plaintext client on a TLS
// listener each fail at once with a *TLSError saying which side speaks
// TLS (so do an untrusted node certificate, and a missing client
// certificate where the node requires one); the plaintext node logs "client speaks TLS; this listener is
// plaintext", the Kafka listener likewise for franz-go over TLS.
func TestTLSMismatchErrors(t *testing.T) {
	pki := newTestPKI(t, "cluster CA")
	plain, plainLogs := startTLSCluster(t, 1, func(node.NodeID) *TLSConfig { return nil })
	secure, secureLogs := startTLSCluster(t, 1, pki.nodeConfig)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	check := func(what string, opts []clientlib.Opt, want func(*clientlib.TLSError) bool, text string) {
		t.Helper()
		c, err := clientlib.NewClient(append(opts, clientlib.MaxRetries(1))...)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = c.Metadata(ctx)
		var te *clientlib.TLSError
		if !errors.As(err, &te) || !want(te) {
			t.Fatalf("%s: got %v, want a *TLSError", what, err)
		}
		if !strings.Contains(err.Error(), text) {
			t.Fatalf("%s: %q lacks %q", what, err, text)
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: not at once", what)
		}
	}
	check("TLS client, plaintext node",
		[]clientlib.Opt{clientlib.SeedAddresses(plain[0].Addr().String()), clientlib.WithTLS(pki.clientConfig("c"))},
		func(e *clientlib.TLSError) bool { return e.Plaintext }, "does not speak TLS")
	plainLogs.waitLog(t, "client speaks TLS; this listener is plaintext (start with --tls-cert)")
	check("plaintext client, TLS node", []clientlib.Opt{clientlib.SeedAddresses(secure[0].Addr().String())},
		func(e *clientlib.TLSError) bool { return e.NodeWantsTLS }, "requires TLS")
	secureLogs.waitLog(t, "client speaks plaintext; this listener is TLS")
	untrusted := pki.clientConfig("c")
	untrusted.RootCAs = nil
	check("untrusted node certificate", []clientlib.Opt{clientlib.SeedAddresses(secure[0].Addr().String()), clientlib.WithTLS(untrusted)},
		func(e *clientlib.TLSError) bool { return !e.Plaintext && !e.NodeWantsTLS }, "--tls-ca")

	required, _ := startTLSCluster(t, 1, func(id node.NodeID) *TLSConfig {
		cfg := pki.nodeConfig(id)
		cfg.ClientAuth = ClientAuthRequire
		return cfg
	})
	noCert := pki.clientConfig("c")
	noCert.Certificates = nil
	check("no client certificate, node requires one", []clientlib.Opt{clientlib.SeedAddresses(required[0].Addr().String()), clientlib.WithTLS(noCert)},
		func(e *clientlib.TLSError) bool { return !e.Plaintext && !e.NodeWantsTLS }, "requires a client certificate")

	kcl, err := kgo.NewClient(kgo.SeedBrokers(plain[0].KafkaAddr().String()), kgo.DialTLSConfig(pki.clientConfig("c")),
		kgo.RetryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer kcl.Close()
	kctx, kcancel := context.WithTimeout(ctx, 3*time.Second)
	defer kcancel()
	if err := kcl.Ping(kctx); err == nil {
		t.Fatal("franz-go over TLS pinged a plaintext Kafka listener")
	}
	plainLogs.waitLog(t, `msg="closing Kafka connection"`, "listener=kafka",
		`reason="client speaks TLS; this listener is plaintext (start with --tls-cert)"`)
}

// A host refused again and again (a misconfigured peer redials every
// second) is logged at warn once per refusalLogEvery, the rest at debug.
func TestTLSRefusalsLoggedOncePerHost(t *testing.T) {
	logs := &logBuffer{}
	r := &Server{logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	for range 5 {
		r.logRefusal("192.0.2.1:4000", "refusing connection", errPlaintextOnTLS)
	}
	if n := strings.Count(logs.String(), "refusing connection"); n != 1 {
		t.Fatalf("%d warnings for 5 refusals of one host, want 1:\n%s", n, logs)
	}
}

// The admin listener of a node serving TLS serves HTTPS with the node's
// certificate and its client-auth mode: with "require", plain HTTP and a
// client without a certificate the CA signed are refused, one with it
// reads /healthz; URL says https.
func TestAdminServesTLS(t *testing.T) {
	pki := newTestPKI(t, "admin")
	rts, _ := startTLSCluster(t, 1, func(id node.NodeID) *TLSConfig {
		c := pki.nodeConfig(id)
		c.ClientAuth = ClientAuthRequire
		return c
	})
	admin, err := ListenAdmin("127.0.0.1:0", nil, rts[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	if !strings.HasPrefix(admin.URL(), "https://") {
		t.Fatalf("URL %s, want https", admin.URL())
	}
	get := func(client *http.Client, url string) (int, error) {
		resp, err := client.Get(url)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	addr := admin.addr().String()
	if code, err := get(&http.Client{Timeout: 5 * time.Second}, "http://"+addr+"/healthz"); err == nil && code == http.StatusOK {
		t.Fatal("plain HTTP read /healthz from a TLS admin listener")
	}
	anon := pki.clientConfig("anyone")
	anon.Certificates = nil
	if _, err := get(&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: anon}}, "https://"+addr+"/healthz"); err == nil {
		t.Fatal("a client without a certificate read /healthz with --tls-client-auth require")
	}
	code, err := get(&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: pki.clientConfig("ops")}}, "https://"+addr+"/healthz")
	if err != nil || code != http.StatusOK {
		t.Fatalf("with a client certificate: %d %v", code, err)
	}
}
