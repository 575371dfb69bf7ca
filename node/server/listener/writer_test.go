package listener

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// splicedAnswer is an answer in pieces: "<" in the head, body as a stored
// slice of its own, ">\n" in the head again.
type splicedAnswer struct{ body []byte }

func (a splicedAnswer) Ready() bool { return true }

func (a splicedAnswer) AppendTo(dst []byte) ([]byte, error) {
	panic("the writer must call AppendSpliced")
}

func (a splicedAnswer) AppendSpliced(head []byte, bufs net.Buffers) ([]byte, net.Buffers, error) {
	start := len(head)
	head = append(head, '<')
	bufs = append(bufs, head[start:], a.body)
	mid := len(head)
	head = append(head, ">\n"...)
	return head, append(bufs, head[mid:]), nil
}

// spliceProtocol answers each request line "s TEXT" with TEXT spliced
// (repeated to 10,000 bytes, so it is written apart from the head) and
// "l TEXT" with the line TEXT.
func spliceProtocol(c *Conn, br *bufio.Reader) error {
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
		if fields[0] == "s" {
			c.Send(slot, splicedAnswer{body: bytes.Repeat([]byte(fields[1]), 10000/len(fields[1]))})
		} else {
			c.Send(slot, lineAnswer{text: fields[1], c: c})
		}
	}
}

// Spliced answers, between plain ones, arrive whole and in order: on
// TCP (writev) and on any other connection (through the buffered writer).
func TestSplicedAnswersInOrder(t *testing.T) {
	want := ""
	requests := ""
	for i, w := range []string{"ab", "c", "de", "f", "g"} {
		if i%2 == 0 {
			requests += "s " + w + "\n"
			want += "<" + strings.Repeat(w, 10000/len(w)) + ">\n"
		} else {
			requests += "l " + w + "\n"
			want += w + "\n"
		}
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pipe := newPipeListener()
	for _, c := range []struct {
		name string
		ln   net.Listener
		dial func() net.Conn
	}{
		{"tcp", tcp, func() net.Conn {
			nc, err := net.DialTimeout("tcp", tcp.Addr().String(), hangGuard)
			if err != nil {
				t.Fatal(err)
			}
			nc.SetDeadline(time.Now().Add(hangGuard))
			t.Cleanup(func() { nc.Close() })
			return nc
		}},
		{"pipe", pipe, func() net.Conn { return pipe.dial(t) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := Serve(c.ln, Config{Serve: spliceProtocol, ConnsMax: 4, InFlightMax: 8, ConnAnswerBytesMax: 1 << 20, Answers: NewBudget(4 * BudgetUnit)})
			t.Cleanup(func() { l.Shutdown(time.Now(), "") })
			nc := c.dial()
			go io.WriteString(nc, requests)
			got := make([]byte, len(want))
			if _, err := io.ReadFull(nc, got); err != nil {
				t.Fatalf("read: %v", err)
			}
			if string(got) != want {
				t.Fatalf("answers differ from what was sent, in order")
			}
		})
	}
}
