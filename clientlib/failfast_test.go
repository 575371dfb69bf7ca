package clientlib_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/node/server"
)

// startServer starts a one-node cluster (a real node/server with the
// metadata group) on a free loopback port and returns its address.
func startServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	srv, err := server.Start(server.Config{
		Core:     node.Config{ID: 1, Nodes: []node.Peer{{ID: 1, Address: addr}}},
		DataDir:  t.TempDir(),
		Listener: ln,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return addr
}

// realClient connects to a real server and waits (bounded) until its
// metadata group has a leader.
func realClient(t *testing.T, addr string, opts ...clientlib.Opt) (*clientlib.Client, context.Context) {
	t.Helper()
	base := []clientlib.Opt{clientlib.SeedAddresses(addr), clientlib.RandSeed(1),
		clientlib.RetryBackoff(5*time.Millisecond, 50*time.Millisecond)}
	client, err := clientlib.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	for {
		info, err := client.Metadata(ctx)
		if err == nil && info.ControllerID != 0 {
			return client, ctx
		}
		if ctx.Err() != nil {
			t.Fatalf("no metadata leader before the deadline: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // polling a real process, bounded by ctx
	}
}

// closedAddr is a loopback address nobody listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// outcome produces r and waits for its promise, failing the test when
// none comes within wait (a bound, far above what the fix needs: without
// it the promise came after the 2-minute delivery timeout).
func outcome(t *testing.T, client *clientlib.Client, r *clientlib.Record, wait time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	client.Produce(context.Background(), r, func(_ *clientlib.Record, err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-time.After(wait):
		t.Fatalf("no outcome for a record to %q within %v", r.Topic, wait)
		return nil
	}
}

// A producer whose only seed refuses connections fails its records with
// an *UnreachableError naming the address, instead of blocking for the
// delivery timeout and then reporting unknown_topic_or_partition (issue 7,
// finding 5).
func TestProduceUnreachableSeedFailsFast(t *testing.T) {
	addr := closedAddr(t)
	client, err := clientlib.NewClient(clientlib.SeedAddresses(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	err = outcome(t, client, &clientlib.Record{Topic: "t", Value: []byte("x")}, 10*time.Second)
	var ue *clientlib.UnreachableError
	if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), "cannot reach the cluster at "+addr+": ") {
		t.Fatalf("got %v, want cannot reach the cluster at %s", err, addr)
	}
	if _, err := client.Metadata(context.Background()); !errors.As(err, &ue) {
		t.Fatalf("Metadata: got %v, want an *UnreachableError", err)
	}
}

// An address that is not a Strand node (here a web server answering with
// an HTML error page, as nginx does) is reported as such, not as "frame
// larger than the limit: 1008813135 bytes" retried until the retries run
// out (finding 5).
func TestNotStrandEndpoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			nc.Read(make([]byte, 512))
			io.WriteString(nc, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/html\r\n\r\n<!DOCTYPE html><html></html>")
			nc.Close()
		}
	}()
	addr := ln.Addr().String()
	client, err := clientlib.NewClient(clientlib.SeedAddresses(addr), clientlib.RetryBackoff(time.Second, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = client.Metadata(ctx)
	var ns *clientlib.NotStrandError
	if !errors.As(err, &ns) || !strings.HasPrefix(err.Error(), addr+" does not speak the Strand protocol (frame: frame larger than the limit") {
		t.Fatalf("got %v, want %s does not speak the Strand protocol", err, addr)
	}
}

// A record for a topic the cluster does not have fails fast with
// ErrUnknownTopic; with UnknownTopicRetries(-1) it waits for the topic
// and is written once it is created (finding 5).
func TestUnknownTopicFailsFastUnlessWaiting(t *testing.T) {
	addr := startServer(t)
	client, ctx := realClient(t, addr)
	err := outcome(t, client, &clientlib.Record{Topic: "missing", Value: []byte("x")}, 10*time.Second)
	if !errors.Is(err, clientlib.ErrUnknownTopic) {
		t.Fatalf("got %v, want ErrUnknownTopic", err)
	}

	waiter, _ := realClient(t, addr, clientlib.UnknownTopicRetries(-1))
	done := make(chan error, 1)
	waiter.Produce(ctx, &clientlib.Record{Topic: "later", Value: []byte("x")}, func(_ *clientlib.Record, err error) { done <- err })
	if err := client.CreateTopic(ctx, "later", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("waiting producer: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the waiting record got no outcome")
	}
}

// Definite refusals from a real node fail at once, without the retries
// that took ~13 s: a replication factor above the cluster's size, a
// delete of a missing topic, a produce, list offsets or consume of a
// partition that does not exist (finding 5). The bound on each call is the context: a retried call would
// run through MaxRetries backoffs, far past it.
func TestDefiniteAdminErrorsFailAtOnce(t *testing.T) {
	addr := startServer(t)
	client, ctx := realClient(t, addr, clientlib.RetryBackoff(time.Second, time.Second), clientlib.ManualPartitioner())
	if err := client.CreateTopic(ctx, "rf", 1, 3, nil); !errors.Is(err, clientlib.ErrInvalidReplicationFactor) {
		t.Fatalf("create rf 3 on 1 node: %v, want ErrInvalidReplicationFactor", err)
	}
	if err := client.DeleteTopic(ctx, "missing"); !errors.Is(err, clientlib.ErrTopicNotFound) || !errors.Is(err, clientlib.ErrUnknownTopic) {
		t.Fatalf("delete missing: %v, want ErrTopicNotFound", err)
	}
	if err := client.CreateTopic(ctx, "two", 2, 1, nil); err != nil {
		t.Fatal(err)
	}
	err := outcome(t, client, &clientlib.Record{Topic: "two", Partition: 5, Value: []byte("x")}, 5*time.Second)
	if !errors.Is(err, clientlib.ErrUnknownTopic) {
		t.Fatalf("produce to partition 5 of 2: %v", err)
	}
	los, err := client.ListOffsets(ctx, "two", []int32{5}, clientlib.OffsetLatest())
	if err != nil || !errors.Is(los[0].Err, clientlib.ErrUnknownTopic) || clientlib.IsRetriable(los[0].Err) {
		t.Fatalf("list offsets of partition 5 of 2: %v %+v, want a definite ErrUnknownTopic", err, los)
	}
	k := clientlib.NewConsumer(client)
	k.Assign("two", 5, clientlib.OffsetEarliest())
	if err := k.Poll(ctx).FirstErr(); !errors.Is(err, clientlib.ErrUnknownTopic) || clientlib.IsRetriable(err) {
		t.Fatalf("consume partition 5 of 2: %v, want a definite ErrUnknownTopic", err)
	}
}
