package server

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/node"
)

// pipeListener is a net.Listener whose connections are in-memory pipes: a
// write to one blocks until the other side reads it, so a test decides
// exactly when an answer has left the node.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial connects a client; its reads and writes fail after testConnDeadline.
func (l *pipeListener) dial(t *testing.T) net.Conn {
	t.Helper()
	client, server := net.Pipe()
	select {
	case l.conns <- server:
	case <-time.After(testConnDeadline):
		t.Fatal("the listener accepts no connection")
	}
	client.SetDeadline(time.Now().Add(testConnDeadline))
	return client
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// startPipeKafkaServer starts a one-node runtime whose Kafka listener is
// ln, with an answer budget of answerBytesMax (0: the default).
func startPipeKafkaServer(t *testing.T, ln *pipeListener, answerBytesMax int) *Server {
	t.Helper()
	native, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := Start(Config{
		Core:           node.Config{ID: 1, Nodes: []node.Peer{{ID: 1, Address: native.Addr().String()}}},
		DataDir:        t.TempDir(),
		Listener:       native,
		KafkaListener:  ln,
		KafkaAdvertise: "127.0.0.1:9",
		answerBytesMax: answerBytesMax,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return rt
}

// kafkaFetchWith is a raw Kafka Fetch v4 request, correlation id corr,
// asking up to maxBytes of partition 0 of topic.
func kafkaFetchWith(corr int32, topic string, maxBytes int32) []byte {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(4)
	req.ReplicaID, req.MaxBytes = -1, maxBytes
	t := kmsg.NewFetchRequestTopic()
	t.Topic = topic
	p := kmsg.NewFetchRequestTopicPartition()
	p.PartitionMaxBytes = maxBytes
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return kmsg.NewRequestFormatter().AppendRequest(nil, req, corr)
}

// Kafka consumers that stop reading cannot make a node hold more fetch
// answer bytes than its answer budget: each Kafka fetch reserves its
// max_bytes from the budget native fetches reserve from, and keeps it until
// its answer is written (the connection stack's writer gives it back), as
// native fetches do. Four consumers fetch with 1 MiB each from a node
// whose budget is 2 MiB, over pipes that hold each answer in the node until
// the consumer reads all of it: two answers are being written, the budget
// holds both, the other two fetches wait; an answer read gives room for
// exactly one more. Before, a Kafka fetch gave its room back when its
// answer was built, before the write: the node held two unwritten answers
// with nothing reserved (and served the other consumers too).
func TestKafkaFetchAnswersHoldTheNodeBudgetUntilWritten(t *testing.T) {
	const fetchBytes = 1<<20 - 1 // 16 budget units, so two fill the budget
	const budget = 2 << 20
	ln := newPipeListener()
	rt := startPipeKafkaServer(t, ln, budget)
	const consumers = 4
	started, finished := make(chan int, consumers), make(chan int, consumers)
	finish := make([]chan struct{}, consumers)
	for i := range consumers {
		nc := ln.dial(t)
		t.Cleanup(func() { nc.Close() }) // before the node closes: its writers are blocked on these
		finish[i] = make(chan struct{})
		go consumeOneAnswer(nc, i, started, finish[i], finished)
		if _, err := nc.Write(kafkaFetchWith(int32(i), "absent", fetchBytes)); err != nil {
			t.Fatal(err)
		}
	}
	next := func(ch <-chan int, what string) int {
		t.Helper()
		select {
		case i := <-ch:
			return i
		case <-time.After(testConnDeadline): // a hang guard, not a measurement
			t.Fatalf("no consumer %s", what)
			return 0
		}
	}
	writing := []int{next(started, "started reading"), next(started, "started reading")}
	held := func(when string) {
		t.Helper()
		if got := rt.fetchAnswers.HeldBytes(); got != budget {
			t.Fatalf("%s: the node's answer budget holds %d bytes, want %d (two 1 MiB answers unwritten)", when, got, budget)
		}
		select {
		case i := <-started:
			t.Fatalf("%s: a third answer (consumer %d) is being written while two fill the budget", when, i)
		default:
		}
	}
	held("two answers being written")
	close(finish[writing[0]])
	next(finished, "read its answer")
	writing = append(writing[1:], next(started, "started reading after an answer went out"))
	held("one answer written, the next being written")
	close(finish[writing[0]])
	close(finish[writing[1]])
	close(finish[next(started, "started reading the last answer")])
	for range consumers - 1 {
		next(finished, "read its answer")
	}
	for range 1000 { // the writer gives the room back just after the last byte is read
		if rt.fetchAnswers.HeldBytes() == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%d answer bytes still held after every answer was written", rt.fetchAnswers.HeldBytes())
}

// consumeOneAnswer reads the first byte of one Kafka answer from nc and
// says so on started (the node's writer is then writing it, and blocked
// until the rest is read), waits for finish, reads the rest and says so on
// finished. A failed read says nothing: the test fails waiting for it.
func consumeOneAnswer(nc net.Conn, i int, started chan<- int, finish <-chan struct{}, finished chan<- int) {
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:1]); err != nil {
		return
	}
	started <- i
	<-finish
	if _, err := io.ReadFull(nc, size[1:]); err != nil {
		return
	}
	if _, err := io.CopyN(io.Discard, nc, int64(binary.BigEndian.Uint32(size[:]))); err != nil {
		return
	}
	finished <- i
}

// A node that shuts down writes the Kafka answers that are in before it
// closes their connections, as it does native ones (the connection stack
// drains both): a consumer reading slowly still gets the answer whose
// write had begun. Before, the node closed its Kafka connections first,
// mid-answer.
func TestKafkaAnswerInIsWrittenAtShutdown(t *testing.T) {
	ln := newPipeListener()
	rt := startPipeKafkaServer(t, ln, 0)
	nc := ln.dial(t)
	t.Cleanup(func() { nc.Close() })
	if _, err := nc.Write(kafkaFetchWith(7, "absent", 1<<20)); err != nil {
		t.Fatal(err)
	}
	// The first byte read: the node's writer is writing the answer (size,
	// correlation id, body), blocked until the rest is read.
	var head [8]byte
	if _, err := io.ReadFull(nc, head[:1]); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- rt.Close() }()
	select {
	case <-ln.done: // the node is shutting down: its Kafka listener no longer accepts
	case <-time.After(testConnDeadline): // a hang guard
		t.Fatal("the node did not stop accepting Kafka connections")
	}
	if _, err := io.ReadFull(nc, head[1:]); err != nil {
		t.Fatalf("the answer being written at shutdown was cut: %v", err)
	}
	if corr := binary.BigEndian.Uint32(head[4:]); corr != 7 {
		t.Fatalf("answer to correlation id %d, want 7", corr)
	}
	if _, err := io.CopyN(io.Discard, nc, int64(binary.BigEndian.Uint32(head[:4]))-4); err != nil {
		t.Fatalf("the answer being written at shutdown was cut: %v", err)
	}
	if n, err := nc.Read(head[:]); err == nil {
		t.Fatalf("read %d bytes after the answer; want the connection closed", n)
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(testConnDeadline): // a hang guard
		t.Fatal("the node did not stop")
	}
}
