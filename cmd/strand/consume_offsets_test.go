package main

import (
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// Every --from form reads as documented: kcat's words, N, -N, s@ and e@
// (given twice), rpk's +N, @T, @T1:T2, @:T, O1:O2, :O2 and :end; a second
// start or end, and a start after the end, are refused.
func TestParseOffsets(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	t1 := time.UnixMilli(1700000000000)
	rfc := time.Date(2026, 11, 30, 18, 0, 0, 0, time.UTC)
	none := time.Time{}
	for _, c := range []struct {
		from    []string
		start   startSpec
		endOff  int64
		endTime time.Time
		toEnd   bool
	}{
		{[]string{"beginning"}, startSpec{kind: startEarliest}, -1, none, false},
		{[]string{"end"}, startSpec{kind: startLatest}, -1, none, false},
		{[]string{"42"}, startSpec{kind: startExact, n: 42}, -1, none, false},
		{[]string{"-10"}, startSpec{kind: startFromEnd, n: 10}, -1, none, false},
		{[]string{"+3"}, startSpec{kind: startFromStart, n: 3}, -1, none, false},
		{[]string{"s@1700000000000"}, startSpec{kind: startTime, at: t1}, -1, none, false},
		{[]string{"s@1700000000000", "e@1700000000000"}, startSpec{kind: startTime, at: t1}, -1, t1, false},
		{[]string{"e@2026-11-30T18:00:00Z"}, startSpec{kind: startEarliest}, -1, rfc, false},
		{[]string{"2026-11-30T18:00:00Z"}, startSpec{kind: startTime, at: rfc}, -1, none, false},
		{[]string{"@2026-11-30T18:00:00Z"}, startSpec{kind: startTime, at: rfc}, -1, none, false},
		{[]string{"@-1h"}, startSpec{kind: startTime, at: now.Add(-time.Hour)}, -1, none, false},
		{[]string{"@2026-11-30T18:00:00Z:-1h"}, startSpec{kind: startTime, at: rfc}, -1, now.Add(-time.Hour), false},
		{[]string{"@:1700000000000"}, startSpec{kind: startEarliest}, -1, t1, false},
		{[]string{"@2026-11-30"}, startSpec{kind: startTime, at: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)}, -1, none, false},
		{[]string{"5:9"}, startSpec{kind: startExact, n: 5}, 9, none, false},
		{[]string{":9"}, startSpec{kind: startEarliest}, 9, none, false},
		{[]string{"-4:end"}, startSpec{kind: startFromEnd, n: 4}, -1, none, true},
		{[]string{"7:"}, startSpec{kind: startExact, n: 7}, -1, none, false},
		{[]string{"latest", ":end"}, startSpec{kind: startLatest}, -1, none, true},
	} {
		r, err := parseOffsets(c.from, now)
		if err != nil {
			t.Errorf("--from %v: %v", c.from, err)
			continue
		}
		if r.start.kind != c.start.kind || r.start.n != c.start.n || !r.start.at.Equal(c.start.at) ||
			r.endOffset != c.endOff || !r.endTime.Equal(c.endTime) || r.untilEnd != c.toEnd {
			t.Errorf("--from %v: got %+v", c.from, r)
		}
	}
	for _, bad := range [][]string{{""}, {"stored"}, {"--1"}, {"+-1"}, {"e@"}, {"s@soon"}, {"@1h"}, {"@x:y"},
		{"5:3"}, {"1:2:3"}, {"1", "2"}, {"e@1", "e@2"}, {":end", ":9"}, {"2026-11-30T18:00:00Z:5"}} {
		if r, err := parseOffsets(bad, now); err == nil {
			t.Errorf("--from %q accepted: %+v", bad, r)
		} else if !isUsageError(err) {
			t.Errorf("--from %q: %v, want a usage error", bad, err)
		}
	}
}

// Per partition, -N and +N clamp to the partition's records silently, and
// an absolute offset outside them is clamped with a note naming it.
func TestResolveStart(t *testing.T) {
	for _, c := range []struct {
		s        startSpec
		at       int64
		noteHas  string
		logStart int64
		hwm      int64
	}{
		{startSpec{kind: startFromEnd, n: 10}, 90, "", 0, 100},
		{startSpec{kind: startFromEnd, n: 10}, 20, "", 20, 25},
		{startSpec{kind: startFromStart, n: 10}, 30, "", 20, 100},
		{startSpec{kind: startFromStart, n: 10}, 25, "", 20, 25},
		{startSpec{kind: startExact, n: 50}, 50, "", 0, 100},
		{startSpec{kind: startExact, n: 50}, 30, "t/1: offset 50 is past the end (high-water mark 30); reading only new records, from 30", 0, 30},
		{startSpec{kind: startExact, n: 5}, 20, "t/1: offset 5 is before the log start 20; reading from 20", 20, 30},
	} {
		got, note := resolveStart(c.s, "t", 1, c.logStart, c.hwm)
		if got != clientlib.OffsetExact(c.at) || note != c.noteHas {
			t.Errorf("%+v in [%d, %d): got %v, note %q; want offset %d, note %q", c.s, c.logStart, c.hwm, got, note, c.at, c.noteHas)
		}
	}
	if _, err := groupStart(offsetRange{start: startSpec{kind: startFromEnd, n: 1}, endOffset: -1}, []string{"-1"}); err == nil ||
		!strings.Contains(err.Error(), "--group") {
		t.Errorf("-1 with --group: %v", err)
	}
	if _, err := groupStart(offsetRange{endTime: time.UnixMilli(1), endOffset: -1}, []string{"e@1"}); err == nil {
		t.Errorf("e@ with --group accepted")
	}
}
