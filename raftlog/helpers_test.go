package raftlog_test

import (
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
	"github.com/strandlog/strand/raftlog/osdisk"
)

// diskKind builds a fresh Disk for a test.
type diskKind struct {
	name string
	make func(t testing.TB) raftlog.Disk
}

var diskKinds = []diskKind{
	{"memdisk", func(t testing.TB) raftlog.Disk { return memdisk.New() }},
	{"osdisk", func(t testing.TB) raftlog.Disk {
		d, err := osdisk.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return d
	}},
}

func entry(index, term uint64, data string) *raftpb.Entry {
	e := &raftpb.Entry{Index: new(index), Term: new(term), Type: raftpb.EntryType_EntryNormal.Enum()}
	if data != "" {
		e.Data = []byte(data)
	}
	return e
}

func hardState(term, vote, commit uint64) *raftpb.HardState {
	return &raftpb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

func mustOpen(t testing.TB, disk raftlog.Disk, options raftlog.Options) *raftlog.Log {
	t.Helper()
	l, err := raftlog.Open(disk, "log", options)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func entriesOf(es ...*raftpb.Entry) []*raftpb.Entry { return es }

// fastDiskKinds are the disks for long randomized runs: the OS disk with
// fsync turned off (these runs check semantics, not durability; durability
// is checked on memdisk, which models it).
var fastDiskKinds = []diskKind{
	diskKinds[0],
	{"osdisk-nosync", func(t testing.TB) raftlog.Disk { return noSyncDisk{diskKinds[1].make(t)} }},
}

// noSyncDisk is a Disk whose syncs do nothing.
type noSyncDisk struct{ raftlog.Disk }

func (d noSyncDisk) SyncDir(string) error { return nil }

func (d noSyncDisk) Open(name string) (raftlog.File, error) {
	f, err := d.Disk.Open(name)
	return noSyncFile{f}, err
}

type noSyncFile struct{ raftlog.File }

func (noSyncFile) Sync() error { return nil }

// liveFiles is disk's files but the segments compaction retired (".del",
// which recovery removes unread), as a node's trash job leaves them.
func liveFiles(disk *memdisk.Disk) []string {
	var out []string
	for _, name := range disk.Files() {
		if !strings.HasSuffix(name, ".del") {
			out = append(out, name)
		}
	}
	return out
}
