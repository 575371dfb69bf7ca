package raftlog_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// readingDisk counts the bytes read through it.
type readingDisk struct {
	raftlog.Disk
	read int64
}

func (d *readingDisk) Open(name string) (raftlog.File, error) {
	f, err := d.Disk.Open(name)
	return &readingFile{File: f, disk: d}, err
}

type readingFile struct {
	raftlog.File
	disk *readingDisk
}

func (f *readingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.disk.read += int64(n)
	return n, err
}

// buildLog writes entries 1..n of size bytes in term changes every 700
// entries, rolling at segmentBytes, with hard states, synced.
func buildLog(t *testing.T, disk raftlog.Disk, n uint64, size int, segmentBytes int64) {
	t.Helper()
	l := mustOpen(t, disk, raftlog.Options{SegmentBytesMax: segmentBytes})
	for i := uint64(1); i <= n; i += 100 {
		must(t, l.Append(batch(i, min(100, n+1-i), 1+i/700, size)))
		must(t, l.SetHardState(hardState(1+i/700, 1, i)))
	}
	must(t, l.Sync())
	must(t, l.Close())
}

// TestOpenReadsOnlySeals shows that Open reads the seal of each sealed segment and the whole active segment only: at 10× the data it reads about the same number of bytes, and the log it recovers (entries, terms, hard state) equals the one written.
func TestOpenReadsOnlySeals(t *testing.T) {
	readAtOpen := func(n uint64) (int64, int64, *raftlog.Log) {
		disk := &readingDisk{Disk: memdisk.New()}
		buildLog(t, disk, n, 1000, 64<<10)
		disk.read = 0
		l := mustOpen(t, disk, raftlog.Options{})
		read := disk.read
		must(t, l.VerifyFrom(0))
		return read, disk.read, l
	}
	small, _, _ := readAtOpen(2000)
	large, all, l := readAtOpen(20000)
	if large > 2*small+64<<10 || large > all/20 {
		t.Fatalf("open read %d bytes at 2,000 entries, %d at 20,000 (%d in all)", small, large, all)
	}
	for _, i := range []uint64{1, 699, 700, 701, 9999, 20000} {
		term, err := l.Term(i)
		must(t, err)
		if want := 1 + ((i-1)/100*100+1)/700; term != want {
			t.Fatalf("term of %d: %d, want %d", i, term, want)
		}
	}
	ents, err := l.Entries(1, 20001, math.MaxUint64)
	must(t, err)
	for j, e := range ents {
		if e.GetIndex() != uint64(j+1) || len(e.GetData()) != 1000 {
			t.Fatalf("entry %d: index %d, %d bytes", j+1, e.GetIndex(), len(e.GetData()))
		}
	}
	hs, _, _ := l.InitialState()
	if hs.GetCommit() != 19901 {
		t.Fatalf("hard state commit %d, want 19901", hs.GetCommit())
	}
}

// stripSeals cuts the seal record off the end of every sealed segment,
// which leaves the files a log written before seals existed would have.
func stripSeals(t *testing.T, disk *memdisk.Disk) (stripped int) {
	t.Helper()
	for _, name := range disk.Files() {
		if !strings.HasSuffix(name, ".log") {
			continue
		}
		buf, _ := disk.ReadFile(name)
		off := lastRecordStart(t, buf)
		if recordType, _, _, _ := raftlog.DecodeRecordForTest(buf[off:]); recordType != 5 {
			continue
		}
		f, err := disk.Open(name)
		must(t, err)
		must(t, f.Truncate(off))
		must(t, f.Sync())
		must(t, f.Close())
		stripped++
	}
	return stripped
}

// TestSegmentsWithoutSealsOpen shows a data directory written before seals existed (no seal at the end of its segments) opens by scanning those segments, recovers the same log, takes appends and rolls into sealed segments; damage in such a segment still fails Open.
func TestSegmentsWithoutSealsOpen(t *testing.T) {
	disk := memdisk.New()
	buildSyncedLog(t, disk)
	want := stateOf(t, mustOpen(t, disk.Clone(), raftlog.Options{}))
	if n := stripSeals(t, disk); n < 5 {
		t.Fatalf("stripped %d seals", n)
	}
	damaged := disk.Clone()
	l := mustOpen(t, disk, raftlog.Options{SegmentBytesMax: 256})
	if got := stateOf(t, l); !got.equal(want) {
		t.Fatal("log without seals recovered differently")
	}
	must(t, l.Append(batch(want.last+1, 20, 4, 30)))
	must(t, l.Sync())
	must(t, l.Close())
	l = mustOpen(t, disk, raftlog.Options{})
	if last, _ := l.LastIndex(); last != want.last+20 {
		t.Fatalf("last index %d after reopen, want %d", last, want.last+20)
	}
	must(t, l.VerifyFrom(0))

	files := liveFiles(damaged)
	buf, _ := damaged.ReadFile(files[2]) // a segment after the snapshot, not the last
	damaged.FlipBit(files[2], int64(len(buf))-3, 1)
	if _, err := raftlog.Open(damaged, "log", raftlog.Options{}); !errors.Is(err, raftlog.ErrCorrupt) {
		t.Fatalf("open with damage in unsealed %s: %v, want ErrCorrupt", files[2], err)
	}
}

// TestCrashAfterSealBeforeNextSegment shows a roll cut short after the seal was synced but before the next segment became durable: Open finds the seal at the end of the last segment, cuts it, and the segment takes appends again (and seals again at the next roll).
func TestCrashAfterSealBeforeNextSegment(t *testing.T) {
	disk := memdisk.New()
	buildLog(t, disk, 300, 100, 4096)
	files := disk.Files()
	lastSeg := files[len(files)-1]
	if strings.HasSuffix(lastSeg, "hardstate") {
		lastSeg = files[len(files)-2]
	}
	must(t, disk.Remove(lastSeg))
	must(t, disk.SyncDir("log"))
	l := mustOpen(t, disk, raftlog.Options{SegmentBytesMax: 4096})
	last, _ := l.LastIndex()
	must(t, l.Append(batch(last+1, 100, 9, 100)))
	must(t, l.Sync())
	must(t, l.Close())
	l = mustOpen(t, disk, raftlog.Options{})
	must(t, l.VerifyFrom(0))
	if got, _ := l.LastIndex(); got != last+100 {
		t.Fatalf("last index %d, want %d", got, last+100)
	}
	ents, err := l.Entries(1, last+101, math.MaxUint64)
	must(t, err)
	if len(ents) != int(last+100) || ents[last].GetTerm() != 9 {
		t.Fatalf("%d entries, entry %d term %d", len(ents), last+1, ents[last].GetTerm())
	}
}

// TestTruncateIntoSealedSegment shows a new leader's overwrite reaching back into a sealed segment Open has not indexed yet: the segment is indexed, cut (its seal with it) and becomes the active segment; the log reopens the same.
func TestTruncateIntoSealedSegment(t *testing.T) {
	disk := memdisk.New()
	buildLog(t, disk, 300, 100, 4096)
	l := mustOpen(t, disk, raftlog.Options{SegmentBytesMax: 4096})
	must(t, l.Append(batch(240, 10, 7, 100)))
	must(t, l.Sync())
	want := stateOf(t, l)
	must(t, l.Close())
	l = mustOpen(t, disk, raftlog.Options{})
	if got := stateOf(t, l); !got.equal(want) || got.last != 249 {
		t.Fatalf("after truncation into a sealed segment: last %d", got.last)
	}
}

// FuzzDecodeSeal feeds arbitrary bytes as the end of a segment file that has a valid head: Open must not panic, and either fails with ErrCorrupt or recovers a log whose entries all read back, the same after a second Open.
func FuzzDecodeSeal(f *testing.F) {
	for _, seed := range sealSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, tail []byte) {
		disk := memdisk.New()
		buildTwoSegments(t, disk)
		name := disk.Files()[0]
		buf, _ := disk.ReadFile(name)
		off := lastRecordStart(t, buf)
		file, err := disk.Open(name)
		must(t, err)
		must(t, file.Truncate(off))
		_, err = file.WriteAt(tail, off)
		must(t, err)
		must(t, file.Sync())
		l, err := raftlog.Open(disk, "log", raftlog.Options{})
		if err != nil {
			if !errors.Is(err, raftlog.ErrCorrupt) {
				t.Fatalf("open failed without ErrCorrupt: %v", err)
			}
			return
		}
		last, _ := l.LastIndex()
		if _, err := l.Entries(1, last+1, math.MaxUint64); err != nil && !errors.Is(err, raftlog.ErrCorrupt) {
			t.Fatalf("read: %v", err)
		}
		must(t, l.Close())
	})
}

// buildTwoSegments writes a log of two segments (the first sealed).
func buildTwoSegments(t testing.TB, disk raftlog.Disk) {
	l, err := raftlog.Open(disk, "log", raftlog.Options{SegmentBytesMax: 300})
	must(t, err)
	must(t, l.SetHardState(hardState(1, 1, 0)))
	for i := uint64(1); i <= 6; i++ {
		must(t, l.Append([]*raftpb.Entry{entry(i, 1+i/3, "entry data of some length")}))
	}
	must(t, l.Sync())
	must(t, l.Close())
}

// sealSeeds returns the seal of a real segment and damaged variants.
func sealSeeds(t testing.TB) [][]byte {
	disk := memdisk.New()
	buildTwoSegments(t, disk)
	buf, _ := disk.ReadFile(disk.Files()[0])
	var off, last int64
	for off < int64(len(buf)) {
		_, _, size, err := raftlog.DecodeRecordForTest(buf[off:])
		must(t, err)
		last, off = off, off+size
	}
	seal := buf[last:]
	flipped := append([]byte(nil), seal...)
	flipped[20] ^= 4
	return [][]byte{seal, flipped, seal[:len(seal)-3], {}, append(append([]byte(nil), seal...), seal...)}
}
