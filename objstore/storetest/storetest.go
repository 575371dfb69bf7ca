// Package storetest is the conformance suite every objstore.Store passes:
// the package comment of objstore, as tests. Each implementation's own
// test calls Run with a constructor of empty stores.
package storetest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/strandlog/strand/objstore"
)

// Run checks the objstore contract against stores made by open, which
// must answer an empty store each call.
func Run(t *testing.T, open func(t *testing.T) objstore.Store) {
	t.Run("PutGetStat", func(t *testing.T) { putGetStat(t, open(t)) })
	t.Run("Overwrite", func(t *testing.T) { overwrite(t, open(t)) })
	t.Run("Ranges", func(t *testing.T) { ranges(t, open(t)) })
	t.Run("Missing", func(t *testing.T) { missing(t, open(t)) })
	t.Run("ShortOrLongReader", func(t *testing.T) { shortOrLongReader(t, open(t)) })
	t.Run("ListSortedByPrefix", func(t *testing.T) { listSorted(t, open(t)) })
	t.Run("DeleteIdempotent", func(t *testing.T) { deleteIdempotent(t, open(t)) })
	t.Run("BadKeys", func(t *testing.T) { badKeys(t, open(t)) })
	t.Run("Empty", func(t *testing.T) { empty(t, open(t)) })
}

func put(t *testing.T, s objstore.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(context.Background(), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func get(t *testing.T, s objstore.Store, key string, off, n int64) []byte {
	t.Helper()
	b, err := s.Get(context.Background(), key, off, n)
	if err != nil {
		t.Fatalf("get %s [%d,+%d): %v", key, off, n, err)
	}
	return b
}

func wantKind(t *testing.T, what string, err error, kind objstore.Kind) {
	t.Helper()
	if got := objstore.KindOf(err); got != kind {
		t.Fatalf("%s: got %v (kind %v), want kind %v", what, err, got, kind)
	}
}

func payload(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func putGetStat(t *testing.T, s objstore.Store) {
	data := payload(70_000, 3)
	put(t, s, "t/0/00000000000000000000.log", data)
	if got := get(t, s, "t/0/00000000000000000000.log", 0, -1); !bytes.Equal(got, data) {
		t.Fatalf("get whole: %d bytes, want the %d put", len(got), len(data))
	}
	obj, err := s.Stat(context.Background(), "t/0/00000000000000000000.log")
	if err != nil || obj.Size != int64(len(data)) || obj.Key != "t/0/00000000000000000000.log" {
		t.Fatalf("stat: %+v %v", obj, err)
	}
}

func overwrite(t *testing.T, s objstore.Store) {
	put(t, s, "k", []byte("first version"))
	put(t, s, "k", []byte("second"))
	if got := get(t, s, "k", 0, -1); string(got) != "second" {
		t.Fatalf("after overwrite: %q", got)
	}
}

func ranges(t *testing.T, s objstore.Store) {
	data := payload(1000, 9)
	put(t, s, "r", data)
	for _, c := range []struct{ off, n, from, to int64 }{
		{0, 10, 0, 10}, {990, 10, 990, 1000}, {990, 100, 990, 1000}, {500, -1, 500, 1000},
		{1000, 5, 1000, 1000}, {1000, -1, 1000, 1000}, {3, 0, 3, 3},
	} {
		if got := get(t, s, "r", c.off, c.n); !bytes.Equal(got, data[c.from:c.to]) {
			t.Fatalf("get [%d,+%d): %d bytes, want [%d,%d)", c.off, c.n, len(got), c.from, c.to)
		}
	}
	_, err := s.Get(context.Background(), "r", 1001, 1)
	wantKind(t, "get past the end", err, objstore.KindRange)
	_, err = s.Get(context.Background(), "r", -1, 1)
	wantKind(t, "get at a negative offset", err, objstore.KindInvalid)
}

func missing(t *testing.T, s objstore.Store) {
	_, err := s.Get(context.Background(), "nope", 0, -1)
	wantKind(t, "get missing", err, objstore.KindNotFound)
	_, err = s.Stat(context.Background(), "nope")
	wantKind(t, "stat missing", err, objstore.KindNotFound)
	put(t, s, "dir/obj", []byte("x"))
	_, err = s.Stat(context.Background(), "dir")
	wantKind(t, "stat of a key prefix", err, objstore.KindNotFound)
}

// shortOrLongReader: a body that does not match its size (a crashed
// uploader's reader, a segment that grew) stores nothing.
func shortOrLongReader(t *testing.T, s objstore.Store) {
	err := s.Put(context.Background(), "short", bytes.NewReader([]byte("abc")), 10)
	if err == nil {
		t.Fatal("a put whose reader ended early succeeded")
	}
	if _, err := s.Stat(context.Background(), "short"); !objstore.IsNotFound(err) {
		t.Fatalf("a failed put left an object: %v", err)
	}
	err = s.Put(context.Background(), "long", strings.NewReader("abcdef"), 3)
	if err == nil {
		t.Fatal("a put whose reader held more than its size succeeded")
	}
	if _, err := s.Stat(context.Background(), "long"); !objstore.IsNotFound(err) {
		t.Fatalf("a failed put left an object: %v", err)
	}
	put(t, s, "kept", []byte("old"))
	if err := s.Put(context.Background(), "kept", io.LimitReader(strings.NewReader("new!"), 2), 4); err == nil {
		t.Fatal("a short overwrite succeeded")
	}
	if got := get(t, s, "kept", 0, -1); string(got) != "old" {
		t.Fatalf("a failed overwrite changed the object to %q", got)
	}
}

func listSorted(t *testing.T, s objstore.Store) {
	keys := []string{"b/2", "a/1", "a.c", "a/0/x", "b/10", "ab"}
	for i, k := range keys {
		put(t, s, k, payload(i+1, byte(i)))
	}
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a.c", "a/0/x", "a/1", "ab", "b/10", "b/2"}},
		{"a/", []string{"a/0/x", "a/1"}},
		{"a", []string{"a.c", "a/0/x", "a/1", "ab"}},
		{"b/1", []string{"b/10"}},
		{"zz/", nil},
	} {
		objs, err := s.List(context.Background(), c.prefix)
		if err != nil {
			t.Fatalf("list %q: %v", c.prefix, err)
		}
		var got []string
		for _, o := range objs {
			got = append(got, o.Key)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Fatalf("list %q: %v, want %v", c.prefix, got, c.want)
		}
	}
	objs, _ := s.List(context.Background(), "b/2")
	if len(objs) != 1 || objs[0].Size != 1 {
		t.Fatalf("list b/2 sizes: %+v", objs)
	}
}

func deleteIdempotent(t *testing.T, s objstore.Store) {
	put(t, s, "d/x", []byte("1"))
	for i := 0; i < 2; i++ {
		if err := s.Delete(context.Background(), "d/x"); err != nil {
			t.Fatalf("delete %d: %v", i, err)
		}
	}
	if _, err := s.Stat(context.Background(), "d/x"); !objstore.IsNotFound(err) {
		t.Fatalf("after delete: %v", err)
	}
	if objs, err := s.List(context.Background(), "d/"); err != nil || len(objs) != 0 {
		t.Fatalf("list after delete: %v %v", objs, err)
	}
}

func badKeys(t *testing.T, s objstore.Store) {
	for _, key := range []string{"", "/a", "a/", "a//b", "a/../b", "./a", "a\x00b", "a\\b", strings.Repeat("k", objstore.MaxKeyLen+1)} {
		err := s.Put(context.Background(), key, strings.NewReader("x"), 1)
		wantKind(t, fmt.Sprintf("put %q", key), err, objstore.KindInvalid)
	}
}

func empty(t *testing.T, s objstore.Store) {
	put(t, s, "zero", nil)
	if got := get(t, s, "zero", 0, -1); len(got) != 0 {
		t.Fatalf("empty object read %d bytes", len(got))
	}
	obj, err := s.Stat(context.Background(), "zero")
	if err != nil || obj.Size != 0 {
		t.Fatalf("stat empty: %+v %v", obj, err)
	}
}
