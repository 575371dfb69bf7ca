package server

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/node/loop"
	"github.com/strandlog/strand/node/server/listener"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/raftlog/osdisk"
)

// Defaults of Config's zero fields. With a 10 ms tick, the Core's
// timeouts come out at about 1 s election, 100 ms heartbeat (counted in
// raft ticks, one every 10 Core ticks) and 5 s request timeout (in Core
// ticks): ticking 2,000 raft groups every 10 ms, and polling them all
// for a Ready after each tick, was much of an idle node's CPU, while
// request deadlines and long polls keep their 10 ms grain.
const (
	TickDefault                = 10 * time.Millisecond    // real time between two node.Core.Tick calls
	ElectionTicksDefault       = 10                       // raft ticks: ≈ 1 s election timeout
	HeartbeatTicksDefault      = 1                        // raft ticks: ≈ 100 ms heartbeats
	TicksPerRaftTickDefault    = 10                       // raft ticks every 100 ms, as etcd's
	RequestTimeoutTicksDefault = 500                      // ≈ 5 s before a waiting request times out
	framesQueueMax             = 4096                     // raft frames waiting for the loop
	requestsQueueMax           = 8192                     // client requests waiting for the loop
	inputsPerProcessMax        = loop.InputsPerProcessMax // inputs taken before Process runs
	connInFlightMax            = 1024                     // requests of one connection awaiting their answer
	peerQueueFramesMax         = 1024                     // outbound frames queued per peer
	peerQueueBytesMax          = 64 << 20
	connsMax                   = 4096      // open connections, clients and peers
	queuedBytesMax             = 256 << 20 // request and frame bytes waiting for the loop
	shutdownFlushTimeout       = 2 * time.Second
	protocolVersion            = node.ProtocolVersion
	helloTimeout               = 10 * time.Second
	reconnectBackoffMin        = 20 * time.Millisecond
	reconnectBackoffMax        = time.Second
	peerUnreachableWarn        = 10 * time.Second // a peer down this long is logged at warn
	replicaLagEntries          = 256              // a follower further behind its leader counts as lagging in stats
	dialTimeout                = time.Second
	outboundWriteTimeout       = 5 * time.Second
	responseWriteTimeout       = 30 * time.Second
)

// Config configures a Server: the Core's Config plus what only a
// real process has (a data directory, sockets, a tick interval).
type Config struct {
	// Core configures the Core. Disk, Network and Clock are filled in by
	// the server when nil; zero tick counts get the defaults above.
	// Core.Nodes gives the peers' addresses: the transport dials them.
	Core node.Config
	// DataDir holds the node's raft logs and checkpoints (osdisk).
	DataDir string
	// Listen is the one TCP address clients and peers connect to
	// (default 127.0.0.1:9192; Kafka's 9092 is the Kafka listener's); port 0
	// picks a free port (see Addr).
	Listen string
	// Listener, when set, is used instead of listening on Listen.
	Listener net.Listener
	// KafkaListen, when set, opens a Kafka protocol listener there (see
	// package kafkaproto); port 0 picks a free port (see KafkaAddr).
	KafkaListen string
	// KafkaListener, when set, is used instead of listening on KafkaListen.
	KafkaListener net.Listener
	// KafkaAdvertise is the host:port Kafka clients reach this node at,
	// registered in the metadata group (default: the Kafka listener's
	// address).
	KafkaAdvertise string
	// Tick is the interval between Core.Tick calls (default 10 ms).
	Tick time.Duration
	// Logger receives the server's and the Core's log records (nil:
	// discard); the Core's get the wall time stamped here. Core.Logger,
	// when set, takes the Core's instead.
	Logger *slog.Logger
	// StatsInterval, when positive, logs the loop's counters this often:
	// rounds, inputs, time inside Process, syncs, frames (for tuning).
	StatsInterval time.Duration
	// TLS, when set, serves both listeners over TLS and makes peer
	// connections mutual TLS (tls.go); nil: plaintext.
	TLS *TLSConfig
	// SASL requires SASL/SCRAM authentication on both client listeners
	// (auth.go); peers are not asked (mutual TLS authenticates them).
	SASL bool
	// SASLBootstrapUser, when set, is created with SASLBootstrapPassword
	// (both SCRAM mechanisms) once the metadata group has a leader, unless
	// it exists, and is a super user: the first administrator.
	SASLBootstrapUser     string
	SASLBootstrapPassword string
	// SecurityNoticeInBanner: the caller (strand dev) says once, in its
	// banner, that security is off, so the node logs it at debug level.
	SecurityNoticeInBanner bool

	// answerBytesMax, when positive, replaces fetchAnswerBytesMax (tests).
	answerBytesMax int
}

// Server runs one Core in a real process: one goroutine (the loop) owns
// the Core and is the only one to call it; readers, writers and the peer
// transport talk to it through bounded channels. A Core error stops the
// node (fail-stop): Done closes and Err says why.
type Server struct {
	cfg    Config
	core   *node.Core
	logger *slog.Logger // records carry node=ID
	ln     net.Listener
	native *listener.Listener // serves ln; nil until started
	net    *peerTransport
	lock   *dirLock // the data directory's lock; nil when Core.Disk was given
	// dataDir is DataDir made absolute; "" when Core.Disk was given. The
	// admin view names a stalled file under it, so an operator reading
	// /readyz alone learns which disk.
	dataDir string

	frames   chan peerFrame
	requests chan loopRequest
	syncs    *syncPool        // runs the Core's fsyncs (storage.go)
	synced   []syncResult     // reused by the loop
	budget   *listener.Budget // bytes of frames and requests queued for the loop
	// fetchAnswers bounds the fetch answer bytes reserved over all
	// connections of both listeners until written (listener.Conn.Reserve).
	fetchAnswers *listener.Budget
	stop         chan struct{} // closed by Close: the loop exits
	done         chan struct{} // closed when the loop has exited and all is shut
	stopOnce     sync.Once

	mu  sync.Mutex
	err error // the fatal error, if any

	loopStats loopCounters // owned by the loop
	// metaLeader is the metadata group leader the Core knows, 0 for none,
	// and metaNodes the nodes registered in the metadata state it applied;
	// the loop stores them after Process for MetadataLeader.
	metaLeader atomic.Uint64
	metaNodes  atomic.Int64
	// clusterID is the cluster id of the applied metadata (nil until the
	// metadata group fixed one), stored by the loop for the Hello answer.
	clusterID atomic.Pointer[[]byte]

	kafka *kafkaListener // nil without a Kafka listener
	tls   *tlsState      // nil without TLS
	// tlsListen is the native listener's tls.Config (nil without TLS).
	tlsListen *tls.Config
	refusals  refusalLog // rate of refused-connection warnings (tls.go)

	// adminQueries are the admin listener's view requests (admin.go),
	// answered by the loop between two Process calls; metrics are the
	// request and fsync measurements only the process sees.
	adminQueries chan adminQuery
	metrics      *serverMetrics

	// round is the loop's socket-free part (package loop): it feeds the
	// Core, runs Process and the post-round steps (the security view the
	// SASL lookups and quotas read, the bootstrap user) and meters quotas.
	round *loop.Round
}

// reasonShutdown is why connections close when the server stops.
const reasonShutdown = "node shutting down"

// loopCounters counts what the loop did since the last stats line.
type loopCounters struct {
	processCalls uint64
	inputs       uint64
	processTime  time.Duration
	since        time.Time
	core         node.Stats
	syncRuns     uint64        // the storage pool's jobs run, at since
	syncTime     time.Duration // and their time
}

// peerFrame is a peer's raft frame and the budget units it holds.
type peerFrame struct {
	frame  []byte
	buf    []byte // the buffer frame lies in, recycled after Receive
	tokens int
}

// loopRequest is a decoded client request and the connection to answer on.
type loopRequest struct {
	req  *strandpb.Request
	conn *nativeConn
	// slot is what the request holds on conn until its answer is written.
	slot   listener.Slot
	tokens int // budget units held until the loop takes it
	// reply, when set, takes the answer instead of conn (the Kafka
	// listener's requests); called on the loop, it must not block.
	reply func(*strandpb.Response)
	// caller is who sent it (HandleAs).
	caller node.Caller
	// confirm, when set, makes this no request but a SASL exchange's
	// confirmation (confirmCredentials): the loop asks the round to
	// confirm the credentials current and calls it with the outcome.
	confirm func(error)
}

// realClock is the real Clock: monotonic time since the server started.
type realClock struct{ start time.Time }

func (c realClock) Monotonic() time.Duration { return time.Since(c.start) }
func (c realClock) Realtime() time.Time      { return time.Now() }

// syncWorkersMax bounds the goroutines the storage pool runs jobs on.
const syncWorkersMax = 8

// applyDefaults sets the loggers (the Core's is the server's, with times
// stamped, unless the caller gave it its own), the bootstrap user's
// super-user rights and the default tick.
func (r *Server) applyDefaults() {
	base := slog.New(slog.DiscardHandler)
	if r.cfg.Logger != nil {
		base = slog.New(stampTime{r.cfg.Logger.Handler()})
	}
	if r.cfg.Core.Logger == nil {
		r.cfg.Core.Logger = base
	}
	r.logger = base.With(slog.Uint64("node", uint64(r.cfg.Core.ID)))
	if u := r.cfg.SASLBootstrapUser; u != "" {
		r.cfg.Core.SuperUsers = append(slices.Clone(r.cfg.Core.SuperUsers), node.Principal("User:"+u))
	}
	if r.cfg.Tick <= 0 {
		r.cfg.Tick = TickDefault
	}
}

// listenNative is Config.Listener, else a listener on Config.Listen
// (default 127.0.0.1:9192).
func (r *Server) listenNative() (net.Listener, error) {
	if r.cfg.Listener != nil {
		return r.cfg.Listener, nil
	}
	addr := r.cfg.Listen
	if addr == "" {
		addr = "127.0.0.1:9192"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("node: listen on %s: %w", addr, err)
	}
	return ln, nil
}

// Start opens the Core on the data directory, starts listening and
// starts the loop. The caller stops it with Close, and watches Done for a
// fatal error.
func Start(cfg Config) (*Server, error) {
	r := &Server{
		cfg:          cfg,
		frames:       make(chan peerFrame, framesQueueMax),
		requests:     make(chan loopRequest, requestsQueueMax),
		budget:       listener.NewBudget(queuedBytesMax),
		fetchAnswers: listener.NewBudget(cmp.Or(cfg.answerBytesMax, fetchAnswerBytesMax)),
		stop:         make(chan struct{}),
		done:         make(chan struct{}),
		adminQueries: make(chan adminQuery, adminQueriesMax),
		metrics:      newServerMetrics(cfg.Core.ID),
	}
	r.applyDefaults()
	var err error
	if r.tls, err = newTLSState(cfg.TLS, cfg.Core.ID, r.logger); err != nil {
		return nil, err
	}
	if r.tls != nil {
		r.tlsListen = r.tls.listenerConfig(cfg.TLS.ClientAuth, true)
	}
	if err := r.fillCoreConfig(); err != nil {
		return nil, err
	}
	ln, err := r.listenNative()
	if err != nil {
		r.net.close()
		r.lock.unlock()
		return nil, err
	}
	r.ln = ln
	if err := r.listenKafka(); err != nil {
		ln.Close()
		r.net.close()
		r.lock.unlock()
		return nil, err
	}
	core, err := node.Open(r.cfg.Core)
	if err != nil {
		r.kafka.closeListener()
		ln.Close()
		r.net.close()
		r.lock.unlock()
		return nil, err
	}
	r.core = core
	r.round = loop.New(core, loop.Config{Clock: r.cfg.Core.Clock, BootstrapUser: r.cfg.SASLBootstrapUser,
		BootstrapPassword: r.cfg.SASLBootstrapPassword, Logger: r.logger})
	r.syncs = newSyncPool(syncWorkersMax, r.metrics.fsync.Observe, r.net.faults.diskWait)
	r.logSecurity()
	r.native = listener.Serve(ln, listener.Config{
		Serve: r.serveNative, TLS: r.tlsListen, ConnsMax: connsMax, InFlightMax: connInFlightMax,
		ConnAnswerBytesMax: connAnswerBytesMax, Answers: r.fetchAnswers, Logger: r.logger,
	})
	r.kafka.start()
	go r.loop()
	return r, nil
}

// fillCoreConfig gives the Core the real Disk, Network and Clock.
func (r *Server) fillCoreConfig() error {
	c := &r.cfg.Core
	if c.Disk == nil {
		if r.cfg.DataDir == "" {
			return errors.New("node/server: DataDir is required")
		}
		dir, err := filepath.Abs(r.cfg.DataDir)
		if err != nil {
			return err
		}
		if c.Disk, err = osdisk.New(dir); err != nil {
			return fmt.Errorf("node: data dir %s: %w", dir, err)
		}
		if r.lock, err = lockDataDir(dir); err != nil {
			return err
		}
		r.dataDir = dir
	}
	if c.Clock == nil {
		c.Clock = realClock{start: time.Now()}
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(c.ID)))
	}
	if c.ElectionTicks == 0 && c.HeartbeatTicks == 0 && c.TicksPerRaftTick == 0 {
		c.ElectionTicks, c.HeartbeatTicks = ElectionTicksDefault, HeartbeatTicksDefault
		c.TicksPerRaftTick = TicksPerRaftTickDefault
	}
	if c.RequestTimeoutTicks == 0 {
		c.RequestTimeoutTicks = RequestTimeoutTicksDefault
	}
	if c.TickDuration == 0 {
		c.TickDuration = r.cfg.Tick
	}
	addrs := make(map[node.NodeID]string, len(c.Nodes))
	for _, p := range c.Nodes {
		addrs[p.ID] = p.Address
	}
	r.net = newPeerTransport(c.ID, addrs, r.logger, r.tls)
	if c.Network == nil {
		c.Network = r.net
	}
	return nil
}

// Addr is the address the server listens on.
func (r *Server) Addr() net.Addr { return r.ln.Addr() }

// MetadataLeader is the metadata group leader this node knows as of the
// loop's last round, 0 when none (or in static mode), and registered the
// number of nodes registered in the metadata state it applied. Safe from
// any goroutine.
func (r *Server) MetadataLeader() (leader node.NodeID, registered int) {
	return node.NodeID(r.metaLeader.Load()), int(r.metaNodes.Load())
}

// Done is closed once the server has stopped, by Close or a fatal error.
func (r *Server) Done() <-chan struct{} { return r.done }

// Err is the fatal error that stopped the server; nil after a clean Close.
func (r *Server) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close stops accepting, fails the requests still waiting (ErrStopped),
// closes the Core and every connection, and waits for all of it. It returns
// the fatal error if the server had already failed.
func (r *Server) Close() error {
	r.stopOnce.Do(func() { close(r.stop) })
	<-r.done
	return r.Err()
}

// loop is the one goroutine that calls the Core: it takes a batch of
// inputs (ticks, raft frames, client requests, storage completions), then
// ends the round (loop.Round.Run: Process once and the post-round steps),
// so the inputs that arrive while Process runs share the next round.
func (r *Server) loop() {
	ticker := time.NewTicker(r.cfg.Tick)
	defer ticker.Stop()
	var statsTicks <-chan time.Time
	if r.cfg.StatsInterval > 0 {
		t := time.NewTicker(r.cfg.StatsInterval)
		defer t.Stop()
		statsTicks = t.C
	}
	r.loopStats.since = time.Now()
	for {
		select {
		case <-r.stop:
			r.shutdown(nil)
			return
		case <-ticker.C:
			r.round.Tick()
		case f := <-r.frames:
			r.receive(f)
		case q := <-r.requests:
			r.handle(q)
		case <-r.syncs.ready:
			r.syncDone()
		case <-statsTicks:
			r.logStats()
			continue
		case q := <-r.adminQueries:
			r.answerAdmin(q)
			continue
		}
		r.loopStats.inputs++
		r.drainInputs(ticker.C)
		start := time.Now()
		out := r.round.Run()
		took := time.Since(start)
		r.loopStats.processTime += took
		r.metrics.process.Observe(took.Seconds())
		r.loopStats.processCalls++
		err := out.Err
		if err == nil {
			r.noteMetadata(out)
			r.syncs.submit(out.Jobs)
		}
		if err != nil {
			r.logger.Error("node stopping (fail-stop)", slog.Any("err", err))
			r.shutdown(fmt.Errorf("node: process: %w", err))
			return
		}
	}
}

// noteMetadata publishes the round's metadata leader and, when the
// metadata version moved, the count of registered nodes (and dials those
// that joined).
func (r *Server) noteMetadata(out loop.Outcome) {
	if !out.MetadataKnown {
		return
	}
	r.metaLeader.Store(uint64(out.MetadataLeader))
	if out.MetadataMoved {
		nodes, _ := r.core.MetadataNodes()
		r.metaNodes.Store(int64(len(nodes)))
		addrs := make(map[node.NodeID]string, len(nodes))
		for _, n := range nodes {
			if n.State != metadata.NodeRemoved {
				addrs[node.NodeID(n.ID)] = n.Address
			}
		}
		r.net.addPeers(addrs) // nodes that joined after start
	}
	if r.clusterID.Load() == nil {
		if id := r.core.ClusterID(); !id.IsZero() {
			b := id.Bytes()
			r.clusterID.Store(&b)
		}
	}
}

// ClusterID is the cluster id of the metadata this node applied, nil until
// the metadata group fixed one. Safe from any goroutine.
func (r *Server) ClusterID() []byte {
	if b := r.clusterID.Load(); b != nil {
		return *b
	}
	return nil
}

// drainInputs takes the inputs already waiting, at most
// inputsPerProcessMax, without blocking.
func (r *Server) drainInputs(ticks <-chan time.Time) {
	for range inputsPerProcessMax {
		select {
		case <-ticks:
			r.round.Tick()
		case f := <-r.frames:
			r.receive(f)
		case q := <-r.requests:
			r.handle(q)
		case <-r.syncs.ready:
			r.syncDone()
		default:
			return
		}
		r.loopStats.inputs++
	}
}

// syncDone hands the Core the results of the fsyncs finished since the
// last call.
func (r *Server) syncDone() {
	r.synced = r.syncs.take(r.synced[:0])
	for _, s := range r.synced {
		r.round.SyncDone(s.token, s.err)
	}
	clear(r.synced)
}

// logStats logs the loop's counters since the last call.
func (r *Server) logStats() {
	s, now, core := &r.loopStats, time.Now(), r.core.Stats()
	elapsed := now.Sub(s.since)
	runs, runTime := r.syncs.runs.Load(), time.Duration(r.syncs.runTime.Load())
	fsyncMs := float64((runTime - s.syncTime).Microseconds()) / 1000 / float64(max(runs-s.syncRuns, 1))
	r.logger.Info("loop stats",
		slog.Uint64("rounds", s.processCalls),
		slog.Float64("inputs_per_round", float64(s.inputs)/float64(max(s.processCalls, 1))),
		slog.Float64("process_time_pct", 100*s.processTime.Seconds()/elapsed.Seconds()),
		slog.Float64("process_ms_per_round", float64(s.processTime.Microseconds())/1000/float64(max(s.processCalls, 1))),
		slog.Uint64("syncs", core.Syncs-s.core.Syncs),
		slog.Float64("fsync_ms_avg", fsyncMs),
		slog.Uint64("frames_sent", core.FramesSent-s.core.FramesSent),
		slog.Uint64("frames_received", core.FramesReceived-s.core.FramesReceived),
		slog.Uint64("peer_frames_dropped_total", r.net.droppedTotal()),
		slog.Int("replicas_lagging", r.core.LaggingReplicas(replicaLagEntries)))
	*s = loopCounters{since: now, core: core, syncRuns: runs, syncTime: runTime}
}

// handle gives one client request to the Core; the answer goes to the
// connection's writer.
func (r *Server) handle(q loopRequest) {
	r.budget.Release(q.tokens)
	if q.confirm != nil {
		r.round.ConfirmSecurity(q.confirm)
		return
	}
	if q.caller.Principal == "" {
		q.caller.Principal = node.Anonymous
	}
	deliver := q.reply
	if deliver == nil {
		conn, slot := q.conn, q.slot
		deliver = func(resp *strandpb.Response) { conn.answer(slot, resp) }
	}
	// The round brings the security view up to date before any answer
	// leaves (a client told its CreateUser applied may authenticate at once
	// on the Kafka listener, which reads only the view) and meters quotas:
	// a throttled native connection pauses its reads (the Kafka listener
	// reads throttle_ms itself).
	metered := r.round.Meter(q.caller, q.req, func(resp *strandpb.Response, wait time.Duration) {
		if q.conn != nil {
			q.conn.lc.ThrottleFor(wait)
		}
		deliver(resp)
	})
	r.round.Handle(q.caller, q.req, r.metrics.observe(q.req, metered))
}

// receive gives one peer frame to the Core.
func (r *Server) receive(f peerFrame) {
	r.budget.Release(f.tokens)
	r.round.Receive(f.frame)
	putPeerBuf(f.buf)
}

// shutdown runs on the loop: stop accepting on both listeners, close the
// Core (failing what waits, whose answers are queued to their
// connections), let the writers of both listeners send the answers that
// are in for a bounded time, close connections and the peer transport.
func (r *Server) shutdown(fatal error) {
	r.stopOnce.Do(func() { close(r.stop) }) // from here on register refuses connections
	r.mu.Lock()
	r.err = fatal
	r.mu.Unlock()
	r.native.StopAccepting()
	r.kafka.stopAccepting()
	r.syncs.close()
	if err := r.core.Close(); err != nil && fatal == nil {
		r.logger.Warn("close", slog.Any("err", err))
	}
	r.failQueued()
	deadline := time.Now().Add(shutdownFlushTimeout)
	r.native.Shutdown(deadline, reasonShutdown)
	r.kafka.shutdown(deadline)
	r.net.close()
	if err := r.lock.unlock(); err != nil {
		r.logger.Warn("unlock data dir", slog.Any("err", err))
	}
	close(r.done)
}

// failQueued answers the requests still in the queue with UNAVAILABLE.
func (r *Server) failQueued() {
	for {
		select {
		case q := <-r.requests:
			r.budget.Release(q.tokens)
			if q.confirm != nil {
				q.confirm(errShuttingDown)
				continue
			}
			resp := &strandpb.Response{CorrelationId: q.req.GetCorrelationId(), Error: &strandpb.Error{
				Code: strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE, Message: "node: shutting down"}}
			if q.reply != nil {
				q.reply(resp)
				continue
			}
			q.conn.answer(q.slot, resp)
		default:
			return
		}
	}
}
