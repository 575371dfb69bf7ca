package main

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/node"
)

// --peers parses into nodes sorted by id, adds this node when missing and
// gives it its rack; malformed lists are refused.
func TestParsePeers(t *testing.T) {
	got, err := parsePeers("3=h3:3, 1=h1:1", 2, "h2:2", "r2")
	if err != nil {
		t.Fatal(err)
	}
	want := []node.Peer{{ID: 1, Address: "h1:1"}, {ID: 2, Address: "h2:2", Rack: "r2"}, {ID: 3, Address: "h3:3"}}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	for _, bad := range []string{"x=h:1", "0=h:1", "1=nohost", "1=h:1,1=h:2", "1"} {
		if _, err := parsePeers(bad, 1, "h:1", ""); err == nil {
			t.Errorf("parsePeers(%q) accepted", bad)
		}
	}
}

// --format expands fields and escapes; an unknown field is refused.
func TestFormat(t *testing.T) {
	f, err := parseFormat(`%T/%p@%o %k=%v %% \t|\n`)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	writeRecord(w, f, &clientlib.Record{Topic: "t", Partition: 2, Offset: 7, Key: []byte("k"), Value: []byte("v"),
		Timestamp: time.Unix(0, 0)})
	w.Flush()
	if got, want := b.String(), "t/2@7 k=v % \t|\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if _, err := parseFormat("%x"); err == nil {
		t.Fatalf("unknown field %%x accepted")
	}
}

// --from accepts earliest, latest, an offset and an RFC3339 time.
func TestParseFrom(t *testing.T) {
	for _, ok := range []string{"earliest", "latest", "0", "42", "2026-11-29T10:00:00Z"} {
		if _, err := parseFrom(ok); err != nil {
			t.Errorf("--from %s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-1", "yesterday"} {
		if _, err := parseFrom(bad); err == nil {
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

// The histogram's quantiles are within its 1/64 resolution of the exact
// ones, and never above the maximum recorded.
func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	for i := 1; i <= 100000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, q := range []float64{0.5, 0.99, 0.999} {
		exact := time.Duration(q*100000) * time.Microsecond
		got := h.quantile(q)
		if got < exact || float64(got-exact) > float64(exact)/32 {
			t.Errorf("q%.3f = %v, exact %v", q, got, exact)
		}
	}
	if h.quantile(1) != 100*time.Millisecond {
		t.Errorf("q1 = %v", h.quantile(1))
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
