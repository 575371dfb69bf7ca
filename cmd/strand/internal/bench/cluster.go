package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/spf13/pflag"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/internal/localcluster"
)

// `strand bench cluster` starts three real `strand serve` processes on
// 127.0.0.1 (fsync before ack, as in production), runs the benches against
// them and prints one table with the servers' CPU and memory. --binary
// names the server binary, so two builds can be compared side by side with
// the same driver.

// Cluster is `strand bench cluster`: its flags, and MakeTLS, which the
// caller sets for --tls.
type Cluster struct {
	// MakeTLS writes a throwaway CA and certificates for servers at addrs
	// (node i+1 at addrs[i]) into dir: --tls.
	MakeTLS func(dir string, addrs []string) (*ServerTLS, error)

	binary         string
	dataDir        string
	keep           bool
	nodes          int
	phases         []string
	duration       time.Duration
	e2eDuration    time.Duration
	rates          []int
	idle           time.Duration
	idleSettle     time.Duration
	manyPartitions int32
	manyKeys       int
	manyProduce    bool
	recordBytes    int
	serverArgs     []string
	cpuProfile     string
	fanoutGroups   []int
	fanoutRounds   int
	fanoutMinBytes int
	fanoutMaxWait  time.Duration
	fanoutNice     int
	readersBinary  string
	tls            bool
	txnSizes       []int
	txnPartitions  []int
	txnRounds      int
	txnDuration    time.Duration
	// The compact phase (compact.go).
	compactKeys         int
	compactUpdates      int
	compactRounds       int
	compactSegmentBytes int64
	compactBatchBytes   int
	compactSettleMax    time.Duration
}

// clusterPhases are the phases `bench cluster` runs by default, in order.
var clusterPhases = []string{"produce", "consume", "e2e", "many"}

// clusterPhasesKnown are every phase `bench cluster` knows: the default
// ones, fanout and txn (minutes long: run on request), compact (servers
// under compacted topics' gate).
var clusterPhasesKnown = append(append([]string(nil), clusterPhases...), "fanout", "txn", "compact")

// ServerTLS is what --tls made: each node's serve flags (by node id) and
// the clients' TLS configuration.
type ServerTLS struct {
	NodeArgs map[int][]string
	Client   *tls.Config
}

// Register registers the flags of `bench cluster`.
func (cb *Cluster) Register(fs *pflag.FlagSet) {
	fs.StringVar(&cb.binary, "binary", "", "strand binary to run the servers with (default: this one)")
	fs.StringVar(&cb.dataDir, "data-dir", "", "directory for the servers' data and logs (default: a new temporary one)")
	fs.BoolVar(&cb.keep, "keep", false, "keep the data directory afterwards (servers' logs are in it)")
	fs.IntVar(&cb.nodes, "nodes", 3, "servers to start")
	fs.StringSliceVar(&cb.phases, "phases", clusterPhases, "phases to run: produce, consume, e2e, many, fanout, txn, compact")
	fs.DurationVar(&cb.duration, "duration", 10*time.Second, "length of each produce phase")
	fs.DurationVar(&cb.e2eDuration, "e2e-duration", 8*time.Second, "length of each e2e run")
	fs.IntSliceVar(&cb.rates, "rates", []int{1000, 5000}, "e2e rates in msgs/s (each on 1 and 6 partitions)")
	fs.DurationVar(&cb.idle, "idle", 10*time.Second, "how long to measure the idle cluster with the many-partition topic")
	fs.DurationVar(&cb.idleSettle, "idle-settle", 15*time.Second, "wait this long after the many-partition topic has its leaders before measuring the idle cluster (its replicas catch up and go quiet)")
	fs.Int32Var(&cb.manyPartitions, "many-partitions", 2000, "partitions of the many-partition topic (RF 3)")
	fs.IntVar(&cb.manyKeys, "many-keys", 0, "produce to the many-partition topic with this many distinct keys (0: keyless, sticky batches)")
	fs.BoolVar(&cb.manyProduce, "many-produce", true, "produce across the many-partition topic after the idle phase")
	fs.IntVar(&cb.recordBytes, "record-bytes", 1024, "bytes per record value")
	fs.IntSliceVar(&cb.fanoutGroups, "fanout-groups", []int{1, 100, 1000}, "fanout: groups tailing the topic in each run (0: none)")
	fs.IntVar(&cb.fanoutRounds, "fanout-rounds", 2, "fanout: rounds over --fanout-groups, the order reversed every other round")
	fs.IntVar(&cb.fanoutMinBytes, "fanout-min-bytes", 1, "fanout: each reader fetch's min_bytes")
	fs.DurationVar(&cb.fanoutMaxWait, "fanout-max-wait", 500*time.Millisecond, "fanout: each reader fetch's max wait")
	fs.IntVar(&cb.fanoutNice, "fanout-nice", 0, "fanout: run the readers under nice -n N (0: not niced), to model readers on other machines")
	fs.StringVar(&cb.readersBinary, "readers-binary", "", "fanout: strand binary to run 'bench readers' with (default: this one)")
	fs.IntSliceVar(&cb.txnSizes, "txn-sizes", []int{1, 10, 100}, "txn: records per transaction of each transactional run")
	fs.IntSliceVar(&cb.txnPartitions, "txn-partitions", []int{1, 6}, "txn: partition counts, each run beside plain idempotent produce, then read back at read_uncommitted and read_committed")
	fs.IntVar(&cb.txnRounds, "txn-rounds", 3, "txn: rounds over the runs, the order reversed every other round")
	fs.DurationVar(&cb.txnDuration, "txn-duration", 5*time.Second, "txn: length of each run")
	fs.IntVar(&cb.compactKeys, "compact-keys", 10000, "compact: distinct keys")
	fs.IntVar(&cb.compactUpdates, "compact-updates", 200000,
		"compact: updates written to each of the two topics, over the keys in turn (issue 24's full size: 2000000, about 2 GiB a topic)")
	fs.IntVar(&cb.compactRounds, "compact-rounds", 4, "compact: rounds, each writing its share to the compacted topic and the delete one, the order reversed every other round")
	fs.Int64Var(&cb.compactSegmentBytes, "compact-segment-bytes", 4<<20, "compact: segment.bytes of both topics (the active segment is never compacted)")
	fs.IntVar(&cb.compactBatchBytes, "compact-batch-bytes", 16<<10, "compact: the producer's max batch bytes (Kafka's batch.size default; a pass waits for the leader's checkpoint, every 1024 raft entries)")
	fs.DurationVar(&cb.compactSettleMax, "compact-settle-max", 60*time.Second, "compact: longest wait for the compacted topic to settle after the writes")
	fs.BoolVar(&cb.tls, "tls", false, "serve and bench over TLS: a throwaway CA and certificates in the data directory, mutual TLS between the servers (not for --phases fanout)")
	fs.StringVar(&cb.cpuProfile, "cpuprofile", "", "write a CPU profile of this bench process (the clients) over the phases to this file (go tool pprof)")
	fs.StringSliceVar(&cb.serverArgs, "server-arg", nil, "extra flag for every server, e.g. --server-arg=--cpuprofile=prof (NODE in it becomes the node id)")
}

// Run starts the servers, runs the phases asked for and prints the table
// (what was measured, also when a phase failed), then stops the servers.
func (cb *Cluster) Run(ctx context.Context, stdout io.Writer) error {
	if err := cb.check(); err != nil {
		return err
	}
	cl, err := cb.start(ctx, stdout, "")
	if err != nil {
		return err
	}
	stopProfile, err := startProfile(cb.cpuProfile)
	if err != nil {
		cl.close()
		return err
	}
	rows, cl, runErr := cb.runPhases(ctx, cl, stdout)
	stopProfile()
	closeErr := cl.close()
	printClusterTable(stdout, cl, rows)
	if runErr != nil {
		return runErr
	}
	return closeErr
}

// startProfile starts a CPU profile of this process into path (none when
// path is ""); the returned func stops it.
func startProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// check refuses settings that cannot run.
func (cb *Cluster) check() error {
	for _, p := range cb.phases {
		if !slices.Contains(clusterPhasesKnown, p) {
			return usageError("--phases: unknown %q: want some of %s", p, strings.Join(clusterPhasesKnown, ","))
		}
	}
	if cb.nodes < 3 {
		return usageError("--nodes must be at least 3 (topics have replication factor 3)")
	}
	if cb.manyPartitions < 1 || cb.recordBytes < 8 || cb.duration <= 0 || cb.e2eDuration <= 0 {
		return usageError("--many-partitions ≥ 1, --record-bytes ≥ 8, --duration and --e2e-duration > 0 please")
	}
	for _, n := range cb.fanoutGroups {
		if n < 0 {
			return usageError("--fanout-groups: %d: want 0 or more", n)
		}
	}
	if cb.fanoutRounds < 1 || cb.fanoutMinBytes < 0 || cb.fanoutMaxWait < 0 || cb.fanoutNice < 0 || cb.fanoutNice > 19 {
		return usageError("--fanout-rounds ≥ 1, --fanout-min-bytes ≥ 0, --fanout-max-wait ≥ 0, --fanout-nice 0..19 please")
	}
	if err := cb.checkTxn(); err != nil {
		return err
	}
	if cb.compactKeys < 1 || cb.compactRounds < 1 || cb.compactUpdates < cb.compactRounds || cb.compactSegmentBytes < 4096 || cb.compactBatchBytes < 1024 || cb.compactSettleMax <= 0 {
		return usageError("--compact-keys ≥ 1, --compact-rounds ≥ 1, --compact-updates ≥ --compact-rounds, --compact-segment-bytes ≥ 4096, --compact-batch-bytes ≥ 1024 and --compact-settle-max > 0 please")
	}
	if cb.tls && slices.Contains(cb.phases, "fanout") {
		return usageError("--tls does not reach the fanout readers yet: drop fanout from --phases")
	}
	for _, r := range cb.rates {
		if r < 1 {
			return usageError("--rates: %d: want at least 1 msg/s", r)
		}
	}
	if cb.binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("cannot find this binary (%w): pass --binary", err)
		}
		cb.binary = exe
	}
	if _, err := os.Stat(cb.binary); err != nil {
		return fmt.Errorf("--binary %s: %w", cb.binary, err)
	}
	return nil
}

// clusterRow is one line of the table.
type clusterRow struct {
	phase      string
	partitions int32
	result     *benchResult          // nil for phases without records
	note       string                // for rows without a result: what was measured
	servers    []localcluster.Sample // at the end of the phase
	serverCPU  float64               // cores, all servers together, over the phase
	span       time.Duration
	fanout     *fanoutFigures // fanout rows only
}

// measured runs f and samples the servers around it.
func measured(cl *benchCluster, phase string, partitions int32, f func() (*benchResult, string, error)) (clusterRow, error) {
	before := cl.sample()
	start := time.Now()
	r, note, err := f()
	span := time.Since(start)
	after := cl.sample()
	row := clusterRow{phase: phase, partitions: partitions, result: r, note: note, servers: after, span: span}
	for i := range after {
		row.serverCPU += (after[i].CPU - before[i].CPU).Seconds() / span.Seconds()
	}
	return row, err
}

// SettingsFor is the settings of one bench against cl.
func (cb *Cluster) SettingsFor(cl *benchCluster, topic string, partitions int32) Settings {
	return Settings{
		Conn:  cl.conn(60 * time.Second),
		topic: topic, partitions: partitions, replication: 3, recordBytes: cb.recordBytes,
		acks: "all", inFlight: 5, clients: 1, batchBytes: 256 << 10, linger: 2 * time.Millisecond,
		duration: cb.duration, bufferedMax: 20000, fetchBytesMax: 8 << 20,
	}
}

// runPhases runs the phases asked for, returning the rows measured so
// far even when one fails.
func (cb *Cluster) runPhases(ctx context.Context, cl *benchCluster, w io.Writer) ([]clusterRow, *benchCluster, error) {
	var rows []clusterRow
	add := func(row clusterRow, err error) error {
		rows = append(rows, row)
		fmt.Fprintf(w, "  %-34s done in %s\n", row.label(), row.span.Round(100*time.Millisecond))
		if err == nil {
			err = cl.exited()
		}
		return err
	}
	for _, p := range cb.phases {
		var err error
		switch p {
		case "produce":
			err = add(cb.benchPhase(ctx, cl, "produce", "bench-6", 6, "produce"))
		case "consume":
			err = add(cb.benchPhase(ctx, cl, "consume", "bench-6", 6, "consume"))
		case "e2e":
			err = cb.e2ePhases(ctx, cl, add)
		case "many":
			// On a fresh cluster when other phases ran: their logs,
			// tail caches and buffers would blur the memory an idle
			// replica costs (the new replicas' share of the cache
			// budget evicts them, which read as negative growth).
			if len(rows) > 0 {
				if err := cl.close(); err != nil {
					return rows, cl, err
				}
				fresh, err := cb.start(ctx, w, "many")
				if err != nil {
					return rows, cl, err
				}
				cl = fresh
			}
			err = cb.manyPhases(ctx, cl, add)
		case "fanout":
			err = cb.fanoutPhases(ctx, cl, add)
		case "txn":
			err = cb.txnPhases(ctx, cl, add)
		case "compact":
			err = cb.compactPhases(ctx, cl, add)
		}
		if err != nil {
			return rows, cl, err
		}
	}
	return rows, cl, nil
}

// benchPhase runs one bench of kind on topic (created with partitions).
func (cb *Cluster) benchPhase(ctx context.Context, cl *benchCluster, phase, topic string, partitions int32, kind string) (clusterRow, error) {
	b := cb.SettingsFor(cl, topic, partitions)
	if kind == "e2e" {
		b.linger = 0
		b.duration = cb.e2eDuration
	}
	if err := cl.ensureTopic(ctx, &b); err != nil {
		return clusterRow{phase: phase, partitions: partitions}, err
	}
	return measured(cl, phase, partitions, func() (*benchResult, string, error) {
		r, err := b.run(ctx, kind)
		return &r, "", err
	})
}

// e2ePhases runs e2e at every rate on 1 and 6 partitions.
func (cb *Cluster) e2ePhases(ctx context.Context, cl *benchCluster, add func(clusterRow, error) error) error {
	for _, rate := range cb.rates {
		for _, parts := range []int32{1, 6} {
			b := cb.SettingsFor(cl, fmt.Sprintf("bench-e2e-%d", parts), parts)
			b.linger, b.duration, b.rate = 0, cb.e2eDuration, rate
			if err := cl.ensureTopic(ctx, &b); err != nil {
				return err
			}
			row, err := measured(cl, fmt.Sprintf("e2e %d/s", rate), parts, func() (*benchResult, string, error) {
				r, err := b.runE2E(ctx)
				return &r, "", err
			})
			if err := add(row, err); err != nil {
				return err
			}
		}
	}
	return nil
}

// manyPhases creates the many-partition topic (timing it until every
// partition has a leader), measures the idle cluster, then produces
// across it.
func (cb *Cluster) manyPhases(ctx context.Context, cl *benchCluster, add func(clusterRow, error) error) error {
	parts := cb.manyPartitions
	b := cb.SettingsFor(cl, fmt.Sprintf("bench-many-%d", parts), parts)
	b.keys = cb.manyKeys
	rssBefore, liveBefore := cl.sample(), cl.liveBytes(ctx)
	var replicas []int
	err := add(measured(cl, "create topic", parts, func() (*benchResult, string, error) {
		var err error
		replicas, err = cl.createAndWaitLeaders(ctx, &b)
		return nil, "until every partition has a leader", err
	}))
	if err != nil {
		return err
	}
	select {
	case <-time.After(cb.idleSettle):
	case <-ctx.Done():
		return ctx.Err()
	}
	err = add(measured(cl, "idle", parts, func() (*benchResult, string, error) {
		select {
		case <-time.After(cb.idle):
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
		return nil, fmt.Sprintf("no clients for %s, after %s to settle", cb.idle, cb.idleSettle), nil
	}))
	if err != nil {
		return err
	}
	if liveAfter := cl.liveBytes(ctx); liveBefore != nil && liveAfter != nil {
		cl.replicaMemory, cl.memoryBasis = perReplica(liveBefore, liveAfter, replicas), "live Go heap and stacks after GCs"
	} else {
		// RSS keeps what earlier phases' heaps left, so the growth may
		// read low, even negative: the table's line says which it is.
		cl.replicaMemory, cl.memoryBasis = perReplica(rssBefore, cl.sample(), replicas), "RSS, which earlier phases' heaps inflate"
	}
	if !cb.manyProduce {
		return nil
	}
	return add(measured(cl, "produce", parts, func() (*benchResult, string, error) {
		r, err := b.runProduce(ctx)
		return &r, "", err
	}))
}

// perReplica is each node's RSS growth per replica it gained.
func perReplica(before, after []localcluster.Sample, replicas []int) []float64 {
	out := make([]float64, len(after))
	for i := range after {
		if i < len(replicas) && replicas[i] > 0 && i < len(before) {
			out[i] = float64(after[i].RSSBytes-before[i].RSSBytes) / float64(replicas[i])
		}
	}
	return out
}

func (r clusterRow) label() string {
	return fmt.Sprintf("%s (%d partitions)", r.phase, r.partitions)
}

// printClusterTable prints the rows, one line each, then what the columns mean.
func printClusterTable(w io.Writer, cl *benchCluster, rows []clusterRow) {
	fmt.Fprintf(w, "\n%-16s %5s %9s %7s %9s %9s %9s %8s %6s %s\n", "phase", "parts", "msgs/s", "MiB/s",
		"p50", "p99", "p999", "srv-cpu", "cli", "RSS MiB per node")
	for _, r := range rows {
		fmt.Fprintf(w, "%-16s %5d ", r.phase, r.partitions)
		if r.result != nil {
			res := r.result
			fmt.Fprintf(w, "%9.0f %7.1f %9s %9s %9s ", res.rate(), float64(res.bytes)/res.elapsed.Seconds()/(1<<20),
				roundDuration(res.latency.quantile(0.5)), roundDuration(res.latency.quantile(0.99)),
				roundDuration(res.latency.quantile(0.999)))
		} else {
			fmt.Fprintf(w, "%-47s ", fmt.Sprintf("%s: %s", r.span.Round(10*time.Millisecond), r.note))
		}
		cli := "-"
		if r.result != nil {
			cli = fmt.Sprintf("%.2f", (r.result.cpuUser+r.result.cpuSys).Seconds()/r.result.elapsed.Seconds())
		}
		fmt.Fprintf(w, "%8.3f %6s %s", r.serverCPU, cli, rssList(r.servers))
		if r.result != nil && r.result.errors > 0 {
			fmt.Fprintf(w, "  (%d errors)", r.result.errors)
		}
		fmt.Fprintln(w)
		if f := r.fanout; f != nil && f.groups > 0 {
			d := f.delivered
			secs := d.elapsed.Seconds()
			fmt.Fprintf(w, "  readers: %d groups delivered %.0f msgs/s, %.1f MiB/s (%.0f polls/s, %d errors), reader CPU %.2f cores\n",
				f.groups, float64(d.records)/secs, float64(d.bytes)/secs/(1<<20), float64(d.polls)/secs, d.errors, f.readerCPU)
			if d.firstErr != "" {
				fmt.Fprintf(w, "  readers' %s\n", d.firstErr)
			}
		}
	}
	printTxnRanges(w, rows)
	printCompact(w, rows, cl.compact)
	if len(cl.replicaMemory) > 0 {
		var parts []string
		for _, m := range cl.replicaMemory {
			parts = append(parts, fmt.Sprintf("%.1f", m/1024))
		}
		fmt.Fprintf(w, "memory per idle replica (growth of the %s / replicas gained, per node): %s KiB\n", cl.memoryBasis, strings.Join(parts, " / "))
	}
	fmt.Fprintf(w, `servers: %s (%d nodes, fsync before ack); records %d bytes, RF 3, acks=all
latency: produce = %s;
  consume = %s; e2e = %s
srv-cpu: the servers' utime+stime over the phase, in cores (1.0 = one core busy), all servers together
cli: this bench process's CPU in cores (it shares the machine with the servers)
`, cl.binary, len(cl.procs), cl.recordBytes, latencyProduce, latencyConsume, latencyE2E)
}

func rssList(s []localcluster.Sample) string {
	var parts []string
	for _, p := range s {
		parts = append(parts, strconv.FormatInt(p.RSSBytes>>20, 10))
	}
	return strings.Join(parts, "/")
}

// benchCluster is the running servers.
type benchCluster struct {
	binary        string
	dir           string
	removeDir     bool
	recordBytes   int
	addrs         []string
	procs         []*localcluster.Proc
	replicaMemory []float64   // bytes per idle replica, per node
	memoryBasis   string      // what replicaMemory counts
	admins        []string    // the servers' admin listeners (live heap)
	tls           *tls.Config // the clients' TLS (--tls; nil: plain)
	compact       *compactFigures
}

// conn is how a bench reaches the servers, giving up after timeout.
func (cl *benchCluster) conn(timeout time.Duration) Conn {
	c := Conn{Brokers: cl.addrs, Timeout: timeout, TLS: cl.tls}
	if cl.tls != nil {
		c.Opts = []clientlib.Opt{clientlib.WithTLS(cl.tls)}
	}
	return c
}

// start launches the servers and waits until every node is registered.
func (cb *Cluster) start(ctx context.Context, w io.Writer, sub string) (*benchCluster, error) {
	cl, err := cb.newBenchCluster(sub)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "bench cluster: %d servers from %s on %s, data in %s\n", cb.nodes, cb.binary,
		strings.Join(cl.addrs, ","), cl.dir)
	certs, err := cb.makeTLS(cl)
	if err != nil {
		return nil, err
	}
	peers := localcluster.Peers(cl.addrs)
	for i := range cl.addrs {
		id := i + 1
		args := []string{"serve", "--id", strconv.Itoa(id), "--peers", peers,
			"--data-dir", filepath.Join(cl.dir, fmt.Sprintf("node%d", id)), "--admin-listen", cl.admins[i]}
		if certs != nil {
			args = append(args, certs.NodeArgs[id]...)
		}
		for _, a := range cb.serverArgs {
			args = append(args, strings.ReplaceAll(a, "NODE", strconv.Itoa(id)))
		}
		p, err := localcluster.Start(cb.binary, filepath.Join(cl.dir, fmt.Sprintf("node%d.log", id)), nil, args...)
		if err != nil {
			cl.close()
			return nil, fmt.Errorf("bench cluster: %w", err)
		}
		cl.procs = append(cl.procs, p)
	}
	if err := cl.waitRegistered(ctx, 60*time.Second); err != nil {
		cl.close()
		return nil, err
	}
	return cl, nil
}

// newBenchCluster picks the servers' data directory (sub under --data-dir,
// else a new temporary one) and their native and admin ports.
func (cb *Cluster) newBenchCluster(sub string) (*benchCluster, error) {
	cl := &benchCluster{binary: cb.binary, recordBytes: cb.recordBytes, dir: cb.dataDir}
	if cl.dir != "" && sub != "" {
		cl.dir = filepath.Join(cl.dir, sub)
	}
	if cl.dir == "" {
		var err error
		if cl.dir, err = os.MkdirTemp("", "strand-bench-cluster-"); err != nil {
			return nil, err
		}
		cl.removeDir = !cb.keep
	}
	ports, err := localcluster.FreePorts(2 * cb.nodes) // the native listeners, then the admin ones
	if err != nil {
		return nil, fmt.Errorf("bench cluster: %w", err)
	}
	cl.addrs, cl.admins = localcluster.Addrs(ports[:cb.nodes]), localcluster.Addrs(ports[cb.nodes:])
	return cl, nil
}

// makeTLS writes the certificates of --tls into the cluster's directory
// and sets the clients' TLS; nil without --tls.
func (cb *Cluster) makeTLS(cl *benchCluster) (*ServerTLS, error) {
	if !cb.tls {
		return nil, nil
	}
	if cb.MakeTLS == nil {
		return nil, errors.New("bench cluster: --tls: no certificate maker")
	}
	certs, err := cb.MakeTLS(cl.dir, cl.addrs)
	if err != nil {
		return nil, fmt.Errorf("bench cluster: TLS certificates: %w", err)
	}
	cl.tls = certs.Client
	return certs, nil
}

// exited reports a server that stopped on its own, with its log's tail.
func (cl *benchCluster) exited() error {
	for i, p := range cl.procs {
		if p.Exited() {
			return fmt.Errorf("bench cluster: server %d exited (%v); its log %s ends:\n%s", i+1, p.Err(), p.Log,
				localcluster.LogTail(p.Log, 2000))
		}
	}
	return nil
}

// close stops every server (SIGTERM, then SIGKILL after 20 s) and removes
// the data directory unless it is kept.
func (cl *benchCluster) close() error {
	err := localcluster.StopAll(cl.procs, syscall.SIGTERM, 20*time.Second)
	if cl.removeDir {
		os.RemoveAll(cl.dir)
	}
	if err != nil {
		return fmt.Errorf("bench cluster: %w", err)
	}
	return nil
}

// waitRegistered polls metadata until every node is registered.
func (cl *benchCluster) waitRegistered(ctx context.Context, within time.Duration) error {
	c, err := cl.conn(within).client(clientlib.ClientID("strand-bench"), clientlib.RequestTimeout(2*time.Second),
		clientlib.MaxRetries(1))
	if err != nil {
		return err
	}
	defer c.Close()
	return retry(ctx, within, "every server registered", func() error {
		if err := cl.exited(); err != nil {
			return stopRetrying{err}
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		info, err := c.Metadata(cctx)
		if err != nil {
			return err
		}
		if len(info.Nodes) < len(cl.procs) {
			return fmt.Errorf("%d of %d nodes registered", len(info.Nodes), len(cl.procs))
		}
		return nil
	})
}

// ensureTopic creates b's topic unless it exists and waits for its leaders.
func (cl *benchCluster) ensureTopic(ctx context.Context, b *Settings) error {
	_, err := cl.createAndWaitLeaders(ctx, b)
	return err
}

// createAndWaitLeaders creates b's topic (unless it exists) and waits
// until every partition has a leader; it returns the replicas each node
// holds of the topic.
func (cl *benchCluster) createAndWaitLeaders(ctx context.Context, b *Settings) ([]int, error) {
	if err := b.ensureTopic(ctx); err != nil {
		return nil, err
	}
	c, err := b.Conn.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	replicas := make([]int, len(cl.procs))
	err = retry(ctx, 5*time.Minute, "every partition of "+b.topic+" has a leader", func() error {
		if err := cl.exited(); err != nil {
			return stopRetrying{err}
		}
		info, err := c.Metadata(ctx)
		if err != nil {
			return err
		}
		for _, t := range info.Topics {
			if t.Name != b.topic {
				continue
			}
			clear(replicas)
			led := 0
			for _, p := range t.Partitions {
				if p.LeaderID != 0 {
					led++
				}
				for _, r := range p.Replicas {
					if r >= 1 && int(r) <= len(replicas) {
						replicas[r-1]++
					}
				}
			}
			if led == int(b.partitions) {
				return nil
			}
			return fmt.Errorf("%d of %d partitions have a leader", led, b.partitions)
		}
		return fmt.Errorf("topic %s not in metadata yet", b.topic)
	})
	return replicas, err
}

// sample reads every server's CPU time and resident memory; a server it
// cannot read samples as zero.
func (cl *benchCluster) sample() []localcluster.Sample {
	out := make([]localcluster.Sample, len(cl.procs))
	for i, p := range cl.procs {
		out[i] = localcluster.SampleOf(p.Cmd.Process.Pid)
	}
	return out
}

// liveBytes is each server's live memory, Go heap objects plus goroutine
// stacks, right after garbage collections its admin listener ran
// (/debug/pprof/heap?gc=1, then go_memstats_heap_alloc_bytes and
// go_memstats_stack_inuse_bytes from /metrics); nil when any server
// cannot say. Unlike RSS it does not keep what earlier phases freed.
func (cl *benchCluster) liveBytes(ctx context.Context) []localcluster.Sample {
	out := make([]localcluster.Sample, len(cl.admins))
	hc, scheme := &http.Client{Timeout: 10 * time.Second}, "http://"
	if cl.tls != nil { // --tls: the admin listeners serve TLS too
		hc.Transport, scheme = &http.Transport{TLSClientConfig: cl.tls}, "https://"
	}
	get := func(url string) (body []byte, err error) {
		// The admin listener opens just after a node's native one (which
		// the cluster's start waited for): retry for up to 5 s.
		err = retry(ctx, 5*time.Second, "GET "+url, func() error {
			body, err = getOnce(ctx, hc, url)
			return err
		})
		return body, err
	}
	for i, a := range cl.admins {
		for range 2 { // twice: sync.Pool keeps a victim cache across one GC
			if _, err := get(scheme + a + "/debug/pprof/heap?gc=1"); err != nil {
				return nil
			}
		}
		body, err := get(scheme + a + "/metrics")
		if err != nil {
			return nil
		}
		live, ok := liveBytesOf(body)
		if !ok {
			return nil
		}
		out[i].RSSBytes = live
	}
	return out
}

// liveBytesOf sums go_memstats_heap_alloc_bytes and
// go_memstats_stack_inuse_bytes of a /metrics answer; false when either is
// missing or the text does not parse.
func liveBytesOf(metrics []byte) (int64, bool) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(metrics))
	if err != nil {
		return 0, false
	}
	var live int64
	for _, name := range []string{"go_memstats_heap_alloc_bytes", "go_memstats_stack_inuse_bytes"} {
		f := families[name]
		if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge() == nil {
			return 0, false
		}
		live += int64(f.GetMetric()[0].GetGauge().GetValue())
	}
	return live, true
}

// getOnce GETs url and returns its body (64 MiB at most); a status other
// than 200 is an error.
func getOnce(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
}
