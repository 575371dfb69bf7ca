package clientlib

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
	"google.golang.org/protobuf/proto"
)

// throttleWorld is a groupWorld that models connections
// (clientcore.Conns): its node n1, the group's coordinator and t/0's
// leader, answers every fetch throttled for throttle and then reads
// nothing more on that connection until the throttle ends, as
// node/server's listener pauses its reader.
type throttleWorld struct {
	*groupWorld
	throttle time.Duration
	conns    map[uint64]*throttleConn
	// beats are the virtual times the node read a heartbeat; throttled
	// how many fetches it answered with a throttle;
	// intoPause the requests the client wrote into a paused connection
	// after the throttled answer reached it (it must hold them: KIP-219).
	beats                []time.Duration
	throttled, intoPause int
}

type throttleConn struct {
	open       bool
	pausedTill time.Duration // the node reads nothing on it before
	told       time.Duration // when the client had the throttled answer
}

func newThrottleWorld(t *testing.T, throttle time.Duration) *throttleWorld {
	return &throttleWorld{groupWorld: newGroupWorld(t), throttle: throttle, conns: map[uint64]*throttleConn{}}
}

func (w *throttleWorld) Dial(string) uint64 {
	id := uint64(len(w.conns) + 1)
	w.conns[id] = &throttleConn{open: true}
	return id
}

func (w *throttleWorld) Open(id uint64) bool { return w.conns[id].open }
func (w *throttleWorld) Close(id uint64)     { w.conns[id].open = false }

func (w *throttleWorld) CallOn(id uint64, addr string, req *strandpb.Request, done func(*strandpb.Response, error)) {
	c := w.conns[id]
	if !c.open {
		w.After(time.Millisecond, func() { done(nil, &ConnError{Addr: addr, Sent: true, Err: errors.New("closed")}) })
		return
	}
	if req.GetHello() != nil {
		resp := &strandpb.Response{Body: &strandpb.Response_Hello{Hello: &strandpb.HelloResponse{NodeId: 1, Version: protocolVersionMin}}}
		w.After(time.Millisecond, func() { done(resp, nil) })
		return
	}
	if w.now < c.pausedTill {
		if w.now >= c.told {
			w.intoPause++
		}
		w.After(c.pausedTill-w.now, func() { w.read(c, addr, req, done) })
		return
	}
	w.read(c, addr, req, done)
}

// read is the node reading req on c and answering it.
func (w *throttleWorld) read(c *throttleConn, addr string, req *strandpb.Request, done func(*strandpb.Response, error)) {
	if req.GetGroupHeartbeat() != nil {
		w.beats = append(w.beats, w.now)
	}
	resp := w.answer(addr, req)
	if req.GetFetch() != nil {
		resp = proto.Clone(resp).(*strandpb.Response)
		resp.GetFetch().ThrottleMs = int32(w.throttle.Milliseconds())
		c.pausedTill, c.told = w.now+w.throttle, w.now+2*time.Millisecond
		w.throttled++
	}
	w.After(2*time.Millisecond, func() { done(resp, nil) })
}

// A group member whose coordinator also leads the partition it fetches,
// and throttles every fetch for 5 s (a fetch quota), keeps heart-beating
// within its 1 s session and keeps its membership: its coordinator
// requests go on a connection of their own (coordconn.go), which the
// fetch throttle does not pause. The throttle still holds the fetches:
// nothing is written into a paused connection, and the member opens two
// connections, no more. Before, the heartbeats waited behind each fetch
// throttle on the one shared connection, 5 s without one, and the
// member's session lapsed (the simulator's seed 153 of an earlier trace:
// the group never converged).
func TestSimulatedCoordinatorNotHeldByFetchThrottle(t *testing.T) {
	w := newThrottleWorld(t, 5*time.Second)
	c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	var lost [][]TopicPartition
	g, err := NewGroupConsumer(c, "g", []string{"t"}, AutoCommitInterval(0),
		GroupConsumerOpts(FetchMaxWait(100*time.Millisecond)), OnLost(func(ps []TopicPartition) { lost = append(lost, ps) }))
	if err != nil {
		t.Fatal(err)
	}
	const run = 12 * time.Second
	c.SimRun(func(ctx context.Context) {
		for w.now < run {
			g.Poll(ctx)
		}
	}, func() {})
	w.run(t, 1000000)
	if w.throttled < 2 {
		t.Fatalf("%d fetches throttled: the throttle never bit", w.throttled)
	}
	if w.intoPause > 0 {
		t.Fatalf("%d requests written into a connection the node paused: the throttle was not honoured", w.intoPause)
	}
	if len(w.beats) == 0 {
		t.Fatal("no heartbeat reached the coordinator")
	}
	last := w.beats[0]
	for _, at := range append(w.beats[1:], run) {
		if at-last > time.Second {
			t.Fatalf("no heartbeat read from %v to %v (session 1 s): held behind the fetch throttle", last, at)
		}
		last = at
	}
	if len(lost) > 0 {
		t.Fatalf("the member lost %v: its session lapsed", lost)
	}
	if len(w.conns) != 2 {
		t.Fatalf("%d connections opened; want 2 (data and coordinator)", len(w.conns))
	}
}
