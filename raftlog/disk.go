package raftlog

import "errors"

// Disk holds raftlog's files. It is the only way raftlog reaches storage, so
// the same code runs on the OS (raftlog/osdisk) and in memory with injected
// faults (raftlog/memdisk).
//
// Names are slash-separated paths relative to the disk's root; a file's
// directory is created when the file is first opened. After a crash only
// bytes covered by a successful File.Sync, and names covered by a successful
// SyncDir of their directory, survive.
type Disk interface {
	// Open opens the named file for reading and writing, creating it empty
	// when it does not exist.
	Open(name string) (File, error)
	// Remove deletes the named file. Removing a missing file is an error.
	Remove(name string) error
	// Rename gives the file from the name to (same directory), replacing a
	// file of that name. Like a removal, durable once SyncDir covers the
	// directory.
	Rename(from, to string) error
	// List returns the names (base names, not paths) of the files in dir,
	// sorted, so that directory order never leaks into behaviour. A missing
	// directory lists as empty.
	List(dir string) ([]string, error)
	// ListDirs returns the names of the directories in dir, sorted like
	// List; a missing directory lists as empty. A directory may outlive
	// its last file (it does on the OS, not in memory).
	ListDirs(dir string) ([]string, error)
	// SyncDir makes creations and removals of files in dir durable.
	SyncDir(dir string) error
}

// File is an open file of a Disk. Files are not safe for concurrent use,
// except ReadAt: a read may run on another goroutine at the same time as
// any call on the same file, Close included (pread beside pwrite: the
// node reads committed entries off its loop, raftlog's Read), and then
// returns the bytes or an error.
type File interface {
	// ReadAt reads len(p) bytes at off; fewer bytes come with an error
	// (io.EOF at the end of the file).
	ReadAt(p []byte, off int64) (int, error)
	// WriteAt writes p at off, extending the file when needed.
	WriteAt(p []byte, off int64) (int, error)
	// Truncate sets the file's size.
	Truncate(size int64) error
	// Size returns the file's current size, synced or not.
	Size() (int64, error)
	// Sync makes the file's current contents and size durable.
	Sync() error
	// Close releases the file. It does not sync.
	Close() error
}

// ErrNoSpace: the disk is full. A Disk's File.WriteAt returns an error
// wrapping it (osdisk maps ENOSPC to it), and raftlog passes it up wrapped,
// so the node can refuse writes instead of stopping. A failed Sync is
// never this error's business: after a failed fsync the log is failed for
// good, full disk or not (fsyncgate).
var ErrNoSpace = errors.New("raftlog: no space left on device")

// SpaceReporter is implemented by a Disk that can tell its free space; the
// node checks it against its free-space floor before it accepts writes.
type SpaceReporter interface {
	// FreeBytes is how many bytes can still be written.
	FreeBytes() (int64, error)
}
