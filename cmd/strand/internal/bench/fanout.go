package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/internal/localcluster"
)

// The fan-out phase of `strand bench cluster` (issue 8, R3): produce
// throughput while 0, 1, 100, 1,000 groups each tail the topic. The
// readers are one child process (`strand bench readers`) that runs one
// Consumer per group — its own positions, one fetch per leader per Poll —
// multiplexed 8 to a connection, so 1,000 groups are 1,000 goroutines,
// not 1,000 processes. Its CPU is sampled apart from the servers' and the
// producer's, and it reports the records and bytes it delivered.

// fanoutTopic is the topic the fan-out phase produces to and tails.
const fanoutTopic = "bench-fanout"

// fanoutPhases runs the produce bench once per group count and round,
// alternating the order of the counts between rounds (1,100,1000 then
// 1000,100,1): a machine that slows down over the run hits both ends.
func (cb *Cluster) fanoutPhases(ctx context.Context, cl *benchCluster, add func(clusterRow, error) error) error {
	b := cb.SettingsFor(cl, fanoutTopic, 6)
	if err := cl.ensureTopic(ctx, &b); err != nil {
		return err
	}
	for round := range cb.fanoutRounds {
		counts := append([]int(nil), cb.fanoutGroups...)
		if round%2 == 1 {
			for i, j := 0, len(counts)-1; i < j; i, j = i+1, j-1 {
				counts[i], counts[j] = counts[j], counts[i]
			}
		}
		for _, n := range counts {
			row, err := cb.fanoutRun(ctx, cl, &b, n)
			if err := add(row, err); err != nil {
				return err
			}
		}
	}
	return nil
}

// fanoutRun produces for --duration while n groups tail the topic.
func (cb *Cluster) fanoutRun(ctx context.Context, cl *benchCluster, b *Settings, n int) (clusterRow, error) {
	phase := fmt.Sprintf("fanout %d", n)
	var rd *readersProc
	if n > 0 {
		var err error
		if rd, err = startReaders(ctx, cb, cl, n); err != nil {
			return clusterRow{phase: phase, partitions: b.partitions}, err
		}
		defer rd.stop()
	}
	var rdBefore localcluster.Sample
	if rd != nil {
		rdBefore = localcluster.SampleOf(rd.cmd.Process.Pid)
		if err := rd.begin(); err != nil {
			return clusterRow{phase: phase, partitions: b.partitions}, err
		}
	}
	row, err := measured(cl, phase, b.partitions, func() (*benchResult, string, error) {
		r, err := b.runProduce(ctx)
		return &r, "", err
	})
	row.fanout = &fanoutFigures{groups: n}
	if rd != nil {
		rdAfter := localcluster.SampleOf(rd.cmd.Process.Pid)
		got, rerr := rd.end()
		if err == nil {
			err = rerr
		}
		row.fanout.readerCPU = (rdAfter.CPU - rdBefore.CPU).Seconds() / got.elapsed.Seconds()
		row.fanout.delivered = got
	}
	return row, err
}

// fanoutFigures is what a fan-out row adds: the readers' side.
type fanoutFigures struct {
	groups    int
	delivered readerTotals
	readerCPU float64 // cores
}

// readerTotals is what `bench readers` delivered between start and stop.
type readerTotals struct {
	records, bytes, polls, errors int64
	elapsed                       time.Duration
	firstErr                      string // the first error, when errors > 0
}

// readersProc is a running `strand bench readers` child.
type readersProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Scanner
	stderr *strings.Builder
}

// startReaders starts the readers for n groups and waits until every
// group has polled once (its positions known).
func startReaders(ctx context.Context, cb *Cluster, cl *benchCluster, n int) (*readersProc, error) {
	exe := cb.readersBinary
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	args := []string{"bench", "readers", "--brokers", strings.Join(cl.addrs, ","), "--topic", fanoutTopic,
		"--groups", strconv.Itoa(n), "--fetch-min-bytes", strconv.Itoa(cb.fanoutMinBytes),
		"--fetch-max-wait", cb.fanoutMaxWait.String()}
	cmd := exec.CommandContext(ctx, exe, args...)
	if cb.fanoutNice > 0 {
		cmd = exec.CommandContext(ctx, "nice", append([]string{"-n", strconv.Itoa(cb.fanoutNice), exe}, args...)...)
	}
	rd := &readersProc{cmd: cmd, stderr: &strings.Builder{}}
	cmd.Stderr = rd.stderr
	var err error
	if rd.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench cluster: start readers: %w", err)
	}
	rd.lines = bufio.NewScanner(out)
	if line, err := rd.next(); err != nil || line != "ready" {
		rd.stop()
		return nil, fmt.Errorf("bench cluster: readers for %d groups did not start (%q, %v): %s", n, line, err, rd.stderr)
	}
	return rd, nil
}

// next reads the readers' next line.
func (rd *readersProc) next() (string, error) {
	if !rd.lines.Scan() {
		if err := rd.lines.Err(); err != nil {
			return "", err
		}
		return "", io.ErrUnexpectedEOF
	}
	return rd.lines.Text(), nil
}

// begin tells the readers to start counting.
func (rd *readersProc) begin() error {
	_, err := io.WriteString(rd.stdin, "start\n")
	return err
}

// end tells the readers to stop and reads their totals.
func (rd *readersProc) end() (readerTotals, error) {
	rd.stdin.Close()
	line, err := rd.next()
	if err != nil {
		return readerTotals{}, fmt.Errorf("bench cluster: readers gave no totals (%v): %s", err, rd.stderr)
	}
	var t readerTotals
	var ms int64
	if _, err := fmt.Sscanf(line, "records=%d bytes=%d polls=%d errors=%d ms=%d", &t.records, &t.bytes, &t.polls,
		&t.errors, &ms); err != nil {
		return t, fmt.Errorf("bench cluster: readers said %q: %w", line, err)
	}
	t.elapsed = time.Duration(ms) * time.Millisecond
	if t.errors > 0 {
		t.firstErr, _ = rd.next()
	}
	return t, nil
}

// stop ends the readers (their stdin closed makes them exit) and waits,
// killing them after 10 s.
func (rd *readersProc) stop() {
	rd.stdin.Close()
	done := make(chan struct{})
	go func() { rd.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		rd.cmd.Process.Kill()
		<-done
	}
}

// Readers is `strand bench readers`, the fan-out phase's child: its
// flags; Conn is set by the caller.
type Readers struct {
	Conn     Conn
	topic    string
	groups   int
	perConn  int
	minBytes int
	maxWait  time.Duration
}

// Register registers the flags of `bench readers`, after the caller's
// client flags.
func (r *Readers) Register(fs *pflag.FlagSet) {
	fs.StringVar(&r.topic, "topic", fanoutTopic, "topic to tail")
	fs.IntVar(&r.groups, "groups", 1, "groups tailing the topic, each one Consumer with its own positions")
	fs.IntVar(&r.perConn, "groups-per-conn", 8, "groups sharing one client (one connection per node; a connection holds at most 32 MiB of fetches, 8 of 4 MiB)")
	fs.IntVar(&r.minBytes, "fetch-min-bytes", 1, "each fetch's min_bytes")
	fs.DurationVar(&r.maxWait, "fetch-max-wait", 500*time.Millisecond, "each fetch's max wait")
}

// Run runs `strand bench readers`: n groups tail the topic from its end.
// It prints "ready" once every group polled once; a line on in starts the
// count; the end of in prints the totals since and returns.
func (r *Readers) Run(ctx context.Context, in io.Reader, out io.Writer) error {
	if err := r.Check(); err != nil {
		return err
	}
	clients, consumers, err := r.consumers(ctx)
	defer closeAll(clients)
	if err != nil {
		return err
	}
	return r.tail(ctx, consumers, in, out)
}

// Check refuses flags that cannot run (*UsageError).
func (r *Readers) Check() error {
	if r.groups < 1 || r.perConn < 1 || r.minBytes < 0 || r.maxWait < 0 {
		return usageError("--groups ≥ 1, --groups-per-conn ≥ 1, --fetch-min-bytes ≥ 0 and --fetch-max-wait ≥ 0 please")
	}
	return nil
}

// consumers connects the clients and makes one Consumer per group, each
// assigned every partition at its current end.
func (r *Readers) consumers(ctx context.Context) ([]*clientlib.Client, []*clientlib.Consumer, error) {
	var clients []*clientlib.Client
	for i := 0; i < r.groups; i += r.perConn {
		c, err := r.Conn.client(clientlib.MaxInFlightPerConn(min(r.perConn, r.groups) + 8))
		if err != nil {
			return clients, nil, err
		}
		clients = append(clients, c)
	}
	offs, err := clients[0].ListOffsets(ctx, r.topic, nil, clientlib.OffsetLatest())
	if err != nil {
		return clients, nil, err
	}
	var consumers []*clientlib.Consumer
	for i := range r.groups {
		k := clientlib.NewConsumer(clients[i/r.perConn], clientlib.FetchMinBytes(int32(r.minBytes)),
			clientlib.FetchMaxWait(r.maxWait))
		for _, o := range offs {
			if o.Err != nil {
				return clients, nil, fmt.Errorf("partition %d: %w", o.Partition, o.Err)
			}
			k.Assign(r.topic, o.Partition, clientlib.OffsetExact(o.HighWatermark))
		}
		consumers = append(consumers, k)
	}
	return clients, consumers, nil
}

// tail polls every consumer on its own goroutine until in ends, counting
// what arrives after the first line of in.
func (r *Readers) tail(ctx context.Context, consumers []*clientlib.Consumer, in io.Reader, out io.Writer) error {
	var counting atomic.Bool
	var records, bytes, polls, errs atomic.Int64
	var firstErr atomic.Pointer[string]
	var first sync.WaitGroup
	first.Add(len(consumers))
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, k := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; cctx.Err() == nil; i++ {
				fs := k.Poll(cctx)
				if i == 0 {
					first.Done()
				}
				if !counting.Load() {
					continue
				}
				polls.Add(1)
				for _, fp := range fs {
					if fp.Err != nil && cctx.Err() == nil {
						errs.Add(1)
						msg := fp.Err.Error()
						firstErr.CompareAndSwap(nil, &msg)
					}
					records.Add(int64(len(fp.Records)))
					for _, rec := range fp.Records {
						bytes.Add(int64(len(rec.Value) + len(rec.Key)))
					}
				}
			}
		}()
	}
	first.Wait()
	fmt.Fprintln(out, "ready")
	lines := bufio.NewScanner(in)
	lines.Scan()
	counting.Store(true)
	start := time.Now()
	for lines.Scan() {
	}
	elapsed := time.Since(start)
	counting.Store(false)
	got := []int64{records.Load(), bytes.Load(), polls.Load(), errs.Load()}
	cancel()
	wg.Wait()
	fmt.Fprintf(out, "records=%d bytes=%d polls=%d errors=%d ms=%d\n", got[0], got[1], got[2], got[3], elapsed.Milliseconds())
	if got[3] > 0 {
		msg := "?"
		if p := firstErr.Load(); p != nil {
			msg = *p
		}
		fmt.Fprintf(out, "first error: %s\n", strings.ReplaceAll(msg, "\n", " "))
	}
	return nil
}
