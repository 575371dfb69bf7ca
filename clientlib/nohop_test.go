package clientlib_test

import (
	"bytes"
	"errors"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
	"github.com/strandlog/strand/proto/strandpb"
)

// clientGoroutines counts the goroutines running clientlib's own code (not
// the fake cluster's, not a test's).
func clientGoroutines(t *testing.T) int {
	t.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 2); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range strings.Split(buf.String(), "\n\n") {
		if strings.Contains(g, "strand/clientlib.") && !strings.Contains(g, "testing.tRunner") {
			n++
		}
	}
	return n
}

// Produce requests in flight cost no goroutine each: with five requests
// held at the node, the client runs no more goroutines than with none (its
// loop, its promise goroutine, a sender per node, a reader and a watchdog
// per connection). Before, each request in flight had a goroutine of its
// own awaiting the answer, with a timer and a ticker.
func TestRequestsInFlightStartNoGoroutines(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Nodes(1), fake.Topic("t", 1)}, smallBatches...)
	// Once first, so the connection and the node's sender exist.
	if err := client.ProduceSync(ctx, &clientlib.Record{Topic: "t", Value: []byte("warm")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	before := clientGoroutines(t)
	hold := make(chan struct{})
	var held atomic.Int32
	cluster.Control(func(_ uint64, req *strandpb.Request) (fake.Action, bool) {
		if req.GetProduce() == nil {
			return fake.Action{}, false
		}
		held.Add(1)
		return fake.Action{Hold: hold}, true
	})
	const n = 5 // the window's batches in flight: one request each
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		client.Produce(ctx, &clientlib.Record{Topic: "t", Value: []byte{byte(i)}}, func(_ *clientlib.Record, err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		})
	}
	for i := 0; held.Load() < n; i++ {
		if i == 30_000 {
			t.Fatalf("%d produce requests reached the node, want %d", held.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
	during := clientGoroutines(t)
	close(hold)
	wg.Wait()
	// A metadata refresh may be running: slack of one.
	if during > before+1 {
		t.Fatalf("%d client goroutines with %d requests in flight, %d with none", during, n, before)
	}
}

// A call past its request timeout fails with a TIMEOUT *Error (its outcome
// unknown), though no timer of its own waits for it: the connection's
// watchdog keeps every call's deadline. Stall detection is off, so only
// the deadline can end the call while the node holds it.
func TestRequestTimeoutKeptByWatchdog(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Nodes(1), fake.Topic("t", 1)},
		clientlib.RequestTimeout(300*time.Millisecond), clientlib.StallTimeout(0), clientlib.MaxRetries(0))
	if _, err := client.ListTopics(ctx); err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	cluster.Control(func(_ uint64, req *strandpb.Request) (fake.Action, bool) {
		return fake.Action{Hold: hold}, true
	})
	_, err := client.ListTopics(ctx)
	var se *clientlib.Error
	if !errors.As(err, &se) || se.Code != strandpb.ErrorCode_ERROR_CODE_TIMEOUT {
		t.Fatalf("a held call ended with %v, want a TIMEOUT error", err)
	}
}
