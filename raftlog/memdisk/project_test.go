package memdisk

import (
	"reflect"
	"testing"
)

// TestProjectCrashMatchesCrashAndLeavesDiskAlone shows ProjectCrash keeps
// what Crash(nil) keeps (synced bytes of dir-synced names), for one
// directory or all, while the live disk keeps its unsynced state and
// handles.
func TestProjectCrashMatchesCrashAndLeavesDiskAlone(t *testing.T) {
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
	o, _ := d.Open("other/x")
	write(t, o, 0, "x")
	must(t, o.Sync())
	must(t, d.SyncDir("other"))

	p := d.ProjectCrash("dir")
	if got := p.Files(); !reflect.DeepEqual(got, []string{"dir/a", "dir/c"}) {
		t.Fatalf("projected files %v", got)
	}
	if got := contents(t, p, "dir/a"); got != "synced" {
		t.Fatalf("projected a = %q", got)
	}
	if got := contents(t, p, "dir/c"); got != "removed" {
		t.Fatalf("projected c = %q", got)
	}
	if got := d.ProjectCrash("").Files(); !reflect.DeepEqual(got, []string{"dir/a", "dir/c", "other/x"}) {
		t.Fatalf("whole projection %v", got)
	}
	// Writing to the projection does not reach the live disk, nor back.
	pa, _ := p.Open("dir/a")
	write(t, pa, 0, "XX")
	if got := contents(t, d, "dir/a"); got != "synced+unsynced" {
		t.Fatalf("live a = %q after writing the projection", got)
	}
	write(t, a, 0, "YY")
	if got := contents(t, p, "dir/a"); got != "XXnced" {
		t.Fatalf("projected a = %q after writing the live disk", got)
	}
	// The live disk is undisturbed: its old handle still works, and a real
	// crash agrees with the projection taken before it.
	must(t, a.Sync())
	if got := contents(t, d, "dir/a"); got != "YYnced+unsynced" {
		t.Fatalf("live a = %q", got)
	}
	want := d.ProjectCrash("dir")
	d.Crash(nil)
	for _, name := range []string{"dir/a", "dir/c"} {
		if got, w := contents(t, d, name), contents(t, want, name); got != w {
			t.Fatalf("%s after crash %q, projected %q", name, got, w)
		}
	}
}

// TestDurableGeneration shows the generation of a directory changes with
// a sync or dir-sync there (and with any crash), never with a write or with
// syncs elsewhere, and Synced says whether the directory has anything a
// crash would drop.
func TestDurableGeneration(t *testing.T) {
	d := New()
	g0 := d.DurableGeneration("dir")
	a, _ := d.Open("dir/a")
	if d.Synced("dir") {
		t.Fatal("a created but not dir-synced: Synced")
	}
	must(t, d.SyncDir("dir"))
	g1 := d.DurableGeneration("dir")
	if g1 == g0 || !d.Synced("dir") {
		t.Fatalf("SyncDir: generation %d -> %d, synced %v", g0, g1, d.Synced("dir"))
	}
	write(t, a, 0, "data")
	if d.DurableGeneration("dir") != g1 || d.Synced("dir") {
		t.Fatalf("a write changed the generation or left the dir synced")
	}
	o, _ := d.Open("other/x")
	must(t, o.Sync())
	must(t, d.SyncDir("other"))
	if d.DurableGeneration("dir") != g1 {
		t.Fatalf("syncs in another directory changed the generation")
	}
	must(t, a.Sync())
	g2 := d.DurableGeneration("dir")
	if g2 == g1 || !d.Synced("dir") {
		t.Fatalf("Sync: generation %d -> %d, synced %v", g1, g2, d.Synced("dir"))
	}
	must(t, d.Remove("dir/a"))
	if d.Synced("dir") {
		t.Fatal("a removed but not dir-synced: Synced")
	}
	d.Crash(nil)
	if g3 := d.DurableGeneration("dir"); g3 == g2 || !d.Synced("dir") {
		t.Fatalf("Crash: generation %d -> %d, synced %v", g2, g3, d.Synced("dir"))
	}
}

// TestChangedDirs shows ChangedDirs names exactly the directories synced
// after a DurableSeq reading, sorted.
func TestChangedDirs(t *testing.T) {
	d := New()
	for _, name := range []string{"b/x", "a/x", "c/x"} {
		f, _ := d.Open(name)
		must(t, f.Sync())
	}
	since := d.DurableSeq()
	must(t, d.SyncDir("c"))
	f, _ := d.Open("a/y")
	write(t, f, 0, "y")
	must(t, f.Sync())
	if got := d.ChangedDirs(since); !reflect.DeepEqual(got, []string{"a", "c"}) {
		t.Fatalf("ChangedDirs = %v, want [a c]", got)
	}
	if got := d.ChangedDirs(d.DurableSeq()); len(got) != 0 {
		t.Fatalf("ChangedDirs(now) = %v", got)
	}
}

// TestTruncatesCountsPerDirectory shows Truncates counts the truncations
// of files in directories of the base name asked for, only.
func TestTruncatesCountsPerDirectory(t *testing.T) {
	d := New()
	a, _ := d.Open("p/0/log/a")
	b, _ := d.Open("p/0/checkpoint/b")
	must(t, a.Truncate(0))
	must(t, a.Truncate(0))
	must(t, b.Truncate(0))
	if got := d.Truncates("log"); got != 2 {
		t.Fatalf("Truncates(log) = %d, want 2", got)
	}
	if got := d.Truncates("checkpoint"); got != 1 {
		t.Fatalf("Truncates(checkpoint) = %d, want 1", got)
	}
}
