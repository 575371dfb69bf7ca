package main

import (
	"bufio"
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/clientlib"
)

// Records are split at the delimiter and kept byte for byte: a "\r"
// before "\n" stays, a multi-byte delimiter ("\r\n", "||") splits only
// where it is whole (a lone last byte of it is data), and a record over
// the limit is measured even when the delimiter straddles bufio's buffer.
func TestReadLinesDelimiters(t *testing.T) {
	const limit = 100
	read := func(in, delim string) []line {
		t.Helper()
		lines, errc := readLines(strings.NewReader(in), []byte(delim), limit)
		var got []line
		for l := range lines {
			got = append(got, l)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, c := range []struct {
		in, delim string
		want      []line
	}{
		{"a\r\nb\n\r\n", "\n", []line{{1, 2, "a\r"}, {2, 1, "b"}, {3, 1, "\r"}}},
		{"a\r\nb\nc\r\n", "\r\n", []line{{1, 1, "a"}, {2, 3, "b\nc"}}},
		{"x|y||z||", "||", []line{{1, 3, "x|y"}, {2, 1, "z"}}},
		{"one\x00two", "\x00", []line{{1, 3, "one"}, {2, 3, "two"}}},
		{"\n\n", "\n", []line{{1, 0, ""}, {2, 0, ""}}},
		{strings.Repeat("q", 200<<10) + "\r\nok\r\n", "\r\n", []line{{1, 200 << 10, ""}}},
		{strings.Repeat("w", limit) + "\r\n", "\r\n", []line{{1, limit, strings.Repeat("w", limit)}}},
	} {
		if got := read(c.in, c.delim); !slices.Equal(got, c.want) {
			t.Errorf("%.40q split at %q: got %.80v, want %.80v", c.in, c.delim, got, c.want)
		}
	}
}

// -D takes kcat's escapes; an empty delimiter or a bad \x is refused.
func TestParseDelimiter(t *testing.T) {
	for in, want := range map[string]string{`\n`: "\n", `\r\n`: "\r\n", `\t`: "\t", `\\`: `\`, `\x00`: "\x00", `\x1e|`: "\x1e|", ";;": ";;", `\q`: `\q`} {
		if got, err := parseDelimiter(in, "-D"); err != nil || string(got) != want {
			t.Errorf("-D %q: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", `\x`, `\x1`, `\xzz`} {
		if _, err := parseDelimiter(bad, "-D"); err == nil {
			t.Errorf("-D %q accepted", bad)
		}
	}
}

// A record takes -K's split key over --key, every -H header, and with -Z
// an empty value or key becomes null while without it empty stays empty
// (never null): null and empty differ on the wire.
func TestRecordShape(t *testing.T) {
	parse := func(args ...string) *recordShape {
		t.Helper()
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		key := fs.StringP("key", "k", "", "")
		var s recordShape
		fs.BoolVarP(&s.null, "null", "Z", false, "")
		sep := fs.StringP("key-separator", "K", "", "")
		hs := fs.StringArrayP("header", "H", nil, "")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := s.parse(fs, *sep, *key, "", *hs, nil); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	r := parse("-K", ":", "-k", "fixed", "-H", "a=1", "-H", "b=", "-H", "c=x=y").record("t", -1, []byte("k:v:w"))
	if string(r.Key) != "k" || string(r.Value) != "v:w" || r.Partition != 0 ||
		!slices.EqualFunc(r.Headers, []clientlib.Header{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte{}}, {Key: "c", Value: []byte("x=y")}},
			func(a, b clientlib.Header) bool { return a.Key == b.Key && bytes.Equal(a.Value, b.Value) }) {
		t.Errorf("split record: %+v", r)
	}
	if r := parse("-k", "fixed").record("t", 2, []byte("v")); string(r.Key) != "fixed" || r.Partition != 2 {
		t.Errorf("fixed key: %+v", r)
	}
	if r := parse().record("t", -1, []byte{}); r.Key != nil || r.Value == nil || len(r.Value) != 0 {
		t.Errorf("empty without -Z: key %v value %#v, want null key and empty value", r.Key, r.Value)
	}
	if r := parse("-Z", "-K", ":").record("t", -1, []byte(":")); r.Key != nil || r.Value != nil {
		t.Errorf("-Z: key %#v value %#v, want both null", r.Key, r.Value)
	}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	var s recordShape
	for _, h := range []string{"novalue", "=v"} {
		if err := s.parse(fs, "", "", "", []string{h}, nil); err == nil || !isUsageError(err) {
			t.Errorf("-H %q: %v, want a usage error", h, err)
		}
	}
	if err := s.parse(fs, ":", "", "", nil, []string{"f"}); err == nil {
		t.Errorf("-K with --value-file accepted")
	}
}

// %h prints headers as kcat's n=v list, -Z prints null as NULL (and
// empty as nothing), %K and %S print sizes, and json is kcat's -J
// envelope, lossless for bytes that are not UTF-8.
func TestFormatHeadersNullsJSON(t *testing.T) {
	r := &clientlib.Record{Topic: "t", Partition: 1, Offset: 9, Key: nil, Value: []byte("a\"<b>"),
		Headers: []clientlib.Header{{Key: "h1", Value: []byte("v1")}, {Key: "h2", Value: nil}}, Timestamp: time.UnixMilli(1700000000123)}
	print := func(format, null string, r *clientlib.Record) string {
		t.Helper()
		f, err := parseFormat(format, null)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		w := bufio.NewWriter(&b)
		writeRecord(w, f, r)
		w.Flush()
		return b.String()
	}
	if got, want := print(`%k|%s|%h|%K|%S\n`, "NULL", r), "NULL|a\"<b>|h1=v1,h2=NULL|0|5\n"; got != want {
		t.Errorf("-Z: got %q, want %q", got, want)
	}
	if got, want := print(`%k|%v|%h\n`, "", &clientlib.Record{Key: []byte{}, Value: nil}), "||\n"; got != want {
		t.Errorf("without -Z: got %q, want %q", got, want)
	}
	want := `{"topic":"t","partition":1,"offset":9,"tstype":"create","ts":1700000000123,"headers":["h1","v1","h2",null],"key":null,"payload":"a\"<b>"}` + "\n"
	if got := print("json", "", r); got != want {
		t.Errorf("json:\ngot  %s\nwant %s", got, want)
	}
	bin := &clientlib.Record{Topic: "t", Key: []byte("k"), Value: []byte{0xff, 0x00}, Timestamp: time.UnixMilli(0)}
	want = `{"topic":"t","partition":0,"offset":0,"tstype":"create","ts":0,"headers":[],"key":"k","payload":"/wA=","payload_encoding":"base64"}` + "\n"
	if got := print("json", "", bin); got != want {
		t.Errorf("json of binary:\ngot  %s\nwant %s", got, want)
	}
}

// consume's -D and -K build kcat's default output (key, -K, value, -D);
// with --format or --json they are refused, as is --json beside another
// --format.
func TestConsumeDelimiters(t *testing.T) {
	run := func(args ...string) (string, error) {
		t.Helper()
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		format := fs.StringP("format", "f", `%v\n`, "")
		asJSON := fs.BoolP("json", "J", false, "")
		null := fs.BoolP("null", "Z", false, "")
		delim := fs.StringP("delimiter", "D", `\n`, "")
		keyDelim := fs.StringP("key-delimiter", "K", "", "")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		f, err := consumeFormat(fs, *format, *asJSON, *null, *delim, *keyDelim)
		if err != nil {
			return "", err
		}
		var b bytes.Buffer
		w := bufio.NewWriter(&b)
		writeRecord(w, f, &clientlib.Record{Key: []byte("k"), Value: []byte("v%n")})
		writeRecord(w, f, &clientlib.Record{Value: nil})
		w.Flush()
		return b.String(), nil
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "v%n\n\n"},
		{[]string{"-D", `\x00`}, "v%n\x00\x00"},
		{[]string{"-K", `\t`, "-D", "|", "-Z"}, "k\tv%n|NULL\tNULL|"},
		{[]string{"-J", "-f", "json"}, `{"topic":"","partition":0,"offset":0,"tstype":"create","ts":-62135596800000,"headers":[],"key":"k","payload":"v%n"}` + "\n" +
			`{"topic":"","partition":0,"offset":0,"tstype":"create","ts":-62135596800000,"headers":[],"key":null,"payload":null}` + "\n"},
	} {
		if got, err := run(c.args...); err != nil || got != c.want {
			t.Errorf("%v: %q, %v; want %q", c.args, got, err, c.want)
		}
	}
	for _, bad := range [][]string{{"-J", "-f", "%v"}, {"-D", ";", "-f", "%v"}, {"-K", ":", "-J"}, {"-D", ""}} {
		if _, err := run(bad...); err == nil || !isUsageError(err) {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
	}
}
