package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// lockFileName is the file in a data directory whose lock marks the
// directory as in use by one process (as pebble's LOCK).
const lockFileName = "LOCK"

// DataDirLockedError: another process (or another Server of this process)
// holds the data directory. Two writers on one directory interleave their
// raft log writes and corrupt it, so the second is refused.
type DataDirLockedError struct {
	Dir string
	PID int // the holder's process id as it wrote it; 0 if unknown
}

func (e *DataDirLockedError) Error() string {
	holder := "another process"
	if e.PID != 0 {
		holder = fmt.Sprintf("process %d", e.PID)
	}
	return fmt.Sprintf("node: data dir %s is in use by %s (lock file %s); stop that process or choose another data dir",
		e.Dir, holder, filepath.Join(e.Dir, lockFileName))
}

// dirLock is a held lock on a data directory. The lock is the kernel's
// (flock on an open file), so it goes with the process: after a crash or
// kill -9 the next start takes it without any manual unlock.
type dirLock struct {
	f *os.File
}

// lockDataDir takes the lock of dir (which must exist) and writes this
// process's id into the LOCK file for the next one to name. A lock already
// held fails with *DataDirLockedError.
func lockDataDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("node: lock data dir: %w", err)
	}
	held, err := flockExclusive(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("node: lock %s: %w", path, err)
	}
	if held {
		pid := readLockPID(f)
		f.Close()
		return nil, &DataDirLockedError{Dir: dir, PID: pid}
	}
	// The pid is informational (the lock is the flock), so it is not synced.
	if err = f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("node: write %s: %w", path, err)
	}
	return &dirLock{f: f}, nil
}

// readLockPID reads the holder's pid from its LOCK file; 0 if unreadable
// (the holder may not have written it yet).
func readLockPID(f *os.File) int {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// unlock releases the lock (closing the file drops the flock). The LOCK
// file stays: removing it would race with a process opening it.
func (l *dirLock) unlock() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}
