// Package fake is an in-process Strand cluster for tests, in the spirit of
// franz-go's kfake: it speaks the real wire protocol (proto/frame frames of
// strandpb messages) on 127.0.0.1, holds topics, partitions and logs in
// memory, assigns leaders, applies Kafka's idempotent-producer rules like
// the engine does, and lets a test inject faults: move leadership (NOT_LEADER
// with a hint), drop connections, hold (delay) requests, answer with an
// error, apply a produce without answering, or apply it twice.
//
// It is a test tool, not a model of raft: a produce is committed when it is
// applied, the high-water mark is the log end, and every node sees the same
// state at once.
package fake

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// Cluster is a running fake cluster. Its methods are safe for concurrent
// use.
type Cluster struct {
	mu             sync.Mutex
	nodes          []*node // nodes[i].id == i+1
	topics         map[string]*topic
	nextProducerID int64
	controls       map[uint64]ControlFunc
	nextControlID  uint64
	appended       chan struct{} // closed and replaced on every append
	// clusterID and the topics' ids are 16 bytes, new for every topic and
	// every Replace: enough for clients' identity checks.
	clusterID []byte
	closed    bool
	wg        sync.WaitGroup
}

// node is one fake node: a listener and its connections.
type node struct {
	id    uint64
	ln    net.Listener
	addr  string
	conns map[net.Conn]struct{}
}

type topic struct {
	name              string
	id                []byte
	replicationFactor int32
	configs           []*strandpb.ConfigEntry
	partitions        []*partition
}

type partition struct {
	leader    uint64
	term      uint64
	batches   []storedBatch
	logStart  int64
	hwm       int64
	producers map[int64]*producerState
}

type storedBatch struct {
	base     int64
	count    int32
	appendMs int64
	bytes    []byte
}

// producerState mirrors engine/producer.go: per producer, its epoch and
// its last 5 accepted batches.
type producerState struct {
	epoch   int32
	batches []acceptedBatch
}

type acceptedBatch struct {
	seq, count int32
	base       int64
}

// Opt configures New.
type Opt func(*options)

type options struct {
	nodes  int
	topics []topicSpec
}

type topicSpec struct {
	name       string
	partitions int32
}

// Nodes sets the number of nodes (default 3).
func Nodes(n int) Opt { return func(o *options) { o.nodes = n } }

// Topic creates a topic at start.
func Topic(name string, partitions int32) Opt {
	return func(o *options) { o.topics = append(o.topics, topicSpec{name, partitions}) }
}

// New starts a cluster listening on free ports of 127.0.0.1.
func New(opts ...Opt) (*Cluster, error) {
	o := options{nodes: 3}
	for _, opt := range opts {
		opt(&o)
	}
	c := &Cluster{
		topics:         make(map[string]*topic),
		nextProducerID: 1000,
		controls:       make(map[uint64]ControlFunc),
		appended:       make(chan struct{}),
	}
	c.clusterID = c.newIDLocked()
	for i := 0; i < o.nodes; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			c.Close()
			return nil, err
		}
		n := &node{id: uint64(i + 1), ln: ln, addr: ln.Addr().String(), conns: make(map[net.Conn]struct{})}
		c.nodes = append(c.nodes, n)
	}
	for _, t := range o.topics {
		if err := c.CreateTopic(t.name, t.partitions); err != nil {
			c.Close()
			return nil, err
		}
	}
	for _, n := range c.nodes {
		c.wg.Add(1)
		go c.accept(n)
	}
	return c, nil
}

// Addrs are the nodes' addresses, node 1 first.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.addr
	}
	return out
}

// Close stops every listener and connection and waits for the cluster's
// goroutines.
func (c *Cluster) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	for _, n := range c.nodes {
		n.ln.Close()
		for nc := range n.conns {
			nc.Close()
		}
	}
	close(c.appended)
	c.mu.Unlock()
	c.wg.Wait()
}

// CreateTopic creates a topic with leaders spread round robin over nodes.
func (c *Cluster) CreateTopic(name string, partitions int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.createTopicLocked(name, partitions, int32(min(3, len(c.nodes))), nil)
	if e != nil {
		return errors.New(e.GetMessage())
	}
	return nil
}

func (c *Cluster) createTopicLocked(name string, partitions, rf int32, configs []*strandpb.ConfigEntry) *strandpb.Error {
	if c.topics[name] != nil {
		return werr(strandpb.ErrorCode_ERROR_CODE_TOPIC_EXISTS, "topic %q exists", name)
	}
	if name == "" || partitions <= 0 || partitions > 10000 || rf <= 0 || int(rf) > len(c.nodes) {
		return werr(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "bad topic %q: %d partitions, rf %d", name, partitions, rf)
	}
	t := &topic{name: name, id: c.newIDLocked(), replicationFactor: rf, configs: configs}
	for i := int32(0); i < partitions; i++ {
		t.partitions = append(t.partitions, &partition{
			leader:    c.nodes[int(i)%len(c.nodes)].id,
			term:      1,
			producers: make(map[int64]*producerState),
		})
	}
	c.topics[name] = t
	return nil
}

// Leader is a partition's leader, 0 when the partition does not exist.
func (c *Cluster) Leader(topicName string, p int32) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if part := c.partitionLocked(topicName, p); part != nil {
		return part.leader
	}
	return 0
}

// MoveLeader makes node the partition's leader under a new term; the old
// leader then answers NOT_LEADER with a hint naming node.
func (c *Cluster) MoveLeader(topicName string, p int32, node uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	part := c.partitionLocked(topicName, p)
	if part == nil || node < 1 || int(node) > len(c.nodes) {
		panic(fmt.Sprintf("fake: MoveLeader %s/%d to %d", topicName, p, node))
	}
	part.leader = node
	part.term++
}

// DropConnections closes every client connection to node (0: every node).
func (c *Cluster) DropConnections(nodeID uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if nodeID == 0 || n.id == nodeID {
			for nc := range n.conns {
				nc.Close()
			}
		}
	}
}

// TrimLogStart moves a partition's log start to offset (at most the
// high-water mark), as retention would.
func (c *Cluster) TrimLogStart(topicName string, p int32, offset int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	part := c.partitionLocked(topicName, p)
	part.logStart = min(max(offset, part.logStart), part.hwm)
}

// Record is one record of a partition's log, for test assertions.
type Record struct {
	Offset int64
	Key    []byte
	Value  []byte
}

// Log is the partition's records from the log start to the high-water mark.
func (c *Cluster) Log(topicName string, p int32) []Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	part := c.partitionLocked(topicName, p)
	var out []Record
	for _, b := range part.batches {
		err := recordbatch.Decode(b.bytes, func(i int, r recordbatch.Record) error {
			if off := b.base + int64(i); off >= part.logStart {
				out = append(out, Record{Offset: off, Key: clone(r.Key), Value: clone(r.Value)})
			}
			return nil
		})
		if err != nil {
			panic(fmt.Sprintf("fake: stored batch undecodable: %v", err))
		}
	}
	return out
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func (c *Cluster) partitionLocked(topicName string, p int32) *partition {
	t := c.topics[topicName]
	if t == nil || p < 0 || int(p) >= len(t.partitions) {
		return nil
	}
	return t.partitions[p]
}

func (c *Cluster) nodeAddr(id uint64) string {
	if id < 1 || int(id) > len(c.nodes) {
		return ""
	}
	return c.nodes[id-1].addr
}

// werr builds a wire error.
func werr(code strandpb.ErrorCode, format string, args ...any) *strandpb.Error {
	return &strandpb.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// sortedTopicNames lists topics in name order, so answers are stable.
func (c *Cluster) sortedTopicNames() []string {
	names := make([]string, 0, len(c.topics))
	for n := range c.topics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// nowMs is the fake's append time.
func nowMs() int64 { return time.Now().UnixMilli() }

// newIDLocked is a fresh 16-byte id: a process-wide counter, so two fake
// clusters never share a cluster or topic id.
func (c *Cluster) newIDLocked() []byte {
	n := idSeq.Add(1)
	id := make([]byte, 16)
	copy(id, "fakeid..")
	binary.BigEndian.PutUint64(id[8:], n)
	return id
}

// idSeq numbers every id any fake cluster handed out.
var idSeq atomic.Uint64

// Replace acts as if the cluster behind the addresses were replaced by a
// new one (a restarted `strand dev`): a new cluster id, and the same
// topics created anew, empty, with new ids.
func (c *Cluster) Replace() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clusterID = c.newIDLocked()
	for _, name := range c.sortedTopicNames() {
		t := c.topics[name]
		delete(c.topics, name)
		c.createTopicLocked(name, int32(len(t.partitions)), t.replicationFactor, t.configs)
	}
}

// RecreateTopic deletes a topic and creates it again, empty, with a new
// id and the same partition count.
func (c *Cluster) RecreateTopic(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.topics[name]
	if t == nil {
		return fmt.Errorf("no topic %q", name)
	}
	delete(c.topics, name)
	if e := c.createTopicLocked(name, int32(len(t.partitions)), t.replicationFactor, t.configs); e != nil {
		return errors.New(e.GetMessage())
	}
	return nil
}
