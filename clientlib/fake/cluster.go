// Package fake is an in-process Strand cluster for tests, in the spirit of
// franz-go's kfake, built on the real pieces: N real node/server servers
// on 127.0.0.1, each on an in-memory disk (raftlog/memdisk) and with the
// real metadata group, so every request goes through the real Core.Handle,
// raft and engine. Each node is fronted by a frame-level proxy on its own
// loopback port; the proxies' addresses are the nodes' addresses (what
// Metadata answers and NOT_LEADER hints name, and what peers dial), so a
// test can inject faults between the client and the servers without a hook
// in a production type: drop connections, hold (delay) requests, answer
// with an error, forward a produce and drop the answer, forward it twice,
// and move a partition's leader by isolating its node's raft traffic until
// the others elect a new one.
package fake

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/node/server"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// Timing of the servers: a 5 ms tick, elections after 100–200 ms and
// heartbeats every 10 ms, so a cluster is ready and a leader moves in a
// fraction of a second.
const (
	tickDefault     = 5 * time.Millisecond
	electionTicks   = 20
	heartbeatTicks  = 2
	readyTimeout    = 30 * time.Second // a cluster or topic not ready by then is an error
	readyPollPeriod = 5 * time.Millisecond
)

// Cluster is a running fake cluster. Its methods are safe for concurrent
// use.
type Cluster struct {
	servers []*server.Server // servers[i] is node i+1; Replace swaps them
	proxies []*proxy         // proxies[i] fronts servers[i]
	peers   []node.Peer      // the proxies' addresses, as the servers know them
	logs    io.Writer
	// groupHeartbeat: the GroupHeartbeat option (0: the node's default).
	groupHeartbeat time.Duration

	mu            sync.Mutex
	controls      map[uint64]ControlFunc
	nextControlID uint64
	isolatedNodes map[uint64]bool
	moveMu        sync.Mutex // one leader move at a time
	closeOnce     sync.Once
	closeErr      error // the servers' fatal errors, set by Close
	wg            sync.WaitGroup
}

// Opt configures New.
type Opt func(*options)

type options struct {
	nodes          int
	topics         []topicSpec
	logs           io.Writer
	groupHeartbeat time.Duration
}

type topicSpec struct {
	name       string
	partitions int32
}

// Nodes sets the number of nodes (default 3).
func Nodes(n int) Opt { return func(o *options) { o.nodes = n } }

// Topic creates a topic at start (replication factor min(3, nodes)) and
// waits until each of its partitions has a leader.
func Topic(name string, partitions int32) Opt {
	return func(o *options) { o.topics = append(o.topics, topicSpec{name, partitions}) }
}

// GroupHeartbeat sets the heartbeat interval the group coordinators give
// members (default node.HeartbeatIntervalDefault, 5 s), so a test's
// rebalance takes a fraction of a second.
func GroupHeartbeat(d time.Duration) Opt { return func(o *options) { o.groupHeartbeat = d } }

// Logs sends the servers' operational logs to w (default: discarded).
func Logs(w io.Writer) Opt { return func(o *options) { o.logs = w } }

// New starts a cluster on free ports of 127.0.0.1 and waits (bounded)
// until it has a metadata leader that every node follows and the Topic
// options' topics have leaders.
func New(opts ...Opt) (*Cluster, error) {
	o := options{nodes: 3, logs: io.Discard}
	for _, opt := range opts {
		opt(&o)
	}
	if o.nodes < 1 {
		return nil, fmt.Errorf("fake: %d nodes; need at least 1", o.nodes)
	}
	c := &Cluster{controls: make(map[uint64]ControlFunc), isolatedNodes: make(map[uint64]bool)}
	if err := c.start(o); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.waitMetadata(); err != nil {
		c.Close()
		return nil, err
	}
	for _, t := range o.topics {
		if err := c.CreateTopic(t.name, t.partitions); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// start listens for every proxy, then starts every server with the
// proxies' addresses as the cluster's, then starts the proxies.
func (c *Cluster) start(o options) error {
	c.logs = o.logs
	c.groupHeartbeat = o.groupHeartbeat
	for i := 0; i < o.nodes; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		p := &proxy{c: c, id: uint64(i + 1), ln: ln, sessions: make(map[*session]struct{}), peers: make(map[io.Closer]struct{})}
		c.proxies = append(c.proxies, p)
		c.peers = append(c.peers, node.Peer{ID: node.NodeID(i + 1), Address: ln.Addr().String()})
	}
	for i := 0; i < o.nodes; i++ {
		s, err := c.startServer(i)
		if err != nil {
			return err
		}
		c.servers = append(c.servers, s)
		c.proxies[i].upstream = s.Addr().String()
	}
	for _, p := range c.proxies {
		c.wg.Add(1)
		go p.accept()
	}
	return nil
}

// startServer starts node i+1's server on an empty in-memory disk.
func (c *Cluster) startServer(i int) (*server.Server, error) {
	return server.Start(server.Config{
		Core: node.Config{
			ID: node.NodeID(i + 1), Nodes: c.peers, Disk: memdisk.New(),
			ElectionTicks: electionTicks, HeartbeatTicks: heartbeatTicks,
			Txn:    node.TxnConfig{Markers: node.PartitionMarkers{}},
			Groups: node.GroupsConfig{HeartbeatInterval: c.groupHeartbeat},
		},
		Listen: "127.0.0.1:0",
		Tick:   tickDefault,
		Logger: slog.New(slog.NewTextHandler(c.logs, nil)).With("fake_node", i+1),
	})
}

// Replace acts as if the cluster behind the addresses were replaced by a
// new one (a restarted `strand dev`): every server is stopped and a new
// one started on an empty disk behind the same proxy, so the new cluster
// has a new cluster id; the topics are created anew, empty, with new ids.
// Not safe to call concurrently with the cluster's other methods.
func (c *Cluster) Replace() error {
	md, err := metadata(c.serverAddr(1))
	if err != nil {
		return err
	}
	for i, old := range c.servers {
		if err := old.Close(); err != nil {
			return fmt.Errorf("fake: node %d: %w", i+1, err)
		}
	}
	for i := range c.servers {
		s, err := c.startServer(i)
		if err != nil {
			return err
		}
		c.servers[i] = s
		c.proxies[i].setUpstream(s.Addr().String())
	}
	if err := c.waitMetadata(); err != nil {
		return err
	}
	for _, t := range md.GetTopics() {
		if err := c.CreateTopic(t.GetName(), int32(len(t.GetPartitions()))); err != nil {
			return err
		}
	}
	return nil
}

// Addrs are the nodes' addresses (their proxies'), node 1 first.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.proxies))
	for i, p := range c.proxies {
		out[i] = p.ln.Addr().String()
	}
	return out
}

// Close stops every server and proxy and waits for the cluster's
// goroutines. Err then says whether a server had stopped on a fatal error.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		var errs []error
		for i, s := range c.servers {
			if err := s.Close(); err != nil {
				errs = append(errs, fmt.Errorf("fake: node %d: %w", i+1, err))
			}
		}
		c.closeErr = errors.Join(errs...)
		for _, p := range c.proxies {
			p.shut()
		}
		c.wg.Wait()
	})
}

// Err is the fatal errors that stopped servers (node fail-stop), nil when
// every server ran until Close. Call it after Close.
func (c *Cluster) Err() error { return c.closeErr }

// serverAddr is node id's real server address (not its proxy).
func (c *Cluster) serverAddr(id uint64) string { return c.servers[id-1].Addr().String() }

// poll calls f every readyPollPeriod until it returns true, for at most
// readyTimeout; the error then says what was awaited and f's last error.
// f returns true with an error for a definite failure: poll returns it.
func poll(what string, f func() (bool, error)) error {
	deadline := time.Now().Add(readyTimeout)
	var last error
	for time.Now().Before(deadline) {
		ok, err := f()
		if ok {
			return err
		}
		last = err
		time.Sleep(readyPollPeriod)
	}
	return fmt.Errorf("fake: %s not within %v (last: %v)", what, readyTimeout, last)
}

// waitMetadata waits until every node knows the same metadata leader and
// every node is registered.
func (c *Cluster) waitMetadata() error {
	return poll("metadata leader", func() (bool, error) {
		var lead uint64
		for id := range c.servers {
			md, err := metadata(c.serverAddr(uint64(id + 1)))
			if err != nil {
				return false, err
			}
			if md.GetControllerId() == 0 || (lead != 0 && md.GetControllerId() != lead) {
				return false, errors.New("no agreed metadata leader")
			}
			lead = md.GetControllerId()
			if len(md.GetNodes()) != len(c.servers) {
				return false, fmt.Errorf("node %d knows %d nodes", id+1, len(md.GetNodes()))
			}
		}
		return true, nil
	})
}

// isolated tells whether node id's raft traffic is being dropped.
func (c *Cluster) isolated(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.isolatedNodes[id]
}
