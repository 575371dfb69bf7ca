package wal_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strandlog/strand/raftlog/memdisk"
	"github.com/strandlog/strand/raftlog/wal"
	"go.etcd.io/raft/v3/raftpb"
	"pgregory.net/rapid"
)

// TestOpenCachedIsOpen shows that OpenCached, with one cache carried over
// every recovery, returns exactly Open's records and errors: the
// write-ahead log is appended, synced, rotated, cut by crashes (torn
// tails rewritten afterwards) and damaged by bit flips, and after each
// step a crash projection is recovered both ways. The records a recovery
// returned stay as they were through the later ones (the cache reads a
// segment's new bytes into the array its old records point into).
func TestOpenCachedIsOpen(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		disk := memdisk.New()
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 1))
		w, _, err := wal.Open(disk, "wal")
		must(t, err)
		var cache wal.Cache
		var kept []wal.Record // what the previous OpenCached returned
		keptWas := ""
		next := uint64(1)
		for step := range rapid.IntRange(1, 40).Draw(t, "steps") {
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0, 1, 2, 3:
				n := rapid.IntRange(1, 3).Draw(t, "entries")
				var ents []*raftpb.Entry
				for range n {
					ents = append(ents, entry(next, 1, fmt.Sprintf("data-%d", next)))
					next++
				}
				must(t, w.Append(wal.Record{Dir: "p/a/0/log", Entries: ents}))
			case 4, 5:
				must(t, w.Sync())
			case 6:
				must(t, w.Rotate())
			case 7:
				must(t, w.RemoveOld())
			case 8:
				disk.Crash(rng)
				if w, _, err = wal.Open(disk, "wal"); err != nil {
					return // damage a flip left in synced bytes
				}
			case 9:
				files := disk.Files()
				name := rapid.SampledFrom(files).Draw(t, "file")
				if data, _ := disk.ReadFile(name); len(data) > 0 {
					disk.FlipBit(name, int64(rapid.IntRange(0, len(data)-1).Draw(t, "offset")), 3)
				}
			}
			_, want, wantErr := wal.Open(disk.ProjectCrash("wal"), "wal")
			_, got, gotErr := wal.OpenCached(disk.ProjectCrash("wal"), "wal", &cache)
			if describe(kept) != keptWas {
				t.Fatalf("step %d: records an earlier OpenCached returned changed:\n%s\nwere\n%s", step, describe(kept), keptWas)
			}
			if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) || describe(want) != describe(got) {
				t.Fatalf("step %d: OpenCached returned %v\n%s\nOpen returned %v\n%s", step, gotErr, describe(got), wantErr, describe(want))
			}
			kept, keptWas = got, describe(got)
			if wantErr != nil {
				return // a damaged log stays damaged
			}
		}
	})
}
