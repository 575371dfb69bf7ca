package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/strandlog/strand/node"
)

// DevCA is a throwaway certificate authority (ECDSA P-256) for strand dev
// --tls and tests: it issues node and client certificates in the form the
// node expects (node certificates carry SAN URI strand://node/ID). Not for
// production: its key lives in memory and in the files it writes.
type DevCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, for --tls-ca on nodes and clients.
	PEM []byte
}

// devCertLifetime is how long DevCA certificates are valid.
const devCertLifetime = 7 * 24 * time.Hour

// NewDevCA makes a CA named name.
func NewDevCA(name string) (*DevCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(devCertLifetime),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &DevCA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(fmt.Sprintf("server: crypto/rand: %v", err))
	}
	return n
}

// Issue signs a certificate for cn, usable by a server and a client: with
// id > 0 it names node id (SAN URI strand://node/ID); hosts become DNS or
// IP SANs. It returns the PEM certificate and PEM key.
func (ca *DevCA) Issue(cn string, id node.NodeID, hosts ...string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: cn, Organization: []string{"strand"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(devCertLifetime),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if id != 0 {
		tmpl.URIs = append(tmpl.URIs, NodeURI(id))
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// IssueFiles issues as Issue and writes DIR/NAME.crt and DIR/NAME.key
// (mode 0600), returning their paths.
func (ca *DevCA) IssueFiles(dir, name, cn string, id node.NodeID, hosts ...string) (certFile, keyFile string, err error) {
	certPEM, keyPEM, err := ca.Issue(cn, id, hosts...)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(keyFile, keyPEM, 0o600)
}

// WriteCA writes the CA certificate to DIR/ca.crt and returns its path.
func (ca *DevCA) WriteCA(dir string) (string, error) {
	path := filepath.Join(dir, "ca.crt")
	return path, os.WriteFile(path, ca.PEM, 0o644)
}
