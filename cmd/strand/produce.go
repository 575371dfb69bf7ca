package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/recordbatch"
)

// cmdProduce sends each line of stdin as one record, waits until every
// record is acknowledged, and fails when any record failed.
func cmdProduce(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("produce")
	var cf clientFlags
	cf.register(fs, 30*time.Second)
	keySep := fs.String("key-separator", "", "split each line at the first SEP into key and value (default: no key)")
	acksText := fs.String("acks", "all", "all (replicated, with offsets), 1 (leader's log) or 0 (fire and forget)")
	partition := fs.Int32("partition", -1, "write every line to this partition (-1: by key hash, else spread over partitions)")
	linger := fs.Duration("linger", 5*time.Millisecond, "wait this long to fill a batch")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("produce: want one topic")
	}
	topic := fs.Arg(0)
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
	if err := checkTopic(ctx, c, topic, cf.timeout); err != nil {
		return err
	}
	p := &lineProducer{c: c, stderr: stderr}
	lines, readErr := readLines(stdin)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted after %d records; unacknowledged records may be lost", p.count())
		case line, ok := <-lines:
			if !ok {
				done = true
				break
			}
			r := &clientlib.Record{Topic: topic, Partition: max(*partition, 0)}
			if *keySep != "" {
				if k, v, ok := strings.Cut(line, *keySep); ok {
					r.Key, line = []byte(k), v
				}
			}
			r.Value = []byte(line)
			p.produce(ctx, r)
		}
	}
	if err := <-readErr; err != nil {
		return fmt.Errorf("reading stdin: %w", err)
	}
	if err := c.Flush(ctx); err != nil {
		return err
	}
	return p.result(topic)
}

// readLines reads stdin on its own goroutine, so Ctrl-C is noticed while
// a terminal read blocks; the error (nil at EOF) follows the last line.
func readLines(stdin io.Reader) (<-chan string, <-chan error) {
	lines, errc := make(chan string, 1024), make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 64<<10), recordbatch.RecordBytesMax+1024)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		errc <- sc.Err()
	}()
	return lines, errc
}

// lineProducer counts outcomes and reports the first failures.
type lineProducer struct {
	c      *clientlib.Client
	stderr io.Writer

	mu     sync.Mutex
	sent   int
	failed int
}

// errorsShownMax bounds the record errors printed.
const errorsShownMax = 5

func (p *lineProducer) produce(ctx context.Context, r *clientlib.Record) {
	p.mu.Lock()
	p.sent++
	p.mu.Unlock()
	p.c.Produce(ctx, r, func(r *clientlib.Record, err error) {
		if err == nil {
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.failed++
		if p.failed <= errorsShownMax {
			fmt.Fprintf(p.stderr, "record %q: %v\n", r.Value, err)
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
		return fmt.Errorf("%d of %d records failed", p.failed, p.sent)
	}
	fmt.Fprintf(p.stderr, "produced %d records to %s\n", p.sent, topic)
	return nil
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

// checkTopic fails fast when topic does not exist, rather than letting
// every record retry until its delivery timeout.
func checkTopic(ctx context.Context, c *clientlib.Client, topic string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	details, err := c.DescribeTopics(ctx, topic)
	if err != nil {
		return err
	}
	for _, d := range details {
		if d.Name == topic && d.Err != nil {
			if errors.Is(d.Err, clientlib.ErrUnknownTopic) {
				return fmt.Errorf("topic %s does not exist; create it with: strand topic create %s --partitions N", topic, topic)
			}
			return d.Err
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
