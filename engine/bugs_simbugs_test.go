//go:build simbugs

package engine

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// failureRecorder is a rapid.TB that records a failure instead of failing
// the test: a planted-bug test requires TestTxnModel's property to fail.
type failureRecorder struct {
	*testing.T
	failed  bool
	message string
}

func (r *failureRecorder) Errorf(format string, args ...any) { r.Error(fmt.Sprintf(format, args...)) }
func (r *failureRecorder) Fatalf(format string, args ...any) { r.Error(fmt.Sprintf(format, args...)) }
func (r *failureRecorder) Fatal(args ...any)                 { r.Error(args...) }
func (r *failureRecorder) FailNow()                          { r.failed = true }
func (r *failureRecorder) Fail()                             { r.failed = true }
func (r *failureRecorder) Failed() bool                      { return r.failed }
func (r *failureRecorder) Logf(string, ...any)               {}
func (r *failureRecorder) Log(...any)                        {}

// Error records the first failure message.
func (r *failureRecorder) Error(args ...any) {
	if !r.failed {
		r.message = fmt.Sprint(args...)
	}
	r.failed = true
}

// setRapidFlag sets one of rapid's flags for the rest of the test.
func setRapidFlag(t *testing.T, name, value string) {
	f := flag.Lookup(name)
	old := f.Value.String()
	if err := f.Value.Set(value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}

// requireModelCatches runs TestTxnModel's property with a planted bug on
// and requires it to fail with a message naming symptom.
func requireModelCatches(t *testing.T, symptom string) {
	setRapidFlag(t, "rapid.nofailfile", "true")
	setRapidFlag(t, "rapid.shrinktime", "5s")
	r := &failureRecorder{T: t}
	rapid.Check(r, runTxnModel)
	if !r.failed {
		t.Fatal("TestTxnModel passed with the bug planted")
	}
	if !strings.Contains(r.message, symptom) {
		t.Fatalf("TestTxnModel failed, but not with %q: %s", symptom, r.message)
	}
	t.Logf("caught: %s", strings.SplitN(r.message, "\n", 2)[0])
}

// TestBugLSOPassesOpenTxn shows TestTxnModel catches a last stable offset
// taken from the newest open transaction instead of the oldest.
func TestBugLSOPassesOpenTxn(t *testing.T) {
	SetTxnBugs(true, false)
	defer SetTxnBugs(false, false)
	requireModelCatches(t, "LastStableOffset")
}

// TestBugDropAbortOnRestore shows TestTxnModel catches a restore that loses
// the newest aborted transaction from the aborted index.
func TestBugDropAbortOnRestore(t *testing.T) {
	SetTxnBugs(false, true)
	defer SetTxnBugs(false, false)
	requireModelCatches(t, "restored partition differs")
}
