package raftlog_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
	"github.com/strandlog/strand/raftlog/osdisk"
)

// buildSyncedLog writes a log with several segments, interleaved hard
// states, a compaction snapshot and a truncated suffix, all synced, ending
// with an entry record.
func buildSyncedLog(t *testing.T, disk raftlog.Disk) {
	t.Helper()
	l, err := raftlog.Open(disk, "log", raftlog.Options{SegmentBytesMax: 256})
	check(t, err)
	for i := uint64(1); i <= 40; i++ {
		check(t, l.Append([]*raftpb.Entry{entry(i, 1+i/15, fmt.Sprintf("payload-%d-%s", i, strings.Repeat("x", int(i%7)*5)))}))
		if i%5 == 0 {
			check(t, l.SetHardState(hardState(1+i/15, 1, i-2)))
		}
	}
	check(t, l.CreateSnapshot(12, &raftpb.ConfState{Voters: []uint64{1, 2, 3}}, []byte("snapshot-data")))
	check(t, l.Append([]*raftpb.Entry{entry(39, 4, "replaced-39"), entry(40, 4, "replaced-40")})) // truncation
	check(t, l.SetHardState(hardState(4, 2, 38)))
	check(t, l.Append([]*raftpb.Entry{entry(41, 4, "tail-41"), entry(42, 4, "tail-42")}))
	check(t, l.Sync())
	check(t, l.Close())
}

func check(t testing.TB, err error) { t.Helper(); must(t, err) }

// logState is everything a Log serves.
type logState struct {
	first, last uint64
	entries     []*raftpb.Entry
	hard        *raftpb.HardState
	snap        *raftpb.Snapshot
}

func stateOf(t *testing.T, l *raftlog.Log) logState {
	t.Helper()
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	s := logState{first: first, last: last}
	if s.last >= s.first {
		ents, err := l.Entries(s.first, s.last+1, math.MaxUint64)
		check(t, err)
		s.entries = ents
	}
	s.hard, _, _ = l.InitialState()
	s.snap, _ = l.Snapshot()
	return s
}

func (s logState) equal(o logState) bool {
	if s.first != o.first || s.last != o.last || len(s.entries) != len(o.entries) {
		return false
	}
	for j := range s.entries {
		if !proto.Equal(s.entries[j], o.entries[j]) {
			return false
		}
	}
	return proto.Equal(s.hard, o.hard) && proto.Equal(s.snap, o.snap)
}

// lastRecordStart returns the offset of the last record of a segment file.
func lastRecordStart(t *testing.T, buf []byte) int64 {
	var off, last int64
	for off < int64(len(buf)) {
		_, _, size, err := raftlog.DecodeRecordForTest(buf[off:])
		check(t, err)
		last, off = off, off+size
	}
	return last
}

// TestBitFlipsInSyncedData shows that a flipped bit anywhere in synced data is caught: Open fails with ErrCorrupt (or, inside a sealed segment's body, which Open does not read, its first read does), except in the last record of the last segment (indistinguishable from a torn write), which is dropped, and in the hard-state side file (redundant copies), where nothing changes. Every byte of every file is tried; no corrupt entry is ever served and nothing else is ever lost.
func TestBitFlipsInSyncedData(t *testing.T) {
	base := memdisk.New()
	buildSyncedLog(t, base)
	l, err := raftlog.Open(base.Clone(), "log", raftlog.Options{})
	check(t, err)
	want := stateOf(t, l)
	wantTorn := want
	wantTorn.last--
	wantTorn.entries = want.entries[:len(want.entries)-1]
	files := liveFiles(base)
	lastSegment := ""
	for _, name := range files {
		if strings.HasSuffix(name, ".log") {
			lastSegment = name
		}
	}
	counts := map[string]int{}
	for _, name := range files {
		buf, _ := base.ReadFile(name)
		tailStart := int64(math.MaxInt64)
		if name == lastSegment {
			tailStart = lastRecordStart(t, buf)
		}
		for off := int64(0); off < int64(len(buf)); off++ {
			disk := base.Clone()
			disk.FlipBit(name, off, uint(off%8))
			l, err := raftlog.Open(disk, "log", raftlog.Options{})
			switch {
			case strings.HasSuffix(name, raftlog.SideFileNameForTest):
				if err != nil || !stateOf(t, l).equal(want) {
					t.Fatalf("flip %s@%d: err %v or state changed", name, off, err)
				}
				counts["side file: unchanged"]++
			case off >= tailStart:
				if err != nil || !stateOf(t, l).equal(wantTorn) {
					t.Fatalf("flip %s@%d (last record): err %v, want the last entry dropped", name, off, err)
				}
				counts["last record: dropped"]++
			default:
				outcome := "ErrCorrupt at Open"
				if err == nil {
					// A sealed segment's body is checked when it is read.
					err = l.VerifyFrom(0)
					outcome = "ErrCorrupt at read"
				}
				if !errors.Is(err, raftlog.ErrCorrupt) {
					t.Fatalf("flip %s@%d: err %v, want ErrCorrupt", name, off, err)
				}
				if !strings.Contains(err.Error(), "offset") {
					t.Fatalf("flip %s@%d: error %q names no offset", name, off, err)
				}
				counts[outcome]++
			}
			if l != nil {
				l.Close()
			}
		}
	}
	t.Logf("files %v, outcomes %v", files, counts)
}

// TestCorruptionOnOSDisk shows, on the real file system, that a damaged record inside synced data fails Open (or the first read of its sealed segment) and garbage after the last record is cut.
func TestCorruptionOnOSDisk(t *testing.T) {
	root := t.TempDir()
	disk, err := osdisk.New(root)
	check(t, err)
	buildSyncedLog(t, disk)
	l, err := raftlog.Open(disk, "log", raftlog.Options{})
	check(t, err)
	want := stateOf(t, l)
	check(t, l.Close())
	names, _ := disk.List("log")
	last := filepath.Join(root, "log", names[len(names)-2]) // the side file sorts last
	f, err := os.OpenFile(last, os.O_RDWR|os.O_APPEND, 0)
	check(t, err)
	_, err = f.Write([]byte{7, 0, 0, 0, 1, 2, 3, 4, 2, 9})
	check(t, err)
	check(t, f.Close())
	l, err = raftlog.Open(disk, "log", raftlog.Options{})
	check(t, err)
	if !stateOf(t, l).equal(want) {
		t.Fatal("state changed after cutting a garbage tail")
	}
	check(t, l.Close())
	first := filepath.Join(root, "log", names[0])
	buf, err := os.ReadFile(first)
	check(t, err)
	buf[len(buf)/2] ^= 0x10
	check(t, os.WriteFile(first, buf, 0o644))
	l, err = raftlog.Open(disk, "log", raftlog.Options{})
	if err == nil { // a sealed segment: its body is checked when read
		err = l.VerifyFrom(0)
	}
	if !errors.Is(err, raftlog.ErrCorrupt) {
		t.Fatalf("open and read after damage in %s: %v, want ErrCorrupt", names[0], err)
	}
}

// TestReadFailureIsReturned shows an I/O error while reading entries is returned, never served as data.
func TestReadFailureIsReturned(t *testing.T) {
	disk := memdisk.New()
	buildSyncedLog(t, disk)
	l, err := raftlog.Open(disk, "log", raftlog.Options{TailCacheBytesMax: -1})
	check(t, err)
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	for _, name := range disk.Files() {
		disk.FailReads(name, true)
	}
	if _, err := l.Entries(first, last+1, math.MaxUint64); err == nil {
		t.Fatal("entries read through a failing disk")
	}
}

// TestCorruptionAfterOpenIsNotServed shows a record damaged after Open is reported as ErrCorrupt by Entries, not handed to raft.
func TestCorruptionAfterOpenIsNotServed(t *testing.T) {
	disk := memdisk.New()
	buildSyncedLog(t, disk)
	l, err := raftlog.Open(disk, "log", raftlog.Options{TailCacheBytesMax: -1})
	check(t, err)
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	name, off, size := l.SegmentRecordForTest(first + 3)
	disk.FlipBit("log/"+name, off+size-1, 3)
	if _, err := l.Entries(first, last+1, math.MaxUint64); !errors.Is(err, raftlog.ErrCorrupt) {
		t.Fatalf("entries over a damaged record: %v, want ErrCorrupt", err)
	}
	if ents, err := l.Entries(first, first+3, math.MaxUint64); err != nil || len(ents) != 3 {
		t.Fatalf("entries before the damaged record: %d, %v", len(ents), err)
	}
}
