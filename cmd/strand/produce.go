package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// cmdProduce sends each line of stdin (or each -D-delimited piece, byte
// for byte) as one record, or with --value-file each file whole, waits
// until every record is acknowledged, and fails when any record failed. A
// record over the limit stops it: the records before are flushed and the
// error says how many were written. Short flags follow kcat and rpk: -K
// key separator, -k key, -H header, -Z null for empty, -D delimiter.
func cmdProduce(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("produce")
	f := registerProduceFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	pl, err := f.plan(fs)
	if err != nil {
		return err
	}
	c, err := f.cf.client(f.clientOpts(pl.acks)...)
	if err != nil {
		return err
	}
	defer closeBounded(c)
	ctx, stop := signalContext()
	defer stop()
	if err := checkTopic(ctx, c, pl.topic, *f.partition, f.cf.timeout); err != nil {
		return err
	}
	p := &lineProducer{c: c, stderr: stderr, txnID: *f.txnID}
	send := func() (*line, error) {
		if pl.files != nil {
			p.sendFiles(ctx, pl.files, pl.topic, *f.partition, &f.shape)
			return nil, nil
		}
		return p.sendLines(ctx, stdin, pl.topic, *f.partition, pl.delim, &f.shape)
	}
	if *f.txnID != "" {
		return p.inTransaction(ctx, pl.topic, send)
	}
	tooLarge, err := send()
	if err != nil {
		return err
	}
	if err := c.Flush(ctx); err != nil {
		return err
	}
	if tooLarge != nil {
		return p.stoppedAt(pl.topic, tooLarge)
	}
	return p.result(pl.topic)
}

// produceFlags are cmdProduce's flags.
type produceFlags struct {
	cf                                              clientFlags
	shape                                           recordShape
	topic, keySep, key, keyFile, delim, acks, txnID *string
	headers, valueFiles                             *[]string
	partition                                       *int32
	linger                                          *time.Duration
}

// registerProduceFlags registers cmdProduce's flags on fs.
func registerProduceFlags(fs *pflag.FlagSet) *produceFlags {
	f := &produceFlags{}
	f.cf.register(fs, 30*time.Second)
	f.topic = fs.StringP("topic", "t", "", "topic to write to (instead of the TOPIC argument)")
	f.keySep = fs.StringP("key-separator", "K", "", "split each record at the first SEP into key and value (default: no key)")
	f.key = fs.StringP("key", "k", "", "the key of every record (rpk's -k; a key split off by -K wins)")
	f.keyFile = fs.String("key-file", "", "the key of every record is this file's bytes, exactly")
	f.headers = fs.StringArrayP("header", "H", nil, "add header KEY=VALUE to every record (repeatable; kcat's and rpk's -H)")
	fs.BoolVarP(&f.shape.null, "null", "Z", false, "an empty value or key is sent as null (a tombstone), as kcat's -Z")
	f.delim = fs.StringP("delimiter", "D", `\n`, `records in stdin end with this (kcat's -D; escapes \n \r \t \\ \xNN; '\r\n' for CRLF input); every other byte is kept`)
	f.valueFiles = fs.StringArray("value-file", nil, "send this file's bytes as one record instead of reading stdin (repeatable: one record per file, kcat's file mode)")
	f.acks = fs.String("acks", "all", "all (replicated, with offsets), 1 (leader's log) or 0 (fire and forget)")
	f.partition = fs.Int32P("partition", "p", -1, "write every record to this partition (-1: by key hash, else spread over partitions)")
	f.linger = fs.Duration("linger", 5*time.Millisecond, "wait this long to fill a batch")
	f.txnID = fs.String("transactional-id", "", "write every record of this run in one transaction, committed at the end and aborted if any record fails or the run is interrupted (kcat's -X transactional.id)")
	return f
}

// producePlan is what cmdProduce's parsed flags ask for.
type producePlan struct {
	topic string
	acks  clientlib.Acks
	delim []byte
	files []valueFile // nil: read records from stdin
}

// plan checks the parsed flags and arguments, reads the key and value
// files, and says what to send.
func (f *produceFlags) plan(fs *pflag.FlagSet) (producePlan, error) {
	var pl producePlan
	topic, err := topicArg(fs, *f.topic)
	if err != nil {
		return pl, err
	}
	if *f.partition < -1 {
		return pl, usageError("--partition %d: want a partition number, or -1 for any", *f.partition)
	}
	acks, err := parseAcks(*f.acks)
	if err != nil {
		return pl, err
	}
	if *f.txnID != "" && acks != clientlib.AcksAll {
		return pl, usageError("--transactional-id needs --acks all (a transaction commits only replicated records)")
	}
	if err := f.shape.parse(fs, *f.keySep, *f.key, *f.keyFile, *f.headers, *f.valueFiles); err != nil {
		return pl, err
	}
	d, err := parseDelimiter(*f.delim, "--delimiter")
	if err != nil {
		return pl, err
	}
	files, err := readValueFiles(*f.valueFiles, &f.shape)
	if err != nil {
		return pl, err
	}
	return producePlan{topic: topic, acks: acks, delim: d, files: files}, nil
}

// clientOpts are the client options the flags ask for.
func (f *produceFlags) clientOpts(acks clientlib.Acks) []clientlib.Opt {
	opts := []clientlib.Opt{clientlib.RequiredAcks(acks), clientlib.DeliveryTimeout(f.cf.timeout), clientlib.Linger(*f.linger)}
	if *f.partition >= 0 {
		opts = append(opts, clientlib.ManualPartitioner())
	}
	if *f.txnID != "" {
		opts = append(opts, clientlib.TransactionalID(*f.txnID))
	}
	return opts
}

// inTransaction runs send inside one transaction of the producer's
// transactional id and commits it once every record was acknowledged. A
// failed record, a line over the limit, a read error or an interrupt
// aborts it instead, so the run writes all of its records or none (for
// read_committed readers), as kcat does with -X transactional.id.
func (p *lineProducer) inTransaction(ctx context.Context, topic string, send func() (*line, error)) error {
	if err := p.c.InitTransactions(ctx); err != nil {
		return wrapErr(err, "transactional id %q", p.txnID)
	}
	if err := p.c.BeginTransaction(); err != nil {
		return wrapErr(err, "beginning a transaction")
	}
	tooLarge, err := send()
	if err == nil {
		err = p.c.Flush(ctx)
	}
	why := p.abortReason(tooLarge, err, ctx.Err())
	if why == "" {
		if err := p.c.CommitTransaction(ctx); err != nil {
			return wrapErr(err, "committing the transaction of %s to %s", plural(p.count(), "record"), topic)
		}
		fmt.Fprintf(p.stderr, "produced %s to %s in one committed transaction (transactional id %s)\n",
			plural(p.count(), "record"), topic, p.txnID)
		return nil
	}
	abortCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), txnAbortWaitMax)
	defer cancel()
	if err := p.c.AbortTransaction(abortCtx); err != nil {
		return userErr(err, "%s; aborting the transaction failed too (%s): its coordinator aborts it after the transaction timeout",
			why, userMessage(err))
	}
	return userErr(nil, "%s; aborted the transaction: read_committed readers see none of its %s",
		why, plural(p.count(), "record"))
}

// txnAbortWaitMax bounds the abort of a failed run's transaction.
const txnAbortWaitMax = 10 * time.Second

// abortReason says why a transactional run must abort ("" when it may
// commit): a line over the limit, an error reading or flushing, an
// interrupt, or records that failed.
func (p *lineProducer) abortReason(tooLarge *line, err, interrupted error) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case tooLarge != nil:
		return fmt.Sprintf("line %d is %d bytes, over the %d-byte (1 MiB) record limit",
			tooLarge.number, tooLarge.size, recordbatch.RecordBytesMax)
	case interrupted != nil:
		return "interrupted"
	case err != nil:
		return userMessage(err)
	case p.failed > 0:
		return fmt.Sprintf("%d of %s failed", p.failed, plural(p.sent, "record"))
	}
	return ""
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

// recordShape is how produce turns input bytes into a record: the key
// (split off by -K, or fixed), the headers, and -Z's nulls.
type recordShape struct {
	keySep  []byte
	key     []byte // nil: no fixed key
	headers []clientlib.Header
	null    bool
}

// parse checks and reads the key, header and file flags.
func (s *recordShape) parse(fs *pflag.FlagSet, keySep, key, keyFile string, headers, valueFiles []string) error {
	switch {
	case fs.Changed("key") && keyFile != "":
		return usageError("--key and --key-file: give one")
	case keySep != "" && len(valueFiles) > 0:
		return usageError("--key-separator splits records read from stdin; with --value-file give --key or --key-file")
	}
	if keySep != "" {
		s.keySep = []byte(keySep)
	}
	if fs.Changed("key") {
		s.key = []byte(key)
	}
	if keyFile != "" {
		b, err := os.ReadFile(keyFile)
		if err != nil {
			return userErr(err, "--key-file: %v", err)
		}
		s.key = b
	}
	for _, h := range headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return usageError("--header %q: want KEY=VALUE (the value may be empty)", h)
		}
		s.headers = append(s.headers, clientlib.Header{Key: k, Value: []byte(v)})
	}
	return nil
}

// record is the record for one input's bytes.
func (s *recordShape) record(topic string, partition int32, text []byte) *clientlib.Record {
	r := &clientlib.Record{Topic: topic, Partition: max(partition, 0), Headers: s.headers, Key: s.key}
	value := text
	if s.keySep != nil {
		if k, v, ok := bytes.Cut(value, s.keySep); ok {
			r.Key, value = k, v
		}
	}
	if value == nil {
		value = []byte{}
	}
	if s.null && len(value) == 0 {
		value = nil
	}
	if s.null && r.Key != nil && len(r.Key) == 0 {
		r.Key = nil
	}
	r.Value = value
	return r
}

// recordSize is what the record limit counts: key, value and headers.
func recordSize(r *clientlib.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// valueFile is one --value-file, read whole.
type valueFile struct {
	name  string
	bytes []byte
}

// readValueFiles reads every --value-file before anything is sent, so a
// missing or too large file writes nothing; nil when there are none.
func readValueFiles(names []string, shape *recordShape) ([]valueFile, error) {
	var files []valueFile
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, userErr(err, "--value-file: %v; nothing written", err)
		}
		if size := recordSize(shape.record("", 0, b)); size > recordbatch.RecordBytesMax {
			return nil, userErr(nil, "--value-file %s: the record is %d bytes, over the %d-byte (1 MiB) record limit; nothing written",
				name, size, recordbatch.RecordBytesMax)
		}
		files = append(files, valueFile{name, b})
	}
	return files, nil
}

// sendFiles produces one record per file.
func (p *lineProducer) sendFiles(ctx context.Context, files []valueFile, topic string, partition int32, shape *recordShape) {
	for _, f := range files {
		p.produce(ctx, "file "+f.name, shape.record(topic, partition, f.bytes))
	}
}

// sendLines produces every delimited record of stdin until EOF, Ctrl-C
// or a record over the limit, which it returns without sending it.
func (p *lineProducer) sendLines(ctx context.Context, stdin io.Reader, topic string, partition int32, delim []byte, shape *recordShape) (*line, error) {
	lines, readErr := readLines(stdin, delim, recordbatch.RecordBytesMax)
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
			r := shape.record(topic, partition, []byte(l.text))
			if size := recordSize(r); size > recordbatch.RecordBytesMax {
				l.size = size
				return &l, nil
			}
			p.produce(ctx, "line "+strconv.Itoa(l.number), r)
		}
	}
}

// line is one delimited record of stdin: its text, unless it is over the
// limit, and its size in bytes without the delimiter.
type line struct {
	number int
	size   int
	text   string
}

// readLines reads stdin on its own goroutine, so Ctrl-C is noticed while
// a terminal read blocks; the error (nil at EOF) follows the last line. A
// line over limit bytes is counted but not kept, and ends the reading.
func readLines(stdin io.Reader, delim []byte, limit int) (<-chan line, <-chan error) {
	lines, errc := make(chan line, 1024), make(chan error, 1)
	go func() {
		defer close(errc)
		defer close(lines)
		br := bufio.NewReaderSize(stdin, 64<<10)
		for n := 1; ; n++ {
			l, err := readLine(br, delim, limit)
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

// readLine reads up to and without the next delim, byte for byte (a "\r"
// before a "\n" delimiter stays), keeping at most limit bytes; size is the
// whole line's length. It returns io.EOF with the last line when that has
// no delimiter.
func readLine(br *bufio.Reader, delim []byte, limit int) (line, error) {
	var buf, tail []byte // tail: the last len(delim) bytes, once buf is dropped
	var l line
	last := delim[len(delim)-1]
	for {
		chunk, err := br.ReadSlice(last)
		l.size += len(chunk)
		if l.size <= limit+len(delim) {
			buf = append(buf, chunk...)
		} else {
			tail = append(append(tail, buf...), chunk...)
			tail, buf = tail[max(0, len(tail)-len(delim)):], nil
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == nil && !bytes.HasSuffix(buf, delim) && !bytes.HasSuffix(tail, delim) {
			continue // the last byte of a longer delimiter alone
		}
		if err == nil {
			l.size -= len(delim)
		}
		if l.size <= limit {
			l.text = string(buf[:l.size])
		}
		return l, err
	}
}

// parseDelimiter reads a delimiter flag with kcat's escapes: \n \r \t \\
// and \xNN.
func parseDelimiter(s, flag string) ([]byte, error) {
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			out = append(out, s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case '\\':
			out = append(out, '\\')
		case 'x':
			if i+3 > len(s) {
				return nil, usageError("%s %q: \\x wants two hex digits", flag, s)
			}
			n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return nil, usageError("%s %q: \\x wants two hex digits", flag, s)
			}
			out = append(out, byte(n))
			i += 2
		default:
			out = append(out, '\\', s[i])
		}
	}
	if len(out) == 0 {
		return nil, usageError("%s: want at least one byte (default \\n)", flag)
	}
	return out, nil
}

// lineProducer counts outcomes and reports the first failures.
type lineProducer struct {
	c      *clientlib.Client
	stderr io.Writer
	txnID  string // --transactional-id: the run is one transaction

	mu     sync.Mutex
	sent   int
	acked  int
	failed int
	// keyless: a record without a key was refused as invalid (a
	// compacted topic takes keyed records only).
	keyless bool
}

// errorsShownMax bounds the record errors printed.
const errorsShownMax = 5

// produce sends r, read from what (line N, file F); a failure is reported
// by where it came from and its size, never by content (a record may be a
// megabyte).
func (p *lineProducer) produce(ctx context.Context, what string, r *clientlib.Record) {
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
		p.keyless = p.keyless || r.Key == nil && errors.Is(err, &clientlib.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_RECORD})
		if p.failed <= errorsShownMax {
			fmt.Fprintf(p.stderr, "strand: %s (%d bytes): %s\n", what, recordSize(r), userMessage(err))
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
		hint := ""
		if p.keyless {
			hint = "; a compacted topic takes keyed records only: give keys with -K SEP (split each line), -k KEY or --key-file"
		}
		return userErr(nil, "%d of %s failed; %s written to %s%s", p.failed, plural(p.sent, "record"), plural(p.acked, "record"), topic, hint)
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
