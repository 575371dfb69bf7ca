package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/strandlog/strand/node"
)

// The admin listener's bounds.
const (
	adminQueriesMax     = 16               // view requests waiting for the loop
	adminViewTimeout    = 5 * time.Second  // one view, queueing included
	adminReadTimeout    = 10 * time.Second // an HTTP request's headers and body
	adminWriteTimeout   = 60 * time.Second // an answer (pprof's CPU profile takes 30 s)
	adminReplicaLagMax  = replicaLagEntries
	adminShutdownBudget = 2 * time.Second
)

// errAdminBusy and errAdminStopped are a view request's operating errors.
var (
	errAdminBusy    = errors.New("node: admin: the loop has too many view requests queued")
	errAdminStopped = errors.New("node: admin: node stopped")
)

// adminQuery asks the loop for one AdminView; answer has capacity 1, so
// the loop never blocks on a caller that gave up.
type adminQuery struct{ answer chan node.AdminView }

// view returns the node's AdminView, taken by the loop between two Process
// calls (the HTTP side never touches the Core). It waits at most
// adminViewTimeout (or ctx), and fails at once when adminQueriesMax
// requests are already queued.
func (r *Server) view(ctx context.Context) (node.AdminView, error) {
	ctx, cancel := context.WithTimeout(ctx, adminViewTimeout)
	defer cancel()
	q := adminQuery{answer: make(chan node.AdminView, 1)}
	select {
	case r.adminQueries <- q:
	case <-r.done:
		return node.AdminView{}, errAdminStopped
	default:
		return node.AdminView{}, errAdminBusy
	}
	select {
	case v := <-q.answer:
		if v.OldestStorageJobFile != "" && r.dataDir != "" {
			v.OldestStorageJobFile = filepath.Join(r.dataDir, v.OldestStorageJobFile)
		}
		return v, nil
	case <-r.done:
		return node.AdminView{}, errAdminStopped
	case <-ctx.Done():
		return node.AdminView{}, fmt.Errorf("node: admin: view: %w", ctx.Err())
	}
}

// answerAdmin runs on the loop: one view per query.
func (r *Server) answerAdmin(q adminQuery) { q.answer <- r.core.AdminView() }

// id is the node's id.
func (r *Server) id() node.NodeID { return r.cfg.Core.ID }

// Admin serves the admin HTTP API of one or more nodes of this process
// (strand serve: its node; strand dev: every node): /metrics, /healthz,
// /readyz, /debug/pprof/, the JSON API under /api/ and the console at /.
// Every page reads fresh AdminViews through the nodes' loops.
type Admin struct {
	nodes  []*Server
	ln     net.Listener
	scheme string // "https" when the first node serves TLS
	http   *http.Server
	lag    *lagHistory
	logger *slog.Logger
	stop   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

// serveAdmin serves the admin API of nodes (at least one; the first is the
// one whose metadata the console shows) on ln until Close.
func serveAdmin(ln net.Listener, logger *slog.Logger, nodes ...*Server) *Admin {
	if len(nodes) == 0 {
		panic("server: serveAdmin without a node")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	a := &Admin{nodes: nodes, ln: ln, lag: newLagHistory(), logger: logger, stop: make(chan struct{})}
	reg := prometheus.NewRegistry()
	reg.MustRegister(&collector{a: a}, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slogPromLogger{logger}}))
	mux.HandleFunc("GET /healthz", a.healthz)
	mux.HandleFunc("GET /readyz", a.readyz)
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /api/cluster", a.apiCluster)
	mux.HandleFunc("GET /api/topics", a.apiTopics)
	mux.HandleFunc("GET /api/groups", a.apiGroups)
	mux.HandleFunc("GET /api/transactions", a.apiTransactions)
	mux.Handle("GET /", consoleHandler())
	a.http = &http.Server{Handler: mux, ReadHeaderTimeout: adminReadTimeout, ReadTimeout: adminReadTimeout,
		WriteTimeout: adminWriteTimeout, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug)}
	a.wg.Go(func() {
		if err := a.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("admin listener stopped", slog.Any("err", err))
		}
	})
	a.wg.Go(a.sampleLag)
	return a
}

// ListenAdmin listens on addr and serves the admin API of nodes there.
//
// When the first node serves TLS the admin API does too, with that node's
// certificate (reloaded with it on SIGHUP) and its --tls-client-auth: with
// "require" only holders of a certificate the CA signed read metrics,
// profiles and the console. Without TLS it is plain HTTP and open to
// whoever reaches it, which serve warns about unless it is bound to a
// loopback address.
func ListenAdmin(addr string, logger *slog.Logger, nodes ...*Server) (*Admin, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("node: admin listen on %s: %w", addr, err)
	}
	scheme := "http"
	if len(nodes) > 0 && nodes[0].tls != nil {
		ln = tls.NewListener(ln, nodes[0].tls.listenerConfig(nodes[0].cfg.TLS.ClientAuth, false))
		scheme = "https"
	}
	a := serveAdmin(ln, logger, nodes...)
	a.scheme = scheme
	return a, nil
}

// addr is the address the admin API listens on.
func (a *Admin) addr() net.Addr { return a.ln.Addr() }

// URL is the console's address, http(s)://HOST:PORT/.
func (a *Admin) URL() string {
	scheme := a.scheme
	if scheme == "" {
		scheme = "http"
	}
	return scheme + "://" + a.ln.Addr().String() + "/"
}

// Close stops the listener (answers in progress get adminShutdownBudget)
// and the lag sampler.
func (a *Admin) Close() error {
	var err error
	a.once.Do(func() {
		close(a.stop)
		ctx, cancel := context.WithTimeout(context.Background(), adminShutdownBudget)
		defer cancel()
		if err = a.http.Shutdown(ctx); err != nil {
			a.http.Close()
		}
		a.wg.Wait()
	})
	return err
}

// views takes one AdminView of every node, in order; a node that cannot
// answer (stopped, busy) has its error instead.
func (a *Admin) views(ctx context.Context) ([]node.AdminView, []error) {
	views := make([]node.AdminView, len(a.nodes))
	errs := make([]error, len(a.nodes))
	for i, n := range a.nodes {
		views[i], errs[i] = n.view(ctx)
	}
	return views, errs
}

// healthz answers 200 while the process serves every node, else 503 with
// the node that stopped and why.
func (a *Admin) healthz(w http.ResponseWriter, _ *http.Request) {
	for _, n := range a.nodes {
		select {
		case <-n.Done():
			http.Error(w, fmt.Sprintf("node %d stopped: %v", n.id(), n.Err()), http.StatusServiceUnavailable)
			return
		default:
		}
	}
	fmt.Fprintln(w, "ok")
}

// readyz answers 200 when every node is ready (see readiness), else 503
// with each reason, one line per node. Readiness is each served node's own
// (can it take its share of the work?), not the cluster's: a peer that is
// down leaves the others ready, as a load balancer wants. Cluster health
// is elsewhere: strand_cluster_nodes_down, strand_peer_up and
// strand_partitions_under_replicated on /metrics, nodes_down and
// under_replicated_partitions in /api/cluster, and `strand cluster health`.
func (a *Admin) readyz(w http.ResponseWriter, req *http.Request) {
	views, errs := a.views(req.Context())
	var reasons []string
	for i, v := range views {
		if errs[i] != nil {
			reasons = append(reasons, fmt.Sprintf("node %d: %v", a.nodes[i].id(), errs[i]))
			continue
		}
		if ok, why := readiness(v); !ok {
			reasons = append(reasons, fmt.Sprintf("node %d: %s", v.ID, why))
		}
	}
	if len(reasons) > 0 {
		http.Error(w, "not ready: "+strings.Join(reasons, "\n"), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
}

// readinessExamplesMax bounds the replicas a not-ready reason names.
const readinessExamplesMax = 3

// readiness says whether a node can take its share of the work: its
// disk is not stalled, its registration is applied, it knows a metadata
// leader, and every replica it hosts knows a leader, is not rebuilding lost state and has applied
// its commit index to within adminReplicaLagMax entries. Otherwise it
// says why.
func readiness(v node.AdminView) (bool, string) {
	if v.DiskStalled {
		return false, fmt.Sprintf("disk stalled: a storage job on %s has not returned for %v", v.OldestStorageJobFile,
			v.OldestStorageJob.Round(time.Millisecond))
	}
	if v.MetaLeader == 0 {
		return false, "no metadata leader known"
	}
	if !v.Registered {
		return false, "registration not applied in the metadata yet"
	}
	var behind []string
	count := 0
	for _, r := range v.Replicas {
		why := ""
		switch {
		case r.Rejoining:
			why = "rebuilding lost state"
		case r.Leader == 0:
			why = "no leader"
		case r.AppliedIndex+adminReplicaLagMax < r.CommitIndex:
			why = fmt.Sprintf("applied %d of %d", r.AppliedIndex, r.CommitIndex)
		default:
			continue
		}
		count++
		if len(behind) < readinessExamplesMax {
			behind = append(behind, fmt.Sprintf("%s/%d %s", r.Topic, r.Partition, why))
		}
	}
	if count > 0 {
		return false, fmt.Sprintf("%d of %d replicas not caught up (%s)", count, len(v.Replicas), strings.Join(behind, "; "))
	}
	return true, ""
}

// slogPromLogger is promhttp's error log on slog.
type slogPromLogger struct{ l *slog.Logger }

func (s slogPromLogger) Println(v ...any) { s.l.Warn("metrics", slog.String("err", fmt.Sprint(v...))) }
