package main

import (
	"errors"
	"io"
	"os"
	"slices"
	"time"

	"github.com/strandlog/strand/cmd/strand/internal/bench"
	"github.com/strandlog/strand/node"
)

// cmdBench runs `strand bench produce|consume|e2e|cluster|readers`. The
// benches live in cmd/strand/internal/bench; this parses the command line
// (the client flags here, the rest there) and renders their errors.
func cmdBench(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError("bench: want produce, consume, e2e or cluster")
	}
	kind, rest := args[0], args[1:]
	var err error
	switch {
	case kind == "-h" || kind == "--help" || kind == "help":
		return &helpShown{text: groupUsage("bench")}
	case kind == "cluster":
		err = cmdBenchCluster(rest, stdout)
	case kind == "readers":
		err = cmdBenchReaders(rest, stdout)
	case slices.Contains(bench.Kinds, kind):
		err = cmdBenchKind(kind, rest, stdout)
	default:
		return usageError("bench: unknown %q: want produce, consume, e2e or cluster", kind)
	}
	var ue *bench.UsageError
	if errors.As(err, &ue) {
		return usageError("%s", ue.Msg)
	}
	return err
}

// cmdBenchKind runs `strand bench produce|consume|e2e` against a running
// cluster.
func cmdBenchKind(kind string, args []string, stdout io.Writer) error {
	fs := newFlags("bench " + kind)
	var cf clientFlags
	cf.register(fs, 30*time.Second)
	var b bench.Settings
	b.Register(fs, kind)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := b.Check(kind); err != nil {
		return err
	}
	conn, err := cf.benchConn()
	if err != nil {
		return err
	}
	b.Conn = conn
	ctx, stop := signalContext()
	defer stop()
	return b.Run(ctx, kind, stdout)
}

// cmdBenchCluster runs `strand bench cluster`.
func cmdBenchCluster(args []string, stdout io.Writer) error {
	fs := newFlags("bench cluster")
	cb := bench.Cluster{MakeTLS: benchTLS}
	cb.Register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("bench cluster takes no arguments, got %q", fs.Args())
	}
	ctx, stop := signalContext()
	defer stop()
	return cb.Run(ctx, stdout)
}

// cmdBenchReaders runs `strand bench readers`, the child process of bench
// cluster's fan-out phase.
func cmdBenchReaders(args []string, stdout io.Writer) error {
	fs := newFlags("bench readers")
	var cf clientFlags
	cf.register(fs, 30*time.Second)
	var r bench.Readers
	r.Register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := r.Check(); err != nil {
		return err
	}
	conn, err := cf.benchConn()
	if err != nil {
		return err
	}
	r.Conn = conn
	ctx, stop := signalContext()
	defer stop()
	return r.Run(ctx, os.Stdin, stdout)
}

// benchConn is the bench's view of the client flags. It fails at once
// when no broker answers, as every client command does.
func (c *clientFlags) benchConn() (bench.Conn, error) {
	probe, err := c.client()
	if err != nil {
		return bench.Conn{}, err
	}
	probe.Close()
	tlsConfig, err := c.tls.config()
	if err != nil {
		return bench.Conn{}, err
	}
	tlsOpts, err := c.tlsOpts()
	if err != nil {
		return bench.Conn{}, err
	}
	return bench.Conn{Brokers: c.brokers, Timeout: c.timeout, Opts: append(tlsOpts, c.sasl.opts()...), TLS: tlsConfig}, nil
}

// benchTLS writes `bench cluster --tls`'s throwaway CA and certificates
// (as strand dev --tls does) for servers at addrs into dir.
func benchTLS(dir string, addrs []string) (*bench.ServerTLS, error) {
	peers := make([]node.Peer, len(addrs))
	for i := range peers {
		peers[i] = node.Peer{ID: node.NodeID(i + 1), Address: addrs[i]}
	}
	certs, err := makeDevTLS(dir, peers, "127.0.0.1")
	if err != nil {
		return nil, err
	}
	out := &bench.ServerTLS{NodeArgs: map[int][]string{}}
	for _, p := range peers {
		n := certs.nodes[p.ID]
		out.NodeArgs[int(p.ID)] = []string{"--tls-cert", n.CertFile, "--tls-key", n.KeyFile, "--tls-ca", n.CAFile}
	}
	client := clientTLSFlags{ca: certs.ca, cert: certs.clientCert, key: certs.clientKey}
	if out.Client, err = client.config(); err != nil {
		return nil, err
	}
	return out, nil
}
