package compacted

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// errPowerCut is what a cutDisk returns once its budget is spent.
var errPowerCut = errors.New("power cut")

// cutDisk fails every disk operation once budget operations have run
// (budget -1: never), as a power cut after that many operations would.
type cutDisk struct {
	*memdisk.Disk
	budget int
}

func (d *cutDisk) op() error {
	if d.budget == 0 {
		return errPowerCut
	}
	if d.budget > 0 {
		d.budget--
	}
	return nil
}

func (d *cutDisk) Open(name string) (raftlog.File, error) {
	if err := d.op(); err != nil {
		return nil, err
	}
	f, err := d.Disk.Open(name)
	return &cutFile{File: f, d: d}, err
}

func (d *cutDisk) Remove(name string) error {
	if err := d.op(); err != nil {
		return err
	}
	return d.Disk.Remove(name)
}

func (d *cutDisk) Rename(from, to string) error {
	if err := d.op(); err != nil {
		return err
	}
	return d.Disk.Rename(from, to)
}

func (d *cutDisk) SyncDir(dir string) error {
	if err := d.op(); err != nil {
		return err
	}
	return d.Disk.SyncDir(dir)
}

type cutFile struct {
	raftlog.File
	d *cutDisk
}

func (f *cutFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.d.op(); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *cutFile) Truncate(size int64) error {
	if err := f.d.op(); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *cutFile) Sync() error {
	if err := f.d.op(); err != nil {
		return err
	}
	return f.File.Sync()
}

// TestSwitchSurvivesPowerCutAnywhere cuts the power after every possible
// number of disk operations while a store switches to a new generation
// (from an empty store, and from one holding a generation), crashes
// memdisk (unsynced writes kept in part, torn, or lost; names not covered
// by a directory sync forgotten or back), reopens and requires exactly the
// old or the new generation, whole, with no other generation's file left;
// the new one if Commit returned. Then the next generation commits over
// whatever the crash left, and survives a crash of its own.
func TestSwitchSurvivesPowerCutAnywhere(t *testing.T) {
	g1, g2, g3 := makeGeneration(t, 1, 0, 12, "a"), makeGeneration(t, 2, 3, 9, "b"), makeGeneration(t, 3, 3, 5, "c")
	withG1 := memdisk.New()
	s := mustOpen(t, withG1)
	must(t, write(s, g1))
	empty := generation{start: 0, end: 0}
	for _, from := range []struct {
		name string
		disk *memdisk.Disk
		old  generation
	}{{"empty", memdisk.New(), empty}, {"full", withG1, g1}} {
		t.Run(from.name, func(t *testing.T) {
			for cut := 0; ; cut++ {
				done := false
				for seed := uint64(0); seed < 4 && !done; seed++ {
					done = switchWithCut(t, from.disk, cut, seed, from.old, g2, g3)
				}
				if done {
					if cut < 10 {
						t.Fatalf("the whole switch took %d disk operations: too few to be the protocol", cut)
					}
					t.Logf("power cut after each of %d disk operations", cut)
					return
				}
			}
		})
	}
}

// switchWithCut runs one power cut after cut operations of writing next
// over a copy of base (holding old), the crash drawn from seed, and reports whether the switch ran
// to the end without reaching the cut.
func switchWithCut(t *testing.T, base *memdisk.Disk, cut int, seed uint64, old, next, after generation) bool {
	t.Helper()
	disk := &cutDisk{Disk: base.Clone(), budget: -1}
	rng := rand.New(rand.NewPCG(uint64(cut), seed))
	s := mustOpen(t, disk)
	disk.budget = cut
	err := write(s, next)
	if err == nil && disk.budget != 0 {
		return true
	}
	disk.Crash(rng)
	disk.budget = -1
	s, err2 := Open(disk, "c", testOpts)
	if err2 != nil {
		t.Fatalf("cut after %d ops: open: %v", cut, err2)
	}
	got := holds(s, next)
	if got != nil && err == nil {
		t.Fatalf("cut after %d ops: Commit returned but the new generation is not there: %v", cut, got)
	}
	if got != nil {
		if e := holdsOld(s, old); e != nil {
			t.Fatalf("cut after %d ops: neither generation: new: %v; old: %v", cut, got, e)
		}
	}
	checkOnlyCurrentFiles(t, disk.Disk, s.Generation(), cut)
	must(t, write(s, after))
	disk.Crash(rng)
	if err := holds(mustOpen(t, disk), after); err != nil {
		t.Fatalf("cut after %d ops: next generation after the crash: %v", cut, err)
	}
	checkOnlyCurrentFiles(t, disk.Disk, after.gen, cut)
	return false
}

// holdsOld is holds for the generation before the switch, which may be
// the empty generation 0.
func holdsOld(s *Store, old generation) error {
	if old.gen == 0 {
		if s.Generation() != 0 || s.Bytes() != 0 {
			return fmt.Errorf("store at generation %d, want the empty one", s.Generation())
		}
		return nil
	}
	return holds(s, old)
}

// checkOnlyCurrentFiles fails when a file of another generation than gen
// is left in the store's directory after Open.
func checkOnlyCurrentFiles(t *testing.T, disk *memdisk.Disk, gen uint64, cut int) {
	t.Helper()
	prefix := fmt.Sprintf("c/%020d-", gen)
	for _, name := range disk.Files() {
		if name != "c/manifest" && !strings.HasPrefix(name, prefix) {
			t.Fatalf("cut after %d ops: file %s left at generation %d: %v", cut, name, gen, disk.Files())
		}
	}
}
