package server

import (
	"context"
	"github.com/strandlog/strand/clientlib"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/node"
)

// txnDataTopic is the two-partition topic of the transactional data tests.
const txnDataTopic = "txd"

// txnProducer is a franz-go transactional producer writing to the
// partition each record names.
func txnProducer(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("txd-producer"), kgo.TransactionTimeout(30*time.Second),
		kgo.DefaultProduceTopic(txnDataTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// runTxn produces values[i] to partition i%2 in one transaction and ends
// it with commit (or abort).
func runTxn(ctx context.Context, t *testing.T, cl *kgo.Client, commit bool, values ...string) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("begin: %v", err)
	}
	for i, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %q: %v", v, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end (commit %v): %v", commit, err)
	}
}

// consumeUntil reads the topic from the start at isolation level iso until
// it saw a record with each of the last values (one per partition), and
// returns every value read, partition by partition, and the offsets.
func consumeUntil(ctx context.Context, t *testing.T, addr string, iso kgo.IsolationLevel, last ...string) (map[int32][]string, map[int32][]int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(txnDataTopic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	values, offsets := map[int32][]string{}, map[int32][]int64{}
	missing := slices.Clone(last)
	for len(missing) > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("still missing %q; read %q", missing, values)
		}
		for _, e := range fetches.Errors() {
			t.Fatalf("fetch %s/%d: %v", e.Topic, e.Partition, e.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			values[r.Partition] = append(values[r.Partition], string(r.Value))
			offsets[r.Partition] = append(offsets[r.Partition], r.Offset)
			missing = slices.DeleteFunc(missing, func(v string) bool { return v == string(r.Value) })
		})
	}
	return values, offsets
}

// Over a real node with the production marker writer and franz-go (issue
// 23): a transactional producer commits a transaction over two
// partitions, aborts the next, and commits two more; while one is open,
// the read_committed end offsets (the last stable offsets) stay at its
// first records on both partitions, and once committed move past them on
// both together. A read_committed consumer reads exactly the committed
// records, a read_uncommitted one every record; neither reads a control
// record as data, and the markers take offsets between the data.
func TestKafkaTxnReadCommittedOverFranzGo(t *testing.T) {
	rt := startKafkaTxnServer(t, node.PartitionMarkers{})
	addr := rt.KafkaAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kafkaTopic(ctx, t, addr, txnDataTopic, 2, nil)
	cl := txnProducer(t, addr)

	runTxn(ctx, t, cl, true, "c0", "c1")
	runTxn(ctx, t, cl, false, "a0", "a1")
	checkOpenTxnInvisible(ctx, t, adm, cl)
	runTxn(ctx, t, cl, true, "end0", "end1")

	committed, _ := consumeUntil(ctx, t, addr, kgo.ReadCommitted(), "end0", "end1")
	want := map[int32][]string{0: {"c0", "o0", "end0"}, 1: {"c1", "o1", "end1"}}
	for p := range int32(2) {
		if !slices.Equal(committed[p], want[p]) {
			t.Errorf("read_committed partition %d: %q, want %q", p, committed[p], want[p])
		}
	}
	all, offsets := consumeUntil(ctx, t, addr, kgo.ReadUncommitted(), "end0", "end1")
	wantAll := map[int32][]string{0: {"c0", "a0", "o0", "end0"}, 1: {"c1", "a1", "o1", "end1"}}
	for p := range int32(2) {
		if !slices.Equal(all[p], wantAll[p]) {
			t.Errorf("read_uncommitted partition %d: %q, want %q", p, all[p], wantAll[p])
		}
		// Each transaction's marker follows its record: offsets 0, 2, 4, 6.
		if wantOff := []int64{0, 2, 4, 6}; !slices.Equal(offsets[p], wantOff) {
			t.Errorf("read_uncommitted partition %d offsets %v, want %v (a marker between each)", p, offsets[p], wantOff)
		}
	}
	kcatReadCommitted(ctx, t, addr, []string{"c0", "o0", "end0"})

	// clientlib's consumer reads the same at both levels and its position
	// passes each partition's last marker (offset 7): the end of the log.
	for _, level := range []clientlib.IsolationLevel{clientlib.ReadCommitted, clientlib.ReadUncommitted} {
		got := clientlibReadAll(ctx, t, rt, level, 8)
		w := want
		if level == clientlib.ReadUncommitted {
			w = wantAll
		}
		for p := range int32(2) {
			if !slices.Equal(got[p], w[p]) {
				t.Errorf("clientlib %v partition %d: %q, want %q", level, p, got[p], w[p])
			}
		}
	}
}

// clientlibReadAll reads both partitions of txnDataTopic from the start
// with clientlib's Consumer at level until its position reaches end on
// both, and returns the values by partition. Before markers were served
// to native readers, the position stopped at a partition's trailing
// marker, and an offset skipped for a marker failed as CORRUPT_BATCH.
func clientlibReadAll(ctx context.Context, t *testing.T, rt *Server, level clientlib.IsolationLevel, end int64) map[int32][]string {
	t.Helper()
	c := newTestClient(t, rt)
	k := clientlib.NewConsumer(c, clientlib.FetchIsolation(level), clientlib.FetchMaxWait(50*time.Millisecond))
	out := map[int32][]string{}
	for p := range int32(2) {
		k.Assign(txnDataTopic, p, clientlib.OffsetEarliest())
	}
	done := func() bool {
		for p := range int32(2) {
			if pos, ok := k.Position(txnDataTopic, p); !ok || pos < end {
				return false
			}
		}
		return true
	}
	for !done() {
		if ctx.Err() != nil {
			p0, _ := k.Position(txnDataTopic, 0)
			p1, _ := k.Position(txnDataTopic, 1)
			t.Fatalf("clientlib %v: positions %d and %d, want %d; read %q", level, p0, p1, end, out)
		}
		for _, f := range k.Poll(ctx) {
			if f.Err != nil {
				t.Fatalf("clientlib %v partition %d: %v", level, f.Partition, f.Err)
			}
			for _, r := range f.Records {
				out[r.Partition] = append(out[r.Partition], string(r.Value))
			}
		}
	}
	return out
}

// checkOpenTxnInvisible runs a transaction writing o0 and o1 and, before
// committing it, checks the read_committed end offsets of both partitions
// stop at its records while the read_uncommitted ones are past them;
// once its markers are written, both partitions' read_committed end
// offsets are past them.
func checkOpenTxnInvisible(ctx context.Context, t *testing.T, adm *kadm.Client, cl *kgo.Client) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i, v := range []string{"o0", "o1"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %q: %v", v, err)
		}
	}
	ends := endOffsets(ctx, t, adm)
	stable := stableOffsets(ctx, t, adm)
	for p := range int32(2) {
		// c, marker, a, marker: the open transaction's record is at 4.
		if stable[p] != 4 || ends[p] != 5 {
			t.Errorf("open transaction, partition %d: read_committed end %d, read_uncommitted end %d; want 4 and 5", p, stable[p], ends[p])
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// The markers are written after EndTxn answers (as in Kafka): poll.
	for stable = stableOffsets(ctx, t, adm); stable[0] != 6 || stable[1] != 6; stable = stableOffsets(ctx, t, adm) {
		if ctx.Err() != nil {
			t.Fatalf("committed transaction: read_committed ends %v, want 6 on both partitions (past its records and markers)", stable)
		}
		time.Sleep(10 * time.Millisecond) // polling the markers' write, bounded by ctx
	}
}

// endOffsets is ListOffsets latest at read_uncommitted, by partition.
func endOffsets(ctx context.Context, t *testing.T, adm *kadm.Client) map[int32]int64 {
	t.Helper()
	listed, err := adm.ListEndOffsets(ctx, txnDataTopic)
	return listedOffsets(t, listed, err)
}

// stableOffsets is ListOffsets latest at read_committed: the last stable
// offsets, by partition.
func stableOffsets(ctx context.Context, t *testing.T, adm *kadm.Client) map[int32]int64 {
	t.Helper()
	listed, err := adm.ListCommittedOffsets(ctx, txnDataTopic)
	return listedOffsets(t, listed, err)
}

// listedOffsets is a ListOffsets answer by partition.
func listedOffsets(t *testing.T, listed kadm.ListedOffsets, err error) map[int32]int64 {
	t.Helper()
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		t.Fatalf("list offsets: %v", err)
	}
	out := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// kcatReadCommitted reads partition 0 with kcat (librdkafka) at
// read_committed and checks it reads exactly want; skipped when kcat is
// not installed.
func kcatReadCommitted(ctx context.Context, t *testing.T, addr string, want []string) {
	t.Helper()
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Log("kcat not installed: the librdkafka read_committed read is skipped")
		return
	}
	kctx, kcancel := context.WithTimeout(ctx, 30*time.Second)
	defer kcancel()
	cmd := exec.CommandContext(kctx, kcat, "-C", "-b", addr, "-t", txnDataTopic, "-p", "0", "-o", "beginning", "-e",
		"-X", "isolation.level=read_committed", "-f", "%s\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat read_committed: %v\n%s", err, out)
	}
	got := strings.Fields(string(out))
	if !slices.Equal(got, want) {
		t.Errorf("kcat read_committed partition 0: %q, want %q", got, want)
	}
	t.Logf("kcat read_committed partition 0: %q", got)
}
