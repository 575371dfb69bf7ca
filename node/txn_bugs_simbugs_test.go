//go:build simbugs

package node

import (
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

// TestBugMarkersBeforeDecision shows the planted bug writes markers for
// an EndTxn the coordinator then refuses: a zombie's EndTxn(commit) at a
// fenced epoch asks for commit markers of its successor's open
// transaction, which no decision ever backs. Without the bug the refused
// request writes none.
func TestBugMarkersBeforeDecision(t *testing.T) {
	for _, planted := range []bool{false, true} {
		markers := newTestMarkers()
		c := newCluster(t, 23, 3, replicated(3, "t", 2), func(cfg *Config) {
			txnTestConfig(markers)(cfg)
			cfg.Bugs.MarkersBeforeDecision = planted
		})
		zombie := c.initTxn("app")
		current := c.initTxn("app")
		if r := c.txnCall("app", addPartitionsReq("app", current, "t", 0)); r.GetError() != nil {
			t.Fatalf("add partitions: %v", r)
		}
		wantCode(t, "zombie end", c.txnCall("app", endTxnReq("app", zombie, true)), strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED)
		asked := 0
		for _, ms := range markers.asked {
			asked += len(ms)
		}
		if planted && asked == 0 || !planted && asked != 0 {
			t.Fatalf("planted %v: %d markers asked for a refused EndTxn: %v", planted, asked, markers.asked)
		}
		if got := c.describeTxn("app"); got.GetState() != "Ongoing" {
			t.Fatalf("planted %v: the refused EndTxn left %v, want Ongoing", planted, got.GetState())
		}
	}
}
