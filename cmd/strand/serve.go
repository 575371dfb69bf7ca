package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/node/server"
)

// nodeFlags are the flags of one node shared by serve and dev.
type nodeFlags struct {
	tick       time.Duration
	cpuProfile string
	stats      time.Duration
	logFormat  string
	logLevel   string
	minFree    int64
	catchUp    int64
	compactIO  int64
	wal        bool
	diskStall  time.Duration
}

func (n *nodeFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&n.tick, "tick", server.TickDefault,
		"raft tick interval; elections take about 100 ticks, heartbeats 10")
	fs.DurationVar(&n.stats, "stats-interval", 0, "log the event loop's counters this often (0: never)")
	fs.StringVar(&n.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	fs.StringVar(&n.logFormat, "log-format", "text", "log format on stderr: text or json")
	fs.StringVar(&n.logLevel, "log-level", "info", "least severe log level shown: debug, info, warn or error")
	fs.Int64Var(&n.minFree, "min-free-bytes", 0,
		"refuse produce (retriable not_enough_space) while the data directory's file system has less free space (0: only when full)")
	fs.Int64Var(&n.catchUp, "catchup-bytes-per-sec", 0,
		"bound the replication bytes per second sent to each follower that is catching up (0: unlimited)")
	fs.Int64Var(&n.compactIO, "compaction-bytes-per-sec", 0,
		"bound the bytes per second compaction passes read and write on this node, all compacted partitions together, as Kafka's log.cleaner.io.max.bytes.per.second; produce and fetch are not slowed (0: unlimited)")
	fs.DurationVar(&n.diskStall, "disk-stall-after", 0,
		"a fsync not returned after this long stalls the node: it hands its leaderships on and refuses produce until the disk answers; half of it logs the slow job (0: one election timeout)")
	fs.BoolVar(&n.wal, "wal", false,
		"make each round durable with one fsync of a node-wide write-ahead log (DATA_DIR/wal) instead of one per partition log written (turning it off later is safe: the log is replayed)")
}

// coreConfig is the node.Config of node id under these flags.
func (n *nodeFlags) coreConfig(id node.NodeID, nodes []node.Peer) (node.Config, error) {
	if n.minFree < 0 || n.catchUp < 0 || n.compactIO < 0 || n.diskStall < 0 {
		return node.Config{}, usageError("--min-free-bytes, --catchup-bytes-per-sec, --compaction-bytes-per-sec and --disk-stall-after must not be negative")
	}
	return node.Config{ID: id, Nodes: nodes, MinFreeBytes: n.minFree, CatchUpBytesPerSec: n.catchUp, CompactionBytesPerSec: n.compactIO, WAL: n.wal,
		DiskStallAfter: n.diskStall, Txn: node.TxnConfig{Markers: node.PartitionMarkers{}}}, nil
}

// logger builds the nodes' logger on w from --log-format and --log-level.
func (n *nodeFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	switch n.logLevel {
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		return nil, usageError("--log-level %q: want debug, info, warn or error", n.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch n.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageError("--log-format %q: want text or json", n.logFormat)
}

// startProfile starts the CPU profile when asked; the returned func stops it.
func (n *nodeFlags) startProfile() (func(), error) {
	if n.cpuProfile == "" {
		return func() {}, nil
	}
	f, err := os.Create(n.cpuProfile)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// serveFlags are `strand serve`'s own flags (beside nodeFlags and the
// TLS and security ones).
type serveFlags struct {
	id                          uint64
	listen, advertise, peers    string
	join, dataDir, rack         string
	kafkaListen, kafkaAdvertise string
	adminListen                 string
}

func (f *serveFlags) register(fs *pflag.FlagSet) {
	fs.Uint64Var(&f.id, "id", 0, "this node's id (1, 2, ...), unique in the cluster")
	fs.StringVar(&f.listen, "listen", "", "address to listen on, for clients and peers (default: this node's --peers entry; 127.0.0.1:9192 without --peers)")
	fs.StringVar(&f.advertise, "advertise", "", "address others reach this node at (default: this node's --peers entry, else --listen)")
	fs.StringVar(&f.peers, "peers", "", "every node of the cluster, this one included: 1=HOST:PORT,2=HOST:PORT,... (default: this node alone)")
	fs.StringVar(&f.join, "join", "", "join a running cluster through any of its nodes (HOST:PORT,...): registers this node at --advertise/--listen; a restart needs no --join")
	fs.StringVar(&f.dataDir, "data-dir", "", "directory of this node's logs (created when missing)")
	fs.StringVar(&f.rack, "rack", "", "this node's failure domain, for replica placement")
	fs.StringVar(&f.kafkaListen, "kafka-listen", "", "also serve Kafka's protocol here, e.g. 0.0.0.0:9092 (default: no Kafka listener)")
	fs.StringVar(&f.kafkaAdvertise, "kafka-advertise", "", "host:port Kafka clients reach this node at (default: --kafka-listen)")
	fs.StringVar(&f.adminListen, "admin-listen", "", "serve the admin HTTP API here: /metrics, /healthz, /readyz, /debug/pprof/, the console at / (default: off)")
}

// check refuses what cannot run; args are the arguments left after the
// flags.
func (f *serveFlags) check(args []string) error {
	if f.id == 0 || f.dataDir == "" {
		return usageError("--id and --data-dir are required")
	}
	if len(args) != 0 {
		return usageError("serve takes no arguments, got %q", args)
	}
	if err := checkKafkaFlags(f.kafkaListen, f.kafkaAdvertise); err != nil {
		return err
	}
	if f.join != "" && (f.peers != "" || f.listen == "" && f.advertise == "") {
		return usageError("--join needs --listen or --advertise (the address the others reach this node at) and no --peers")
	}
	return checkAdminListen(f.adminListen)
}

// nodes is the cluster as --peers (or --join, which registers this node
// through a running one) says.
func (f *serveFlags) nodes(logger *slog.Logger) ([]node.Peer, error) {
	nodes, err := resolvePeers(node.NodeID(f.id), f.peers, &f.listen, &f.advertise, f.rack)
	if err != nil || f.join == "" {
		return nodes, err
	}
	if nodes, err = joinCluster(f.join, f.id, f.advertise, f.rack); err != nil {
		return nil, err
	}
	logger.Info("registered with the cluster; joining the metadata group", slog.Uint64("node", f.id),
		slog.String("address", f.advertise), slog.String("via", f.join))
	return nodes, nil
}

// cmdServe runs one node until SIGTERM or SIGINT (clean shutdown) or a
// fatal error (exit 1). A restart on the same --data-dir recovers.
func cmdServe(args []string, stderr io.Writer) error {
	fs := newFlags("serve")
	var f serveFlags
	f.register(fs)
	var nf nodeFlags
	nf.register(fs)
	var tf serveTLSFlags
	tf.register(fs)
	var sf securityFlags
	sf.register(fs)
	var tierf tierFlags
	tierf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	tlsCfg, err := tf.config()
	if err != nil {
		return err
	}
	if err := f.check(fs.Args()); err != nil {
		return err
	}
	store, err := tierf.open(context.Background()) // before joining: a wrong store fails with nothing changed
	if err != nil {
		return err
	}
	logger, err := nf.logger(stderr)
	if err != nil {
		return err
	}
	nodes, err := f.nodes(logger)
	if err != nil {
		return err
	}
	stopProfile, err := nf.startProfile()
	if err != nil {
		return err
	}
	defer stopProfile()
	core, err := nf.coreConfig(node.NodeID(f.id), nodes)
	if err != nil {
		return err
	}
	core.Join = f.join != ""
	core.ObjectStore, core.TieredStorageUnfinished, core.TierUploadBytesPerSec = store, tierf.unfinished, tierf.uploadRate
	scfg := server.Config{
		Core:    core,
		DataDir: f.dataDir, Listen: f.listen, Tick: nf.tick, Logger: logger, StatsInterval: nf.stats,
		KafkaListen: f.kafkaListen, KafkaAdvertise: f.kafkaAdvertise, TLS: tlsCfg,
	}
	if err := sf.apply(&scfg); err != nil {
		return err
	}
	hup := catchHUP(tlsCfg != nil)
	rt, err := server.Start(scfg)
	if err != nil {
		return err
	}
	attrs := []any{slog.Uint64("node", f.id), slog.String("listen", rt.Addr().String()),
		slog.String("data_dir", f.dataDir), slog.String("cluster", describeNodes(nodes))}
	if a := rt.KafkaAddr(); a != nil {
		attrs = append(attrs, slog.String("kafka_listen", a.String()))
	}
	attrs = append(attrs, slog.Bool("tls", tlsCfg != nil))
	if f.adminListen != "" {
		admin, err := serveAdmin(rt, f.adminListen, logger, tlsCfg != nil)
		if err != nil {
			rt.Close()
			return err
		}
		defer admin.Close()
		attrs = append(attrs, slog.String("admin", admin.URL()))
	}
	logger.Info("node started", attrs...)
	return serveUntilStopped(rt, logger, hup)
}

// serveAdmin serves rt's admin API on addr, warning when it is reachable
// beyond this host without TLS.
func serveAdmin(rt *server.Server, addr string, logger *slog.Logger, withTLS bool) (*server.Admin, error) {
	admin, err := server.ListenAdmin(addr, logger, rt)
	if err != nil {
		return nil, userErr(err, "cannot serve the admin API on %s: %v", addr, errors.Unwrap(err))
	}
	if !withTLS && !loopbackAddr(addr) {
		logger.Warn("the admin API (metrics, profiles, console) has no TLS or authentication and listens beyond this host: bind --admin-listen to 127.0.0.1 or a management network, or serve with --tls-cert (it then uses TLS and --tls-client-auth)",
			slog.String("admin", admin.URL()))
	}
	return admin, nil
}

// serveUntilStopped runs rt until SIGTERM or SIGINT (a clean Close) or a
// fatal error; with TLS (hup from catchHUP), SIGHUP reloads its
// certificates meanwhile.
func serveUntilStopped(rt *server.Server, logger *slog.Logger, hup chan os.Signal) error {
	ctx, stop := signalContext()
	defer stop()
	reloadOnHUP(hup, []*server.Server{rt}, logger, ctx.Done())
	select {
	case <-ctx.Done():
		stop()
		logger.Info("signal: shutting down")
		return closeOrForce([]*server.Server{rt}, logger)
	case <-rt.Done():
		return rt.Err()
	}
}

// shutdownWaitLog is how often a shutdown that has not finished says so.
const shutdownWaitLog = 3 * time.Second

// closeOrForce closes the nodes, saying every shutdownWaitLog that it
// still waits, until they are closed or a second SIGTERM or SIGINT ends
// the wait. A clean close can wait forever on a hung disk: its last write
// or fsync never returns (the kernel holds the thread, so even the forced
// exit completes only once the device answers or is torn down). Forcing
// loses nothing acknowledged: a write is acknowledged only after the
// fsyncs it needs returned.
func closeOrForce(rts []*server.Server, logger *slog.Logger) error {
	again, stop := signalContext()
	defer stop()
	closed := make(chan error, 1)
	go func() {
		var first error
		for _, rt := range rts {
			if err := rt.Close(); err != nil && first == nil {
				first = err
			}
		}
		closed <- first
	}()
	ticker := time.NewTicker(shutdownWaitLog)
	defer ticker.Stop()
	begun := time.Now()
	for {
		select {
		case err := <-closed:
			return err
		case <-ticker.C:
			logger.Warn("shutdown still waiting for the clean close: a disk write or fsync has not returned (a stalled disk?); a second SIGTERM or SIGINT exits without it",
				slog.Duration("waited", time.Since(begun).Round(time.Second)))
		case <-again.Done():
			return errors.New("exit forced by a second signal before the clean close finished (nothing acknowledged is lost; a restart recovers)")
		}
	}
}

// checkKafkaFlags refuses a --kafka-advertise without a listener and
// addresses that are not HOST:PORT, before anything starts.
func checkKafkaFlags(listen, advertise string) error {
	if advertise != "" && listen == "" {
		return usageError("--kafka-advertise %s needs --kafka-listen: there is no Kafka listener to advertise", advertise)
	}
	for _, f := range [...]struct{ name, addr string }{{"--kafka-listen", listen}, {"--kafka-advertise", advertise}} {
		if f.addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(f.addr); err != nil {
			return usageError("%s %q: want HOST:PORT (%v)", f.name, f.addr, err)
		}
	}
	return nil
}

// loopbackAddr tells whether HOST:PORT names this host only (a loopback
// IP or "localhost").
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkAdminListen refuses an --admin-listen that is not HOST:PORT.
func checkAdminListen(addr string) error {
	if addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return usageError("--admin-listen %q: want HOST:PORT (%v)", addr, err)
	}
	return nil
}

// resolvePeers works out the cluster's nodes and this node's listen
// address. --peers must name this node: a node missing from its own list
// would invent an address. Without --listen the node listens on its
// --peers entry; with --listen, the port must be the entry's (the host may
// differ, e.g. 0.0.0.0 to listen on every interface). --advertise, when
// given, must equal the entry. Without --peers the cluster is this node
// alone, at --advertise or --listen.
func resolvePeers(self node.NodeID, spec string, listen, advertise *string, rack string) ([]node.Peer, error) {
	listenSet, advertiseSet := *listen != "", *advertise != ""
	if strings.TrimSpace(spec) == "" {
		if !listenSet {
			*listen = "127.0.0.1:9192"
		}
		if *advertise == "" {
			*advertise = *listen
		}
		return []node.Peer{{ID: self, Address: *advertise, Rack: rack}}, nil
	}
	nodes, err := parsePeers(spec, rack, self)
	if err != nil {
		return nil, usageError("--peers: %v", err)
	}
	var entry string
	for _, p := range nodes {
		if p.ID == self {
			entry = p.Address
		}
	}
	if entry == "" {
		return nil, usageError("--peers %s does not name this node (--id %d): add %d=HOST:PORT, the address the others reach it at",
			spec, self, self)
	}
	if advertiseSet && *advertise != entry {
		return nil, usageError("--advertise %s and --peers entry %d=%s disagree: give one address", *advertise, self, entry)
	}
	*advertise = entry
	if !listenSet {
		*listen = entry
		return nodes, nil
	}
	_, lport, err := net.SplitHostPort(*listen)
	if err != nil {
		return nil, usageError("--listen %q: %v", *listen, err)
	}
	if _, eport, _ := net.SplitHostPort(entry); eport != lport {
		return nil, usageError("--listen %s and --peers entry %d=%s name different ports: the others would dial a port this node does not listen on",
			*listen, self, entry)
	}
	return nodes, nil
}

// parsePeers parses "1=host:port,2=host:port" into the cluster's nodes,
// sorted by id; self gets rack.
func parsePeers(spec, rack string, self node.NodeID) ([]node.Peer, error) {
	byID := map[node.NodeID]string{}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		idText, addr, ok := strings.Cut(part, "=")
		id, err := strconv.ParseUint(idText, 10, 64)
		if !ok || err != nil || id == 0 {
			return nil, fmt.Errorf("%q is not ID=HOST:PORT with ID ≥ 1", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%q: %v", part, err)
		}
		if _, dup := byID[node.NodeID(id)]; dup {
			return nil, fmt.Errorf("node %d given twice", id)
		}
		byID[node.NodeID(id)] = addr
	}
	nodes := make([]node.Peer, 0, len(byID))
	for id, addr := range byID {
		p := node.Peer{ID: id, Address: addr}
		if id == self {
			p.Rack = rack
		}
		nodes = append(nodes, p)
	}
	sortPeers(nodes)
	return nodes, nil
}

func sortPeers(nodes []node.Peer) {
	for i := 1; i < len(nodes); i++ {
		for j := i; j > 0 && nodes[j].ID < nodes[j-1].ID; j-- {
			nodes[j], nodes[j-1] = nodes[j-1], nodes[j]
		}
	}
}

func describeNodes(nodes []node.Peer) string {
	parts := make([]string, len(nodes))
	for i, p := range nodes {
		parts[i] = fmt.Sprintf("%d=%s", p.ID, p.Address)
	}
	return strings.Join(parts, ",")
}

// checkBasePort refuses a --base-port whose highest derived port (Strand's
// of the last node, or the admin port base-port+200 when it is derived)
// is over 65535, before anything starts.
func checkBasePort(base, nodes int, adminDerived bool) error {
	top, what := base+devNativePortOffset+nodes-1, fmt.Sprintf("node %d's Strand port (base-port+%d)", nodes, devNativePortOffset+nodes-1)
	if adminDerived && base+devAdminPortOffset > top {
		top, what = base+devAdminPortOffset, fmt.Sprintf("the admin port (base-port+%d)", devAdminPortOffset)
	}
	highest := base + 65535 - top
	switch {
	case base < 1:
		return usageError("--base-port %d: want 1 to %d", base, highest)
	case top > 65535:
		hint := ""
		if adminDerived {
			hint = " (or give --admin-listen HOST:PORT)"
		}
		return usageError("--base-port %d: %s would be %d, over 65535; want 1 to %d%s", base, what, top, highest, hint)
	}
	return nil
}

// devPeers are the dev cluster's count nodes on host: node i serves
// Kafka on basePort+i-1 and the native protocol devNativePortOffset above.
func devPeers(count int, host string, basePort int) []node.Peer {
	nodes := make([]node.Peer, count)
	for i := range nodes {
		nodes[i] = node.Peer{ID: node.NodeID(i + 1), Address: net.JoinHostPort(host, strconv.Itoa(basePort+devNativePortOffset+i)),
			KafkaAddress: net.JoinHostPort(host, strconv.Itoa(basePort+i))}
	}
	return nodes
}

// devAdmin serves every dev node's admin API and console on addr; when
// it cannot, it stops the nodes and says what to try.
func devAdmin(addr string, logger *slog.Logger, rts []*server.Server) (*server.Admin, error) {
	admin, err := server.ListenAdmin(addr, logger, rts...)
	if err != nil {
		for _, rt := range rts {
			rt.Close()
		}
		return nil, userErr(err, "cannot serve the admin API on %s: %v (try --admin-listen or --base-port)", addr, errors.Unwrap(err))
	}
	return admin, nil
}

// cmdDev runs a whole cluster in this process on consecutive ports, until
// Ctrl-C, and prints how to use it.
func cmdDev(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dev")
	count := fs.Int("nodes", 3, "number of nodes (1 to 9)")
	host := fs.String("host", "127.0.0.1", "address to listen on")
	basePort := fs.Int("base-port", 9092, "Kafka port of node 1; node i serves Kafka on base-port+i-1 and Strand's protocol on base-port+100+i-1")
	dataDir := fs.String("data-dir", "", "keep the cluster's data here (default: a temporary directory, removed at exit)")
	quiet := fs.Bool("quiet", false, "do not log node messages")
	withTLS := fs.Bool("tls", false, "generate a throwaway CA and certificates in the data directory and serve every listener (peers too) over TLS")
	adminListen := fs.String("admin-listen", "", "serve the admin API and console of every node here (default: host:base-port+200, e.g. 127.0.0.1:9292)")
	var nf nodeFlags
	nf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *count < 1 || *count > 9 {
		return usageError("--nodes %d: want 1 to 9", *count)
	}
	if err := checkBasePort(*basePort, *count, *adminListen == ""); err != nil {
		return err
	}
	dir, cleanup, err := devDataDir(*dataDir)
	if err != nil {
		return err
	}
	defer cleanup()
	stopProfile, err := nf.startProfile()
	if err != nil {
		return err
	}
	defer stopProfile()
	nodes := devPeers(*count, *host, *basePort)
	logger, err := nf.logger(stderr)
	if err != nil {
		return err
	}
	if *quiet {
		logger = slog.New(slog.DiscardHandler)
	}
	certs, err := devCerts(*withTLS, dir, nodes, *host)
	if err != nil {
		return err
	}
	if *adminListen == "" {
		*adminListen = net.JoinHostPort(*host, strconv.Itoa(*basePort+devAdminPortOffset))
	}
	if err := checkAdminListen(*adminListen); err != nil {
		return err
	}
	hup := catchHUP(certs != nil)
	rts, err := startDevNodes(nodes, dir, nf, logger, certs)
	if err != nil {
		return err
	}
	admin, err := devAdmin(*adminListen, logger, rts)
	if err != nil {
		return err
	}
	defer admin.Close()
	ctx, stop := signalContext()
	defer stop()
	reloadOnHUP(hup, rts, logger, ctx.Done())
	printDevBanner(stdout, nodes, dir, *dataDir == "", admin.URL())
	if err := waitDevReady(ctx, rts); err != nil {
		fmt.Fprintf(stdout, "\nnot ready: %v\n", err)
	} else {
		printDevHelp(stdout, nodes, certs)
	}
	return runDevUntilStopped(ctx, stdout, logger, rts)
}

// runDevUntilStopped waits for ctx (Ctrl-C) or a node's failure, then
// closes every node.
func runDevUntilStopped(ctx context.Context, stdout io.Writer, logger *slog.Logger, rts []*server.Server) error {
	failed := make(chan *server.Server, len(rts))
	for _, rt := range rts {
		go func() { <-rt.Done(); failed <- rt }()
	}
	var runErr error
	select {
	case <-ctx.Done():
		fmt.Fprintln(stdout, "\nstopping the cluster")
	case rt := <-failed:
		runErr = fmt.Errorf("a node stopped: %v", rt.Err())
	}
	if err := closeOrForce(rts, logger); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// devNativePortOffset puts strand dev's native listeners above its Kafka
// ones: Kafka tools try 127.0.0.1:9092 first, so Kafka gets it, and Strand's
// own protocol takes 9192 onwards.
const devNativePortOffset = 100

// devAdminPortOffset puts strand dev's admin listener (console, metrics)
// above the native listeners.
const devAdminPortOffset = 200

// devDataDir returns the data directory and what to do at exit: remove a
// temporary one, keep a named one.
func devDataDir(named string) (string, func(), error) {
	if named != "" {
		return named, func() {}, os.MkdirAll(named, 0o755)
	}
	dir, err := os.MkdirTemp("", "strand-dev-")
	if err != nil {
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// A dev cluster caps every topic's segment.bytes and segment.ms, so that
// retention shows within a minute on a laptop (a segment is deleted only
// once it is no longer the active one).
const (
	devSegmentBytesMax = 1 << 20
	devSegmentAgeMax   = 10 * time.Second
)

// startDevNodes starts every node; on failure it stops those started.
// With certs, every node serves TLS with its certificate.
func startDevNodes(nodes []node.Peer, dir string, nf nodeFlags, logger *slog.Logger, certs *devTLS) ([]*server.Server, error) {
	var rts []*server.Server
	for _, p := range nodes {
		core, err := nf.coreConfig(p.ID, nodes)
		if err != nil {
			return nil, err // the same flags for every node: none started
		}
		core.SegmentBytesMax, core.SegmentAgeMax = devSegmentBytesMax, devSegmentAgeMax
		var tlsCfg *server.TLSConfig
		if certs != nil {
			tlsCfg = certs.nodes[p.ID]
		}
		rt, err := server.Start(server.Config{
			TLS:     tlsCfg,
			Core:    core,
			DataDir: filepath.Join(dir, fmt.Sprintf("node-%d", p.ID)),
			Listen:  p.Address, Tick: nf.tick, StatsInterval: nf.stats, Logger: logger,
			KafkaListen: p.KafkaAddress, SecurityNoticeInBanner: true,
		})
		if err != nil {
			for _, started := range rts {
				started.Close()
			}
			if errors.Is(err, syscall.EADDRINUSE) {
				return nil, userErr(err, "cannot listen on %s or %s: address already in use (another strand dev running? try --base-port)",
					p.KafkaAddress, p.Address)
			}
			return nil, err
		}
		rts = append(rts, rt)
	}
	return rts, nil
}

// devReadyTimeout bounds the wait for a metadata leader before strand dev
// says it is ready.
const devReadyTimeout = 30 * time.Second

// waitDevReady polls (bounded) until every node knows a metadata group
// leader and has applied every node's registration: only then do topic
// commands succeed.
func waitDevReady(ctx context.Context, rts []*server.Server) error {
	ctx, cancel := context.WithTimeout(ctx, devReadyTimeout)
	defer cancel()
	ticker := time.NewTicker(20 * time.Millisecond)
	defer ticker.Stop()
	for {
		waiting := 0
		for _, rt := range rts {
			if leader, registered := rt.MetadataLeader(); leader == 0 || registered < len(rts) {
				waiting++
			}
		}
		if waiting == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %v, %d of %d nodes know no metadata leader or not every node", devReadyTimeout, waiting, len(rts))
		case <-ticker.C:
		}
	}
}

// printDevBanner names the nodes and the data directory.
func printDevBanner(w io.Writer, nodes []node.Peer, dir string, temporary bool, adminURL string) {
	fmt.Fprintf(w, "strand dev: %d-node cluster starting.\n", len(nodes))
	for _, p := range nodes {
		fmt.Fprintf(w, "  node %d  %s  (Kafka clients: %s)\n", p.ID, p.Address, p.KafkaAddress)
	}
	fmt.Fprintf(w, "  console %s  (metrics: %smetrics)\n", adminURL, adminURL)
	if temporary {
		fmt.Fprintf(w, "  data    %s (temporary: removed when you stop the cluster)\n", dir)
	} else {
		fmt.Fprintf(w, "  data    %s (kept: start again with the same --data-dir to recover)\n", dir)
	}
}

// selfCommand is how the user ran this binary (./bin/strand from the
// repository, strand from PATH), so printed commands run as shown.
func selfCommand() string {
	if len(os.Args) > 0 && strings.ContainsRune(os.Args[0], filepath.Separator) {
		return os.Args[0]
	}
	return "strand"
}

// printDevHelp says the cluster is ready and how to use it.
func printDevHelp(w io.Writer, nodes []node.Peer, certs *devTLS) {
	brokers := ""
	if nodes[0].Address != "127.0.0.1:9192" {
		brokers = " --brokers " + nodes[0].Address
	}
	brokers += certs.cliFlags()
	rf := min(3, len(nodes))
	s := selfCommand()
	fmt.Fprintf(w, `ready: a metadata leader is elected and every node registered.

In another shell:
  %s topic create hello --partitions 3 --replication-factor %d%s
  printf 'first\nsecond\nthird\n' | %s produce hello%s
  %s consume hello --from earliest --until-end%s
  %s cluster%s

`, s, rf, brokers, s, brokers, s, brokers, s, brokers)
	if certs != nil {
		certs.printHelp(w, nodes[0].Address, nodes[0].KafkaAddress)
	} else {
		fmt.Fprintf(w, `Go clients connect with clientlib.NewClient(clientlib.SeedAddresses(%q)).
Kafka clients connect to %s, e.g. kcat -b %s -L
`, nodes[0].Address, nodes[0].KafkaAddress, nodes[0].KafkaAddress)
	}
	if certs != nil {
		fmt.Fprintln(w, "Security: TLS on every listener; no SASL, no ACLs: anyone with the client certificate may do anything.")
	} else {
		fmt.Fprintln(w, "Security is off: no TLS, no SASL, no ACLs; anyone who reaches these ports may do anything.")
	}
	fmt.Fprintln(w, "Press Ctrl-C to stop.")
}
