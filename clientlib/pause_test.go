package clientlib_test

import (
	"context"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
	"github.com/strandlog/strand/proto/strandpb"
)

// A node that stops answering (as a SIGSTOPped process: connections stay
// open, nothing comes back) is given up on after StallTimeout, not the
// request timeout, and keyless records go to partitions whose leaders
// answer: 300 records are acknowledged, all on other nodes' partitions.
// Before, the sticky partitioner stayed on the paused node's partition once
// its window filled (no batch sealed, so it never moved on) and nothing was
// acknowledged until the request timeout (issue 7, finding 11).
func TestPausedNodeKeylessRecordsFlowElsewhere(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Nodes(3), fake.Topic("t", 6)},
		clientlib.StallTimeout(300*time.Millisecond), clientlib.RequestTimeout(30*time.Second),
		clientlib.DeliveryTimeout(time.Minute), clientlib.Linger(time.Millisecond))
	paused := cluster.Leader("t", 0)
	resume := make(chan struct{})
	cluster.Control(func(node uint64, req *strandpb.Request) (fake.Action, bool) {
		return fake.Action{Hold: resume}, node == paused
	})
	defer close(resume) // before the cluster closes: held calls end

	const want = 300
	acked := make(chan *clientlib.Record, 4*want)
	sendCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for i := 0; sendCtx.Err() == nil && i < 100*want; i++ {
			client.Produce(sendCtx, &clientlib.Record{Topic: "t", Value: []byte("v")}, func(r *clientlib.Record, err error) {
				if err == nil {
					select {
					case acked <- r:
					default: // the test has seen enough
					}
				}
			})
		}
	}()
	for n := 0; n < want; n++ {
		select {
		case r := <-acked:
			if cluster.Leader("t", r.Partition) == paused {
				t.Fatalf("record acknowledged by the paused node's partition %d", r.Partition)
			}
		case <-ctx.Done():
			t.Fatalf("%d of %d keyless records acknowledged while node %d is paused", n, want, paused)
		}
	}
}
