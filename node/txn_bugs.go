//go:build !simbugs

package node

import (
	"github.com/strandlog/strand/node/txnsvc"
	"github.com/strandlog/strand/proto/strandpb"
)

// bugMarkersBeforeDecision is a planted bug's hook (txn_bugs_simbugs.go):
// nothing in production builds.
func (c *Core) bugMarkersBeforeDecision(*txnsvc.Coordinator, *strandpb.EndTxnRequest) {}
