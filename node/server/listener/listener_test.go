package listener

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// hangGuard bounds every wait of these tests, so a broken stack fails
// them instead of hanging them; it never measures speed.
const hangGuard = 10 * time.Second

// pipeListener is a net.Listener whose connections are in-memory pipes: a
// write to one blocks until the other side reads it, so a test decides
// when an answer has left the process.
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

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

func (l *pipeListener) dial(t *testing.T) net.Conn {
	t.Helper()
	client, server := net.Pipe()
	select {
	case l.conns <- server:
	case <-time.After(hangGuard):
		t.Fatal("the listener accepts no connection")
	}
	client.SetDeadline(time.Now().Add(hangGuard))
	t.Cleanup(func() { client.Close() })
	return client
}

// lineAnswer is an answer line, in at once unless gate is set: then it
// comes once gate closes, or never (ErrStopped when the connection closes
// or drains first).
type lineAnswer struct {
	text string
	gate chan struct{}
	c    *Conn
}

func (a lineAnswer) Ready() bool {
	if a.gate == nil {
		return true
	}
	select {
	case <-a.gate:
		return true
	default:
		return false
	}
}

func (a lineAnswer) AppendTo(dst []byte) ([]byte, error) {
	if a.gate != nil {
		select {
		case <-a.gate:
		case <-a.c.Done():
			return dst, ErrStopped
		case <-a.c.Draining():
			return dst, ErrStopped
		}
	}
	return append(dst, a.text+"\n"...), nil
}

// lineProtocol serves one request per line, "[bytes] [gated] text": the
// request reserves bytes of answer room, and its answer is text (gated:
// once gate closes). It names each answer on sent (when not nil) once
// sent.
func lineProtocol(gate chan struct{}, sent chan<- string) func(c *Conn, br *bufio.Reader) error {
	return func(c *Conn, br *bufio.Reader) error {
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return ReadFailure(err)
			}
			fields := strings.Fields(line)
			slot, ok := c.Take()
			if !ok {
				return nil
			}
			n, err := strconv.Atoi(fields[0])
			if err != nil {
				return err
			}
			if n > 0 && !c.Reserve(&slot, n) {
				return nil
			}
			a := lineAnswer{text: fields[len(fields)-1], c: c}
			if fields[1] == "gated" {
				a.gate = gate
			}
			c.Send(slot, a)
			if sent != nil {
				sent <- a.text
			}
		}
	}
}

// serveLines runs the line protocol on a pipe listener with a node-wide
// answer budget of budgetBytes.
func serveLines(t *testing.T, budgetBytes int, gate chan struct{}, sent chan<- string) (*Listener, *pipeListener, *Budget) {
	t.Helper()
	ln := newPipeListener()
	b := NewBudget(budgetBytes)
	l := Serve(ln, Config{Serve: lineProtocol(gate, sent), ConnsMax: 4, InFlightMax: 8,
		ConnAnswerBytesMax: 1 << 20, Answers: b})
	t.Cleanup(func() { l.Shutdown(time.Now(), "") })
	return l, ln, b
}

// An answer's room stays held, on its connection and in the node's
// budget, until the answer is written: while the client has read part of
// it, the writer still holds it; once read, the room comes back.
func TestAnswerRoomHeldUntilWritten(t *testing.T) {
	l, ln, b := serveLines(t, 4*BudgetUnit, nil, nil)
	nc := ln.dial(t)
	if _, err := io.WriteString(nc, "1000 ready answer\n"); err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 1)
	if _, err := io.ReadFull(nc, first); err != nil {
		t.Fatal(err)
	}
	conns := l.Conns()
	if len(conns) != 1 || conns[0].AnswerBytes() != 1000 || b.HeldBytes() != BudgetUnit {
		t.Fatalf("while the answer is written: %d conns, budget holds %d, want 1 conn holding 1000 bytes, %d in the budget",
			len(conns), b.HeldBytes(), BudgetUnit)
	}
	rest, err := bufio.NewReader(nc).ReadString('\n')
	if err != nil || string(first)+rest != "answer\n" {
		t.Fatalf("answer %q, %v", string(first)+rest, err)
	}
	waitFor(t, "the room given back", func() bool { return conns[0].AnswerBytes() == 0 && b.HeldBytes() == 0 })
}

// A connection that closes gives back the room of its answers not yet
// written, to the node's budget too.
func TestCloseGivesBackAnswerRoom(t *testing.T) {
	l, ln, b := serveLines(t, 4*BudgetUnit, make(chan struct{}), nil)
	nc := ln.dial(t)
	if _, err := io.WriteString(nc, "1000 gated a\n2000 gated b\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both reserved", func() bool { return b.HeldBytes() == 2*BudgetUnit })
	nc.Close()
	waitFor(t, "the room given back", func() bool { return b.HeldBytes() == 0 && len(l.Conns()) == 0 })
}

// Shutdown drains: the answers that are in but not yet written (behind a
// client slow to read) go out, then the connection closes; an answer still
// to come is not waited for.
func TestShutdownWritesTheAnswersThatAreIn(t *testing.T) {
	sent := make(chan string, 3)
	l, ln, _ := serveLines(t, 4*BudgetUnit, make(chan struct{}), sent)
	nc := ln.dial(t)
	if _, err := io.WriteString(nc, "0 ready a\n0 ready b\n0 gated never\n"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		select {
		case <-sent:
		case <-time.After(hangGuard):
			t.Fatal("the requests were not served")
		}
	}
	stopped := make(chan struct{})
	go func() {
		l.Shutdown(time.Now().Add(time.Hour), "stopping")
		close(stopped)
	}()
	select {
	case <-ln.done: // Shutdown began: the writer is told to drain
	case <-time.After(hangGuard):
		t.Fatal("Shutdown did not stop accepting")
	}
	got, err := io.ReadAll(nc)
	if string(got) != "a\nb\n" || err != nil {
		t.Fatalf("read %q, %v; want both answers that were in, then the close", got, err)
	}
	select {
	case <-stopped:
	case <-time.After(hangGuard):
		t.Fatal("Shutdown waits for an answer that never comes")
	}
}

// A protocol that sends more answers than it took slots closes its
// connection rather than block whoever answers.
func TestSendBeyondSlotsCloses(t *testing.T) {
	ln := newPipeListener()
	sent := make(chan error, 1)
	l := Serve(ln, Config{ConnsMax: 1, InFlightMax: 1, Serve: func(c *Conn, br *bufio.Reader) error {
		for range 3 {
			c.Send(Slot{}, lineAnswer{text: "x", c: c})
		}
		<-c.Done()
		sent <- nil
		return errors.New("unreachable: closed")
	}})
	t.Cleanup(func() { l.Shutdown(time.Now(), "") })
	ln.dial(t)
	select {
	case <-sent:
	case <-time.After(hangGuard):
		t.Fatal("the connection stayed open with more answers than slots")
	}
}

// waitFor polls cond until it holds (bounded by hangGuard).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(hangGuard); time.Now().Before(deadline); {
		if cond() {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v", what, hangGuard)
}
