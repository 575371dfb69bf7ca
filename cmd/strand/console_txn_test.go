package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The console of `strand dev`, in headless Chromium, shows transactions:
// franz-go (on dev's Kafka port) commits two records on ledger/0 (offsets
// 0, 1, marker 2) and leaves two open (3, 4); group audit committed 1.
// The Transactions section shows 1 open with its age, 1 committed, 0
// aborted, and ledger/0 held back at last stable offset 3 by 2 records;
// the group shows lag 4 and, for read_committed consumers, 2. Before, the
// console had no transaction figures at all.
func TestConsoleTransactionsInBrowser(t *testing.T) {
	skipShort(t)
	chromium := chromiumPath(t)
	port, admin, _ := startDev(t, 3)
	env := []string{"STRAND_BROKERS=127.0.0.1:" + strconv.Itoa(port+devNativePortOffset)}
	runCLI(t, env, "", "topic", "create", "ledger", "--partitions", "1", "--replication-factor", "3")
	openTransaction(t, "127.0.0.1:"+strconv.Itoa(port))
	runCLI(t, env, "", "group", "reset", "audit", "-t", "ledger", "--to-offset", "1", "--execute")
	url := "http://" + admin + "/"
	waitFor(t, "ledger/0 held back in /api/transactions", 30*time.Second, func() error { return heldBack(url, "ledger", 2) })

	dom := runChromium(t, chromium, url, "--dump-dom")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`data-rendered="true"`),
		regexp.MustCompile(`<p data-txn="summary"><b class="txn-open">1</b> open<span> · oldest <b class="txn-oldest">[0-9.]+ s</b></span> · ` +
			`<b class="txn-committed">1</b> committed · <b class="txn-aborted">0</b> aborted \(<b class="txn-timed-out">0</b> timed out\)`),
		regexp.MustCompile(`<tr data-held-back="ledger/0"><td>ledger/0</td><td>5</td><td>3</td><td class="lso-lag">2</td></tr>`),
		regexp.MustCompile(`data-group="audit".*<b class="lag-records">4</b>.*<b class="lag-stable-records">2</b>`),
		regexp.MustCompile(`<td>ledger/0</td><td>1</td><td>5</td><td>4</td><td class="lag-stable">2</td>`),
	} {
		if !want.MatchString(dom) {
			t.Errorf("rendered console lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
	shot := filepath.Join(artifactDir(t), "console-transactions.png")
	runChromium(t, chromium, url, "--screenshot="+shot)
	t.Logf("console screenshot: %s", shot)
}

// openTransaction commits a transaction of two records on ledger/0 and
// leaves a second one open with two more (the client is left unclosed,
// so nothing aborts it before the test ends).
func openTransaction(t *testing.T, kafka string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafka), kgo.TransactionalID("console-tx"), kgo.DefaultProduceTopic("ledger"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	for i := range 2 {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{"debit", "credit"} {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %q: %v", v, err)
			}
		}
		if i == 0 {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// heldBack is nil once /api/transactions lists topic/0 held back by lag
// records.
func heldBack(url, topic string, lag int64) error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url + "api/transactions")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		HeldBack []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			LSOLag    int64  `json:"lso_lag_records"`
		} `json:"held_back"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return err
	}
	for _, h := range body.HeldBack {
		if h.Topic == topic && h.Partition == 0 && h.LSOLag == lag {
			return nil
		}
	}
	return fmt.Errorf("held back %+v: want %s/0 by %d", body.HeldBack, topic, lag)
}
