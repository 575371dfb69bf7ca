// Package osdisk is raftlog's Disk on the operating system's file system.
package osdisk

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/strandlog/strand/raftlog"
)

// Disk is a raftlog.Disk rooted at a directory of the OS file system.
type Disk struct {
	root string
}

var _ raftlog.Disk = (*Disk)(nil)

// New returns a Disk rooted at root, creating root when missing.
func New(root string) (*Disk, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	return &Disk{root: root}, nil
}

func (d *Disk) path(name string) string {
	return filepath.Join(d.root, filepath.FromSlash(name))
}

// Open opens name for reading and writing, creating it and its directory
// when missing. A directory it creates is not made durable by SyncDir of the
// file's directory; its parent would need a sync too (raftlog's directories
// are created once, by the node, before use).
func (d *Disk) Open(name string) (raftlog.File, error) {
	p := d.path(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	return &file{f: f}, nil
}

// Remove deletes name.
func (d *Disk) Remove(name string) error { return os.Remove(d.path(name)) }

// Rename renames from to to (rename(2): replaces to atomically).
func (d *Disk) Rename(from, to string) error { return os.Rename(d.path(from), d.path(to)) }

// List returns the sorted names of the regular files in dir.
func (d *Disk) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(d.path(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// ListDirs returns the sorted names of the directories in dir.
func (d *Disk) ListDirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(d.path(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// SyncDir fsyncs dir, making creations and removals in it durable. A
// missing dir is created first (as Open would).
func (d *Disk) SyncDir(dir string) error {
	if err := os.MkdirAll(d.path(dir), 0o755); err != nil {
		return err
	}
	f, err := os.Open(d.path(dir))
	if err != nil {
		return err
	}
	serr := f.Sync()
	cerr := f.Close()
	if serr != nil {
		return serr
	}
	return cerr
}

// file is an open OS file.
type file struct {
	f *os.File
}

func (f *file) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }
func (f *file) Truncate(size int64) error               { return f.f.Truncate(size) }
func (f *file) Sync() error                             { return f.f.Sync() }
func (f *file) Close() error                            { return f.f.Close() }

func (f *file) Size() (int64, error) {
	info, err := f.f.Stat()
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}
