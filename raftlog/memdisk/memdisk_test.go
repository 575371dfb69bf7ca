package memdisk

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"path"
	"reflect"
	"testing"

	"github.com/strandlog/strand/raftlog"
)

var _ raftlog.Disk = (*Disk)(nil)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, f raftlog.File, off int64, s string) {
	t.Helper()
	_, err := f.WriteAt([]byte(s), off)
	must(t, err)
}

func contents(t *testing.T, d *Disk, name string) string {
	t.Helper()
	b, ok := d.ReadFile(name)
	if !ok {
		return "<missing>"
	}
	return string(b)
}

// TestCrashKeepsOnlySyncedState shows a crash without rng drops unsynced bytes and names not covered by SyncDir, and brings removed but not dir-synced files back.
func TestCrashKeepsOnlySyncedState(t *testing.T) {
	d := New()
	a, _ := d.Open("dir/a")
	write(t, a, 0, "synced")
	must(t, a.Sync())
	must(t, d.SyncDir("dir"))
	write(t, a, 6, "+unsynced")
	c, _ := d.Open("dir/c")
	write(t, c, 0, "removed")
	must(t, c.Sync())
	must(t, d.SyncDir("dir"))
	must(t, d.Remove("dir/c"))
	b, _ := d.Open("dir/b")
	write(t, b, 0, "never dir-synced")
	must(t, b.Sync())
	d.Crash(nil)
	if got := d.Files(); !reflect.DeepEqual(got, []string{"dir/a", "dir/c"}) {
		t.Fatalf("files after crash %v", got)
	}
	if got := contents(t, d, "dir/a"); got != "synced" {
		t.Fatalf("a = %q", got)
	}
	if got := contents(t, d, "dir/c"); got != "removed" {
		t.Fatalf("c = %q", got)
	}
	if _, err := a.ReadAt(make([]byte, 1), 0); !errors.Is(err, ErrCrashed) {
		t.Fatalf("old handle after crash: %v", err)
	}
}

// TestCrashWithRNGDamagesOnlyUnsyncedBytes shows a random crash keeps a prefix of the unsynced writes, may tear the last one, and never touches synced bytes; the same seed gives the same result.
func TestCrashWithRNGDamagesOnlyUnsyncedBytes(t *testing.T) {
	outcomes := map[string]bool{}
	for seed := uint64(0); seed < 200; seed++ {
		d := New()
		f, _ := d.Open("f")
		write(t, f, 0, "SYNCED|")
		must(t, f.Sync())
		must(t, d.SyncDir("."))
		write(t, f, 7, "one|")
		write(t, f, 11, "two|")
		write(t, f, 15, "three|")
		twin := d.Clone()
		d.Crash(rand.New(rand.NewPCG(seed, 1)))
		twin.Crash(rand.New(rand.NewPCG(seed, 1)))
		got := contents(t, d, "f")
		if got != contents(t, twin, "f") {
			t.Fatalf("seed %d: crash not deterministic", seed)
		}
		if !bytes.HasPrefix([]byte(got), []byte("SYNCED|")) {
			t.Fatalf("seed %d: synced bytes damaged: %q", seed, got)
		}
		full := "SYNCED|one|two|three|"
		switch {
		case full[:len(got)] == got:
			outcomes["prefix"] = true
		default:
			outcomes["torn"] = true
		}
		if len(got) > len(full) {
			t.Fatalf("seed %d: grew beyond the writes: %q", seed, got)
		}
	}
	if !outcomes["prefix"] || !outcomes["torn"] {
		t.Fatalf("outcomes seen: %v", outcomes)
	}
}

// TestFaultInjection shows FailReads, FailSync and FlipBit act as documented.
func TestFaultInjection(t *testing.T) {
	d := New()
	f, _ := d.Open("f")
	write(t, f, 0, "abc")
	must(t, f.Sync())
	d.FailReads("f", true)
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, ErrInjected) {
		t.Fatalf("read with FailReads: %v", err)
	}
	d.FailReads("f", false)
	d.FailSync(true)
	if err := f.Sync(); !errors.Is(err, ErrInjected) {
		t.Fatalf("sync with FailSync: %v", err)
	}
	if err := d.SyncDir("."); !errors.Is(err, ErrInjected) {
		t.Fatalf("syncdir with FailSync: %v", err)
	}
	d.FailSync(false)
	must(t, d.SyncDir("."))
	d.FlipBit("f", 1, 0)
	d.Crash(nil)
	if got := contents(t, d, "f"); got != "acc" {
		t.Fatalf("flipped durable byte: %q", got)
	}
}

// TestFileSemantics shows ReadAt, WriteAt, Truncate, Size and List behave like OS files and directories.
func TestFileSemantics(t *testing.T) {
	d := New()
	f, _ := d.Open("x/y/f")
	write(t, f, 4, "tail")
	if size, _ := f.Size(); size != 8 {
		t.Fatalf("size %d", size)
	}
	buf := make([]byte, 10)
	if n, err := f.ReadAt(buf, 0); n != 8 || err != io.EOF || string(buf[:8]) != "\x00\x00\x00\x00tail" {
		t.Fatalf("read %d %v %q", n, err, buf[:n])
	}
	// An empty read at the end (or past it) is no error, as os.File's: a
	// batch with no records after its header ends a segment exactly so.
	for _, off := range []int64{8, 20} {
		if n, err := f.ReadAt(buf[:0], off); n != 0 || err != nil {
			t.Fatalf("empty read at %d: %d %v, want 0 <nil>", off, n, err)
		}
	}
	must(t, f.Truncate(5))
	if got := contents(t, d, "x/y/f"); got != "\x00\x00\x00\x00t" {
		t.Fatalf("after truncate %q", got)
	}
	g, _ := d.Open("x/y/g")
	_ = g
	names, _ := d.List("x/y")
	if !reflect.DeepEqual(names, []string{"f", "g"}) {
		t.Fatalf("list %v", names)
	}
	if names, _ := d.List("x"); len(names) != 0 {
		t.Fatalf("list of parent %v", names)
	}
	if err := d.Remove("x/nope"); err == nil {
		t.Fatal("removing a missing file worked")
	}
	if d.Bytes() != 5 {
		t.Fatalf("bytes %d", d.Bytes())
	}
	if d.DurableBytes() != 0 {
		t.Fatalf("durable bytes %d", d.DurableBytes())
	}
}

// Sync replays only the writes since the last sync over the durable bytes
// (O(unsynced bytes), not O(file)), and what it makes durable is exactly
// the current contents, across writes, truncations, growth and a bit
// flipped in not-yet-durable bytes.
func TestSyncMakesCurrentContentsDurable(t *testing.T) {
	d := New()
	f, err := d.Open("dir/a")
	must(t, err)
	must(t, d.SyncDir("dir"))
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		for range rng.IntN(4) {
			size, _ := f.Size()
			switch rng.IntN(4) {
			case 0:
				must(t, f.Truncate(rng.Int64N(size+1)))
			default:
				b := make([]byte, 1+rng.IntN(64))
				for i := range b {
					b[i] = byte(rng.Uint32())
				}
				_, err := f.WriteAt(b, rng.Int64N(size+16))
				must(t, err)
			}
		}
		if size, _ := f.Size(); size > 0 && rng.IntN(8) == 0 {
			d.FlipBit("dir/a", rng.Int64N(size), uint(rng.IntN(8)))
		}
		must(t, f.Sync())
		want, _ := d.ReadFile("dir/a")
		d.Crash(nil)
		got, _ := d.ReadFile("dir/a")
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d: after sync and crash %d bytes, want %d (equal %v)", round, len(got), len(want), bytes.Equal(got, want))
		}
		f, err = d.Open("dir/a")
		must(t, err)
	}
}

// A rename is durable only once SyncDir covers its directory: a crash
// before brings the old name back (with its durable bytes), after it the
// new name stays; renaming onto a name replaces that file.
func TestRenameDurableAtSyncDir(t *testing.T) {
	d := New()
	f, err := d.Open("log/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("aaa"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	g, _ := d.Open("log/b")
	g.WriteAt([]byte("bbb"), 0)
	g.Sync()
	if err := d.SyncDir("log"); err != nil {
		t.Fatal(err)
	}
	if err := d.Rename("log/a", "log/b"); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.List("log"); len(got) != 1 || got[0] != "b" {
		t.Fatalf("after rename: %v", got)
	}
	if b, _ := d.ReadFile("log/b"); string(b) != "aaa" {
		t.Fatalf("renamed-over file reads %q", b)
	}
	c := d.Clone()
	c.Crash(nil)
	if a, _ := c.ReadFile("log/a"); string(a) != "aaa" {
		t.Fatalf("crash before SyncDir: log/a reads %q, want it back", a)
	}
	if b, _ := c.ReadFile("log/b"); string(b) != "bbb" {
		t.Fatalf("crash before SyncDir: log/b reads %q, want the old file", b)
	}
	if err := d.SyncDir("log"); err != nil {
		t.Fatal(err)
	}
	d.Crash(nil)
	if got, _ := d.List("log"); len(got) != 1 || got[0] != "b" {
		t.Fatalf("crash after SyncDir: %v", got)
	}
	if err := d.Rename("log/missing", "log/x"); err == nil {
		t.Fatal("rename of a missing file succeeded")
	}
}

// TestDirOfIsPathDir shows that dirOf, the namespace's directory index
// key, agrees with path.Dir over clean names: nested, top-level, rooted.
func TestDirOfIsPathDir(t *testing.T) {
	names := []string{"a", "a/b", "a/b/c", "ab/c", "/x", "/x/y", "p/t@1/0/log/00000001.seg"}
	dirs := []string{".", "/", "a", "a/b", "ab", "/x", "x", "p/t@1/0/log", "p/t@1/0"}
	for _, name := range names {
		for _, dir := range dirs {
			if got, want := dirOf(name) == dir, path.Dir(name) == dir; got != want {
				t.Errorf("dirOf(%q) == %q is %v, path.Dir says %v", name, dir, got, want)
			}
		}
	}
}
