package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/recordbatch"
)

// cmdProduce sends each line of stdin as one record, waits until every
// record is acknowledged, and fails when any record failed. A line over
// the record limit stops it: the records before are flushed and the error
// says how many were written.
func cmdProduce(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("produce")
	var cf clientFlags
	cf.register(fs, 30*time.Second)
	topicFlag := fs.StringP("topic", "t", "", "topic to write to (instead of the TOPIC argument)")
	keySep := fs.StringP("key-separator", "K", "", "split each line at the first SEP into key and value (default: no key)")
	acksText := fs.String("acks", "all", "all (replicated, with offsets), 1 (leader's log) or 0 (fire and forget)")
	partition := fs.Int32P("partition", "p", -1, "write every line to this partition (-1: by key hash, else spread over partitions)")
	linger := fs.Duration("linger", 5*time.Millisecond, "wait this long to fill a batch")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	topic, err := topicArg(fs, *topicFlag)
	if err != nil {
		return err
	}
	if *partition < -1 {
		return usageError("--partition %d: want a partition number, or -1 for any", *partition)
	}
	acks, err := parseAcks(*acksText)
	if err != nil {
		return err
	}
	opts := []clientlib.Opt{clientlib.RequiredAcks(acks), clientlib.DeliveryTimeout(cf.timeout), clientlib.Linger(*linger)}
	if *partition >= 0 {
		opts = append(opts, clientlib.ManualPartitioner())
	}
	c, err := cf.client(opts...)
	if err != nil {
		return err
	}
	defer closeBounded(c)
	ctx, stop := signalContext()
	defer stop()
	if err := checkTopic(ctx, c, topic, *partition, cf.timeout); err != nil {
		return err
	}
	p := &lineProducer{c: c, stderr: stderr}
	tooLarge, err := p.sendLines(ctx, stdin, topic, *partition, *keySep)
	if err != nil {
		return err
	}
	if err := c.Flush(ctx); err != nil {
		return err
	}
	if tooLarge != nil {
		return p.stoppedAt(topic, tooLarge)
	}
	return p.result(topic)
}

// topicArg is the topic named by the TOPIC argument or by -t/--topic.
func topicArg(fs *pflag.FlagSet, flag string) (string, error) {
	switch {
	case flag != "" && fs.NArg() == 0:
		return flag, nil
	case flag == "" && fs.NArg() == 1:
		return fs.Arg(0), nil
	case flag != "" && fs.NArg() == 1 && fs.Arg(0) == flag:
		return flag, nil
	}
	return "", usageError("want one topic (TOPIC or -t TOPIC)")
}

// sendLines produces every line of stdin until EOF, Ctrl-C or a line over
// the record limit, which it returns without sending it.
func (p *lineProducer) sendLines(ctx context.Context, stdin io.Reader, topic string, partition int32, keySep string) (*line, error) {
	lines, readErr := readLines(stdin, recordbatch.RecordBytesMax)
	for {
		select {
		case <-ctx.Done():
			return nil, userErr(ctx.Err(), "interrupted after %d lines; records not yet acknowledged may be lost", p.count())
		case l, ok := <-lines:
			if !ok {
				if err := <-readErr; err != nil {
					return nil, wrapErr(err, "reading stdin after line %d", p.count())
				}
				return nil, nil
			}
			if l.size > recordbatch.RecordBytesMax {
				return &l, nil
			}
			r := &clientlib.Record{Topic: topic, Partition: max(partition, 0)}
			value := l.text
			if keySep != "" {
				if k, v, ok := strings.Cut(value, keySep); ok {
					r.Key, value = []byte(k), v
				}
			}
			r.Value = []byte(value)
			if size := len(r.Key) + len(r.Value); size > recordbatch.RecordBytesMax {
				l.size = size
				return &l, nil
			}
			p.produce(ctx, l.number, r)
		}
	}
}

// line is one line of stdin: its text, unless it is over the limit, and
// its size in bytes without the line end.
type line struct {
	number int
	size   int
	text   string
}

// readLines reads stdin on its own goroutine, so Ctrl-C is noticed while
// a terminal read blocks; the error (nil at EOF) follows the last line. A
// line over limit bytes is counted but not kept, and ends the reading.
func readLines(stdin io.Reader, limit int) (<-chan line, <-chan error) {
	lines, errc := make(chan line, 1024), make(chan error, 1)
	go func() {
		defer close(errc)
		defer close(lines)
		br := bufio.NewReaderSize(stdin, 64<<10)
		for n := 1; ; n++ {
			l, err := readLine(br, limit)
			l.number = n
			if err != nil && l.size == 0 && l.text == "" {
				if err != io.EOF {
					errc <- err
				}
				return
			}
			lines <- l
			if l.size > limit || err != nil {
				if err != io.EOF && l.size <= limit {
					errc <- err
				}
				return
			}
		}
	}()
	return lines, errc
}

// readLine reads one line without its "\n" or "\r\n", keeping at most
// limit bytes of it; size is the whole line's length. It returns io.EOF
// with the last line when that has no line end.
func readLine(br *bufio.Reader, limit int) (line, error) {
	var buf []byte
	var l line
	for {
		chunk, err := br.ReadSlice('\n')
		l.size += len(chunk)
		if l.size <= limit+2 {
			buf = append(buf, chunk...)
		} else {
			buf = nil
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == nil {
			l.size--
			if l.size <= limit+1 {
				buf = buf[:len(buf)-1]
			}
			if len(buf) > 0 && buf[len(buf)-1] == '\r' {
				buf = buf[:len(buf)-1]
				l.size--
			}
		}
		if l.size <= limit {
			l.text = string(buf)
		}
		return l, err
	}
}

// lineProducer counts outcomes and reports the first failures.
type lineProducer struct {
	c      *clientlib.Client
	stderr io.Writer

	mu     sync.Mutex
	sent   int
	acked  int
	failed int
}

// errorsShownMax bounds the record errors printed.
const errorsShownMax = 5

// produce sends r, read from line number; a failure is reported by line
// number and size, never by content (a record may be a megabyte).
func (p *lineProducer) produce(ctx context.Context, number int, r *clientlib.Record) {
	p.mu.Lock()
	p.sent++
	p.mu.Unlock()
	p.c.Produce(ctx, r, func(r *clientlib.Record, err error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if err == nil {
			p.acked++
			return
		}
		p.failed++
		if p.failed <= errorsShownMax {
			fmt.Fprintf(p.stderr, "strand: line %d (%d bytes): %s\n", number, len(r.Key)+len(r.Value), userMessage(err))
		}
	})
}

func (p *lineProducer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent
}

func (p *lineProducer) result(topic string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed > 0 {
		return userErr(nil, "%d of %s failed; %s written to %s", p.failed, plural(p.sent, "record"), plural(p.acked, "record"), topic)
	}
	fmt.Fprintf(p.stderr, "produced %s to %s\n", plural(p.sent, "record"), topic)
	return nil
}

// stoppedAt is the error for a line over the record limit, after the
// lines before it were flushed.
func (p *lineProducer) stoppedAt(topic string, l *line) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	failed := ""
	if p.failed > 0 {
		failed = fmt.Sprintf(" (%d failed)", p.failed)
	}
	return userErr(nil, "line %d is %d bytes, over the %d-byte (1 MiB) record limit; stopped there after writing %s to %s%s",
		l.number, l.size, recordbatch.RecordBytesMax, plural(p.acked, "record"), topic, failed)
}

// plural is "1 record", "2 records".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// parseAcks reads --acks.
func parseAcks(s string) (clientlib.Acks, error) {
	switch s {
	case "all", "-1":
		return clientlib.AcksAll, nil
	case "1":
		return clientlib.AcksLeader, nil
	case "0":
		return clientlib.AcksNone, nil
	}
	return 0, usageError("--acks %q: want all, 1 or 0", s)
}

// checkTopic fails fast when topic does not exist, or lacks partition
// (-1: any), rather than letting every record retry or fail on its own.
func checkTopic(ctx context.Context, c *clientlib.Client, topic string, partition int32, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	details, err := c.DescribeTopics(ctx, topic)
	if err != nil {
		return err
	}
	for _, d := range details {
		switch {
		case d.Name != topic:
		case d.Err != nil:
			return topicErr(topic, d.Err)
		case partition >= d.Partitions:
			return userErr(nil, "%s has no partition %d (it has %d: 0 to %d)", topic, partition, d.Partitions, d.Partitions-1)
		}
	}
	return nil
}

// closeBounded closes the client, waiting at most closeWaitMax for records
// still buffered (after Ctrl-C, Flush has given up on them already).
func closeBounded(c *clientlib.Client) {
	done := make(chan struct{})
	go func() {
		c.Close()
		close(done)
	}()
	timer := time.NewTimer(closeWaitMax)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	}
}

// closeWaitMax bounds closeBounded.
const closeWaitMax = 2 * time.Second
