package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// startKind is how a consume's start offset is given.
type startKind int

const (
	startEarliest  startKind = iota // the log start
	startLatest                     // the high-water mark: only new records
	startExact                      // an absolute offset
	startFromEnd                    // n before the high-water mark, per partition
	startFromStart                  // n after the log start, per partition
	startTime                       // the first record at or after a time
)

// startSpec is a consume's start, before it is resolved per partition.
type startSpec struct {
	kind startKind
	n    int64
	at   time.Time
}

// offsetRange is what --from says: where to start and, optionally, where
// to stop (an offset or a time, both not included).
type offsetRange struct {
	start     startSpec
	startSet  bool
	endOffset int64     // -1: none
	endTime   time.Time // zero: none
	untilEnd  bool      // ":end": stop at the high-water marks seen at start
}

// hasEnd says whether the range stops on its own.
func (r offsetRange) hasEnd() bool { return r.endOffset >= 0 || !r.endTime.IsZero() || r.untilEnd }

// offsetSyntax is the one-line summary of --from's forms, for errors.
const offsetSyntax = "want earliest|beginning, latest|end, N, -N (N before the end), +N (N after the start), " +
	"s@TIME, e@TIME (stop before TIME), @TIME, @T1:T2, @:TIME, O1:O2, :O2 or :end; " +
	"TIME is Unix milliseconds, RFC3339, YYYY-MM-DD or a duration before now such as -1h"

// parseOffsets reads every --from value (kcat lets -o be given twice: a
// start and an e@ end) into one range; now anchors relative times.
func parseOffsets(values []string, now time.Time) (offsetRange, error) {
	r := offsetRange{start: startSpec{kind: startEarliest}, endOffset: -1}
	var startFrom, endFrom string
	for _, v := range values {
		one, err := parseOffset(v, now)
		if err != nil {
			return r, err
		}
		if one.startSet {
			if startFrom != "" {
				return r, usageError("--from %q and %q: two starts; give one start and at most one end", startFrom, v)
			}
			r.start, r.startSet, startFrom = one.start, true, v
		}
		if one.hasEnd() {
			if endFrom != "" {
				return r, usageError("--from %q and %q: two ends; give one start and at most one end", endFrom, v)
			}
			r.endOffset, r.endTime, r.untilEnd, endFrom = one.endOffset, one.endTime, one.untilEnd, v
		}
	}
	if r.endOffset >= 0 && r.start.kind == startExact && r.start.n > r.endOffset {
		return r, usageError("--from %d:%d: the start is after the end", r.start.n, r.endOffset)
	}
	return r, nil
}

// parseOffset reads one --from value.
func parseOffset(s string, now time.Time) (offsetRange, error) {
	r := offsetRange{endOffset: -1}
	bad := usageError("--from %q: %s", s, offsetSyntax)
	if start, ok := parseStart(s, now); ok {
		r.start, r.startSet = start, true
		return r, nil
	}
	switch {
	case s == "stored":
		return r, usageError("--from stored: give --group GROUP instead (a group resumes at its committed offsets)")
	case strings.HasPrefix(s, "e@"):
		t, ok := parseTime(s[2:], now)
		if !ok {
			return r, bad
		}
		r.endTime = t
		return r, nil
	case strings.HasPrefix(s, "@"):
		return parseTimeRange(s[1:], now, bad)
	}
	left, right, ok := strings.Cut(s, ":")
	if !ok {
		return r, bad
	}
	if left != "" {
		if r.start, ok = parseStart(left, now); !ok || r.start.kind == startTime {
			return r, bad
		}
		r.startSet = true
	}
	switch n, err := strconv.ParseInt(right, 10, 64); {
	case right == "end":
		r.untilEnd = true
	case err == nil && n >= 0:
		r.endOffset = n
	case right == "" && left != "":
	default:
		return r, bad
	}
	return r, nil
}

// parseStart reads a start on its own: a word, N, -N, +N, s@TIME or an
// RFC3339 time.
func parseStart(s string, now time.Time) (startSpec, bool) {
	switch s {
	case "earliest", "beginning", "start", "oldest":
		return startSpec{kind: startEarliest}, true
	case "latest", "end", "newest":
		return startSpec{kind: startLatest}, true
	}
	if rest, ok := strings.CutPrefix(s, "s@"); ok {
		t, ok := parseTime(rest, now)
		return startSpec{kind: startTime, at: t}, ok
	}
	if n, err := strconv.ParseUint(strings.TrimLeft(s, "+-"), 10, 63); err == nil && len(s) > 0 && !strings.ContainsAny(s[1:], "+-") {
		switch s[0] {
		case '-':
			return startSpec{kind: startFromEnd, n: int64(n)}, true
		case '+':
			return startSpec{kind: startFromStart, n: int64(n)}, true
		}
		return startSpec{kind: startExact, n: int64(n)}, true
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return startSpec{kind: startTime, at: t}, true
	}
	return startSpec{}, false
}

// parseTimeRange reads rpk's @T, @T1:T2 and @:T (the body after "@").
// An RFC3339 time holds colons itself, so every colon is tried as the
// separator.
func parseTimeRange(body string, now time.Time, bad error) (offsetRange, error) {
	r := offsetRange{endOffset: -1}
	if t, ok := parseTime(body, now); ok {
		r.start, r.startSet = startSpec{kind: startTime, at: t}, true
		return r, nil
	}
	for i := 0; i < len(body); i++ {
		if body[i] != ':' {
			continue
		}
		left, right := body[:i], body[i+1:]
		lt, lok := parseTime(left, now)
		rt, rok := parseTime(right, now)
		if (lok || left == "") && (rok || right == "") && (left != "" || right != "") {
			if left != "" {
				r.start, r.startSet = startSpec{kind: startTime, at: lt}, true
			}
			r.endTime = rt
			return r, nil
		}
	}
	return r, bad
}

// parseTime reads a time: Unix milliseconds (kcat's s@ and e@), RFC3339,
// a date (midnight UTC), or a negative duration before now (rpk's -1h).
func parseTime(s string, now time.Time) (time.Time, bool) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
		return time.UnixMilli(ms), true
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, true
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, true
	}
	if d, err := time.ParseDuration(s); err == nil && d < 0 {
		return now.Add(d), true
	}
	return time.Time{}, false
}

// groupStart is the start a group consumer takes where the group has no
// committed offset: relative starts and ends have no meaning there.
func groupStart(r offsetRange, from []string) (clientlib.Offset, error) {
	if r.endOffset >= 0 || !r.endTime.IsZero() {
		return clientlib.Offset{}, usageError("--from %s with --group: an end offset or time applies only without --group (use --until-end)", strings.Join(from, " "))
	}
	switch r.start.kind {
	case startFromEnd, startFromStart:
		return clientlib.Offset{}, usageError("--from %s with --group: a relative offset applies only without --group; to move a group, see 'strand group reset --shift-by'", strings.Join(from, " "))
	case startExact:
		return clientlib.OffsetExact(r.start.n), nil
	case startLatest:
		return clientlib.OffsetLatest(), nil
	case startTime:
		return clientlib.OffsetAtTimestamp(r.start.at), nil
	}
	return clientlib.OffsetEarliest(), nil
}

// resolveStart is where one partition starts, given its log start and
// high-water mark; note is what to tell the user when an absolute offset
// was outside the partition and was clamped to it.
func resolveStart(s startSpec, topic string, p int32, logStart, hwm int64) (clientlib.Offset, string) {
	switch s.kind {
	case startExact:
		switch {
		case s.n < logStart:
			return clientlib.OffsetExact(logStart), fmt.Sprintf("%s/%d: offset %d is before the log start %d; reading from %d", topic, p, s.n, logStart, logStart)
		case s.n > hwm:
			return clientlib.OffsetExact(hwm), fmt.Sprintf("%s/%d: offset %d is past the end (high-water mark %d); reading only new records, from %d", topic, p, s.n, hwm, hwm)
		}
		return clientlib.OffsetExact(s.n), ""
	case startFromEnd:
		return clientlib.OffsetExact(max(hwm-s.n, logStart)), ""
	case startFromStart:
		return clientlib.OffsetExact(min(logStart+s.n, hwm)), ""
	case startLatest:
		return clientlib.OffsetLatest(), ""
	case startTime:
		return clientlib.OffsetAtTimestamp(s.at), ""
	}
	return clientlib.OffsetEarliest(), ""
}
