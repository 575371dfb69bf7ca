package listener

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"time"
)

// writeLoop writes the answers in the order sent, flushing whenever no
// further answer is queued, so pipelined answers share writes.
func (c *Conn) writeLoop() {
	defer c.l.wg.Done()
	bw := bufio.NewWriterSize(c.nc, ioBufferBytes)
	var buf []byte
	for {
		select {
		case <-c.done:
			return
		case <-c.draining:
			c.drain(bw, buf)
			return
		case o := <-c.out:
			var err error
			if buf, err = c.write(bw, buf, o); err != nil {
				c.Close(closeReason(err))
				return
			}
			if o.closeAfter != "" {
				c.Close(o.closeAfter)
				return
			}
		}
	}
}

// closeReason is the logged reason for a writer's error: none for
// ErrStopped.
func closeReason(err error) string {
	if errors.Is(err, ErrStopped) {
		return ""
	}
	return err.Error()
}

// write writes one answer, flushing first when it is not in yet (so the
// answers before it do not wait for it) and after it when nothing else is
// queued, then gives back what its request held: the answer's bytes are
// accounted until they are out of the process.
func (c *Conn) write(bw *bufio.Writer, buf []byte, o outgoing) ([]byte, error) {
	if bw.Buffered() > 0 && !o.answer.Ready() {
		if err := bw.Flush(); err != nil {
			return buf, fmt.Errorf("write: %v", err)
		}
	}
	if sa, ok := o.answer.(SplicedAnswer); ok {
		return c.writeSpliced(bw, buf, o, sa)
	}
	buf, err := o.answer.AppendTo(buf[:0])
	if err != nil {
		return buf, err
	}
	if len(buf) > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := bw.Write(buf); err != nil {
			return buf, fmt.Errorf("write: %v", err)
		}
	}
	if len(c.out) == 0 || o.closeAfter != "" {
		if err := bw.Flush(); err != nil {
			return buf, fmt.Errorf("write: %v", err)
		}
	}
	c.release(o.slot)
	return buf, nil
}

// writeSpliced is write for an answer in pieces (SplicedAnswer): on a
// TCP connection the buffered answers, then the pieces go out with one
// writev, the stored bytes among them never copied; on any other
// connection (TLS) each piece goes through the buffered writer.
func (c *Conn) writeSpliced(bw *bufio.Writer, buf []byte, o outgoing, sa SplicedAnswer) ([]byte, error) {
	buf, bufs, err := sa.AppendSpliced(buf[:0], c.vecs[:0])
	c.vecs = bufs[:0]
	if err != nil {
		return buf, err
	}
	c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, direct := c.nc.(*net.TCPConn)
	if direct && len(bufs) > 1 {
		if err := bw.Flush(); err != nil {
			return buf, fmt.Errorf("write: %v", err)
		}
		if _, err := bufs.WriteTo(c.nc); err != nil {
			return buf, fmt.Errorf("write: %v", err)
		}
	} else {
		for _, b := range bufs {
			if _, err := bw.Write(b); err != nil {
				return buf, fmt.Errorf("write: %v", err)
			}
		}
	}
	clear(c.vecs[:cap(c.vecs)]) // drop the references to stored bytes
	if len(c.out) == 0 || o.closeAfter != "" {
		if err := bw.Flush(); err != nil {
			return buf, fmt.Errorf("write: %v", err)
		}
	}
	c.release(o.slot)
	return buf, nil
}

// drain writes, at shutdown, the queued answers that are in (stopping at
// the first one still to come), then signals flushed.
func (c *Conn) drain(bw *bufio.Writer, buf []byte) {
	defer close(c.flushed)
	for {
		select {
		case o := <-c.out:
			if !o.answer.Ready() {
				bw.Flush()
				return
			}
			var err error
			if buf, err = c.write(bw, buf, o); err != nil || o.closeAfter != "" {
				return
			}
		default:
			bw.Flush()
			return
		}
	}
}

// drainUntil asks the writer to send what is ready and waits until it
// did, the connection closed, or deadline passed.
func (c *Conn) drainUntil(deadline time.Time) {
	c.drainOnce.Do(func() { close(c.draining) })
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-c.flushed:
	case <-c.done:
	case <-timer.C:
	}
}
