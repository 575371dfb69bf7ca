package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// What a kcat or rpk user types, against a real one-node cluster:
// produce keeps every byte of a line (a "\r" before "\n" arrives), sends
// -H headers, -Z nulls and --value-file files whole; consume prints them
// back with %h, -Z and -J, and -o -N, +N and an absolute offset apply per
// partition, a shorter partition being clamped with a note instead of
// failing the command.
func TestKcatProduceConsume(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 1)
	b := "--brokers=" + c.addrs[0]
	if o := runOutcome(t, "", "topic", "create", "kc", "-p", "3", b); o.code != 0 {
		t.Fatalf("create: %+v", o)
	}
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(c.addrs, "kc", 3) })
	produce := func(stdin string, args ...string) {
		t.Helper()
		if o := runOutcome(t, stdin, append([]string{"produce", "kc", b}, args...)...); o.code != 0 || !strings.HasPrefix(o.stderr, "produced ") {
			t.Fatalf("produce %v: %+v", args, o)
		}
	}
	produce("0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n", "-p", "0")
	produce("x\ny\nz\n", "-p", "1")
	produce("cr\r\n\n", "-p", "2", "-H", "h1=v1", "-H", "h2=", "-Z", "-k", "key")
	dir := t.TempDir()
	bin := []byte{0xff, 0x00, '\r', '\n', 'e'}
	if err := os.WriteFile(filepath.Join(dir, "v.bin"), bin, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "k"), []byte("file key\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	produce("", "-p", "2", "--value-file", filepath.Join(dir, "v.bin"), "--key-file", filepath.Join(dir, "k"))

	lines := func(args ...string) ([]string, string) {
		t.Helper()
		if !slices.Contains(args, "-f") {
			args = append(args, "-f", `%p/%o %v\n`)
		}
		o := runOutcome(t, "", append([]string{"consume", "kc", "-e", b}, args...)...)
		if o.code != 0 {
			t.Fatalf("consume %v: %+v", args, o)
		}
		got := strings.Split(strings.TrimSuffix(o.stdout, "\n"), "\n")
		slices.Sort(got)
		return got, o.stderr
	}
	if got, _ := lines("-o", "-2", "-f", `%p/%o %S\n`); !slices.Equal(got, []string{"0/8 1", "0/9 1", "1/1 1", "1/2 1", "2/1 0", "2/2 5"}) {
		t.Errorf("-o -2: %q", got)
	}
	if got, _ := lines("-o", "+2", "-p", "1"); !slices.Equal(got, []string{"1/2 z"}) {
		t.Errorf("-o +2 -p 1: %q", got)
	}
	got, notes := lines("-o", "5")
	if !slices.Equal(got, []string{"0/5 5", "0/6 6", "0/7 7", "0/8 8", "0/9 9"}) {
		t.Errorf("-o 5: %q", got)
	}
	for _, want := range []string{
		"strand: kc/1: offset 5 is past the end (high-water mark 3); reading only new records, from 3\n",
		"strand: kc/2: offset 5 is past the end (high-water mark 3); reading only new records, from 3\n"} {
		if !strings.Contains(notes, want) {
			t.Errorf("-o 5: stderr %q lacks %q", notes, want)
		}
	}
	checkKcatPartition2(t, b, bin)
	if got, _ := lines("--group", "g", "-o", "beginning", "-f", `%p/%o\n`); len(got) != 16 || got[0] != "0/0" || got[15] != "2/2" {
		t.Errorf("--group g -o beginning: %q", got)
	}
	if o := runOutcome(t, "", "consume", "kc", "--group", "g", "-o", "+9", b); o.code != 2 || !strings.Contains(o.stderr, "relative offset applies only without --group") {
		t.Errorf("--group with -o +9: %+v", o)
	}
}

// checkKcatPartition2 reads kc/2 back with %h and -Z, and with -J.
func checkKcatPartition2(t *testing.T, b string, bin []byte) {
	t.Helper()
	o := runOutcome(t, "", "consume", "kc", "-p", "2", "-e", "-Z", "-f", `%k|%v|%h\n`, b)
	if want := "key|cr\r|h1=v1,h2=\nkey|NULL|h1=v1,h2=\nfile key\n|" + string(bin) + "|\n"; o.code != 0 || o.stdout != want {
		t.Errorf("consume -Z %%h: %+v, want stdout %q", o, want)
	}
	o = runOutcome(t, "", "consume", "kc", "-p", "2", "-e", "-J", b)
	type envelope struct {
		Topic           string    `json:"topic"`
		Partition       int32     `json:"partition"`
		Offset          int64     `json:"offset"`
		TSType          string    `json:"tstype"`
		TS              int64     `json:"ts"`
		Headers         []*string `json:"headers"`
		Key             *string   `json:"key"`
		Payload         *string   `json:"payload"`
		PayloadEncoding string    `json:"payload_encoding"`
	}
	var got []envelope
	for _, l := range strings.Split(strings.TrimSuffix(o.stdout, "\n"), "\n") {
		var e envelope
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("-J line %q: %v (%+v)", l, err, o)
		}
		got = append(got, e)
	}
	if len(got) != 3 || got[0].Topic != "kc" || got[0].Partition != 2 || got[0].Offset != 0 || got[0].TSType != "create" ||
		time.Since(time.UnixMilli(got[0].TS)) > time.Hour || *got[0].Payload != "cr\r" || *got[0].Key != "key" ||
		len(got[0].Headers) != 4 || *got[0].Headers[0] != "h1" || *got[0].Headers[1] != "v1" || *got[0].Headers[3] != "" ||
		got[1].Payload != nil || got[2].PayloadEncoding != "base64" || *got[2].Payload != "/wANCmU=" {
		t.Errorf("-J: %+v", o)
	}
}

// Time bounds as kcat's -o s@MS -o e@MS and rpk's @T:T, answered by
// ListOffsets by timestamp: the end is not included, and a partition
// with no record at or after the end time yet is read until one arrives,
// which is not printed.
func TestConsumeTimeRange(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 1)
	b := "--brokers=" + c.addrs[0]
	if o := runOutcome(t, "", "topic", "create", "ts", "-p", "1", b); o.code != 0 {
		t.Fatalf("create: %+v", o)
	}
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(c.addrs, "ts", 1) })
	cl, err := clientlib.NewClient(clientlib.SeedAddresses(c.addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	at := func(ms int64) *clientlib.Record {
		return &clientlib.Record{Topic: "ts", Value: []byte(strconv.FormatInt(ms, 10)), Timestamp: t0.Add(time.Duration(ms) * time.Millisecond)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, at(0), at(1000), at(2000), at(3000)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ms := func(d int64) string { return strconv.FormatInt(t0.UnixMilli()+d, 10) }
	for _, args := range [][]string{
		{"-o", "s@" + ms(1000), "-o", "e@" + ms(3000)},
		{"-o", "@" + ms(500) + ":" + ms(2500)},
		{"-o", "@" + t0.Add(time.Second).UTC().Format(time.RFC3339Nano) + ":" + ms(2001)},
	} {
		o := runOutcome(t, "", append([]string{"consume", "ts", b}, args...)...)
		if o.code != 0 || o.stdout != "1000\n2000\n" {
			t.Errorf("consume %v: %+v, want 1000 and 2000", args, o)
		}
	}
	if o := runOutcome(t, "", "consume", "ts", "-o", "e@"+ms(10000), "-e", b); o.code != 0 || o.stdout != "0\n1000\n2000\n3000\n" {
		t.Errorf("e@ after every record, with -e: %+v", o)
	}
	// No record at or after 5000 yet: the consume waits, prints 4000 and
	// stops at 6000 without printing it.
	cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer ccancel()
	cmd := exec.CommandContext(cctx, strandBinary(t), "consume", "ts", "-o", "s@"+ms(3000), "-o", "e@"+ms(5000), b)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, at(4000), at(6000), at(4500)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil || out.String() != "3000\n4000\n" {
		t.Errorf("open-ended e@: %v, output %q; want 3000 and 4000, then exit 0", err, out.String())
	}
}
