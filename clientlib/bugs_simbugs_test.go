//go:build simbugs

package clientlib

import (
	"slices"
	"testing"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// The planted bugAutoCommitFetched shows in the scripted group world: the
// records' end is committed in the Poll that hands them out, before the
// application processed them (the clean build commits it a Poll later).
func TestBugAutoCommitFetchedCommitsUnprocessed(t *testing.T) {
	SetBugs(true)
	defer SetBugs(false)
	_, _, early := runGroupMember(t)
	if len(early) == 0 {
		t.Fatal("no commit before processing: the planted bug does not show")
	}
}

// The planted bugCommitSkipsFlush shows in the scripted transaction:
// CommitTransaction reports success although its record was not produced
// before the transaction ended (the clean build sends add, produce, then
// end: TestSimulatedTransactionCommits). In this world the commit even
// ends the transaction locally, its AddPartitionsToTxn not yet sent.
func TestBugCommitSkipsFlushEndsBeforeRecords(t *testing.T) {
	SetTxnBugs(true)
	defer SetTxnBugs(false)
	kinds, _, finished, commitErr := runSimulatedCommit(t, 10000, false) // the late record keeps the loop busy
	if !finished || commitErr != nil {
		t.Fatalf("task finished=%v, commit error %v; want CommitTransaction to report success", finished, commitErr)
	}
	at := func(kind string) int { // a request never sent comes last
		if i := slices.Index(kinds, kind); i >= 0 {
			return i
		}
		return len(kinds)
	}
	if at("produce") < at("end") {
		t.Fatalf("requests %v: the planted bug does not show (want no produce before the transaction's end)", kinds[:min(len(kinds), 8)])
	}
}

// TestBugIgnoresThrottleStalls: with the planted bug the client writes
// into the connection its node paused for a 5 s throttle, gives the node
// up as stalled after 200 ms and dials again
// (TestSimulatedThrottleHoldsConnection without the bug keeps one).
func TestBugIgnoresThrottleStalls(t *testing.T) {
	SetConnBugs(false, true)
	defer SetConnBugs(false, false)
	w := plainConnWorld()
	w.throttle = 5 * time.Second
	c, _ := simulatedClient(t, w, StallTimeout(200*time.Millisecond), RequestTimeout(time.Second))
	produce := &strandpb.Request{Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{Acks: -1}}}
	for range 2 {
		c.simCall("n1", produce, time.Second, 0, func(*strandpb.Response, error) {})
	}
	w.run(t, 1000)
	c.simCall("n1", produce, time.Second, 0, func(*strandpb.Response, error) {})
	w.run(t, 1000)
	if w.next < 2 {
		t.Fatalf("%d connections; want the planted bug to give the throttled one up", w.next)
	}
}
