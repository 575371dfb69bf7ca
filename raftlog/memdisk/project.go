package memdisk

import (
	"path"
	"sort"
)

// durableChanged notes that what a crash would keep of dir may have
// changed. The disk's mutex is held.
func (d *Disk) durableChanged(dir string) {
	d.durableSeq++
	d.dirChanged[dir] = d.durableSeq
}

// DurableGeneration returns a number that stays the same as long as what a
// power loss would keep of the files directly in dir stays the same: it
// changes with every Sync of a file there, every SyncDir of dir, every
// Crash and every FlipBit there. A checker can cache what it derived from
// ProjectCrash(dir) under it. Writes do not change it: unsynced bytes are
// not kept anyway.
func (d *Disk) DurableGeneration(dir string) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	// Keys are clean: a hit is the answer, so only a miss pays for Clean
	// (the audit asks at every raft message a node sends).
	seq, ok := d.dirChanged[dir]
	if !ok {
		seq = d.dirChanged[path.Clean(dir)]
	}
	return max(seq, d.crashSeq)
}

// ProjectCrash returns a new Disk holding exactly what a power loss at this
// instant would keep of the files directly in dir (of every file when dir
// is ""): the names covered by SyncDir, each with its synced bytes only, as
// Crash(nil) would leave them. d is not disturbed: its handles, unsynced
// writes and injected failures stay, and neither sees the other's later
// writes: the projection shares d's durable bytes, copy on write (the
// audit projects a log at every sync it checks; copying cost more than
// recovering). The projection has no injected failures.
func (d *Disk) ProjectCrash(dir string) *Disk {
	d.mu.Lock()
	defer d.mu.Unlock()
	if dir != "" {
		dir = path.Clean(dir)
	}
	p := New()
	from := d.durableNames.files
	if dir != "" {
		from = d.durableNames.inDir(dir)
	}
	for name, n := range from {
		size := len(n.durable)
		n.durableShared = max(n.durableShared, size)
		pn := &inode{
			durable:       n.durable[:size:size],
			data:          n.durable[:size:size],
			durableShared: size,
			dataShared:    size,
		}
		p.names.set(name, pn)
		p.durableNames.set(name, pn)
	}
	return p
}

// Synced reports whether a power loss now would keep the files directly in
// dir exactly as they are: no unsynced write or truncation, no creation or
// removal that SyncDir has not covered.
func (d *Disk) Synced(dir string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	dir = path.Clean(dir)
	durable := d.durableNames.inDir(dir)
	for name, n := range d.names.inDir(dir) {
		if len(n.ops) > 0 || durable[name] != n {
			return false
		}
	}
	current := d.names.inDir(dir)
	for name, n := range durable {
		if current[name] != n {
			return false
		}
	}
	return true
}

// DurableSeq returns a counter that grows with every change to what a
// crash would keep, anywhere on the disk: a watcher remembers it and asks
// ChangedDirs what changed since.
func (d *Disk) DurableSeq() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.durableSeq
}

// ChangedDirs returns, sorted, the directories whose durable state changed
// after DurableSeq returned since (every directory after a Crash).
func (d *Disk) ChangedDirs(since uint64) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var dirs []string
	for dir, seq := range d.dirChanged {
		if seq > since || d.crashSeq > since {
			dirs = append(dirs, dir)
		}
	}
	sort.Strings(dirs)
	return dirs
}

// Truncates returns how many File.Truncate calls the disk served on files
// in directories whose last element is base ("log": every raft log): a
// simulator counts log truncations with it. One map lookup.
func (d *Disk) Truncates(base string) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.truncates[base]
}
