package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// What a transactional bench's latencies measure.
const (
	latencyTxn = "per transaction, from BeginTransaction to CommitTransaction's return: " +
		"its records produced and acknowledged, then the commit"
	latencyCommit = "CommitTransaction alone, after the transaction's records were acknowledged: " +
		"EndTxn at the coordinator, whose decision is durable when it answers"
)

// runTxnProduce produces transactions of --txn-records records, one at a
// time per client, each committed once its records are acknowledged,
// until --duration or --count records; a transaction's records go round
// robin over the topic's partitions, so one of N records touches
// min(N, partitions) of them. It measures records and commits per second
// and the transaction and commit latencies.
func (b *Settings) runTxnProduce(ctx context.Context) (benchResult, error) {
	parts, err := b.partitionCount(ctx)
	if err != nil {
		return benchResult{}, err
	}
	clients, err := b.txnProducers()
	if err != nil {
		return benchResult{}, err
	}
	defer closeAll(clients)
	txns, commits := make([]*histogram, len(clients)), make([]*histogram, len(clients))
	var records, errs atomic.Int64
	var firstErr error
	var errOnce sync.Once
	userStart, sysStart := cpuUsage()
	start := time.Now()
	deadline := start.Add(b.duration)
	var wg sync.WaitGroup
	for i, c := range clients {
		txns[i], commits[i] = &histogram{}, &histogram{}
		wg.Go(func() {
			err := b.txnLoop(ctx, c, parts, deadline, &records, &errs, txns[i], commits[i])
			if err != nil {
				errOnce.Do(func() { firstErr = err })
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	user, sys := cpuUsage()
	if firstErr != nil {
		return benchResult{}, firstErr
	}
	txn, commit := &histogram{}, &histogram{}
	for i := range clients {
		txn.merge(txns[i])
		commit.merge(commits[i])
	}
	return benchResult{what: fmt.Sprintf("transactional produce, %d records per transaction", b.txnRecords),
		records: records.Load(), bytes: records.Load() * int64(b.recordBytes), errors: errs.Load(), elapsed: elapsed,
		latency: txn, latencyIs: latencyTxn, commits: int64(commit.total), commitLatency: commit,
		cpuUser: user - userStart, cpuSys: sys - sysStart}, nil
}

// txnLoop runs one client's transactions until the deadline (or its share
// of --count is taken). A transaction that fails is aborted and counted as
// errors; a fenced producer ends the bench.
func (b *Settings) txnLoop(ctx context.Context, c *clientlib.Client, parts int32, deadline time.Time,
	records, errs *atomic.Int64, txns, commits *histogram) error {
	value := make([]byte, b.recordBytes)
	next := int32(0) // the partition of the next record
	for ctx.Err() == nil {
		if b.count > 0 && records.Load() >= b.count || b.count == 0 && time.Now().After(deadline) {
			return nil
		}
		t0 := time.Now()
		if err := c.BeginTransaction(); err != nil {
			return fmt.Errorf("bench: begin transaction: %w", err)
		}
		var failed atomic.Int64
		for range b.txnRecords {
			r := &clientlib.Record{Topic: b.topic, Partition: next, Value: value}
			next = (next + 1) % parts
			c.Produce(ctx, r, func(_ *clientlib.Record, err error) {
				if err != nil {
					failed.Add(1)
				}
			})
		}
		err := c.Flush(ctx)
		t1 := time.Now()
		if err == nil && failed.Load() == 0 {
			err = c.CommitTransaction(ctx)
		}
		if err == nil && failed.Load() == 0 {
			commits.record(time.Since(t1))
			txns.record(time.Since(t0))
			records.Add(int64(b.txnRecords))
			continue
		}
		errs.Add(int64(b.txnRecords))
		if errors.Is(err, clientlib.ErrProducerFenced) {
			return fmt.Errorf("bench: %w", err)
		}
		if err := c.AbortTransaction(ctx); err != nil && !errors.Is(err, clientlib.ErrNoTransaction) {
			return fmt.Errorf("bench: abort a failed transaction: %w", err)
		}
	}
	return nil
}

// partitionCount is the bench topic's partition count.
func (b *Settings) partitionCount(ctx context.Context) (int32, error) {
	c, err := b.Conn.client()
	if err != nil {
		return 0, err
	}
	defer c.Close()
	mctx, cancel := context.WithTimeout(ctx, b.Conn.Timeout)
	defer cancel()
	info, err := c.Metadata(mctx)
	if err != nil {
		return 0, err
	}
	for _, t := range info.Topics {
		if t.Name == b.topic && len(t.Partitions) > 0 {
			return int32(len(t.Partitions)), nil
		}
	}
	return 0, fmt.Errorf("bench: topic %s is not in the cluster's metadata", b.topic)
}

// txnProducers connects --clients transactional producers, each with its
// own transactional id.
func (b *Settings) txnProducers() ([]*clientlib.Client, error) {
	var clients []*clientlib.Client
	for i := range b.clients {
		c, err := b.Conn.client(clientlib.TransactionalID(fmt.Sprintf("strand-bench-%d-%d", os.Getpid(), i)),
			clientlib.RequiredAcks(clientlib.AcksAll), clientlib.MaxInFlightBatches(b.inFlight),
			clientlib.BatchBytes(b.batchBytes), clientlib.Linger(b.linger), clientlib.MaxBufferedRecords(b.bufferedMax),
			clientlib.MaxInFlightPerConn(64), clientlib.ManualPartitioner())
		if err == nil {
			ictx, cancel := context.WithTimeout(context.Background(), b.Conn.Timeout)
			err = c.InitTransactions(ictx)
			cancel()
			if err != nil {
				c.Close()
			}
		}
		if err != nil {
			closeAll(clients)
			return nil, err
		}
		clients = append(clients, c)
	}
	return clients, nil
}

// txnPhases are bench cluster's txn phase: for each partition count,
// plain idempotent produce and transactions of each size, rounds times;
// then reading the transactions' topic back at read_uncommitted and at
// read_committed, rounds times. Each round reverses the order of the one
// before, so the machine's load hits every run alike.
func (cb *Cluster) txnPhases(ctx context.Context, cl *benchCluster, add func(clusterRow, error) error) error {
	var produce, consume []txnRun
	for _, p := range cb.txnPartitions {
		for _, s := range append([]int{0}, cb.txnSizes...) {
			produce = append(produce, txnRun{parts: int32(p), size: s})
		}
		if len(cb.txnSizes) > 0 {
			for _, level := range []string{"read_uncommitted", "read_committed"} {
				consume = append(consume, txnRun{parts: int32(p), isolation: level})
			}
		}
	}
	for _, runs := range [][]txnRun{produce, consume} {
		for round := range cb.txnRounds {
			order := slices.Clone(runs)
			if round%2 == 1 {
				slices.Reverse(order)
			}
			for _, r := range order {
				if err := cb.txnRun(ctx, cl, r, add); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// txnRun is one run of the txn phase: a consume at isolation when that is
// set, else a produce, in transactions of size records (0: plain
// idempotent), to a topic of parts partitions.
type txnRun struct {
	parts     int32
	size      int
	isolation string
}

// name is the table's name of the run.
func (r txnRun) name() string {
	switch {
	case r.isolation != "":
		return r.isolation
	case r.size == 0:
		return "idempotent"
	}
	return fmt.Sprintf("txn x%d", r.size)
}

// topic is the run's topic: plain idempotent produce writes its own, so
// the consumes read back only transactions.
func (r txnRun) topic() string {
	if r.size == 0 && r.isolation == "" {
		return fmt.Sprintf("bench-idem-%d", r.parts)
	}
	return fmt.Sprintf("bench-txn-%d", r.parts)
}

// txnRun runs and measures r, adding its row.
func (cb *Cluster) txnRun(ctx context.Context, cl *benchCluster, r txnRun, add func(clusterRow, error) error) error {
	b := cb.SettingsFor(cl, r.topic(), r.parts)
	b.duration, b.txnRecords, b.isolation = cb.txnDuration, r.size, r.isolation
	if err := cl.ensureTopic(ctx, &b); err != nil {
		return err
	}
	return add(measured(cl, r.name(), r.parts, func() (*benchResult, string, error) {
		var res benchResult
		var err error
		if r.isolation != "" {
			res, err = b.consumeFor(ctx, cb.txnDuration)
		} else {
			res, err = b.runProduce(ctx)
		}
		return &res, "", err
	}))
}

// consumeFor reads b's topic back from its start again and again until
// d has passed: the transactions' topic is small, and one read of it is
// over in milliseconds, too short to measure. The result sums the reads.
func (b *Settings) consumeFor(ctx context.Context, d time.Duration) (benchResult, error) {
	sum := benchResult{latency: &histogram{}}
	for sum.elapsed < d && ctx.Err() == nil {
		r, err := b.runConsume(ctx)
		if err != nil {
			return sum, err
		}
		sum.what, sum.latencyIs = r.what, r.latencyIs
		sum.records, sum.bytes, sum.errors = sum.records+r.records, sum.bytes+r.bytes, sum.errors+r.errors
		sum.elapsed, sum.cpuUser, sum.cpuSys = sum.elapsed+r.elapsed, sum.cpuUser+r.cpuUser, sum.cpuSys+r.cpuSys
		sum.latency.merge(r.latency)
	}
	return sum, nil
}

// isTxnPhase says whether a row's phase is a run of the txn phase.
func isTxnPhase(phase string) bool {
	switch phase {
	case "idempotent", "read_uncommitted", "read_committed":
		return true
	}
	return strings.HasPrefix(phase, "txn x")
}

// printTxnRanges prints, for the txn phase's rows, each run's figures as
// ranges over its rounds: records/s, commits/s, commit p50 and p99.
func printTxnRanges(w io.Writer, rows []clusterRow) {
	type key struct {
		phase string
		parts int32
	}
	var keys []key
	byKey := map[key][]*benchResult{}
	for _, r := range rows {
		if r.result == nil || !isTxnPhase(r.phase) {
			continue
		}
		k := key{r.phase, r.partitions}
		if byKey[k] == nil {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], r.result)
	}
	if len(keys) == 0 {
		return
	}
	fmt.Fprintf(w, "\ntxn phase, min–max over the rounds:\n%-16s %5s %15s %13s %17s %17s\n",
		"run", "parts", "msgs/s", "commits/s", "commit p50", "commit p99")
	for _, k := range keys {
		rs := byKey[k]
		rate := spread(rs, func(r *benchResult) float64 { return r.rate() })
		line := fmt.Sprintf("%-16s %5d %15s", k.phase, k.parts, rangeOf(rate, "%.0f"))
		if rs[0].commitLatency != nil {
			commits := spread(rs, func(r *benchResult) float64 { return float64(r.commits) / r.elapsed.Seconds() })
			p50 := spread(rs, func(r *benchResult) float64 { return r.commitLatency.quantile(0.5).Seconds() * 1000 })
			p99 := spread(rs, func(r *benchResult) float64 { return r.commitLatency.quantile(0.99).Seconds() * 1000 })
			line += fmt.Sprintf(" %13s %17s %17s", rangeOf(commits, "%.0f"), rangeOf(p50, "%.1f")+" ms", rangeOf(p99, "%.1f")+" ms")
		}
		fmt.Fprintf(w, "%s  (%d rounds)\n", line, len(rs))
	}
}

// spread is f of every result, sorted.
func spread(rs []*benchResult, f func(*benchResult) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	slices.Sort(out)
	return out
}

// rangeOf renders sorted values as "min–max" (one value alone).
func rangeOf(sorted []float64, format string) string {
	lo, hi := fmt.Sprintf(format, sorted[0]), fmt.Sprintf(format, sorted[len(sorted)-1])
	if lo == hi {
		return lo
	}
	return lo + "–" + hi
}

// checkTxn refuses txn phase settings that cannot run.
func (cb *Cluster) checkTxn() error {
	for _, s := range cb.txnSizes {
		if s < 1 {
			return usageError("--txn-sizes: %d: want at least 1 record per transaction", s)
		}
	}
	for _, p := range cb.txnPartitions {
		if p < 1 {
			return usageError("--txn-partitions: %d: want at least 1", p)
		}
	}
	if cb.txnRounds < 1 || cb.txnDuration <= 0 {
		return usageError("--txn-rounds ≥ 1 and --txn-duration > 0 please")
	}
	return nil
}
