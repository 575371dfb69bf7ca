package main

import (
	"context"

	"github.com/strandlog/strand/clientlib"
)

// nodesDiskFull asks every node for metadata, one short call each, and
// returns the ids of those whose answer says their own disk is below its
// free-space floor (only a node knows its own disk). A node that does not
// answer is left out: `strand cluster` must not hang on a dead node.
func nodesDiskFull(ctx context.Context, nodes []clientlib.Node) map[uint64]bool {
	full := map[uint64]bool{}
	for _, n := range nodes {
		c, err := clientlib.NewClient(clientlib.SeedAddresses(n.Address), clientlib.ClientID("strand-cli"),
			clientlib.DialTimeout(brokerDialTimeout), clientlib.RequestTimeout(brokerDialTimeout), clientlib.MaxRetries(1))
		if err != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*brokerDialTimeout)
		info, err := c.Metadata(cctx)
		cancel()
		c.Close()
		if err != nil {
			continue
		}
		for _, m := range info.Nodes {
			if m.ID == n.ID && m.DiskFull {
				full[n.ID] = true
			}
		}
	}
	return full
}
