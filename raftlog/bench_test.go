package raftlog_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/osdisk"
)

// benchAppendSync appends one entry of size bytes and syncs, per op, on the
// OS disk: raft's Ready cycle for one batch.
func benchAppendSync(b *testing.B, size int) {
	disk, err := osdisk.New(b.TempDir())
	must(b, err)
	l := mustOpen(b, disk, raftlog.Options{})
	defer l.Close()
	data := benchData(size)
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		index := uint64(i + 1)
		e := &raftpb.Entry{Index: &index, Term: new(uint64(1)), Data: data}
		must(b, l.Append([]*raftpb.Entry{e}))
		must(b, l.Sync())
	}
}

// benchData returns size bytes of a non-zero pattern: a virtual disk may
// write zeros faster than data, so both loops write the same bytes.
func benchData(size int) []byte {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	return data
}

// benchRawWriteSync writes size bytes to a plain file and fsyncs, per op:
// the disk's limit for the same pattern, in the same file system.
func benchRawWriteSync(b *testing.B, size int) {
	f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
	must(b, err)
	defer f.Close()
	data := benchData(size)
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, err := f.Write(data)
		must(b, err)
		must(b, f.Sync())
	}
}

func BenchmarkAppendSync1MiB(b *testing.B)    { benchAppendSync(b, 1<<20) }
func BenchmarkAppendSync16KiB(b *testing.B)   { benchAppendSync(b, 16<<10) }
func BenchmarkRawWriteSync1MiB(b *testing.B)  { benchRawWriteSync(b, 1<<20) }
func BenchmarkRawWriteSync16KiB(b *testing.B) { benchRawWriteSync(b, 16<<10) }

// BenchmarkSequentialRead reads a 64 MiB log of 16 KiB entries with Entries
// in 1 MiB pages, from the page cache (tail cache off), checksums verified.
func BenchmarkSequentialRead(b *testing.B) {
	disk, err := osdisk.New(b.TempDir())
	must(b, err)
	l := mustOpen(b, disk, raftlog.Options{TailCacheBytesMax: -1})
	defer l.Close()
	const entryBytes, count = 16 << 10, 4096
	data := benchData(entryBytes)
	batch := make([]*raftpb.Entry, 0, 64)
	for i := uint64(1); i <= count; i++ {
		batch = append(batch, &raftpb.Entry{Index: new(i), Term: new(uint64(1)), Data: data})
		if len(batch) == cap(batch) {
			must(b, l.Append(batch))
			batch = batch[:0]
		}
	}
	must(b, l.Sync())
	b.SetBytes(entryBytes * count)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for lo := uint64(1); lo <= count; {
			ents, err := l.Entries(lo, count+1, 1<<20)
			must(b, err)
			lo += uint64(len(ents))
		}
	}
}

// benchPaired alternates, per op, one raw write+fsync and one Append+Sync
// of size bytes in the same directory, timing each, so that both see the
// same disk weather (the VM's disk and neighbours vary a lot between runs).
// It reports each side's ns/op and throughput-ratio = raw time / log time.
func benchPaired(b *testing.B, size int) {
	dir := b.TempDir()
	disk, err := osdisk.New(dir)
	must(b, err)
	l := mustOpen(b, disk, raftlog.Options{})
	defer l.Close()
	f, err := os.Create(filepath.Join(dir, "raw"))
	must(b, err)
	defer f.Close()
	data := benchData(size)
	var rawTotal, logTotal time.Duration
	b.SetBytes(int64(2 * size))
	b.ResetTimer()
	raw := func() {
		start := time.Now()
		_, err := f.Write(data)
		must(b, err)
		must(b, f.Sync())
		rawTotal += time.Since(start)
	}
	for i := 0; i < b.N; i++ {
		if i%2 == 0 { // alternate the order: an fsync may pay for the other file's journal work
			raw()
		}
		start := time.Now()
		index := uint64(i + 1)
		must(b, l.Append([]*raftpb.Entry{{Index: &index, Term: new(uint64(1)), Data: data}}))
		must(b, l.Sync())
		logTotal += time.Since(start)
		if i%2 == 1 {
			raw()
		}
	}
	b.ReportMetric(float64(rawTotal.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(logTotal.Nanoseconds())/float64(b.N), "log-ns/op")
	b.ReportMetric(float64(rawTotal)/float64(logTotal), "log/raw-throughput")
}

func BenchmarkPairedAppendVsRaw1MiB(b *testing.B)  { benchPaired(b, 1<<20) }
func BenchmarkPairedAppendVsRaw16KiB(b *testing.B) { benchPaired(b, 16<<10) }
