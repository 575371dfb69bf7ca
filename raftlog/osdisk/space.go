package osdisk

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/strandlog/strand/raftlog"
)

var _ raftlog.SpaceReporter = (*Disk)(nil)

// FreeBytes is the space an unprivileged writer may still use on the file
// system holding the disk's root (statfs: available blocks × block size).
func (d *Disk) FreeBytes() (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.root, &st); err != nil {
		return 0, fmt.Errorf("osdisk: statfs %s: %w", d.root, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// WriteAt writes p at off; a full file system's ENOSPC (or EDQUOT) comes
// back wrapping raftlog.ErrNoSpace.
func (f *file) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.f.WriteAt(p, off)
	if err != nil && (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) {
		err = fmt.Errorf("%w: %w", raftlog.ErrNoSpace, err)
	}
	return n, err
}
