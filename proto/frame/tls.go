package frame

import "errors"

// ErrTLSOnPlaintext is the reason a plaintext listener gives for a peer
// whose first bytes are a TLS handshake record: the client was told to use
// TLS, the node was not.
var ErrTLSOnPlaintext = errors.New("client speaks TLS; this listener is plaintext (start with --tls-cert)")

// LooksLikeTLS reports whether b, the first bytes a listener received,
// open a TLS handshake record (a ClientHello): content type 22 (0x16), then
// a record version 3.x with x ≤ 4 (SSL 3.0 to TLS 1.3; TLS 1.3 still
// sends 3.1 here). It needs the first three bytes. Read as a frame length
// those bytes are ≥ 0x16030000 (369 MB), which no frame limit here
// accepts, so no valid Strand or Kafka frame is ever taken for TLS.
func LooksLikeTLS(b []byte) bool {
	return len(b) >= 3 && b[0] == 0x16 && b[1] == 0x03 && b[2] <= 0x04
}
