package clientlib

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// refusingWorld is a scriptedWorld whose every node refuses connections
// (a *ConnError never sent) while down: a cluster whose processes are
// all restarting.
type refusingWorld struct {
	scriptedWorld
	down bool
}

func (w *refusingWorld) Call(addr string, req *strandpb.Request, done func(*strandpb.Response, error)) {
	if w.down {
		w.After(time.Millisecond, func() { done(nil, &ConnError{Addr: addr, Err: errors.New("connection refused")}) })
		return
	}
	w.scriptedWorld.Call(addr, req, done)
}

// TestSimulatedClusterRestartIsRetried: a Client that a node answered
// before retries a request every node refuses (the whole cluster
// restarting) until it comes back, where a Client that never reached the
// cluster fails at once with an *UnreachableError (a wrong address).
// Before, both failed at once: with connections modelled in the
// simulator, transactional producers gave up 217 times in 30 seeds on
// "cannot reach the cluster" during whole-cluster power cuts, while the
// producer's own loop waited (judgeWaiting).
func TestSimulatedClusterRestartIsRetried(t *testing.T) {
	for _, reachedFirst := range []bool{true, false} {
		w := &refusingWorld{}
		w.answer = func(string, *strandpb.Request) *strandpb.Response { return twoNodeMetadata() }
		c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(1),
			RetryBackoff(10*time.Millisecond, 100*time.Millisecond), MaxRetries(50))
		if err != nil {
			t.Fatal(err)
		}
		var first, second error
		finished := false
		c.SimRun(func(ctx context.Context) {
			if reachedFirst {
				_, first = c.Metadata(ctx)
			}
			w.down = true
			w.After(500*time.Millisecond, func() { w.down = false })
			_, second = c.Metadata(ctx)
		}, func() { finished = true })
		w.run(t, 100000)
		if !finished || first != nil {
			t.Fatalf("reached first %v: finished=%v, first Metadata %v", reachedFirst, finished, first)
		}
		var ue *UnreachableError
		switch {
		case reachedFirst && second != nil:
			t.Fatalf("Metadata while the cluster restarts, after it answered once: %v; want it retried until the cluster is back", second)
		case !reachedFirst && !errors.As(second, &ue):
			t.Fatalf("Metadata of a Client that never reached the cluster: %v; want an *UnreachableError at once", second)
		}
	}
}
