package memdisk

import (
	"fmt"
	"math"

	"github.com/strandlog/strand/raftlog"
)

// The capacity fault: a Disk may be given a size. A write that would grow
// the bytes held by all its files past it fails whole, writing nothing,
// with an error wrapping raftlog.ErrNoSpace, as a full file system answers
// ENOSPC. FreeBytes reports what is left (raftlog.SpaceReporter).

var _ raftlog.SpaceReporter = (*Disk)(nil)

// SetCapacity sets the disk's size in bytes; 0 or less: unlimited.
func (d *Disk) SetCapacity(bytes int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.capacity = bytes
}

// UsedBytes is the bytes the disk's files hold now (synced or not).
func (d *Disk) UsedBytes() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.usedLocked()
}

// FreeBytes implements raftlog.SpaceReporter.
func (d *Disk) FreeBytes() (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.capacity <= 0 {
		return math.MaxInt64, nil
	}
	return max(0, d.capacity-d.usedLocked()), nil
}

func (d *Disk) usedLocked() int64 {
	var n int64
	for _, node := range d.names.files {
		n += int64(len(node.data))
	}
	return n
}

// checkSpaceLocked fails a write of p at off into node when it would
// grow the disk past its capacity.
func (d *Disk) checkSpaceLocked(node *inode, name string, off int64, p []byte) error {
	if d.capacity <= 0 {
		return nil
	}
	grow := off + int64(len(p)) - int64(len(node.data))
	if grow <= 0 || d.usedLocked()+grow <= d.capacity {
		return nil
	}
	return fmt.Errorf("memdisk: write %s at %d (%d bytes): %w", name, off, len(p), raftlog.ErrNoSpace)
}
