package server

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"github.com/strandlog/strand/node"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
)

// peerTransport is the real Network: per peer one outbound TCP connection
// fed by a bounded queue. Send never blocks: a full queue drops the frame
// (raft retransmits). Frames arrive at peers through their listener, as
// Request{raft} after a Hello naming this node (see nativeConn).
type peerTransport struct {
	self   node.NodeID
	addr   string // this node's own address, named in its peer Hellos
	logger *slog.Logger
	// peers is replaced whole (copy on write) when a node joins, so Send
	// reads it without a lock; mu orders the writers and close.
	peers  atomic.Pointer[map[node.NodeID]*peerLink]
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
	once   sync.Once
	faults faultState    // injected faults: only with -tags faultinject
	stop   chan struct{} // closed by close
	tls    *tlsState     // nil: plaintext peers; else mutual TLS by node id (tls.go)
}

// peerLink is the outbound side towards one peer.
type peerLink struct {
	net         *peerTransport
	id          node.NodeID
	addr        string
	queue       chan []byte
	queuedBytes atomic.Int64
	dropped     atomic.Uint64
	stop        chan struct{}
	// downSince is when the current run of failed dials began (Unix
	// nanoseconds); 0 while connected and before the first dial.
	downSince atomic.Int64
}

var _ node.Network = (*peerTransport)(nil)

// newPeerTransport starts one sender goroutine per peer (self excluded);
// with tls non-nil every peer connection is mutual TLS.
func newPeerTransport(self node.NodeID, addrs map[node.NodeID]string, logger *slog.Logger, tls *tlsState) *peerTransport {
	n := &peerTransport{self: self, addr: addrs[self], logger: logger, stop: make(chan struct{}), tls: tls}
	n.peers.Store(&map[node.NodeID]*peerLink{})
	n.faults.start(n.stop)
	n.addPeers(addrs)
	return n
}

// addPeers starts a sender for every node of addrs not known yet, or
// known at another address (self excluded): the peers of the
// configuration at start, then the nodes the metadata group registers (a
// node that joined, or re-registered at a new address: its old sender
// stops, dropping what it had queued).
func (n *peerTransport) addPeers(addrs map[node.NodeID]string) {
	n.addPeersIf(addrs, false)
}

// learnPeer starts a sender for node id at addr, the address its own peer
// Hello named, when this node knows no address for it: a node that missed
// id's join (it was wiped and restarted over its static peers) can then
// answer id while id leads the metadata group, catch up, and learn the
// registration. A known address is never changed this way: registrations
// in the metadata move peers.
func (n *peerTransport) learnPeer(id node.NodeID, addr string) {
	n.addPeersIf(map[node.NodeID]string{id: addr}, true)
}

// addPeersIf is addPeers; onlyNew leaves nodes with a sender alone.
func (n *peerTransport) addPeersIf(addrs map[node.NodeID]string, onlyNew bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	old := *n.peers.Load()
	ids := make([]node.NodeID, 0, len(addrs))
	for id := range addrs {
		if id != n.self && addrs[id] != "" && (old[id] == nil || !onlyNew && old[id].addr != addrs[id]) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 || n.closed {
		return
	}
	slices.Sort(ids)
	peers := make(map[node.NodeID]*peerLink, len(old)+len(ids))
	for id, p := range old {
		peers[id] = p
	}
	var stopped []*peerLink
	for _, id := range ids {
		p := &peerLink{net: n, id: id, addr: addrs[id],
			queue: make(chan []byte, peerQueueFramesMax), stop: make(chan struct{})}
		if prev := old[id]; prev != nil {
			stopped = append(stopped, prev)
			n.logger.Info("peer address changed", slog.Uint64("peer", uint64(id)), slog.String("from", prev.addr),
				slog.String("address", p.addr))
		} else if len(old) > 0 {
			n.logger.Info("peer added", slog.Uint64("peer", uint64(id)), slog.String("address", addrs[id]))
		}
		peers[id] = p
		n.wg.Add(1)
		go p.run()
	}
	n.peers.Store(&peers)
	for _, p := range stopped {
		close(p.stop) // after the swap: Send no longer finds it
	}
}

// Send queues frame for the peer, or drops it when the queue is full or
// the peer unknown.
func (n *peerTransport) Send(to node.NodeID, frame []byte) {
	p := (*n.peers.Load())[to]
	if p == nil || n.faults.isolated() {
		return
	}
	if p.queuedBytes.Load()+int64(len(frame)) > peerQueueBytesMax {
		p.dropped.Add(1)
		return
	}
	select {
	case p.queue <- frame:
		p.queuedBytes.Add(int64(len(frame)))
	default:
		p.dropped.Add(1)
	}
}

// droppedTotal is the number of frames dropped on full queues so far.
func (n *peerTransport) droppedTotal() uint64 {
	var total uint64
	for _, p := range *n.peers.Load() {
		total += p.dropped.Load()
	}
	return total
}

// unreachableFor is how long peer id has failed every dial: 0 while it
// is connected, before the first dial, and for this node and unknown ids.
func (n *peerTransport) unreachableFor(id node.NodeID) time.Duration {
	p := (*n.peers.Load())[id]
	if p == nil {
		return 0
	}
	since := p.downSince.Load()
	if since == 0 {
		return 0
	}
	return time.Since(time.Unix(0, since))
}

// close stops every sender and waits for them.
func (n *peerTransport) close() {
	n.once.Do(func() {
		close(n.stop)
		n.mu.Lock()
		n.closed = true
		n.mu.Unlock()
		for _, p := range *n.peers.Load() {
			close(p.stop)
		}
		n.wg.Wait()
	})
}

// run connects, sends, and reconnects with backoff until stopped. A peer
// that cannot be reached is logged at debug (peers start and stop in any
// order), and at warn once it has been unreachable for
// peerUnreachableWarn.
func (p *peerLink) run() {
	defer p.net.wg.Done()
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	failures := 0              // dials failed in a row
	var failingSince time.Time // zero while connected
	warned := false
	log := p.net.logger.With(slog.Uint64("peer", uint64(p.id)), slog.String("address", p.addr))
	for {
		nc, err := p.dial()
		if err != nil {
			p.discardQueued()
			switch {
			case failingSince.IsZero():
				log.Debug("peer unreachable; retrying", slog.Any("err", err))
				failingSince = time.Now()
				p.downSince.Store(failingSince.UnixNano())
			case !warned && time.Since(failingSince) > peerUnreachableWarn:
				log.Warn("peer unreachable; retrying", slog.Any("err", err),
					slog.Duration("for", time.Since(failingSince).Round(time.Second)))
				warned = true
			}
			failures++
			timer := time.NewTimer(peerReconnectBackoff.Delay(failures, rng))
			select {
			case <-p.stop:
				timer.Stop()
				return
			case <-timer.C:
			}
			continue
		}
		if warned {
			log.Info("peer reachable again")
		} else {
			log.Debug("peer connected")
		}
		failingSince, warned, failures = time.Time{}, false, 0
		p.downSince.Store(0)
		err = p.pump(nc)
		nc.Close()
		if err == nil {
			return // stopped
		}
		log.Debug("peer connection lost; reconnecting", slog.Any("err", err))
		failingSince = time.Now()
		p.downSince.Store(failingSince.UnixNano()) // 0 again once a redial succeeds
	}
}

// peerReconnectBackoff is the wait before redialling an unreachable peer:
// clientlib's Backoff, the jittered backoff every retry of this module
// waits, doubling from reconnectBackoffMin to reconnectBackoffMax. Its
// equal jitter keeps nodes restarted together from redialling each other
// in lock-step.
var peerReconnectBackoff = clientlib.Backoff{Base: reconnectBackoffMin, Max: reconnectBackoffMax}

// discardQueued drops the frames queued for a peer that cannot be reached:
// by the time it is back they are stale (heartbeats, probes of old rounds;
// raft re-sends what still matters), and a queue full of them would hold
// back, or push out at its bounds, the catch-up the peer needs first.
func (p *peerLink) discardQueued() {
	for range cap(p.queue) {
		select {
		case f := <-p.queue:
			p.queuedBytes.Add(-int64(len(f)))
			p.dropped.Add(1)
		default:
			return
		}
	}
}

// dial connects and performs the Hello, naming this node as a peer.
func (p *peerLink) dial() (net.Conn, error) {
	nc, err := p.net.dialPeer(p.id, p.addr)
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(dialTimeout))
	hello := &strandpb.Request{Body: &strandpb.Request_Hello{Hello: &strandpb.HelloRequest{
		VersionMin: protocolVersion, VersionMax: protocolVersion,
		ClientId: fmt.Sprintf("strand-node-%d", p.net.self), PeerNodeId: uint64(p.net.self), PeerAddress: p.net.addr}}}
	out, err := frame.Append(nil, hello)
	if err == nil {
		_, err = nc.Write(out)
	}
	var resp strandpb.Response
	if err == nil {
		_, err = frame.Decode(nc, nil, frame.BytesMaxDefault, &resp)
	}
	if err == nil && resp.GetHello() == nil {
		err = fmt.Errorf("hello refused: %v", resp.GetError().GetMessage())
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	nc.SetDeadline(time.Time{})
	return nc, nil
}

// pump writes queued frames until a write fails (returned) or the network
// stops (nil). A reader discards anything the peer sends and notices a
// closed connection.
func (p *peerLink) pump(nc net.Conn) error {
	broken := make(chan struct{})
	go func() {
		io.Copy(io.Discard, nc)
		close(broken)
	}()
	bw := bufio.NewWriterSize(nc, 256<<10)
	var header []byte
	for {
		select {
		case <-p.stop:
			return nil
		case <-broken:
			return fmt.Errorf("connection closed by peer")
		case f := <-p.queue:
			p.net.faults.wait(p.stop)
			p.queuedBytes.Add(-int64(len(f)))
			header = raftEnvelope(header[:0], len(f))
			nc.SetWriteDeadline(time.Now().Add(outboundWriteTimeout))
			bw.Write(header)
			if _, err := bw.Write(f); err != nil {
				return err
			}
			if len(p.queue) == 0 {
				if err := bw.Flush(); err != nil {
					return err
				}
			}
		}
	}
}

// raftEnvelope appends the frame length prefix and the
// Request.raft field header for a RaftFrame of frameBytes bytes: followed
// by the frame itself this is a framed Request{raft: frame}, built without
// re-marshalling the frame.
func raftEnvelope(dst []byte, frameBytes int) []byte {
	var field []byte
	field = protowire.AppendTag(field, raftField, protowire.BytesType)
	field = protowire.AppendVarint(field, uint64(frameBytes))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(field)+frameBytes))
	return append(dst, field...)
}
