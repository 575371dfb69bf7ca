package memdisk

import "strings"

// namespace is a set of file names, each naming an inode, indexed by
// directory as well: List, SyncDir, ProjectCrash and Synced look at one
// directory, and scanning every name on the disk for it was 2-3% of a
// simulated run's CPU (a node's disk holds every partition's files).
// Iterations over files or a directory's map run in map order: a caller
// whose result depends on the order sorts.
type namespace struct {
	files map[string]*inode            // by full name
	dirs  map[string]map[string]*inode // by directory (dirOf), then full name
}

func newNamespace() namespace {
	return namespace{files: map[string]*inode{}, dirs: map[string]map[string]*inode{}}
}

// get returns the inode name names.
func (ns namespace) get(name string) (*inode, bool) {
	n, ok := ns.files[name]
	return n, ok
}

// set makes name name n.
func (ns namespace) set(name string, n *inode) {
	ns.files[name] = n
	dir := dirOf(name)
	m := ns.dirs[dir]
	if m == nil {
		m = map[string]*inode{}
		ns.dirs[dir] = m
	}
	m[name] = n
}

// del removes name.
func (ns namespace) del(name string) {
	if _, ok := ns.files[name]; !ok {
		return
	}
	delete(ns.files, name)
	dir := dirOf(name)
	if m := ns.dirs[dir]; m != nil {
		delete(m, name)
		if len(m) == 0 {
			delete(ns.dirs, dir)
		}
	}
}

// inDir returns the files directly in dir (a clean path), by full name: the
// index's own map, not to be changed by the caller (nil when none).
func (ns namespace) inDir(dir string) map[string]*inode { return ns.dirs[dir] }

// dirOf is path.Dir(name) for a clean name, without cleaning: "." for a
// name without a slash, "/" for one whose only slash leads.
func dirOf(name string) string {
	switch i := strings.LastIndexByte(name, '/'); i {
	case -1:
		return "."
	case 0:
		return "/"
	default:
		return name[:i]
	}
}
