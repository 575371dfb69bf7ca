package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
)

// --peers parses into nodes sorted by id and gives this node its rack;
// malformed lists are refused.
func TestParsePeers(t *testing.T) {
	got, err := parsePeers("3=h3:3, 1=h1:1,2=h2:2", "r2", 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []node.Peer{{ID: 1, Address: "h1:1"}, {ID: 2, Address: "h2:2", Rack: "r2"}, {ID: 3, Address: "h3:3"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"x=h:1", "0=h:1", "1=nohost", "1=h:1,1=h:2", "1"} {
		if _, err := parsePeers(bad, "", 1); err == nil {
			t.Errorf("parsePeers(%q) accepted", bad)
		}
	}
}

// serve refuses a --peers list that lacks its own --id (it used to invent
// an address for itself: peer 1's, and "connect" to itself), and a
// --listen or --advertise that disagrees with its own --peers entry; it
// listens on its entry when --listen is not given.
func TestResolvePeers(t *testing.T) {
	const peers = "1=127.0.0.1:9092,2=127.0.0.1:9093,3=127.0.0.1:9094"
	for _, tc := range []struct {
		id                int
		peers             string
		listen, advertise string
		wantListen        string
		wantErr           string
	}{
		{id: 4, peers: peers, wantErr: "does not name this node"},
		{id: 2, peers: peers, listen: "127.0.0.1:9092", wantErr: "different ports"},
		{id: 2, peers: peers, advertise: "10.0.0.2:9093", wantErr: "disagree"},
		{id: 2, peers: peers, wantListen: "127.0.0.1:9093"},
		{id: 2, peers: peers, listen: "0.0.0.0:9093", wantListen: "0.0.0.0:9093"},
		{id: 1, wantListen: "127.0.0.1:9192"},
	} {
		listen, advertise := tc.listen, tc.advertise
		nodes, err := resolvePeers(node.NodeID(tc.id), tc.peers, &listen, &advertise, "")
		switch {
		case tc.wantErr != "":
			if err == nil || !isUsageError(err) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%+v: got %v, want a usage error with %q", tc, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%+v: %v", tc, err)
		case listen != tc.wantListen:
			t.Errorf("%+v: listens on %s, want %s", tc, listen, tc.wantListen)
		case tc.peers == "" && (len(nodes) != 1 || nodes[0].Address != tc.wantListen):
			t.Errorf("%+v: alone, got %v", tc, nodes)
		}
	}
}

// Flag values the server would silently replace are refused before any
// connection: a partition count below 1 (it made 1 and the CLI printed 0
// or -1), a replication factor below 1 (it made 3 and the CLI printed -1),
// and a negative partition other than -1 ("any").
func TestBadCountsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"topic", "create", "t", "--partitions", "0"},
		{"topic", "create", "t", "--partitions", "-1"},
		{"topic", "create", "t", "-p", "2", "--replication-factor", "-1"},
		{"topic", "create", "t", "-p", "2", "-r", "0"},
		{"produce", "t", "--partition", "-2"},
		{"consume", "t", "--partition", "-2"},
		{"consume", "t", "--count", "-1"},
		{"consume", "t", "--isolation", "committed"},
	} {
		var out, errOut bytes.Buffer
		code := run(append(args, "--brokers", "127.0.0.1:1"), strings.NewReader(""), &out, &errOut)
		if code != 2 || out.Len() != 0 || !strings.HasPrefix(errOut.String(), "strand: --") {
			t.Errorf("strand %v: exit %d, stdout %q, stderr %q; want exit 2 naming the flag", args, code, out.String(), errOut.String())
		}
	}
}

// Every command and subcommand answers --help, -h and `strand help CMD`
// on stdout with exit 0: its synopsis with positional arguments, a
// one-line description and an example. `strand topic --help`, `strand
// bench --help` and `strand help CMD` used to fail.
func TestHelpForEveryCommand(t *testing.T) {
	for _, name := range []string{"dev", "serve", "topic create", "topic list", "topic describe", "topic delete",
		"produce", "consume", "cluster", "bench produce", "bench consume", "bench e2e", "bench cluster", "version", "help"} {
		words := strings.Fields(name)
		want := []string{"Usage:\n  strand " + name, "Example:\n  "}
		if strings.Contains(name, "topic ") && name != "topic list" {
			want = append(want, "strand "+name+" NAME")
		}
		if name == "produce" || name == "consume" {
			want = append(want, "strand "+name+" TOPIC", "--brokers")
		}
		forms := [][]string{append([]string{"help"}, words...)}
		if name != "help" {
			forms = append(forms, append(slices.Clone(words), "--help"), append(slices.Clone(words), "-h"))
		}
		for _, args := range forms {
			checkHelp(t, args, want)
		}
	}
	for _, group := range []string{"topic", "bench"} {
		for _, args := range [][]string{{group, "--help"}, {group, "-h"}, {"help", group}} {
			checkHelp(t, args, []string{"Usage:\n  strand " + group + " ", "Example:\n  strand " + group})
		}
	}
	checkHelp(t, []string{"help"}, []string{"Usage:", "strand topic create NAME"})
	checkHelp(t, []string{"--help"}, []string{"Usage:", "strand consume TOPIC"})
}

// checkHelp runs args and wants exit 0 with every string of want on stdout.
func checkHelp(t *testing.T, args []string, want []string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(args, strings.NewReader(""), &out, &errOut); code != 0 || errOut.Len() != 0 {
		t.Errorf("strand %v: exit %d, stderr %q", args, code, errOut.String())
		return
	}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("strand %v: stdout lacks %q:\n%s", args, w, out.String())
		}
	}
}

// `strand version` prints the version, the commit (or "unknown") and the
// Go version; there was no such command.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out, errOut bytes.Buffer
		if code := run(args, strings.NewReader(""), &out, &errOut); code != 0 {
			t.Fatalf("strand %v: exit %d: %s", args, code, errOut.String())
		}
		if s := out.String(); !strings.HasPrefix(s, "strand ") || !strings.Contains(s, "\ncommit ") || !strings.Contains(s, runtime.Version()) {
			t.Errorf("strand %v: %q", args, s)
		}
	}
}

// Errors are rendered once, by userMessage: no stacked "strand: code:
// pkg:" prefixes, network errors reduced to their cause, and topic errors
// in the user's words.
func TestUserMessage(t *testing.T) {
	exists := &clientlib.Error{Code: strandpb.ErrorCode_ERROR_CODE_TOPIC_EXISTS, Message: `metadata: topic exists: "hello"`}
	refused := &clientlib.ConnError{Addr: "127.0.0.1:1", Err: &net.OpError{Op: "dial", Net: "tcp",
		Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}}
	tooLarge := &clientlib.Error{Code: strandpb.ErrorCode_ERROR_CODE_RECORD_TOO_LARGE}
	noSpace := &clientlib.Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_ENOUGH_SPACE, Message: "node: not enough disk space"}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{topicErr("hello", exists), `topic "hello" already exists`},
		{topicErr("nope", &clientlib.Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, Message: "topic nope"}),
			`topic "nope" does not exist (create it with: strand topic create nope --partitions N)`},
		{&clientlib.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_CONFIG, Message: "metadata: invalid topic config: x"}, "invalid topic config: x"},
		{tooLarge, "record too large"},
		{refused, "cannot reach 127.0.0.1:1: connection refused"},
		{fmt.Errorf("listen on x: %w", &net.OpError{Op: "listen", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9092},
			Err: &os.SyscallError{Syscall: "bind", Err: syscall.EADDRINUSE}}),
			"cannot listen on 127.0.0.1:9092: address already in use (is another strand running there?)"},
		{&clientlib.RetriesExhaustedError{Attempts: 3, Err: refused}, "cannot reach 127.0.0.1:1: connection refused (gave up after 3 attempts)"},
		{&clientlib.RetriesExhaustedError{Attempts: 8, Err: noSpace}, "not enough disk space (not_enough_space, gave up after 8 attempts)"},
		{&clientlib.RetriesExhaustedError{Attempts: 6, Err: &clientlib.Error{Code: strandpb.ErrorCode_ERROR_CODE_TIMEOUT, Message: "delivery timeout", Cause: noSpace}},
			"delivery timeout; last error: not enough disk space (not_enough_space) (gave up after 6 attempts)"},
		{&clientlib.ConnError{Addr: "h:80", Err: errors.New("frame: frame larger than the limit: 1008813135 bytes")},
			"h:80 answered, but not as a strand node (frame larger than the limit: 1008813135 bytes)"},
		{wrapErr(&clientlib.OffsetOutOfRangeError{Topic: "hello", Partition: 0, Offset: 120, HighWatermark: 100}, "hello/0"),
			"hello/0: offset 120 is past the end of hello/0 (high-water mark 100); use --from latest or a smaller offset"},
	} {
		if got := userMessage(tc.err); got != tc.want {
			t.Errorf("userMessage(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// readLine keeps lines up to the limit, strips "\n" only (a "\r" before it
// is the line's own byte), and for a
// longer line (even one far over bufio's buffer, which made
// bufio.Scanner fail with "token too long") reports its whole size
// without keeping it.
func TestReadLines(t *testing.T) {
	const limit = 100
	in := "a\r\n\n" + strings.Repeat("x", limit) + "\n" + strings.Repeat("y", 300<<10) + "\nnot read\n"
	lines, errc := readLines(strings.NewReader(in), []byte("\n"), limit)
	var got []line
	for l := range lines {
		got = append(got, l)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	want := []line{{1, 2, "a\r"}, {2, 0, ""}, {3, limit, strings.Repeat("x", limit)}, {4, 300 << 10, ""}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %d lines %.80v, want %.80v", len(got), got, want)
	}
	lines, errc = readLines(strings.NewReader("last"), []byte("\n"), limit)
	if l := <-lines; l != (line{1, 4, "last"}) {
		t.Fatalf("unterminated last line: %+v", l)
	}
	if _, more := <-lines; more || <-errc != nil {
		t.Fatalf("more after the last line")
	}
}

// --format expands fields and escapes as kcat's -f does (%t the topic,
// %T the timestamp in Unix milliseconds: they were swapped, so kcat's
// '%t %T' printed the timestamp and then the topic); an unknown field is
// refused.
func TestFormat(t *testing.T) {
	f, err := parseFormat(`%t/%p@%o %T %k=%v %% \t|\n`, "")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	writeRecord(w, f, &clientlib.Record{Topic: "t", Partition: 2, Offset: 7, Key: []byte("k"), Value: []byte("v"),
		Timestamp: time.UnixMilli(1764590400123)})
	w.Flush()
	if got, want := b.String(), "t/2@7 1764590400123 k=v % \t|\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if _, err := parseFormat("%x", ""); err == nil {
		t.Fatalf("unknown field %%x accepted")
	}
}

// --from accepts earliest, latest, an offset and an RFC3339 time (the
// other forms: TestParseOffsets).
func TestParseFrom(t *testing.T) {
	for _, ok := range []string{"earliest", "latest", "0", "42", "2026-11-29T10:00:00Z"} {
		if _, err := parseOffsets([]string{ok}, time.Now()); err != nil {
			t.Errorf("--from %s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "--1", "yesterday"} {
		if _, err := parseOffsets([]string{bad}, time.Now()); err == nil {
			t.Errorf("--from %q accepted", bad)
		}
	}
}

// A flag not given on the command line is read from STRAND_<FLAG>; the
// command line wins over the environment.
func TestFlagsFromEnvironment(t *testing.T) {
	t.Setenv("STRAND_DATA_DIR", "/from/env")
	t.Setenv("STRAND_ID", "7")
	fs := newFlags("test")
	dir := fs.String("data-dir", "", "")
	id := fs.Uint64("id", 0, "")
	if err := parseFlags(fs, []string{"--id", "3"}); err != nil {
		t.Fatal(err)
	}
	if *dir != "/from/env" || *id != 3 {
		t.Fatalf("data-dir %q id %d", *dir, *id)
	}
	t.Setenv("STRAND_ID", "seven")
	fs = newFlags("test")
	fs.Uint64("id", 0, "")
	if err := parseFlags(fs, nil); err == nil || !isUsageError(err) {
		t.Fatalf("bad STRAND_ID: %v", err)
	}
}

// Unknown commands and missing arguments are usage errors (exit 2).
func TestUsageErrors(t *testing.T) {
	var out, errOut bytes.Buffer
	for _, args := range [][]string{{"frobnicate"}, {"topic"}, {"topic", "create"}, {"serve"}, {"produce"}, {"bench", "x"}} {
		out.Reset()
		errOut.Reset()
		if code := run(args, strings.NewReader(""), &out, &errOut); code != 2 {
			t.Errorf("strand %v: exit %d, want 2 (%s)", args, code, errOut.String())
		}
	}
}

// A client command whose brokers refuse connections, or answer but not as
// strand nodes, fails with one line saying so instead of retrying until
// --timeout (it took about 13 s, with "clientlib: connection to ...").
func TestUnreachableBrokers(t *testing.T) {
	closed := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			nc.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			nc.Close()
		}
	}()
	for _, tc := range []struct{ brokers, want string }{
		{closed, "strand: cannot reach the cluster at " + closed + ": connection refused (is a cluster running there? 'strand dev' starts one on 127.0.0.1:9192)\n"},
		{ln.Addr().String(), "strand: " + ln.Addr().String() + " answered, but not as a strand node ("},
	} {
		for _, args := range [][]string{{"topic", "list"}, {"produce", "t"}, {"consume", "t"}, {"cluster"}} {
			var out, errOut bytes.Buffer
			code := run(append(args, "--brokers", tc.brokers, "--timeout", "20s"), strings.NewReader("x\n"), &out, &errOut)
			if code != 1 || !strings.HasPrefix(errOut.String(), tc.want) || strings.Count(errOut.String(), "\n") != 1 {
				t.Errorf("strand %v --brokers %s: exit %d, stderr %q; want exit 1 and %q", args, tc.brokers, code, errOut.String(), tc.want)
			}
		}
	}
}

// strand dev refuses a --base-port whose derived ports overflow 65535 at
// once, naming the port: before, 65400 passed the check (it covered only
// the Strand ports, base-port+100..) and the admin port base-port+200
// failed later (issue 19, item 10).
func TestDevBasePortOverflowRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--base-port", "65400"}, "--base-port 65400: the admin port (base-port+200) would be 65600, over 65535; want 1 to 65335 (or give --admin-listen HOST:PORT)"},
		{[]string{"--base-port", "65440", "--admin-listen", "127.0.0.1:1"}, "--base-port 65440: node 3's Strand port (base-port+102) would be 65542, over 65535; want 1 to 65433"},
		{[]string{"--base-port", "0"}, "--base-port 0: want 1 to 65335"},
	} {
		err := cmdDev(c.args, io.Discard, io.Discard)
		var use *errUsage
		if !errors.As(err, &use) || use.msg != c.want {
			t.Errorf("dev %v: %v, want the usage error %q", c.args, err, c.want)
		}
	}
}
