package frame

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// clientHello captures the first bytes a crypto/tls client sends with cfg.
func clientHello(t testing.TB, cfg *tls.Config) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		c := tls.Client(a, cfg)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Handshake() // fails when b closes
	}()
	b.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	n, err := io.ReadAtLeast(b, buf, 3)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// helloSeeds are real ClientHellos of TLS 1.2 and 1.3 clients.
func helloSeeds(t testing.TB) [][]byte {
	return [][]byte{
		clientHello(t, &tls.Config{ServerName: "node-1", MaxVersion: tls.VersionTLS12}),
		clientHello(t, &tls.Config{ServerName: "node-1", MinVersion: tls.VersionTLS13}),
		clientHello(t, &tls.Config{InsecureSkipVerify: true}),
	}
}

// Real ClientHellos are recognised and are never a frame (Strand's, or a
// Kafka request's size); a Strand Hello frame is not taken for TLS.
func TestLooksLikeTLSRealClientHellos(t *testing.T) {
	for i, h := range helloSeeds(t) {
		if !LooksLikeTLS(h) {
			t.Errorf("hello %d (% x...) not recognised", i, h[:5])
		}
		if _, err := Read(bytes.NewReader(h), nil, BytesMaxDefault); !errors.Is(err, ErrTooLarge) {
			t.Errorf("hello %d read as a frame: %v", i, err)
		}
	}
	hello, _ := Append(nil, &strandpb.Request{Body: &strandpb.Request_Hello{Hello: &strandpb.HelloRequest{VersionMin: 1, VersionMax: 1}}})
	if LooksLikeTLS(hello) {
		t.Errorf("a Strand hello frame taken for TLS")
	}
	if LooksLikeTLS([]byte{0x16, 0x03}) {
		t.Errorf("two bytes taken for TLS")
	}
}

// FuzzFirstBytes feeds what a listener might receive first: detection and
// the first frame's decode never panic, and no input is both a TLS
// handshake record and a frame a listener accepts (a Strand frame within
// BytesMaxDefault, or a Kafka request size within 16 MiB), so the clear
// "client speaks TLS" error never hides a valid client.
func FuzzFirstBytes(f *testing.F) {
	for _, h := range helloSeeds(f) {
		f.Add(h)
	}
	hello, _ := Append(nil, &strandpb.Request{Body: &strandpb.Request_Hello{Hello: &strandpb.HelloRequest{VersionMin: 1, VersionMax: 1}}})
	f.Add(hello)
	f.Add([]byte{0x16, 0x03, 0x05, 0, 0})
	f.Add([]byte{0x16, 0x03, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		isTLS := LooksLikeTLS(data)
		var req strandpb.Request
		_, err := Decode(bytes.NewReader(data), nil, BytesMaxDefault, &req)
		if isTLS && err == nil {
			t.Fatalf("% x is a TLS record and a valid frame", data)
		}
		if isTLS && len(data) >= 4 {
			if size := int32(binary.BigEndian.Uint32(data)); size <= 16<<20 {
				t.Fatalf("% x is a TLS record and a Kafka request size %d", data, size)
			}
		}
	})
}
