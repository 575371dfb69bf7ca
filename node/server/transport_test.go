package server

import (
	"log/slog"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
)

// Frames queued for a peer that cannot be reached are discarded at the
// failed dial, not kept to flood it (stale heartbeats and probes ahead of
// its catch-up) when it comes back.
func TestUnreachablePeerQueueIsDiscarded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: every dial is refused
	n := newPeerTransport(1, map[node.NodeID]string{1: "127.0.0.1:0", 2: addr}, slog.New(slog.DiscardHandler), nil)
	defer n.close()
	const frames = 100
	for range frames {
		n.Send(2, []byte("stale frame"))
	}
	p := (*n.peers.Load())[2]
	deadline := time.Now().Add(10 * time.Second)
	for len(p.queue) > 0 || p.queuedBytes.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d frames still queued for an unreachable peer after 10 s", len(p.queue))
		}
		time.Sleep(10 * time.Millisecond) // polling the sender goroutine's progress
	}
	if got := p.dropped.Load(); got != frames {
		t.Fatalf("%d frames counted dropped, want %d", got, frames)
	}
}

// TestTransportLearnsPeers: addPeers starts a sender for a node that
// joined after start and replaces the sender of a node registered again
// at a new address (the old one stops); a known address changes nothing.
func TestTransportLearnsPeers(t *testing.T) {
	n := newPeerTransport(1, map[node.NodeID]string{1: "127.0.0.1:1", 2: "127.0.0.1:2"}, slog.New(slog.DiscardHandler), nil)
	defer n.close()
	first := (*n.peers.Load())[2]
	n.addPeers(map[node.NodeID]string{2: "127.0.0.1:2", 4: "127.0.0.1:4"})
	peers := *n.peers.Load()
	if peers[2] != first || peers[4] == nil || peers[4].addr != "127.0.0.1:4" || peers[1] != nil {
		t.Fatalf("after a join: peers %v", peers)
	}
	n.addPeers(map[node.NodeID]string{2: "127.0.0.1:22"})
	if p := (*n.peers.Load())[2]; p == first || p.addr != "127.0.0.1:22" {
		t.Fatalf("after a new address: peer 2 at %s", p.addr)
	}
	select {
	case <-first.stop:
	default:
		t.Fatalf("the old sender of peer 2 was not stopped")
	}
}

// TestTransportLearnsPeerFromHello: a peer Hello naming a node this node
// has no address for starts a sender to the address the Hello gives (a
// node that missed a join must answer the joined node once it leads the
// metadata group); a known node's address is never changed by a Hello.
func TestTransportLearnsPeerFromHello(t *testing.T) {
	n := newPeerTransport(1, map[node.NodeID]string{1: "127.0.0.1:1", 2: "127.0.0.1:2"}, slog.New(slog.DiscardHandler), nil)
	defer n.close()
	if n.addr != "127.0.0.1:1" {
		t.Fatalf("own address %q, want the configuration's", n.addr)
	}
	known := (*n.peers.Load())[2]
	n.learnPeer(5, "127.0.0.1:5")
	n.learnPeer(2, "127.0.0.1:9")
	n.learnPeer(6, "")
	peers := *n.peers.Load()
	if peers[5] == nil || peers[5].addr != "127.0.0.1:5" {
		t.Fatalf("peer 5 not learned from its Hello: %v", peers)
	}
	if peers[2] != known || peers[2].addr != "127.0.0.1:2" || peers[6] != nil {
		t.Fatalf("a Hello changed a known peer or added one without an address: %v", peers)
	}
}

// Reconnect delays are clientlib's jittered backoff: the wait after the
// n-th failed dial in a row lies in [step/2, step], step = 20 ms doubled
// n-1 times up to 1 s, and draws differ, so nodes restarted together do
// not redial in lock-step.
func TestReconnectDelayJittered(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for failures := 1; failures <= 10; failures++ {
		step := min(reconnectBackoffMin<<(failures-1), reconnectBackoffMax)
		seen := map[time.Duration]bool{}
		for range 100 {
			d := peerReconnectBackoff.Delay(failures, rng)
			if d < step/2 || d > step {
				t.Fatalf("after %d failures: delay %v outside [%v, %v]", failures, d, step/2, step)
			}
			seen[d] = true
		}
		if len(seen) < 50 {
			t.Fatalf("after %d failures: %d distinct delays in 100 draws: not jittered", failures, len(seen))
		}
	}
}

// unreachableFor counts from the first failed dial to a peer, is 0 once
// the peer answers, and counts again from the moment a connection to it is
// lost and cannot be redialled; this node and unknown ids are never
// unreachable. The Kafka listener leaves out of Metadata a peer
// unreachable for kafkaBrokerDownAfter. Before, a lost connection never
// counted: a peer that was connected and then died stayed "reachable".
func TestTransportUnreachableFor(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: every dial is refused
	n := newPeerTransport(1, map[node.NodeID]string{1: "127.0.0.1:0", 2: addr}, slog.New(slog.DiscardHandler), nil)
	defer n.close()
	waitTransport(t, "peer 2 unreachable", func() bool { return n.unreachableFor(2) > 0 })
	if n.unreachableFor(1) != 0 || n.unreachableFor(9) != 0 {
		t.Fatalf("this node %v, an unknown node %v: want 0", n.unreachableFor(1), n.unreachableFor(9))
	}
	back, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen at %s again: %v", addr, err)
	}
	conns := make(chan net.Conn, 64)
	go answerHellos(back, conns)
	waitTransport(t, "peer 2 reachable again", func() bool { return n.unreachableFor(2) == 0 })
	back.Close() // the peer dies: its listener and connections go
	for len(conns) > 0 {
		(<-conns).Close()
	}
	waitTransport(t, "peer 2 unreachable after its connection was lost", func() bool {
		for len(conns) > 0 { // a redial that raced the close
			(<-conns).Close()
		}
		return n.unreachableFor(2) > 0
	})
}

// answerHellos accepts connections on ln, answers each one's Hello as a
// peer does and hands it to conns, until ln closes.
func answerHellos(ln net.Listener, conns chan<- net.Conn) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		var hello strandpb.Request
		if _, err := frame.Decode(c, nil, frame.BytesMaxDefault, &hello); err != nil {
			c.Close()
			continue
		}
		out, _ := frame.Append(nil, &strandpb.Response{Body: &strandpb.Response_Hello{Hello: &strandpb.HelloResponse{}}})
		c.Write(out)
		conns <- c
	}
}

// waitTransport polls cond for up to 20 s (the sender's reconnect
// backoff), failing the test after.
func waitTransport(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20 s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling the sender goroutine's progress
	}
}
