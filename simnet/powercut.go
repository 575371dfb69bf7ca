package simnet

import (
	"errors"
	"path"
	"slices"
	"strings"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// errPowerCut is what every disk operation returns once the power is cut.
var errPowerCut = errors.New("simnet: power cut")

// cutKind is where a power cut is armed to strike.
type cutKind uint8

const (
	cutCheckpoint  cutKind = iota + 1 // while an engine or metadata checkpoint is written
	cutSegmentRoll                    // while a log rolls to a new segment file
	cutRound                          // at a drawn write of the node's next processing rounds
	cutRecovery                       // at a drawn write of the node's recovery (Open)
	cutCompaction                     // while a compaction pass writes or switches its prefix (compacted/)
)

// cutDisk is a node's Disk with a power switch: armed, it cuts the power
// at the after-th disk operation from the moment the node creates a file
// of the armed kind (a checkpoint file, a new log segment). From then on
// every operation fails, so nothing more reaches the disk, and the node
// fail-stops out of the Process round it was in; the world then crashes
// its memdisk, which keeps only what was synced. This is a power cut in
// the middle of a processing round, at each step of the checkpoint write
// protocol (write, sync, SyncDir, removal of older files) or of a roll.
type cutDisk struct {
	d        *memdisk.Disk
	armed    cutKind
	after    int // operations allowed after the trigger before the cut
	counting bool
	cut      bool
	fired    cutKind // the kind that cut the power, 0 while none did
	// kill: a cutRound or cutCompaction kills the process instead of
	// cutting the power (the page cache survives: the disk keeps every
	// write).
	kill bool
	// atSwitch: a cutCompaction counts from the pass's new manifest
	// (manifest.tmp: the switch), else from its first new segment file.
	atSwitch bool
	// firedAt is the file or directory of the operation the cut struck.
	firedAt string
	// durable, when set, is called with a compacted prefix's directory
	// after each operation that changed what a power loss would keep of it
	// (a file's Sync, SyncDir, Remove, Rename): prefixes.go checks that
	// durable view at every step of a pass.
	durable func(dir string)
}

var _ raftlog.Disk = (*cutDisk)(nil)

// arm sets the power cut; reset disarms it (at every restart).
func (c *cutDisk) arm(kind cutKind, after int) {
	c.armed, c.after, c.counting, c.cut, c.fired, c.kill = kind, after, false, false, 0, false
	c.atSwitch, c.firedAt = false, ""
}

func (c *cutDisk) reset() { c.arm(0, 0) }

// resetAtRestart disarms a cut that fired or counts down within a round
// (they belong to the run that ended), but keeps a power cut armed for the
// node's next checkpoint or segment roll that has not started counting: a
// node restarted before it wrote one still has the cut ahead of it, so the
// fault is not lost to a restart that happened to come first.
func (c *cutDisk) resetAtRestart() {
	if (c.armed == cutCheckpoint || c.armed == cutSegmentRoll || c.armed == cutCompaction) && !c.counting && !c.cut {
		kind, after, kill, atSwitch := c.armed, c.after, c.kill, c.atSwitch
		c.arm(kind, after)
		c.kill, c.atSwitch = kill, atSwitch
		return
	}
	c.reset()
}

// armNow sets a power cut that counts from now: the after-th disk write
// (Open, Remove, SyncDir, WriteAt, Truncate, Sync) from here is cut, so
// the cut falls between the writes of one Ready (entries, hard state,
// syncs of several groups), of a checkpoint, or of a recovery.
func (c *cutDisk) armNow(kind cutKind, after int) {
	c.arm(kind, after)
	c.counting = true
}

// op counts one operation on name and reports whether the power is off
// for it.
func (c *cutDisk) op(name string) bool {
	if c.cut {
		return true
	}
	if !c.counting {
		return false
	}
	if c.after == 0 {
		c.cut = true
		c.fired, c.firedAt = c.armed, name
		return true
	}
	c.after--
	return false
}

// triggers reports whether opening name starts the countdown: a new file
// of the armed kind.
func (c *cutDisk) triggers(name string) bool {
	if c.armed == 0 || c.counting {
		return false
	}
	dir, base := path.Split(path.Clean(name))
	switch c.armed {
	case cutCheckpoint:
		if !strings.HasSuffix(dir, "/checkpoint/") {
			return false
		}
	case cutSegmentRoll:
		if !strings.HasSuffix(dir, "/log/") || !strings.HasSuffix(base, ".log") {
			return false
		}
	case cutCompaction:
		if !inCompacted(dir) || c.atSwitch != (base == "manifest.tmp") {
			return false
		}
	}
	names, err := c.d.List(dir)
	return err == nil && !slices.Contains(names, base)
}

// Open implements raftlog.Disk.
func (c *cutDisk) Open(name string) (raftlog.File, error) {
	if c.triggers(name) {
		c.counting = true
	}
	if c.op(name) {
		return nil, errPowerCut
	}
	f, err := c.d.Open(name)
	if err != nil {
		return nil, err
	}
	return &cutFile{File: f, c: c, name: name}, nil
}

// Remove implements raftlog.Disk.
func (c *cutDisk) Remove(name string) error {
	if c.op(name) {
		return errPowerCut
	}
	return c.changed(path.Dir(name), c.d.Remove(name))
}

// Rename implements raftlog.Disk.
func (c *cutDisk) Rename(from, to string) error {
	if c.op(to) {
		return errPowerCut
	}
	return c.changed(path.Dir(to), c.d.Rename(from, to))
}

// changed reports a durable step in dir to the durable hook when dir is a
// compacted prefix's and the operation succeeded; it returns err.
func (c *cutDisk) changed(dir string, err error) error {
	if err == nil && c.durable != nil && inCompacted(path.Clean(dir)+"/") {
		c.durable(path.Clean(dir))
	}
	return err
}

// List implements raftlog.Disk.
func (c *cutDisk) List(dir string) ([]string, error) {
	if c.cut {
		return nil, errPowerCut
	}
	return c.d.List(dir)
}

// ListDirs implements raftlog.Disk.
func (c *cutDisk) ListDirs(dir string) ([]string, error) {
	if c.cut {
		return nil, errPowerCut
	}
	return c.d.ListDirs(dir)
}

// SyncDir implements raftlog.Disk.
func (c *cutDisk) SyncDir(dir string) error {
	if c.op(dir + "/") {
		return errPowerCut
	}
	return c.changed(dir, c.d.SyncDir(dir))
}

// cutFile is a file of a cutDisk.
type cutFile struct {
	raftlog.File
	c    *cutDisk
	name string
}

func (f *cutFile) ReadAt(p []byte, off int64) (int, error) {
	if f.c.cut {
		return 0, errPowerCut
	}
	return f.File.ReadAt(p, off)
}

func (f *cutFile) WriteAt(p []byte, off int64) (int, error) {
	if f.c.op(f.name) {
		return 0, errPowerCut
	}
	return f.File.WriteAt(p, off)
}

func (f *cutFile) Truncate(size int64) error {
	if f.c.op(f.name) {
		return errPowerCut
	}
	return f.File.Truncate(size)
}

func (f *cutFile) Size() (int64, error) {
	if f.c.cut {
		return 0, errPowerCut
	}
	return f.File.Size()
}

func (f *cutFile) Sync() error {
	if f.c.op(f.name) {
		return errPowerCut
	}
	return f.c.changed(path.Dir(f.name), f.File.Sync())
}

// inCompacted reports whether a file's directory (or a directory, with its
// trailing slash) is a replica's compacted prefix (node's compactedDir).
func inCompacted(dir string) bool { return strings.HasSuffix(dir, "/compacted/") }

// firedInCompacted reports whether the cut struck an operation on a
// compacted prefix's files or directory.
func (c *cutDisk) firedInCompacted() bool {
	return c.firedAt != "" && inCompacted(path.Dir(path.Clean(c.firedAt))+"/") || inCompacted(c.firedAt)
}
