package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/node/server"
)

// serveTLSFlags are strand serve's TLS flags: the node's certificate, key
// and CA (which signs peers and, when asked for, clients).
type serveTLSFlags struct {
	cert, key, ca, clientAuth string
}

func (f *serveTLSFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.cert, "tls-cert", "", "serve TLS on every listener with this PEM certificate, which must name the node (SAN URI strand://node/ID); peers then use mutual TLS")
	fs.StringVar(&f.key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&f.ca, "tls-ca", "", "PEM CA certificate(s) that sign the peers' certificates and clients' (required with --tls-cert)")
	fs.StringVar(&f.clientAuth, "tls-client-auth", "none", "client certificates on client listeners: none, request (verified when given) or require")
}

// config is the node's TLS configuration, nil without --tls-cert.
func (f *serveTLSFlags) config() (*server.TLSConfig, error) {
	auth, err := server.ParseClientAuth(f.clientAuth)
	if err != nil {
		return nil, usageError("--tls-client-auth %q: want none, request or require", f.clientAuth)
	}
	if f.cert == "" && f.key == "" && f.ca == "" {
		if f.clientAuth != "none" {
			return nil, usageError("--tls-client-auth %s needs --tls-cert, --tls-key and --tls-ca", f.clientAuth)
		}
		return nil, nil
	}
	if f.cert == "" || f.key == "" || f.ca == "" {
		return nil, usageError("TLS needs all of --tls-cert, --tls-key and --tls-ca (peers authenticate each other with the CA)")
	}
	return &server.TLSConfig{CertFile: f.cert, KeyFile: f.key, CAFile: f.ca, ClientAuth: auth}, nil
}

// clientTLSFlags are the TLS flags of every client command (rpk's
// --tls-enabled/--tls-truststore/--tls-cert/--tls-key; any of the file
// flags turns TLS on, as in rpk).
type clientTLSFlags struct {
	enabled                bool
	ca, cert, key, srvName string
}

func (f *clientTLSFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.enabled, "tls", false, "connect over TLS (implied by the other --tls-* flags)")
	fs.StringVar(&f.ca, "tls-ca", "", "PEM CA certificate(s) to verify the nodes with (default: the system's roots)")
	fs.StringVar(&f.cert, "tls-cert", "", "PEM client certificate, for nodes that ask for one")
	fs.StringVar(&f.key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&f.srvName, "tls-server-name", "", "name the nodes' certificates must carry (default: the host of each address)")
}

// config is the client's tls.Config, nil when TLS is off.
func (f *clientTLSFlags) config() (*tls.Config, error) {
	if !f.enabled && f.ca == "" && f.cert == "" && f.key == "" && f.srvName == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.srvName}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, userErr(err, "--tls-ca: %v", rootCauseFile(err))
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, userErr(nil, "--tls-ca %s holds no PEM certificate", f.ca)
		}
	}
	if (f.cert == "") != (f.key == "") {
		return nil, usageError("--tls-cert and --tls-key go together")
	}
	if f.cert != "" {
		pair, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, userErr(err, "--tls-cert %s, --tls-key %s: %v", f.cert, f.key, rootCauseFile(err))
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// rootCauseFile is a file error without its operation prefix.
func rootCauseFile(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Path + ": " + pe.Err.Error()
	}
	return trimPackagePrefixes(err.Error())
}

// tlsOpt is the clientlib option of the client's TLS flags (none when off).
func (c *clientFlags) tlsOpts() ([]clientlib.Opt, error) {
	cfg, err := c.tls.config()
	if err != nil || cfg == nil {
		return nil, err
	}
	return []clientlib.Opt{clientlib.WithTLS(cfg)}, nil
}

// catchHUP starts catching SIGHUP for reloadOnHUP (nil without TLS). Call
// it before a node listens: a SIGHUP that arrives between the listener
// and reloadOnHUP is then held, not given its default action, which ends
// the process (a client that saw the node up and sent SIGHUP found it
// gone: TestServeReloadsTLSOnSIGHUP under CI load).
func catchHUP(withTLS bool) chan os.Signal {
	if !withTLS {
		return nil
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return hup
}

// reloadOnHUP reloads the TLS files of rts on every SIGHUP caught on hup
// (catchHUP; nil: none) until stop closes; a failed reload keeps the pair
// in use (the node logs why).
func reloadOnHUP(hup chan os.Signal, rts []*server.Server, logger *slog.Logger, stop <-chan struct{}) {
	if hup == nil {
		return
	}
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-stop:
				return
			case <-hup:
				logger.Info("SIGHUP: reloading TLS certificates")
				for _, rt := range rts {
					rt.ReloadTLS()
				}
			}
		}
	}()
}

// devTLS is what strand dev --tls generated: the files of a throwaway CA,
// one certificate per node (naming it, valid for host), one client
// certificate.
type devTLS struct {
	dir, ca, clientCert, clientKey string
	nodes                          map[node.NodeID]*server.TLSConfig
}

// devCerts is makeDevTLS when on, else nil.
func devCerts(on bool, dir string, nodes []node.Peer, host string) (*devTLS, error) {
	if !on {
		return nil, nil
	}
	d, err := makeDevTLS(dir, nodes, host)
	if err != nil {
		return nil, fmt.Errorf("generating TLS certificates: %w", err)
	}
	return d, nil
}

// makeDevTLS writes a CA and the certificates into DIR/tls.
func makeDevTLS(dir string, nodes []node.Peer, host string) (*devTLS, error) {
	d := &devTLS{dir: filepath.Join(dir, "tls"), nodes: map[node.NodeID]*server.TLSConfig{}}
	if err := os.MkdirAll(d.dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := server.NewDevCA("strand dev CA")
	if err != nil {
		return nil, err
	}
	if d.ca, err = ca.WriteCA(d.dir); err != nil {
		return nil, err
	}
	hosts := []string{host, "localhost", "127.0.0.1"}
	for _, p := range nodes {
		cert, key, err := ca.IssueFiles(d.dir, fmt.Sprintf("node-%d", p.ID), fmt.Sprintf("node-%d", p.ID), p.ID, hosts...)
		if err != nil {
			return nil, err
		}
		d.nodes[p.ID] = &server.TLSConfig{CertFile: cert, KeyFile: key, CAFile: d.ca, ClientAuth: server.ClientAuthRequest}
	}
	if d.clientCert, d.clientKey, err = ca.IssueFiles(d.dir, "client", "strand-dev-client", 0); err != nil {
		return nil, err
	}
	return d, nil
}

// cliFlags are the client flags a strand command needs for this cluster.
func (d *devTLS) cliFlags() string {
	if d == nil {
		return ""
	}
	return fmt.Sprintf(" --tls-ca %s --tls-cert %s --tls-key %s", d.ca, d.clientCert, d.clientKey)
}

// printHelp says how Go and Kafka clients use the certificates.
func (d *devTLS) printHelp(w io.Writer, nativeAddr, kafkaAddr string) {
	fmt.Fprintf(w, `TLS is on: every listener and the peer links (mutual TLS); a throwaway CA and certificates are in %s.
strand commands take %s
  (or STRAND_TLS_CA, STRAND_TLS_CERT, STRAND_TLS_KEY in the environment).
Go clients connect with clientlib.NewClient(clientlib.SeedAddresses(%q), clientlib.WithTLS(cfg)),
  cfg a *tls.Config trusting %s (client certificate %s, key %s).
Kafka clients connect to %s over SSL, e.g.
  kcat -b %s -X security.protocol=SSL -X ssl.ca.location=%s -X ssl.certificate.location=%s -X ssl.key.location=%s -L
`, d.dir, d.cliFlags()[1:], nativeAddr, d.ca, d.clientCert, d.clientKey, kafkaAddr, kafkaAddr, d.ca, d.clientCert, d.clientKey)
}
