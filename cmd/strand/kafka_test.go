package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/linearizability"
)

// kafkaCluster is a testCluster whose nodes also serve Kafka's protocol.
type kafkaCluster struct {
	*testCluster
	kafka []string // node i's Kafka listener
}

// startKafkaCluster starts n `strand serve --kafka-listen` processes.
func startKafkaCluster(t *testing.T, n int) *kafkaCluster {
	t.Helper()
	c := &kafkaCluster{testCluster: &testCluster{t: t, dir: t.TempDir(), procs: make([]*proc, n)}}
	ports := freePorts(t, 2*n)
	var parts []string
	for i := range n {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i]))
		c.addrs = append(c.addrs, addr)
		c.kafka = append(c.kafka, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[n+i])))
		parts = append(parts, fmt.Sprintf("%d=%s", i+1, addr))
	}
	c.peers = strings.Join(parts, ",")
	for i := range n {
		c.start(i)
	}
	t.Cleanup(func() {
		for _, p := range c.procs {
			if p != nil {
				p.kill()
			}
		}
		if t.Failed() {
			c.dumpLogs()
		}
	})
	waitFor(t, "cluster", 30*time.Second, func() error { return clusterReady(c.addrs, n) })
	return c
}

// start starts node i+1 with its Kafka listener.
func (c *kafkaCluster) start(i int) {
	id := i + 1
	c.procs[i] = startProc(c.t, filepath.Join(c.dir, fmt.Sprintf("node-%d.log", id)), nil,
		"serve", "--id", strconv.Itoa(id), "--listen", c.addrs[i], "--peers", c.peers,
		"--data-dir", filepath.Join(c.dir, fmt.Sprintf("data-%d", id)), "--kafka-listen", c.kafka[i])
}

// Bounds of the Kafka kill test.
const (
	kkTopic        = "kkill"
	kkPartitions   = 4
	kkWriters      = 3
	kkCycles       = 2
	kkRecordsMax   = 3000
	kkInFlight     = 16
	kkKeys         = 12
	kkProgressStep = 250
)

// franz-go's idempotent producer at acks=all against three real `strand
// serve` processes through their Kafka listeners, while nodes are
// SIGKILLed and restarted: kadm creates the topic; afterwards every
// partition is drained (Strand's client) and the project's log checker
// must find no lost acknowledged record, no duplicate and no per-key
// reordering; a kgo consumer then reads every partition through the Kafka
// fetch path and must see exactly the drained records, and kadm's start
// and end offsets must bound them.
func TestKafkaIdempotentProducerSurvivesKill(t *testing.T) {
	skipShort(t)
	c := startKafkaCluster(t, 3)
	adm := kafkaAdmin(t, c.kafka)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	created, err := adm.CreateTopic(ctx, kkPartitions, 3, nil, kkTopic)
	if err != nil || created.Err != nil {
		t.Fatalf("kadm create topic: %v / %v", err, created.Err)
	}
	if created.ID == (kadm.TopicID{}) {
		t.Errorf("kadm create topic answered no topic id")
	}
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(c.addrs, kkTopic, kkPartitions) })

	w := &kafkaKillWorkload{h: linearizability.NewHistory(), start: time.Now()}
	w.budget.Store(kkRecordsMax)
	var wg sync.WaitGroup
	for i := range kkWriters {
		wg.Go(func() { w.write(t, c.kafka, linearizability.ClientID(i)) })
	}
	faultsErr := w.faults(c)
	w.stopped.Store(true)
	wg.Wait()
	if faultsErr != nil {
		t.Fatal(faultsErr)
	}
	t.Logf("%d records acknowledged, %d failed or unknown", w.acked.Load(), w.failed.Load())
	if w.acked.Load() < kkProgressStep*kkCycles {
		t.Fatalf("only %d records acknowledged: too little progress", w.acked.Load())
	}
	var seen atomic.Int64
	rec := pollRecorder{h: w.h, now: w.now, topic: kkTopic, seen: &seen}
	rec.drain(t, c.addrs, linearizability.ClientID(kkWriters), kkPartitions, 60*time.Second)
	report := linearizability.Check(w.h, linearizability.Options{FinalDrain: true, Timeout: 60 * time.Second})
	if err := report.Err(); err != nil {
		t.Fatal(err)
	}
	checkKafkaReadBack(t, c, adm, drainedValues(w.h))
}

// kafkaKillWorkload is the writers' state and the recorded history.
type kafkaKillWorkload struct {
	h       *linearizability.History
	start   time.Time
	acked   atomic.Int64
	failed  atomic.Int64
	budget  atomic.Int64
	stopped atomic.Bool
}

func (w *kafkaKillWorkload) now() int64 { return int64(time.Since(w.start)) }

// write produces keyed records through one kgo client (idempotent and
// acks=all are kgo's defaults), keeping kkInFlight outstanding.
func (w *kafkaKillWorkload) write(t *testing.T, seeds []string, id linearizability.ClientID) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(time.Millisecond), kgo.RecordDeliveryTimeout(20*time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.DialTimeout(time.Second))
	if err != nil {
		t.Error(err)
		return
	}
	defer cl.Close()
	slots := make(chan struct{}, kkInFlight)
	for seq := 0; !w.stopped.Load() && w.budget.Add(-1) >= 0; seq++ {
		slots <- struct{}{}
		key := fmt.Sprintf("k%d", (int(id)*5+seq)%kkKeys)
		partition := clientlib.KeyPartition([]byte(key), kkPartitions)
		value := fmt.Sprintf("c%d-%d", id, seq)
		tp := linearizability.TopicPartition{Topic: kkTopic, Partition: partition}
		op := w.h.CallProduce(id, tp, key, value, w.now())
		r := &kgo.Record{Topic: kkTopic, Partition: partition, Key: []byte(key), Value: []byte(value)}
		cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			if err != nil {
				w.h.Indefinite(op, w.now())
				w.failed.Add(1)
			} else {
				w.h.ReturnProduce(op, r.Offset, w.now())
				w.acked.Add(1)
			}
			<-slots
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	cl.Flush(ctx)
}

// faults kills and restarts nodes, each step after writers made progress.
func (w *kafkaKillWorkload) faults(c *kafkaCluster) error {
	progress := func(what string) error {
		target := w.acked.Load() + kkProgressStep
		deadline := time.Now().Add(40 * time.Second)
		for w.acked.Load() < target {
			if w.budget.Load() <= 0 {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("no progress %s: %d acknowledged, want %d", what, w.acked.Load(), target)
			}
			time.Sleep(20 * time.Millisecond) // polling a readiness condition
		}
		return nil
	}
	if err := progress("before the first fault"); err != nil {
		return err
	}
	for cycle := range kkCycles {
		victim := cycle % len(c.procs)
		c.procs[victim].kill()
		if err := progress(fmt.Sprintf("with node %d down", victim+1)); err != nil {
			return err
		}
		c.start(victim)
		if err := progress(fmt.Sprintf("after restarting node %d", victim+1)); err != nil {
			return err
		}
	}
	return nil
}

// drainedValues is, per partition, the values the history's final drain
// read, in offset order.
func drainedValues(h *linearizability.History) map[int32][]string {
	out := map[int32][]string{}
	best := map[int32]map[int64]string{}
	for _, op := range h.Ops() {
		if op.TP.Topic != kkTopic || op.Kind != linearizability.KindFetch {
			continue
		}
		m := best[op.TP.Partition]
		if m == nil {
			m = map[int64]string{}
			best[op.TP.Partition] = m
		}
		for _, r := range op.Received {
			m[r.Offset] = r.Value
		}
	}
	for p, m := range best {
		offsets := make([]int64, 0, len(m))
		for o := range m {
			offsets = append(offsets, o)
		}
		slices.Sort(offsets)
		for _, o := range offsets {
			out[p] = append(out[p], m[o])
		}
	}
	return out
}

// checkKafkaReadBack reads every partition from the start to kadm's end
// offset with a kgo consumer and compares with what the drain read.
func checkKafkaReadBack(t *testing.T, c *kafkaCluster, adm *kadm.Client, want map[int32][]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Right after the kills a partition may still be electing: the
	// answers are retriable (LEADER_NOT_AVAILABLE), so ask until none is.
	var starts, ends kadm.ListedOffsets
	waitFor(t, "kadm offsets", 30*time.Second, func() error {
		var err error
		if starts, err = adm.ListStartOffsets(ctx, kkTopic); err == nil {
			if ends, err = adm.ListEndOffsets(ctx, kkTopic); err == nil {
				err = errors.Join(starts.Error(), ends.Error())
			}
		}
		return err
	})
	offsets := map[int32]kgo.Offset{}
	total := int64(0)
	for p := range int32(kkPartitions) {
		s, _ := starts.Lookup(kkTopic, p)
		e, _ := ends.Lookup(kkTopic, p)
		if s.Err != nil || e.Err != nil || s.Offset != 0 || e.Offset != int64(len(want[p])) {
			t.Fatalf("partition %d: kadm offsets start %d (%v), end %d (%v); the drain read %d records",
				p, s.Offset, s.Err, e.Offset, e.Err, len(want[p]))
		}
		offsets[p] = kgo.NewOffset().At(0)
		total += e.Offset
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.kafka...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{kkTopic: offsets}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[int32][]string{}
	for n := int64(0); n < total; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("kgo read %d of %d records: %v", n, total, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("kgo fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(len(got[r.Partition])) {
				t.Fatalf("partition %d: kgo read offset %d after %d records", r.Partition, r.Offset, len(got[r.Partition]))
			}
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		})
	}
	for p := range int32(kkPartitions) {
		if !slices.Equal(got[p], want[p]) {
			t.Fatalf("partition %d: kgo read %d records, the drain %d; they differ", p, len(got[p]), len(want[p]))
		}
	}
}

// kafkaAdmin is a kadm client on the given Kafka listeners.
func kafkaAdmin(t *testing.T, seeds []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// createKafkaTopics creates topics through adm (Kafka's CreateTopics),
// retrying for up to 30 s while the cluster elects its leaders; a topic
// that already exists counts as created.
func createKafkaTopics(ctx context.Context, t *testing.T, adm *kadm.Client, partitions int32, rf int16, topics ...string) {
	t.Helper()
	waitFor(t, "create "+strings.Join(topics, ", "), 30*time.Second, func() error {
		r, err := adm.CreateTopics(ctx, partitions, rf, nil, topics...)
		if err == nil {
			err = r.Error()
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		return err
	})
}

// kcat (librdkafka) against `strand dev`, as the README prints it: -L lists
// every node as a broker, -P writes lines with keys and a header, -C -o
// beginning -e reads them back and exits; -z gzip|snappy|lz4|zstd batches
// are accepted and read back; -G (a consumer group) reads everything and
// commits, as kadm's FetchOffsets sees. The README's franz-go snippet runs; kadm
// lists the topic's offsets.
// Skipped when kcat is not installed (.ci/run installs Debian's kcat).
func TestKafkaKcatAgainstDev(t *testing.T) {
	skipShort(t)
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat); .ci/run installs it")
	}
	port := freeConsecutivePorts(t, 1)
	dir := t.TempDir()
	native := "127.0.0.1:" + strconv.Itoa(port+devNativePortOffset)
	broker := "127.0.0.1:" + strconv.Itoa(port)
	dev := startProc(t, filepath.Join(dir, "dev.log"), nil, "dev", "--nodes", "1", "--base-port", strconv.Itoa(port))
	defer dev.kill()
	env := []string{"STRAND_BROKERS=" + native}
	waitFor(t, "strand dev", 30*time.Second, func() error {
		_, errOut, err := runCLIResult(t, env, "", "cluster", "--timeout", "2s")
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		return nil
	})
	runCLI(t, env, "", "topic", "create", "hello", "--partitions", "3", "--replication-factor", "1")
	run := func(stdin string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kcat, args...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("kcat %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out.String(), errOut.String())
		}
		return out.String()
	}
	meta := run("", "-b", broker, "-L")
	for _, want := range []string{"1 brokers:", "broker 1 at " + broker, `topic "hello" with 3 partitions`} {
		if !strings.Contains(meta, want) {
			t.Fatalf("kcat -L lacks %q:\n%s", want, meta)
		}
	}
	run("a:first\nb:second\nc:third\n", "-b", broker, "-P", "-t", "hello", "-K:", "-H", "source=kcat")
	out := run("", "-b", broker, "-C", "-t", "hello", "-o", "beginning", "-e", "-q", "-f", `%k=%s %h\n`)
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	sort.Strings(got)
	want := []string{"a=first source=kcat", "b=second source=kcat", "c=third source=kcat"}
	if !slices.Equal(got, want) {
		t.Fatalf("kcat -C printed %q, want %q in any order", got, want)
	}
	// Batches compressed with every codec librdkafka has are accepted and
	// read back (served as sent, compressed).
	runCLI(t, env, "", "topic", "create", "codecs", "--partitions", "1", "--replication-factor", "1")
	codecs := []string{"gzip", "snappy", "lz4", "zstd"}
	for _, codec := range codecs {
		run(codec+"-1\n"+codec+"-2\n", "-b", broker, "-P", "-t", "codecs", "-z", codec)
	}
	var wantCodecs []string
	for _, codec := range codecs {
		wantCodecs = append(wantCodecs, codec+"-1", codec+"-2")
	}
	if got := strings.Fields(run("", "-b", broker, "-C", "-t", "codecs", "-o", "beginning", "-e", "-q")); !slices.Equal(got, wantCodecs) {
		t.Fatalf("compressed batches read back as %q, want %q", got, wantCodecs)
	}
	// kcat -G, as the README prints it: a consumer group reads every
	// record and commits; a second run of the group reads nothing new.
	groupOut := run("", "-b", broker, "-G", "g", "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", `%k=%s\n`, "hello")
	gotGroup := strings.Split(strings.TrimSuffix(groupOut, "\n"), "\n")
	sort.Strings(gotGroup)
	if want := []string{"a=first", "b=second", "c=third"}; !slices.Equal(gotGroup, want) {
		t.Fatalf("kcat -G printed %q, want %q in any order", gotGroup, want)
	}
	if again := run("", "-b", broker, "-G", "g", "-X", "auto.offset.reset=earliest", "-e", "-q", "hello"); again != "" {
		t.Fatalf("kcat -G again (after its commits) printed %q", again)
	}
	gadm := kafkaAdmin(t, []string{broker})
	gctx, gcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer gcancel()
	committed, err := gadm.FetchOffsets(gctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	csum := int64(0)
	committed.Each(func(o kadm.OffsetResponse) { csum += o.At })
	if csum != 3 {
		t.Fatalf("kcat -G committed offsets summing to %d, want 3: %v", csum, committed)
	}
	if got := readmeFranzGo(t, broker); !slices.Contains(got, "k=from franz-go") || !slices.Contains(got, "a=first") {
		t.Fatalf("the README's franz-go snippet printed %q", got)
	}
	adm := kafkaAdmin(t, []string{broker})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, "hello")
	if err != nil {
		t.Fatal(err)
	}
	sum := int64(0)
	ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
	if sum != 4 {
		t.Fatalf("kadm end offsets sum to %d, want 4", sum)
	}
	if err := dev.stop(syscall.SIGINT, 20*time.Second); err != nil {
		t.Fatalf("strand dev after SIGINT: %v", err)
	}
}

// readmeFranzGo is the README's franz-go snippet word for word, with the
// seed address given and a bounded context, returning what it printed.
func readmeFranzGo(t *testing.T, broker string) []string {
	var printed []string
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics("hello"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "hello", Key: []byte("k"), Value: []byte("from franz-go")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for seen := false; !seen; { // read hello from its start until our record comes by
		if ctx.Err() != nil {
			t.Fatalf("after printing %q: %v", printed, ctx.Err())
		}
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			printed = append(printed, fmt.Sprintf("%s=%s", r.Key, r.Value))
			seen = seen || string(r.Value) == "from franz-go"
		})
	}
	return printed
}
