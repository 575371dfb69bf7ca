// Package bench is `strand bench`: produce, consume and end-to-end
// benches against a running cluster, and `bench cluster`, which starts
// three real servers (internal/localcluster) and runs every bench
// against them, printing one table with the servers' CPU and memory.
// cmd/strand parses the client flags (brokers, TLS, SASL) into a Conn and
// hands the rest of the command line to this package's flag sets.
package bench

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/clientlib"
)

// Conn is how the benches reach the cluster: what cmd/strand's client
// flags say, or the servers `bench cluster` started.
type Conn struct {
	Brokers []string
	Timeout time.Duration
	// Opts are the client options of the command line (TLS, SASL).
	Opts []clientlib.Opt
	// TLS is the clients' TLS configuration (nil: plain), for the
	// servers' admin listeners, which serve TLS when the nodes do.
	TLS *tls.Config
}

// dialTimeout bounds each connection attempt.
const dialTimeout = 2 * time.Second

// client connects to the cluster with opts after the connection's own.
func (c Conn) client(opts ...clientlib.Opt) (*clientlib.Client, error) {
	base := append([]clientlib.Opt{clientlib.SeedAddresses(c.Brokers...), clientlib.ClientID("strand-cli"),
		clientlib.DialTimeout(dialTimeout)}, c.Opts...)
	return clientlib.NewClient(append(base, opts...)...)
}

// UsageError is a command-line mistake (cmd/strand exits 2 on it).
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usageError(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// Settings are the flags of `strand bench produce|consume|e2e`; Conn is
// set by the caller.
type Settings struct {
	Conn          Conn
	topic         string
	partitions    int32
	replication   int32
	recordBytes   int
	acks          string
	inFlight      int
	clients       int
	batchBytes    int
	linger        time.Duration
	count         int64
	duration      time.Duration
	rate          int
	bufferedMax   int
	fetchBytesMax int32
	keys          int
	txnRecords    int               // produce in transactions of this many records (0: not transactional)
	isolation     string            // consume: read_uncommitted (also when empty) or read_committed
	configs       map[string]string // the topic's settings when created (bench cluster's compact phase)
}

// Register registers the flags of bench kind (produce, consume or e2e),
// after the caller's client flags.
func (b *Settings) Register(fs *pflag.FlagSet, kind string) {
	fs.StringVar(&b.topic, "topic", "strand-bench", "topic to use (created when missing)")
	fs.Int32Var(&b.partitions, "partitions", 6, "partitions of the topic when created")
	fs.Int32Var(&b.replication, "replication-factor", 3, "replication factor of the topic when created")
	fs.IntVar(&b.recordBytes, "record-bytes", 1024, "bytes per record value")
	fs.Int64Var(&b.count, "count", 0, "records to send or read (0: run for --duration)")
	fs.DurationVar(&b.duration, "duration", 10*time.Second, "how long to run when --count is 0")
	fs.IntVar(&b.clients, "clients", 1, "concurrent clients (connections), each with its own producer or consumer")
	fs.Int32Var(&b.fetchBytesMax, "fetch-bytes", 8<<20, "max bytes per fetch request")
	if kind == "consume" {
		fs.StringVar(&b.isolation, "isolation", "read_uncommitted", "what to read of transactions, as Kafka's "+
			"isolation.level: read_uncommitted (every record up to the high-water mark at start) or read_committed "+
			"(only committed transactions' records, up to the last stable offset at start)")
		return
	}
	lingerDefault := 2 * time.Millisecond
	if kind == "e2e" {
		lingerDefault = 0
		fs.IntVar(&b.rate, "rate", 5000, "records per second to send")
	}
	fs.StringVar(&b.acks, "acks", "all", "all, 1 or 0")
	fs.IntVar(&b.inFlight, "in-flight", 5, "batches in flight per partition (1-5)")
	fs.IntVar(&b.batchBytes, "batch-bytes", 256<<10, "max bytes per batch")
	fs.DurationVar(&b.linger, "linger", lingerDefault, "wait this long to fill a batch")
	fs.IntVar(&b.bufferedMax, "buffered", 20000, "records buffered per client before Produce blocks")
	fs.IntVar(&b.keys, "keys", 0, "give records keys from this many distinct values, spread by hash over the partitions (0: keyless, sticky batches)")
	if kind == "produce" {
		fs.IntVar(&b.txnRecords, "txn-records", 0, "produce in transactions of this many records, round robin over the partitions, one transaction at a time per client, each committed once its records are acknowledged (0: not transactional)")
	}
}

// settings is the line a bench echoes before it starts, so a pasted
// result carries what produced it.
func (b *Settings) settings(kind string) string {
	s := fmt.Sprintf("bench %s: brokers=%s topic=%s partitions=%d replication-factor=%d record-bytes=%d clients=%d",
		kind, strings.Join(b.Conn.Brokers, ","), b.topic, b.partitions, b.replication, b.recordBytes, b.clients)
	if b.count > 0 {
		s += fmt.Sprintf(" count=%d", b.count)
	} else {
		s += fmt.Sprintf(" duration=%s", b.duration)
	}
	if kind == "consume" {
		return s + fmt.Sprintf(" fetch-bytes=%d isolation=%s", b.fetchBytesMax, b.isolation)
	}
	s += fmt.Sprintf(" acks=%s in-flight=%d batch-bytes=%d linger=%s buffered=%d keys=%d",
		b.acks, b.inFlight, b.batchBytes, b.linger, b.bufferedMax, b.keys)
	if kind == "e2e" {
		s += fmt.Sprintf(" rate=%d/s", b.rate)
	}
	if b.txnRecords > 0 {
		s += fmt.Sprintf(" txn-records=%d", b.txnRecords)
	}
	return s
}

// Kinds are the benches Settings runs.
var Kinds = []string{"produce", "consume", "e2e"}

// Check refuses settings of bench kind that cannot run (*UsageError).
func (b *Settings) Check(kind string) error {
	if b.clients < 1 || b.recordBytes < 8 || b.keys < 0 || b.txnRecords < 0 {
		return usageError("--clients ≥ 1, --record-bytes ≥ 8, --keys ≥ 0 and --txn-records ≥ 0 please")
	}
	if b.txnRecords > 0 && b.acks != "all" && b.acks != "-1" {
		return usageError("--txn-records: a transactional producer acknowledges with acks=all: drop --acks %s", b.acks)
	}
	if _, err := isolationLevel(b.isolation); err != nil {
		return err
	}
	if kind == "e2e" && b.rate < 1 {
		return usageError("--rate must be at least 1")
	}
	return nil
}

// Run runs bench kind against Conn and prints its settings and result.
func (b *Settings) Run(ctx context.Context, kind string, stdout io.Writer) error {
	if err := b.Check(kind); err != nil {
		return err
	}
	fmt.Fprintln(stdout, b.settings(kind))
	if err := b.ensureTopic(ctx); err != nil {
		return err
	}
	r, err := b.run(ctx, kind)
	if err != nil {
		return err
	}
	r.print(stdout)
	return nil
}

// run runs one bench of kind produce, consume or e2e.
func (b *Settings) run(ctx context.Context, kind string) (benchResult, error) {
	switch kind {
	case "produce":
		return b.runProduce(ctx)
	case "consume":
		return b.runConsume(ctx)
	}
	return b.runE2E(ctx)
}

// ensureTopic creates the bench topic unless it exists. It asks first: an
// existing topic is used as it is, so --replication-factor and
// --partitions (the creation's) never refuse a run on it (a three-way
// default against a one-node cluster did, since the create was refused
// for the replication factor before it could say the topic exists).
func (b *Settings) ensureTopic(ctx context.Context) error {
	c, err := b.Conn.client()
	if err != nil {
		return err
	}
	defer c.Close()
	cctx, cancel := context.WithTimeout(ctx, b.Conn.Timeout)
	defer cancel()
	topics, err := c.DescribeTopics(cctx, b.topic)
	if err == nil && len(topics) == 1 && topics[0].Err == nil {
		return nil
	}
	err = c.CreateTopic(cctx, b.topic, b.partitions, b.replication, b.configs)
	if err != nil && !errors.Is(err, clientlib.ErrTopicExists) {
		return fmt.Errorf("create topic %s: %w", b.topic, err)
	}
	return nil
}

// producerClient connects a client with the bench's producer options.
func (b *Settings) producerClient() (*clientlib.Client, error) {
	acks, err := acksOf(b.acks)
	if err != nil {
		return nil, err
	}
	return b.Conn.client(clientlib.RequiredAcks(acks), clientlib.MaxInFlightBatches(b.inFlight),
		clientlib.BatchBytes(b.batchBytes), clientlib.Linger(b.linger), clientlib.MaxBufferedRecords(b.bufferedMax),
		clientlib.MaxInFlightPerConn(64))
}

// acksOf reads --acks.
func acksOf(s string) (clientlib.Acks, error) {
	switch s {
	case "all", "-1":
		return clientlib.AcksAll, nil
	case "1":
		return clientlib.AcksLeader, nil
	case "0":
		return clientlib.AcksNone, nil
	}
	return 0, usageError("--acks %q: want all, 1 or 0", s)
}

// isolationLevel is --isolation's level, read_uncommitted when empty.
func isolationLevel(s string) (clientlib.IsolationLevel, error) {
	switch s {
	case "", "read_uncommitted":
		return clientlib.ReadUncommitted, nil
	case "read_committed":
		return clientlib.ReadCommitted, nil
	}
	return 0, usageError("--isolation %q: want read_uncommitted or read_committed", s)
}

// What each bench's latencies measure, printed beside them.
const (
	latencyProduce = "from the Produce call to the acknowledgement; includes client queueing: " +
		"time blocked on a full buffer and waiting in a batch (--linger) and behind --in-flight batches"
	latencyConsume = "per Poll: one fetch round to every leader"
	latencyE2E     = "from the Produce call to the record's arrival in Poll in the same process " +
		"(produced at a steady rate, so hardly any client queueing)"
	latencyE2EAck = "from the Produce call to the acknowledgement, at the same steady rate"
)

// benchResult is what a bench prints.
type benchResult struct {
	what      string
	records   int64
	bytes     int64
	errors    int64
	elapsed   time.Duration
	latency   *histogram
	latencyIs string     // what latency measures
	latency2  *histogram // e2e: the producer's ack latency
	// commits and commitLatency: transactional produce's commits and
	// CommitTransaction's latency (nil when not transactional).
	commits       int64
	commitLatency *histogram
	cpuUser       time.Duration
	cpuSys        time.Duration
}

// rate is records per second.
func (r benchResult) rate() float64 { return float64(r.records) / r.elapsed.Seconds() }

func (r benchResult) print(w io.Writer) {
	secs := r.elapsed.Seconds()
	fmt.Fprintf(w, "%s: %d records in %s: %.0f msgs/s, %.1f MiB/s", r.what, r.records,
		r.elapsed.Round(time.Millisecond), float64(r.records)/secs, float64(r.bytes)/secs/(1<<20))
	if r.errors > 0 {
		fmt.Fprintf(w, ", %d errors", r.errors)
	}
	fmt.Fprintln(w)
	if r.latency != nil {
		fmt.Fprintf(w, "  latency %s\n    (%s)\n", r.latency.summary(), r.latencyIs)
	}
	if r.latency2 != nil {
		fmt.Fprintf(w, "  produce ack latency %s\n    (%s)\n", r.latency2.summary(), latencyE2EAck)
	}
	if r.commitLatency != nil {
		fmt.Fprintf(w, "  %d commits: %.0f commits/s, commit latency %s\n    (%s)\n", r.commits,
			float64(r.commits)/secs, r.commitLatency.summary(), latencyCommit)
	}
	cpu := r.cpuUser + r.cpuSys
	fmt.Fprintf(w, "  bench process CPU: %s user + %s sys = %.0f%% of one core\n",
		r.cpuUser.Round(time.Millisecond), r.cpuSys.Round(time.Millisecond), 100*cpu.Seconds()/secs)
}

// runProduce sends records as fast as the clients' windows allow and
// measures each record's time from Produce to its acknowledgement.
func (b *Settings) runProduce(ctx context.Context) (benchResult, error) {
	if b.txnRecords > 0 {
		return b.runTxnProduce(ctx)
	}
	clients, err := b.producers()
	if err != nil {
		return benchResult{}, err
	}
	defer closeAll(clients)
	var sent, errs atomic.Int64
	hists := make([]*histogram, len(clients))
	value := make([]byte, b.recordBytes)
	userStart, sysStart := cpuUsage()
	start := time.Now()
	deadline := start.Add(b.duration)
	var wg sync.WaitGroup
	for i, c := range clients {
		hists[i] = &histogram{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := hists[i]
			for ctx.Err() == nil {
				n := sent.Add(1)
				if (b.count > 0 && n > b.count) || (b.count == 0 && n%64 == 0 && time.Now().After(deadline)) {
					return
				}
				r := &clientlib.Record{Topic: b.topic, Value: value}
				if b.keys > 0 {
					r.Key = binary.BigEndian.AppendUint64(nil, uint64(n%int64(b.keys)))
				}
				t0 := time.Now()
				c.Produce(ctx, r, func(_ *clientlib.Record, err error) {
					h.record(time.Since(t0))
					if err != nil {
						errs.Add(1)
					}
				})
			}
		}()
	}
	wg.Wait()
	for _, c := range clients {
		c.Flush(context.Background())
	}
	elapsed := time.Since(start)
	user, sys := cpuUsage()
	all := &histogram{}
	for _, h := range hists {
		all.merge(h)
	}
	acked := int64(all.total) - errs.Load()
	return benchResult{what: "produce", records: acked, bytes: acked * int64(b.recordBytes), errors: errs.Load(),
		elapsed: elapsed, latency: all, latencyIs: latencyProduce, cpuUser: user - userStart,
		cpuSys: sys - sysStart}, nil
}

// producers connects --clients producer clients.
func (b *Settings) producers() ([]*clientlib.Client, error) {
	var clients []*clientlib.Client
	for range b.clients {
		c, err := b.producerClient()
		if err != nil {
			closeAll(clients)
			return nil, err
		}
		clients = append(clients, c)
	}
	return clients, nil
}

func closeAll(clients []*clientlib.Client) {
	for _, c := range clients {
		c.Close()
	}
}

// runConsume reads the topic from the earliest offset up to its ends at
// start (or --count records) at --isolation, measuring poll latency.
func (b *Settings) runConsume(ctx context.Context) (benchResult, error) {
	level, err := isolationLevel(b.isolation)
	if err != nil {
		return benchResult{}, err
	}
	c, err := b.Conn.client(clientlib.MaxInFlightPerConn(64))
	if err != nil {
		return benchResult{}, err
	}
	defer c.Close()
	ends, total, err := b.consumeEnds(ctx, c, level)
	if err != nil {
		return benchResult{}, err
	}
	k := clientlib.NewConsumer(c, clientlib.FetchMaxBytes(b.fetchBytesMax),
		clientlib.FetchMaxPartitionBytes(min(b.fetchBytesMax, 4<<20)), clientlib.FetchIsolation(level))
	for p := range ends {
		k.Assign(b.topic, p, clientlib.OffsetEarliest())
	}
	polls := &histogram{}
	var got, bytes, errs int64
	userStart, sysStart := cpuUsage()
	start := time.Now()
	for got < total && ctx.Err() == nil && len(ends) > 0 {
		t0 := time.Now()
		fetches := k.Poll(ctx)
		polls.record(time.Since(t0))
		for _, fp := range fetches {
			if fp.Err != nil {
				errs++
			}
			for _, r := range fp.Records {
				got++
				bytes += int64(len(r.Value) + len(r.Key))
			}
		}
		b.unassignDone(k, ends)
	}
	elapsed := time.Since(start)
	user, sys := cpuUsage()
	what := "consume"
	if level == clientlib.ReadCommitted {
		what = "consume, read_committed"
	}
	return benchResult{what: what, records: got, bytes: bytes, errors: errs, elapsed: elapsed, latency: polls,
		latencyIs: latencyConsume, cpuUser: user - userStart, cpuSys: sys - sysStart}, nil
}

// consumeEnds is where a consume ends in each partition: the high-water
// mark at start, or at read_committed the last stable offset; and how
// many offsets lie before those ends (transaction markers included), at
// most --count.
func (b *Settings) consumeEnds(ctx context.Context, c *clientlib.Client, level clientlib.IsolationLevel) (map[int32]int64, int64, error) {
	at := clientlib.OffsetLatest()
	if level == clientlib.ReadCommitted {
		at = clientlib.OffsetLastStable()
	}
	offs, err := c.ListOffsets(ctx, b.topic, nil, at)
	if err != nil {
		return nil, 0, err
	}
	var total int64
	ends := map[int32]int64{}
	for _, o := range offs {
		if o.Err != nil {
			return nil, 0, fmt.Errorf("partition %d: %w", o.Partition, o.Err)
		}
		end := o.HighWatermark
		if level == clientlib.ReadCommitted {
			end = o.Offset
		}
		ends[o.Partition] = end
		total += end - o.LogStartOffset
	}
	if total == 0 {
		return nil, 0, fmt.Errorf("topic %s is empty: run 'strand bench produce' first", b.topic)
	}
	if b.count > 0 {
		total = min(total, b.count)
	}
	return ends, total, nil
}

// unassignDone unassigns every partition whose position reached its end.
// The position, not the last record's offset, says so: a transaction's
// marker takes the offset after its records, and no record has it.
func (b *Settings) unassignDone(k *clientlib.Consumer, ends map[int32]int64) {
	for p, end := range ends {
		if pos, ok := k.Position(b.topic, p); ok && pos >= end {
			k.Unassign(b.topic, p)
			delete(ends, p)
		}
	}
}

// runE2E produces at a steady --rate and consumes in the same process:
// each record carries its send time, so latency is from Produce to Poll.
func (b *Settings) runE2E(ctx context.Context) (benchResult, error) {
	pc, err := b.producerClient()
	if err != nil {
		return benchResult{}, err
	}
	defer pc.Close()
	cc, err := b.Conn.client()
	if err != nil {
		return benchResult{}, err
	}
	defer cc.Close()
	k := clientlib.NewConsumer(cc, clientlib.FetchMaxWait(100*time.Millisecond))
	if err := b.startAtEnd(ctx, cc, k); err != nil {
		return benchResult{}, err
	}
	if b.count == 0 {
		b.count = int64(float64(b.rate) * b.duration.Seconds())
	}
	e2e, acks := &histogram{}, &histogram{}
	var ackMu sync.Mutex
	var errs atomic.Int64
	consumed := make(chan int64, 1)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { consumed <- b.consumeStamped(cctx, k, e2e) }()
	userStart, sysStart := cpuUsage()
	start := time.Now()
	b.produceAtRate(ctx, pc, start, func(err error, d time.Duration) {
		ackMu.Lock()
		acks.record(d)
		ackMu.Unlock()
		if err != nil {
			errs.Add(1)
		}
	})
	pc.Flush(context.Background())
	wait := time.NewTimer(10 * time.Second) // bounded wait for the tail to be consumed
	defer wait.Stop()
	select {
	case <-consumed:
	case <-wait.C:
		cancel()
		<-consumed
	}
	cancel()
	elapsed := time.Since(start)
	user, sys := cpuUsage()
	return benchResult{what: fmt.Sprintf("e2e at %d msgs/s", b.rate), records: int64(e2e.total),
		bytes: int64(e2e.total) * int64(b.recordBytes), errors: errs.Load(), elapsed: elapsed, latency: e2e,
		latencyIs: latencyE2E, latency2: acks, cpuUser: user - userStart, cpuSys: sys - sysStart}, nil
}

// startAtEnd assigns every partition at its end and waits until the
// consumer knows its positions, so no record produced later is missed.
func (b *Settings) startAtEnd(ctx context.Context, c *clientlib.Client, k *clientlib.Consumer) error {
	offs, err := c.ListOffsets(ctx, b.topic, nil, clientlib.OffsetLatest())
	if err != nil {
		return err
	}
	for _, o := range offs {
		if o.Err != nil {
			return fmt.Errorf("partition %d: %w", o.Partition, o.Err)
		}
		k.Assign(b.topic, o.Partition, clientlib.OffsetExact(o.HighWatermark))
	}
	return nil
}

// consumeStamped polls until ctx ends or a record with the last sequence
// arrives, recording each record's age; it returns records seen so far.
func (b *Settings) consumeStamped(ctx context.Context, k *clientlib.Consumer, h *histogram) int64 {
	for ctx.Err() == nil {
		for _, r := range k.Poll(ctx).Records() {
			sentNs := int64(binary.BigEndian.Uint64(r.Value))
			h.record(time.Duration(time.Now().UnixNano() - sentNs))
			if int64(h.total) >= b.count {
				return int64(h.total)
			}
		}
	}
	return int64(h.total)
}

// produceAtRate sends b.count records at b.rate per second, each value
// stamped with its send time.
func (b *Settings) produceAtRate(ctx context.Context, c *clientlib.Client, start time.Time, done func(error, time.Duration)) {
	interval := time.Second / time.Duration(b.rate)
	for i := int64(0); i < b.count && ctx.Err() == nil; i++ {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		value := make([]byte, b.recordBytes)
		t0 := time.Now()
		binary.BigEndian.PutUint64(value, uint64(t0.UnixNano()))
		c.Produce(ctx, &clientlib.Record{Topic: b.topic, Value: value}, func(_ *clientlib.Record, err error) {
			done(err, time.Since(t0))
		})
	}
}
