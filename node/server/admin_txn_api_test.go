package server

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/node"
)

// The console's API shows transactions: a franz-go producer commits two
// records on tx/0 (offsets 0, 1, marker 2), aborts one (3, marker 4) and
// leaves two open (5, 6), and group g committed offset 1. Then
// /api/transactions counts 3 begun, 1 committed, 1 aborted, 1 open with its
// age, and lists tx/0 held back at LSO 5 (2 records); /api/topics has the
// same LSO and LSO lag; /api/groups and /metrics give g's lag to the
// high-water mark (6) and to the LSO (4, a read_committed consumer's).
// Once the producer commits (its marker at 7), nothing is open or held
// back and both lags are 7.
func TestAdminAPITransactions(t *testing.T) {
	rt := startKafkaTxnServer(t, node.PartitionMarkers{})
	a := startTestAdmin(t, rt)
	addr := rt.KafkaAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kafkaTopic(ctx, t, addr, "tx", 1, nil)
	cl := txnClient(t, addr, "console-tid")
	for i, txn := range []struct {
		n   int
		end kgo.TransactionEndTry
	}{{2, kgo.TryCommit}, {1, kgo.TryAbort}, {2, kgo.TryCommit}} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for range txn.n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		if i == 2 {
			break // left open
		}
		if err := cl.EndTransaction(ctx, txn.end); err != nil {
			t.Fatalf("end %d: %v", i, err)
		}
	}
	c := newTestClient(t, rt)
	if err := c.CommitOffsets(ctx, "g", map[clientlib.TopicPartition]int64{{Topic: "tx", Partition: 0}: 1}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	var txns apiTransactions
	heldBack := func(want []apiHeldBack) error {
		getJSONInto(t, a.URL()+"api/transactions", &txns)
		if !slices.Equal(txns.HeldBack, want) {
			return fmt.Errorf("held back %+v, want %+v", txns.HeldBack, want)
		}
		return nil
	}
	open := []apiHeldBack{{Topic: "tx", Partition: 0, HighWatermark: 7, LastStableOffset: 5, LSOLag: 2}}
	pollAdmin(t, func() error { return heldBack(open) }) // the abort's marker is written after EndTxn answers
	want := apiTxnCounts{Begun: 3, Committed: 1, Aborted: 1}
	if txns.apiTxnCounts != want || txns.Open != 1 || txns.OldestOpenSeconds < 0 || len(txns.Nodes) != 1 ||
		txns.Nodes[0].Node != 1 || txns.Nodes[0].Open != 1 || txns.Nodes[0].apiTxnCounts != want {
		t.Errorf("transactions with one open: %+v", txns)
	}
	var topics apiTopics
	getJSONInto(t, a.URL()+"api/topics", &topics)
	if p, ok := topicPartition(topics, "tx", 0); !ok || p.LastStableOffset != 5 || p.LSOLag != 2 || p.HighWatermark != 7 {
		t.Errorf("topics: tx/0 %+v", p)
	}
	checkGroupLag(t, a, 6, 4)

	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	pollAdmin(t, func() error {
		if err := heldBack([]apiHeldBack{}); err != nil || txns.Open != 0 {
			return fmt.Errorf("after the commit: %+v (%v)", txns, err)
		}
		return nil
	})
	if txns.Committed != 2 || txns.OldestOpenSeconds != 0 {
		t.Errorf("after the commit: %+v", txns)
	}
	checkGroupLag(t, a, 7, 7) // the commit marker at 7
}

// pollAdmin retries check until it passes, failing after adminTestWait.
func pollAdmin(t *testing.T, check func() error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(adminTestWait); time.Now().Before(deadline); {
		if err = check(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond) // polling a marker's write, bounded
	}
	t.Fatal(err)
}

// topicPartition finds topic/p in an /api/topics answer.
func topicPartition(topics apiTopics, topic string, p int32) (apiPartition, bool) {
	for _, tp := range topics.Topics {
		for _, ap := range tp.Partitions {
			if tp.Name == topic && ap.Partition == p {
				return ap, true
			}
		}
	}
	return apiPartition{}, false
}

// checkGroupLag checks group g's lag on tx/0 to the high-water mark and
// to the LSO in /api/groups and /metrics.
func checkGroupLag(t *testing.T, a *Admin, lag, stable int64) {
	t.Helper()
	var groups apiGroups
	getJSONInto(t, a.URL()+"api/groups", &groups)
	i := slices.IndexFunc(groups.Groups, func(g apiGroup) bool { return g.ID == "g" })
	if i < 0 || len(groups.Groups[i].Partitions) != 1 {
		t.Fatalf("groups: %+v", groups)
	}
	g := groups.Groups[i]
	p := g.Partitions[0]
	if g.LagRecords != lag || g.LagStableRecords != stable || p.Lag != lag || p.LagStable != stable ||
		p.LastStableOffset != p.HighWatermark-(lag-stable) {
		t.Errorf("group g: want lag %d, to the LSO %d: %+v", lag, stable, g)
	}
	labels := map[string]string{"group": "g", "topic": "tx", "partition": "0"}
	if got := metricValue(t, a, "strand_group_lag_records", labels); got != float64(lag) {
		t.Errorf("strand_group_lag_records = %v, want %d", got, lag)
	}
	if got := metricValue(t, a, "strand_group_lag_stable_records", labels); got != float64(stable) {
		t.Errorf("strand_group_lag_stable_records = %v, want %d", got, stable)
	}
}
