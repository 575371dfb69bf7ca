package kafkaproto

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/sasl"
)

// FuzzSASLHandshake feeds a listener that requires SASL a SaslHandshake
// and two SaslAuthenticate requests made of fuzzed bytes (keys forced): it
// never panics, and no connection authenticates without the password.
func FuzzSASLHandshake(f *testing.F) {
	pc, err := sasl.NewCredential(metadata.ScramSHA256, "alice", "alice-pw", 4096)
	if err != nil {
		f.Fatal(err)
	}
	cred := metadata.CredentialFromProto("alice", pc)
	lookup := func(name, mech string) (metadata.Credential, bool) {
		return cred, name == "alice" && mech == metadata.ScramSHA256
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = metadata.ScramSHA256
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SetVersion(2)
	auth.SASLAuthBytes = []byte("n,,n=alice,r=abcdefgh")
	auth2 := kmsg.NewPtrSASLAuthenticateRequest()
	auth2.SetVersion(2)
	auth2.SASLAuthBytes = []byte("c=biws,r=abcdefgh,p=AAAA")
	f.Add(frameRequest(hs, 1), frameRequest(auth, 2), frameRequest(auth2, 3))
	s := &Server{cfg: Config{Backend: fakeBackend{}, SASL: lookup}, logger: slog.New(slog.DiscardHandler), classic: newClassicState()}
	f.Fuzz(func(t *testing.T, b1, b2, b3 []byte) {
		c := &conn{s: s, done: make(chan struct{}), gate: SASLGate{lookup: lookup}}
		for i, b := range [][]byte{b1, b2, b3} {
			if len(b) < 2 {
				return
			}
			b = bytes.Clone(b)
			binary.BigEndian.PutUint16(b, map[bool]uint16{true: 17, false: 36}[i == 0])
			p, err := c.serve(b)
			if err != nil {
				return
			}
			if resp := p.resp(); resp != nil {
				appendResponse(nil, p, resp)
			}
			if c.gate.principal != "" {
				t.Fatalf("authenticated as %q without the password", c.gate.principal)
			}
			if p.closeAfter != "" {
				return
			}
		}
	})
}
