package kafkaproto

import (
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/node/server/listener"
	"github.com/strandlog/strand/proto/strandpb"
)

// heldBackend holds every fetch unanswered (a long poll that never ends)
// (the answer bytes reserved are read from the connections).
type heldBackend struct {
	mu      sync.Mutex
	fetches []func(*strandpb.Response)
	// holdOthers: other requests wait in others too (else answered at once).
	holdOthers bool
	others     []func(*strandpb.Response)
}

func (b *heldBackend) Submit(_ <-chan struct{}, req *strandpb.Request, reply func(*strandpb.Response)) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if req.GetFetch() == nil && b.holdOthers {
		b.others = append(b.others, reply)
		return nil
	}
	if req.GetFetch() == nil {
		reply(&strandpb.Response{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_TIMEOUT}})
		return nil
	}
	b.fetches = append(b.fetches, reply)
	return nil
}

// state is the fetches submitted and the answer bytes s's connections
// hold reserved.
func (b *heldBackend) state(s *Server) (int, int) {
	var reserved int64
	for _, c := range s.l.Conns() {
		reserved += c.AnswerBytes()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.fetches), int(reserved)
}

// waitState polls until ok(fetches, reserved) holds (bounded).
func (b *heldBackend) waitState(t *testing.T, s *Server, what string, ok func(fetches, reserved int) bool) {
	t.Helper()
	for range 1000 {
		if ok(b.state(s)) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	f, r := b.state(s)
	t.Fatalf("%s: %d fetches submitted, %d bytes reserved", what, f, r)
}

// A Kafka client that pipelines long-polling fetches of 8 MiB each (7 MiB
// reserved: one answer frame) stops being read once its fetches reserved
// more than connAnswerBytesMax (five of them, not the 64 its in-flight bound allows); an answer written gives
// room for the next; closing the connection gives every reservation back,
// to the node-wide budget too. Before, Kafka fetches reserved nothing.
func TestKafkaFetchAnswersBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &heldBackend{}
	budget := listener.NewBudget(512 << 20)
	s := Serve(ln, Config{Backend: b, NodeID: 1, Logger: slog.New(slog.DiscardHandler), Answers: budget})
	t.Cleanup(s.Close)
	c := dialRaw(t, s)
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(11)
	req.MaxWaitMillis, req.MaxBytes = 500, 8<<20
	topic := kmsg.NewFetchRequestTopic()
	topic.Topic = "t"
	part := kmsg.NewFetchRequestTopicPartition()
	part.PartitionMaxBytes = 1 << 20
	topic.Partitions = append(topic.Partitions, part)
	req.Topics = append(req.Topics, topic)
	body := req.AppendTo(nil)
	for i := range 20 {
		c.send(1, 11, int32(i), false, body)
	}
	each := listener.FetchAnswerBytes(req.MaxBytes) // capped at one answer frame
	want := connAnswerBytesMax/each + 1
	b.waitState(t, s, "fetches before the bound", func(f, _ int) bool { return f >= want })
	time.Sleep(100 * time.Millisecond) // a reader that ignored the bound would have taken all 20 by now
	if f, r := b.state(s); f != want || r != want*each {
		t.Fatalf("%d fetches submitted (%d bytes reserved), want %d: the connection's answers are not bounded", f, r, want)
	}
	b.mu.Lock()
	first := b.fetches[0]
	b.mu.Unlock()
	first(&strandpb.Response{Body: &strandpb.Response_Fetch{Fetch: &strandpb.FetchResponse{}}})
	if corr, _, err := c.recv(); err != nil || corr != 0 {
		t.Fatalf("first answer: corr %d, %v", corr, err)
	}
	b.waitState(t, s, "a fetch after an answer went out", func(f, _ int) bool { return f == want+1 })
	// The client goes; the node answers each fetch at its max wait. The
	// requests the client had sent are read and answered too, then the
	// connection closes with nothing reserved.
	c.nc.Close()
	answered := 1
	b.waitState(t, s, "reservations after the close", func(f, r int) bool {
		b.mu.Lock()
		for ; answered < len(b.fetches); answered++ {
			b.fetches[answered](&strandpb.Response{Body: &strandpb.Response_Fetch{Fetch: &strandpb.FetchResponse{}}})
		}
		b.mu.Unlock()
		return r == 0 && budget.HeldBytes() == 0
	})
}

// An answer ready at once goes out while the long-polling fetch pipelined
// behind it waits (librdkafka sends a consumer's commits and fetches on one
// connection). It used to sit in the write buffer until the fetch, queued
// behind it, was answered too: up to the fetch's max wait.
func TestKafkaAnswerNotHeldBehindLongPoll(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &heldBackend{holdOthers: true}
	s := Serve(ln, Config{Backend: b, NodeID: 1, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(s.Close)
	c := dialRaw(t, s)
	list := kmsg.NewPtrListOffsetsRequest()
	list.SetVersion(1)
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(11)
	fetch.MaxWaitMillis, fetch.MaxBytes = 500, 1<<20
	c.send(2, 1, 1, false, list.AppendTo(nil))
	c.send(1, 11, 2, false, fetch.AppendTo(nil))
	b.waitState(t, s, "the fetch submitted", func(f, _ int) bool { return f == 1 })
	b.mu.Lock()
	b.others[0](&strandpb.Response{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_TIMEOUT}})
	b.mu.Unlock()
	if corr, _, err := c.recv(); err != nil || corr != 1 {
		t.Fatalf("the ListOffsets answer did not arrive while the fetch waited: corr %d, %v", corr, err)
	}
}
