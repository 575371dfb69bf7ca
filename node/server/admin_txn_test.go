package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/node"
)

// metricValue is the value of the one series of name with the given
// labels (-1 when absent).
func metricValue(t *testing.T, a *Admin, name string, labels map[string]string) float64 {
	t.Helper()
	f := scrape(t, a)[name]
	for _, m := range f.GetMetric() {
		match := true
		for k, v := range labels {
			match = match && label(m, k) == v
		}
		if !match {
			continue
		}
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	return -1
}

// TestMetricsTransactions reads /metrics after a franz-go producer
// committed one transaction, aborted one and left a third open: begun 3,
// committed 1, aborted 1, one open transaction, and the partition's LSO
// lag is the open transaction's records; once the producer commits it,
// the lag is gone and nothing is open.
func TestMetricsTransactions(t *testing.T) {
	rt := startKafkaTxnServer(t, node.PartitionMarkers{})
	a := startTestAdmin(t, rt)
	addr := rt.KafkaAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kafkaTopic(ctx, t, addr, "tx", 1, nil)
	cl := txnClient(t, addr, "metrics-tid")
	for i, end := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort, kgo.TryCommit} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		if i == 2 {
			break // left open
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			t.Fatalf("end %d: %v", i, err)
		}
	}
	n := map[string]string{"node": "1"}
	tx0 := map[string]string{"node": "1", "topic": "tx", "partition": "0"}
	var lag float64
	for deadline := time.Now().Add(adminTestWait); time.Now().Before(deadline); {
		// The second transaction's abort is counted at its decision; its
		// markers may still be written when EndTransaction returned.
		if lag = metricValue(t, a, "strand_partition_lso_lag_records", tx0); lag == 2 {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling the markers' write, bounded
	}
	for name, want := range map[string]float64{"strand_txn_begun_total": 3, "strand_txn_committed_total": 1,
		"strand_txn_aborted_total": 1, "strand_txn_timed_out_total": 0, "strand_txn_open": 1} {
		if got := metricValue(t, a, name, n); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if lag != 2 {
		t.Errorf("LSO lag of tx/0 with two records open: %v", lag)
	}
	if got := metricValue(t, a, "strand_txn_oldest_open_seconds", n); got < 0 {
		t.Errorf("oldest open age %v", got)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	open := -1.0
	for deadline := time.Now().Add(adminTestWait); time.Now().Before(deadline); {
		lag, open = metricValue(t, a, "strand_partition_lso_lag_records", tx0), metricValue(t, a, "strand_txn_open", n)
		if lag == 0 && open == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling the markers' write and report, bounded
	}
	if lag != 0 || open != 0 {
		t.Errorf("after the commit: LSO lag %v, open %v", lag, open)
	}
}
