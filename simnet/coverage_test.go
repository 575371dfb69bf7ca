package simnet

import (
	"fmt"
	"strings"
	"testing"
)

// errorReporter is the part of testing.TB requireCoverage uses.
type errorReporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// requireCoverage fails t when any expected name stayed at zero in c,
// naming them and printing the table.
func requireCoverage(t errorReporter, c *Coverage, expected []string) {
	t.Helper()
	if missing := c.Missing(expected); len(missing) > 0 {
		t.Errorf("never happened across the sample: %s\n%s", strings.Join(missing, ", "), c.Table("  "))
	}
}

// TestCoverageCountsMergesAndReportsMissing shows counts add up across
// runs, output is sorted whatever the insertion order, declared names show
// as zeros, and Missing names exactly the expected names never counted.
func TestCoverageCountsMergesAndReportsMissing(t *testing.T) {
	a := NewCoverage("fault/crash", "event/truncation")
	a.Inc("fault/partition")
	a.Inc("fault/crash")
	b := NewCoverage()
	b.Add("fault/crash", 2)
	b.Add("event/leader-change", 5)
	a.Merge(b)
	if got, want := a.Line(), "event/leader-change=5 event/truncation=0 fault/crash=3 fault/partition=1"; got != want {
		t.Fatalf("Line() = %q, want %q", got, want)
	}
	table := a.Table("sim: ")
	if !strings.Contains(table, "sim: event/truncation ") || !strings.Contains(table, " 0  <- never\n") {
		t.Fatalf("table does not mark the zero:\n%s", table)
	}
	expected := []string{"fault/crash", "event/truncation", "event/checkpoint-restore", "fault/crash"}
	if got := strings.Join(a.Missing(expected), ","); got != "event/checkpoint-restore,event/truncation" {
		t.Fatalf("Missing = %s", got)
	}
	var rec recorder
	requireCoverage(&rec, a, expected)
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "event/checkpoint-restore, event/truncation") {
		t.Fatalf("requireCoverage with names at zero reported %q", rec.errors)
	}
	a.Inc("event/truncation")
	a.Inc("event/checkpoint-restore")
	rec = recorder{}
	requireCoverage(&rec, a, expected)
	if len(rec.errors) != 0 {
		t.Fatalf("requireCoverage with every name counted reported %q", rec.errors)
	}
}

// recorder is an errorReporter that keeps what it was told.
type recorder struct{ errors []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
