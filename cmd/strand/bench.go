package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/clientlib"
)

// benchFlags are the flags of every bench.
type benchFlags struct {
	cf            clientFlags
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
}

func (b *benchFlags) register(fs *pflag.FlagSet, kind string) {
	b.cf.register(fs, 30*time.Second)
	fs.StringVar(&b.topic, "topic", "strand-bench", "topic to use (created when missing)")
	fs.Int32Var(&b.partitions, "partitions", 6, "partitions of the topic when created")
	fs.Int32Var(&b.replication, "replication-factor", 3, "replication factor of the topic when created")
	fs.IntVar(&b.recordBytes, "record-bytes", 1024, "bytes per record value")
	fs.Int64Var(&b.count, "count", 0, "records to send or read (0: run for --duration)")
	fs.DurationVar(&b.duration, "duration", 10*time.Second, "how long to run when --count is 0")
	fs.IntVar(&b.clients, "clients", 1, "concurrent clients (connections), each with its own producer or consumer")
	fs.Int32Var(&b.fetchBytesMax, "fetch-bytes", 8<<20, "max bytes per fetch request")
	if kind == "consume" {
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
}

// cmdBench runs `strand bench produce|consume|e2e` against a running cluster.
func cmdBench(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError("bench: want produce, consume or e2e")
	}
	kind := args[0]
	if kind == "-h" || kind == "--help" || kind == "help" {
		return &helpShown{text: groupUsage("bench")}
	}
	if kind != "produce" && kind != "consume" && kind != "e2e" {
		return usageError("bench: unknown %q: want produce, consume or e2e", kind)
	}
	fs := newFlags("bench " + kind)
	var b benchFlags
	b.register(fs, kind)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if b.clients < 1 || b.recordBytes < 8 {
		return usageError("--clients ≥ 1 and --record-bytes ≥ 8 please")
	}
	ctx, stop := signalContext()
	defer stop()
	if err := b.ensureTopic(ctx); err != nil {
		return err
	}
	switch kind {
	case "produce":
		return b.runProduce(ctx, stdout)
	case "consume":
		return b.runConsume(ctx, stdout)
	}
	return b.runE2E(ctx, stdout)
}

// ensureTopic creates the bench topic unless it exists.
func (b *benchFlags) ensureTopic(ctx context.Context) error {
	c, err := b.cf.client()
	if err != nil {
		return err
	}
	defer c.Close()
	cctx, cancel := context.WithTimeout(ctx, b.cf.timeout)
	defer cancel()
	err = c.CreateTopic(cctx, b.topic, b.partitions, b.replication, nil)
	if err != nil && !errTopicExists(err) {
		return wrapErr(err, "create topic %s", b.topic)
	}
	return nil
}

// producerClient connects a client with the bench's producer options.
func (b *benchFlags) producerClient() (*clientlib.Client, error) {
	acks, err := parseAcks(b.acks)
	if err != nil {
		return nil, err
	}
	return b.cf.client(clientlib.RequiredAcks(acks), clientlib.MaxInFlightBatches(b.inFlight),
		clientlib.BatchBytes(b.batchBytes), clientlib.Linger(b.linger), clientlib.MaxBufferedRecords(b.bufferedMax),
		clientlib.MaxInFlightPerConn(64))
}

// benchResult is what a bench prints.
type benchResult struct {
	what     string
	records  int64
	bytes    int64
	errors   int64
	elapsed  time.Duration
	latency  *histogram
	latency2 *histogram // e2e: the producer's ack latency
	cpuUser  time.Duration
	cpuSys   time.Duration
}

func (r benchResult) print(w io.Writer) {
	secs := r.elapsed.Seconds()
	fmt.Fprintf(w, "%s: %d records in %s: %.0f msgs/s, %.1f MiB/s", r.what, r.records,
		r.elapsed.Round(time.Millisecond), float64(r.records)/secs, float64(r.bytes)/secs/(1<<20))
	if r.errors > 0 {
		fmt.Fprintf(w, ", %d errors", r.errors)
	}
	fmt.Fprintln(w)
	if r.latency != nil {
		fmt.Fprintf(w, "  latency %s\n", r.latency.summary())
	}
	if r.latency2 != nil {
		fmt.Fprintf(w, "  produce ack latency %s\n", r.latency2.summary())
	}
	cpu := r.cpuUser + r.cpuSys
	fmt.Fprintf(w, "  bench process CPU: %s user + %s sys = %.0f%% of one core\n",
		r.cpuUser.Round(time.Millisecond), r.cpuSys.Round(time.Millisecond), 100*cpu.Seconds()/secs)
}

// runProduce sends records as fast as the clients' windows allow and
// measures each record's time from Produce to its acknowledgement.
func (b *benchFlags) runProduce(ctx context.Context, w io.Writer) error {
	clients, err := b.producers()
	if err != nil {
		return err
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
				t0 := time.Now()
				c.Produce(ctx, &clientlib.Record{Topic: b.topic, Value: value}, func(_ *clientlib.Record, err error) {
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
	benchResult{what: "produce", records: acked, bytes: acked * int64(b.recordBytes), errors: errs.Load(),
		elapsed: elapsed, latency: all, cpuUser: user - userStart, cpuSys: sys - sysStart}.print(w)
	return nil
}

// producers connects --clients producer clients.
func (b *benchFlags) producers() ([]*clientlib.Client, error) {
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

// runConsume reads the topic from the earliest offset up to the
// high-water marks at start (or --count records), measuring poll latency.
func (b *benchFlags) runConsume(ctx context.Context, w io.Writer) error {
	c, err := b.cf.client(clientlib.MaxInFlightPerConn(64))
	if err != nil {
		return err
	}
	defer c.Close()
	offs, err := c.ListOffsets(ctx, b.topic, nil, clientlib.OffsetLatest())
	if err != nil {
		return err
	}
	var total int64
	ends := map[int32]int64{}
	for _, o := range offs {
		if o.Err != nil {
			return wrapErr(o.Err, "partition %d", o.Partition)
		}
		ends[o.Partition] = o.HighWatermark
		total += o.HighWatermark - o.LogStartOffset
	}
	if total == 0 {
		return userErr(nil, "topic %s is empty: run 'strand bench produce' first", b.topic)
	}
	if b.count > 0 {
		total = min(total, b.count)
	}
	k := clientlib.NewConsumer(c, clientlib.FetchMaxBytes(b.fetchBytesMax),
		clientlib.FetchMaxPartitionBytes(min(b.fetchBytesMax, 4<<20)))
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
			if end, ok := ends[fp.Partition]; ok && fp.Err == nil && len(fp.Records) > 0 &&
				fp.Records[len(fp.Records)-1].Offset+1 >= end {
				k.Unassign(b.topic, fp.Partition)
				delete(ends, fp.Partition)
			}
		}
	}
	elapsed := time.Since(start)
	user, sys := cpuUsage()
	benchResult{what: "consume", records: got, bytes: bytes, errors: errs, elapsed: elapsed, latency: polls,
		cpuUser: user - userStart, cpuSys: sys - sysStart}.print(w)
	fmt.Fprintln(w, "  (latency is per Poll: one fetch round to every leader)")
	return nil
}

// runE2E produces at a steady --rate and consumes in the same process:
// each record carries its send time, so latency is from Produce to Poll.
func (b *benchFlags) runE2E(ctx context.Context, w io.Writer) error {
	pc, err := b.producerClient()
	if err != nil {
		return err
	}
	defer pc.Close()
	cc, err := b.cf.client()
	if err != nil {
		return err
	}
	defer cc.Close()
	k := clientlib.NewConsumer(cc, clientlib.FetchMaxWait(100*time.Millisecond))
	if err := b.startAtEnd(ctx, cc, k); err != nil {
		return err
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
	benchResult{what: fmt.Sprintf("e2e at %d msgs/s", b.rate), records: int64(e2e.total),
		bytes: int64(e2e.total) * int64(b.recordBytes), errors: errs.Load(), elapsed: elapsed, latency: e2e,
		latency2: acks, cpuUser: user - userStart, cpuSys: sys - sysStart}.print(w)
	return nil
}

// startAtEnd assigns every partition at its end and waits until the
// consumer knows its positions, so no record produced later is missed.
func (b *benchFlags) startAtEnd(ctx context.Context, c *clientlib.Client, k *clientlib.Consumer) error {
	offs, err := c.ListOffsets(ctx, b.topic, nil, clientlib.OffsetLatest())
	if err != nil {
		return err
	}
	for _, o := range offs {
		if o.Err != nil {
			return wrapErr(o.Err, "partition %d", o.Partition)
		}
		k.Assign(b.topic, o.Partition, clientlib.OffsetExact(o.HighWatermark))
	}
	return nil
}

// consumeStamped polls until ctx ends or a record with the last sequence
// arrives, recording each record's age; it returns records seen so far.
func (b *benchFlags) consumeStamped(ctx context.Context, k *clientlib.Consumer, h *histogram) int64 {
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
func (b *benchFlags) produceAtRate(ctx context.Context, c *clientlib.Client, start time.Time, done func(error, time.Duration)) {
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
