package tier

import (
	"fmt"
	"strconv"
	"strings"
)

// segmentSuffix ends every segment object's key.
const segmentSuffix = ".seg"

// SegmentKey is the object key of seg under the partition's prefix
// (no trailing slash): prefix/<base:20>-<end:20>-<term>.seg.
func SegmentKey(prefix string, seg Segment) string {
	return fmt.Sprintf("%s/%020d-%020d-%d%s", prefix, seg.Base, seg.End, seg.Term, segmentSuffix)
}

// ParseSegmentKey reads the range and term back from a key SegmentKey
// wrote under prefix; ok is false for any other key (the caller leaves
// such objects alone).
func ParseSegmentKey(prefix, key string) (seg Segment, ok bool) {
	name, found := strings.CutPrefix(key, prefix+"/")
	if !found || strings.Contains(name, "/") {
		return Segment{}, false
	}
	name, found = strings.CutSuffix(name, segmentSuffix)
	if !found {
		return Segment{}, false
	}
	parts := strings.Split(name, "-")
	if len(parts) != 3 || len(parts[0]) != 20 || len(parts[1]) != 20 {
		return Segment{}, false
	}
	base, err1 := strconv.ParseInt(parts[0], 10, 64)
	end, err2 := strconv.ParseInt(parts[1], 10, 64)
	term, err3 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || base < 0 || end <= base {
		return Segment{}, false
	}
	seg = Segment{Base: base, End: end, Term: term}
	if SegmentKey(prefix, seg) != key {
		return Segment{}, false // not canonical (a sign, leading zeros in the term)
	}
	return seg, true
}

// startSuffix ends every log start marker's key.
const startSuffix = ".start"

// StartKey is the key of the marker saying the partition's remote log
// starts at start (doc.go, "Recovery"): prefix/<start:20>.start. Its key
// alone says it (the body repeats the offset, for an operator): markers
// are only ever added at a higher start, so two leaders' writes never
// race on one key, and the highest marker in a listing is the newest.
func StartKey(prefix string, start int64) string {
	return fmt.Sprintf("%s/%020d%s", prefix, start, startSuffix)
}

// ParseStartKey reads the start back from a key StartKey wrote under
// prefix; ok is false for any other key.
func ParseStartKey(prefix, key string) (start int64, ok bool) {
	name, found := strings.CutPrefix(key, prefix+"/")
	if !found || len(name) != 20+len(startSuffix) || !strings.HasSuffix(name, startSuffix) {
		return 0, false
	}
	start, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil || start < 0 || StartKey(prefix, start) != key {
		return 0, false
	}
	return start, true
}
