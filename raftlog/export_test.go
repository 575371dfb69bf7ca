package raftlog

// Test hooks for the external test package (which may import memdisk).

// DecodeRecordForTest exposes the record decoder.
var DecodeRecordForTest = decodeRecord

// SideFileNameForTest is the hard-state side file's name.
const SideFileNameForTest = sideFileName

// SegmentRecordForTest returns the file name, offset and size of the record
// of entry i.
func (l *Log) SegmentRecordForTest(i uint64) (string, int64, int64) {
	s := l.segments[l.segmentOf(i)]
	if err := l.indexSegment(s); err != nil {
		panic(err)
	}
	return s.name, s.starts[i-s.base], int64(s.sizes[i-s.base])
}

// RecordSeedsForTest returns the record seeds of FuzzDecodeRecord.
func RecordSeedsForTest() [][]byte { return recordSeeds() }

// TailCachedForTest returns the number of entries and bytes in the tail cache.
func (l *Log) TailCachedForTest() (int, int64) { return len(l.tail), l.tailBytes }
