package memdisk

import (
	"path"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestNamespaceIndexMatchesScan shows that the per-directory index answers
// as a scan of every name would: after any sequence of opens, removals,
// renames (across directories, over existing names), directory syncs and
// crashes, List and ProjectCrash of each directory agree with
// Files and the whole-disk projection filtered by path.Dir, and the index
// holds no name the namespace lost; right after SyncDir a crash keeps
// exactly the directory's names.
func TestNamespaceIndexMatchesScan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		names := []string{"a", "d/a", "d/b", "d/e/c", "e/a", "e/b", "/r"}
		dirs := []string{".", "d", "d/e", "e", "/"}
		d := New()
		for i := range rapid.IntRange(1, 40).Draw(t, "ops") {
			name := rapid.SampledFrom(names).Draw(t, "name")
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0, 1:
				f, _ := d.Open(name)
				_, _ = f.WriteAt([]byte{byte(i)}, 0)
				if rapid.Bool().Draw(t, "sync") {
					_ = f.Sync()
				}
			case 2:
				_ = d.Remove(name)
			case 3:
				_ = d.Rename(name, rapid.SampledFrom(names).Draw(t, "to"))
			case 4:
				dir := rapid.SampledFrom(dirs).Draw(t, "dir")
				_ = d.SyncDir(dir)
				listed, _ := d.List(dir)
				var durable []string
				for _, name := range d.ProjectCrash(dir).Files() {
					durable = append(durable, path.Base(name))
				}
				if !slices.Equal(durable, listed) {
					t.Fatalf("after SyncDir(%q) a crash keeps %v, the directory holds %v", dir, durable, listed)
				}
			case 5:
				d.Crash(nil)
			}
			checkIndex(t, d, dirs)
		}
	})
}

// checkIndex fails unless d's per-directory answers match a full scan.
func checkIndex(t *rapid.T, d *Disk, dirs []string) {
	all, whole := d.Files(), d.ProjectCrash("").Files()
	for _, dir := range dirs {
		var want, wantDurable []string
		for _, name := range all {
			if path.Dir(name) == dir {
				want = append(want, path.Base(name))
			}
		}
		for _, name := range whole {
			if path.Dir(name) == dir {
				wantDurable = append(wantDurable, name)
			}
		}
		if got, _ := d.List(dir); !slices.Equal(got, want) {
			t.Fatalf("List(%q) = %v, a scan finds %v", dir, got, want)
		}
		if got := d.ProjectCrash(dir).Files(); !slices.Equal(got, wantDurable) {
			t.Fatalf("ProjectCrash(%q) holds %v, the whole projection %v", dir, got, wantDurable)
		}
	}
	for _, ns := range []namespace{d.names, d.durableNames} {
		indexed := 0
		for dir, m := range ns.dirs {
			if len(m) == 0 {
				t.Fatalf("directory %q indexed with no file", dir)
			}
			for name, n := range m {
				if dirOf(name) != dir || ns.files[name] != n {
					t.Fatalf("index holds %q under %q, the namespace does not", name, dir)
				}
			}
			indexed += len(m)
		}
		if indexed != len(ns.files) {
			t.Fatalf("index holds %d names, the namespace %d", indexed, len(ns.files))
		}
	}
}
