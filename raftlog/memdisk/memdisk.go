// Package memdisk is an in-memory raftlog.Disk that models the page cache,
// for tests and the deterministic simulator.
//
// Each file has durable contents (as of its last Sync) and current contents,
// plus the ordered list of writes and truncations since that Sync. Each name
// exists durably only once a SyncDir of its directory covered it: a created
// file that was never dir-synced vanishes on Crash, a removed one comes back.
// Crash keeps, per file, a random prefix of the unsynced operations applied
// over the durable contents, and may tear the last kept write (a prefix of it
// lands, then garbage, then nothing). Only bytes never synced are lost or
// damaged by Crash.
//
// Randomness comes only from the *math/rand/v2.Rand handed to Crash, and
// every iteration that consumes it runs over sorted names, so a seed replays
// exactly. The Disk is safe for concurrent use (one mutex), so tests can use
// it and the OS disk interchangeably.
package memdisk

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/strandlog/strand/raftlog"
)

// ErrCrashed is returned by a File opened before a Crash.
var ErrCrashed = errors.New("memdisk: file handle from before a crash")

// ErrInjected is returned by operations failed on purpose (FailReads, FailSync).
var ErrInjected = errors.New("memdisk: injected failure")

// op is one unsynced change to a file: a write of bytes at off, or a
// truncation to size.
type op struct {
	truncate bool
	off      int64 // write offset, or size for a truncation
	bytes    []byte
}

// inode is one file's contents.
type inode struct {
	durable []byte // as of the last Sync
	data    []byte // current
	ops     []op   // since the last Sync, in order
	// flipped: FlipBit changed data since the last Sync, so data is no
	// longer durable with ops applied.
	flipped bool
	// durableShared and dataShared are the lengths of the prefixes of
	// durable's and data's arrays that another inode may be viewing
	// (ProjectCrash shares bytes instead of copying them): a write below
	// that length copies the array first. Appends past it write where no
	// view reaches.
	durableShared, dataShared int
}

// ownDurable copies durable to an array of its own when the operations
// ops, applied over it, would write where another inode may be viewing.
func (n *inode) ownDurable(ops []op) {
	if n.durableShared > 0 && writesBelow(len(n.durable), ops, n.durableShared) {
		n.durable, n.durableShared = append([]byte(nil), n.durable...), 0
	}
}

// ownData copies data to an array of its own when o would write where
// another inode may be viewing.
func (n *inode) ownData(o op) {
	if n.dataShared > 0 && writesBelow(len(n.data), []op{o}, n.dataShared) {
		n.data, n.dataShared = append([]byte(nil), n.data...), 0
	}
}

// writesBelow reports whether ops, applied in order over contents of
// length size, write (bytes or a zero extension) anywhere below limit.
func writesBelow(size int, ops []op, limit int) bool {
	for _, o := range ops {
		if o.truncate {
			if int(o.off) > size && size < limit {
				return true // zero-extends from size
			}
			size = int(o.off)
			continue
		}
		if min(int(o.off), size) < limit {
			return true
		}
		size = max(size, int(o.off)+len(o.bytes))
	}
	return false
}

// Disk is an in-memory raftlog.Disk with crash and fault injection.
type Disk struct {
	mu           sync.Mutex
	names        namespace // current namespace
	durableNames namespace // namespace as of the last SyncDir of each directory
	failReads    map[string]bool
	failSync     bool
	capacity     int64  // bytes; 0: unlimited (capacity.go)
	generation   uint64 // bumped by Crash; older handles fail
	// durableSeq counts changes to what a crash would keep; dirChanged[dir]
	// is its value at the last such change in dir, crashSeq at the last
	// Crash (see DurableGeneration).
	durableSeq uint64
	dirChanged map[string]uint64
	crashSeq   uint64
	truncates  map[string]uint64 // File.Truncate calls per directory base name, for coverage counts
}

var _ raftlog.Disk = (*Disk)(nil)

// New returns an empty Disk.
func New() *Disk {
	return &Disk{
		names:        newNamespace(),
		durableNames: newNamespace(),
		failReads:    map[string]bool{},
		dirChanged:   map[string]uint64{},
		truncates:    map[string]uint64{},
	}
}

// Open opens name, creating it empty when missing.
func (d *Disk) Open(name string) (raftlog.File, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	name = path.Clean(name)
	node, ok := d.names.get(name)
	if !ok {
		node = &inode{}
		d.names.set(name, node)
	}
	return &file{disk: d, name: name, node: node, generation: d.generation}, nil
}

// Remove deletes name from the current namespace.
func (d *Disk) Remove(name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	name = path.Clean(name)
	if _, ok := d.names.get(name); !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	d.names.del(name)
	return nil
}

// Rename moves from's file to the name to in the current namespace,
// replacing what was there; the durable namespace follows at SyncDir.
func (d *Disk) Rename(from, to string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	from, to = path.Clean(from), path.Clean(to)
	node, ok := d.names.get(from)
	if !ok {
		return &fs.PathError{Op: "rename", Path: from, Err: fs.ErrNotExist}
	}
	d.names.del(from)
	d.names.set(to, node)
	return nil
}

// List returns the sorted base names of the files in dir.
func (d *Disk) List(dir string) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dir = path.Clean(dir)
	var names []string
	for name := range d.names.inDir(dir) {
		names = append(names, path.Base(name))
	}
	sort.Strings(names)
	return names, nil
}

// ListDirs returns the sorted names of the directories in dir: here a
// directory exists while a file lies somewhere below it.
func (d *Disk) ListDirs(dir string) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	prefix := path.Clean(dir) + "/"
	seen := make(map[string]bool) // lookup only: names are sorted below
	var names []string
	for name := range d.names.files {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		if sub, _, nested := strings.Cut(rest, "/"); nested && !seen[sub] {
			seen[sub] = true
			names = append(names, sub)
		}
	}
	sort.Strings(names)
	return names, nil
}

// SyncDir makes the creations and removals of files in dir durable.
func (d *Disk) SyncDir(dir string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failSync {
		return fmt.Errorf("syncdir %s: %w", dir, ErrInjected)
	}
	dir = path.Clean(dir)
	d.durableChanged(dir)
	current := d.names.inDir(dir)
	for name, node := range d.durableNames.inDir(dir) {
		if current[name] != node {
			d.durableNames.del(name) // deleting while ranging: allowed
		}
	}
	for name, node := range current {
		if old, ok := d.durableNames.get(name); !ok || old != node {
			d.durableNames.set(name, node)
		}
	}
	return nil
}

// Crash simulates a power loss: every handle opened before becomes invalid,
// names not covered by SyncDir are forgotten or come back, and each file
// keeps its durable bytes. With rng non-nil, a random prefix of each file's
// unsynced operations survives too, the last of which may be torn. With rng
// nil, all unsynced state is dropped.
func (d *Disk) Crash(rng *rand.Rand) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.generation++
	d.durableSeq++
	d.crashSeq = d.durableSeq
	names := make([]string, 0, len(d.durableNames.files))
	for name := range d.durableNames.files {
		names = append(names, name)
	}
	sort.Strings(names)
	d.names = newNamespace()
	for _, name := range names {
		node := d.durableNames.files[name]
		d.names.set(name, node)
		node.crash(rng)
	}
}

// crash rebuilds the file from its durable bytes and a random prefix of its
// unsynced operations.
func (n *inode) crash(rng *rand.Rand) {
	data := append([]byte(nil), n.durable...)
	if rng != nil && len(n.ops) > 0 {
		kept := rng.IntN(len(n.ops) + 1)
		for i := 0; i < kept; i++ {
			o := n.ops[i]
			if i == kept-1 && !o.truncate && rng.IntN(2) == 0 {
				o = tear(o, rng)
			}
			data = apply(data, o)
		}
	}
	n.durable = data
	n.data = append([]byte(nil), data...)
	n.ops, n.flipped = nil, false
	n.durableShared, n.dataShared = 0, 0
}

// sync makes the current contents durable in O(bytes written since the
// last sync): it replays the unsynced operations over the durable bytes
// (which end equal to data) instead of copying the whole file.
func (n *inode) sync() {
	if n.flipped {
		// A flip made data differ from durable plus ops: copy it.
		if n.durableShared > 0 {
			n.durable, n.durableShared = nil, 0
		}
		n.durable, n.flipped = append(n.durable[:0], n.data...), false
	} else {
		n.ownDurable(n.ops)
		for _, o := range n.ops {
			n.durable = apply(n.durable, o)
		}
	}
	n.ops = nil
}

// tear returns the part of write o that reached the medium: a prefix of it,
// then garbage.
func tear(o op, rng *rand.Rand) op {
	keep := rng.IntN(len(o.bytes) + 1)
	garbage := rng.IntN(len(o.bytes) - keep + 1)
	torn := make([]byte, keep+garbage)
	copy(torn, o.bytes[:keep])
	for i := keep; i < len(torn); i++ {
		torn[i] = byte(rng.Uint32())
	}
	return op{off: o.off, bytes: torn}
}

// apply performs o on data and returns the result.
func apply(data []byte, o op) []byte {
	if o.truncate {
		return resize(data, o.off)
	}
	end := o.off + int64(len(o.bytes))
	if int64(len(data)) < end {
		data = resize(data, end)
	}
	copy(data[o.off:], o.bytes)
	return data
}

// resize returns data cut or zero-extended to size.
func resize(data []byte, size int64) []byte {
	if int64(len(data)) >= size {
		return data[:size]
	}
	return append(data, make([]byte, size-int64(len(data)))...)
}

// Clone returns an independent copy of the disk (contents, durable state,
// namespaces, injected failures), so a test can try many faults on one
// prepared disk. Handles on d do not work on the copy.
func (d *Disk) Clone() *Disk {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := New()
	c.failSync = d.failSync
	c.durableSeq, c.crashSeq = d.durableSeq, d.crashSeq
	for dir, seq := range d.dirChanged {
		c.dirChanged[dir] = seq
	}
	copies := map[*inode]*inode{}
	clone := func(n *inode) *inode {
		if cp, ok := copies[n]; ok {
			return cp
		}
		cp := &inode{
			durable: append([]byte(nil), n.durable...),
			data:    append([]byte(nil), n.data...),
			ops:     append([]op(nil), n.ops...),
			flipped: n.flipped,
		}
		copies[n] = cp
		return cp
	}
	for name, n := range d.names.files {
		c.names.set(name, clone(n))
	}
	for name, n := range d.durableNames.files {
		c.durableNames.set(name, clone(n))
	}
	for name := range d.failReads {
		c.failReads[name] = true
	}
	return c
}

// FlipBit flips bit (0..7) of the byte at offset of name, in both its
// durable and current contents, to model media corruption.
func (d *Disk) FlipBit(name string, offset int64, bit uint) {
	d.mu.Lock()
	defer d.mu.Unlock()
	node, ok := d.names.get(path.Clean(name))
	if !ok {
		panic(fmt.Sprintf("memdisk: FlipBit of missing file %s", name))
	}
	d.durableChanged(path.Dir(path.Clean(name)))
	node.ownDurable([]op{{off: offset, bytes: []byte{0}}})
	node.ownData(op{off: offset, bytes: []byte{0}})
	if offset < int64(len(node.durable)) {
		node.durable[offset] ^= 1 << (bit % 8)
	}
	if offset < int64(len(node.data)) {
		node.data[offset] ^= 1 << (bit % 8)
		node.flipped = true // the next sync copies data whole (inode.sync)
	}
}

// FailReads makes ReadAt of name fail (fail true) or work again.
func (d *Disk) FailReads(name string, fail bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	name = path.Clean(name)
	if fail {
		d.failReads[name] = true
	} else {
		delete(d.failReads, name)
	}
}

// FailSync makes File.Sync and SyncDir fail (fail true) or work again.
func (d *Disk) FailSync(fail bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failSync = fail
}

// Files returns the current names of all files, sorted.
func (d *Disk) Files() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	names := make([]string, 0, len(d.names.files))
	for name := range d.names.files {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Bytes returns the total current size of all files.
func (d *Disk) Bytes() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var total int64
	for _, node := range d.names.files {
		total += int64(len(node.data))
	}
	return total
}

// DurableBytes returns the total size of the files that would survive a
// crash now, as they would survive with no unsynced operation kept.
func (d *Disk) DurableBytes() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var total int64
	for _, node := range d.durableNames.files {
		total += int64(len(node.durable))
	}
	return total
}

// ReadFile returns a copy of the current contents of name, for tests.
func (d *Disk) ReadFile(name string) ([]byte, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	node, ok := d.names.get(path.Clean(name))
	if !ok {
		return nil, false
	}
	return append([]byte(nil), node.data...), true
}

// file is a handle on an inode.
type file struct {
	disk       *Disk
	name       string
	node       *inode
	generation uint64
	closed     bool
}

// check returns the error for a use of a stale or closed handle. The disk's
// mutex is held.
func (f *file) check() error {
	if f.closed {
		return fs.ErrClosed
	}
	if f.generation != f.disk.generation {
		return ErrCrashed
	}
	return nil
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	f.disk.mu.Lock()
	defer f.disk.mu.Unlock()
	if err := f.check(); err != nil {
		return 0, err
	}
	if f.disk.failReads[f.name] {
		return 0, fmt.Errorf("read %s: %w", f.name, ErrInjected)
	}
	if off < 0 {
		return 0, errors.New("memdisk: negative offset")
	}
	if len(p) == 0 {
		return 0, nil // as os.File's ReadAt: nothing asked, nothing missing, even at the end
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	f.disk.mu.Lock()
	defer f.disk.mu.Unlock()
	if err := f.check(); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, errors.New("memdisk: negative offset")
	}
	if err := f.disk.checkSpaceLocked(f.node, f.name, off, p); err != nil {
		return 0, err
	}
	o := op{off: off, bytes: append([]byte(nil), p...)}
	f.node.ownData(o)
	f.node.data = apply(f.node.data, o)
	f.node.ops = append(f.node.ops, o)
	return len(p), nil
}

func (f *file) Truncate(size int64) error {
	f.disk.mu.Lock()
	defer f.disk.mu.Unlock()
	if err := f.check(); err != nil {
		return err
	}
	if size < 0 {
		return errors.New("memdisk: negative size")
	}
	o := op{truncate: true, off: size}
	f.disk.truncates[path.Base(path.Dir(f.name))]++
	f.node.ownData(o)
	f.node.data = apply(f.node.data, o)
	f.node.ops = append(f.node.ops, o)
	return nil
}

func (f *file) Size() (int64, error) {
	f.disk.mu.Lock()
	defer f.disk.mu.Unlock()
	if err := f.check(); err != nil {
		return 0, err
	}
	return int64(len(f.node.data)), nil
}

func (f *file) Sync() error {
	f.disk.mu.Lock()
	defer f.disk.mu.Unlock()
	if err := f.check(); err != nil {
		return err
	}
	if f.disk.failSync {
		return fmt.Errorf("sync %s: %w", f.name, ErrInjected)
	}
	f.node.sync()
	f.disk.durableChanged(path.Dir(f.name))
	return nil
}

func (f *file) Close() error {
	f.disk.mu.Lock()
	defer f.disk.mu.Unlock()
	if f.closed {
		return fs.ErrClosed
	}
	f.closed = true
	return nil
}
