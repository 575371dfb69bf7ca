package main

import (
	"context"

	"github.com/strandlog/strand/clientlib"
)

// nodesDiskNotes asks every node for metadata, one short call each, and
// returns the note `strand cluster` prints beside each node whose answer
// says its own disk is below its free-space floor or stalled (only a node
// knows its own disk). A node that does not answer is left out: `strand
// cluster` must not hang on a dead node.
func nodesDiskNotes(ctx context.Context, nodes []clientlib.Node) map[uint64]string {
	notes := map[uint64]string{}
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
			if note := diskNote(m.DiskFull, m.DiskStalled); m.ID == n.ID && note != "" {
				notes[n.ID] = note
			}
		}
	}
	return notes
}

// What `strand cluster` prints beside a node whose disk takes no writes.
const (
	diskFullNote    = "DISK FULL: refusing produce (not_enough_space) until space returns"
	diskStalledNote = "DISK STALLED: a storage job hangs; leading nothing, refusing produce until the disk answers"
)

// diskNote is the note for a node's disk state; "" for a healthy disk.
func diskNote(full, stalled bool) string {
	switch {
	case full && stalled:
		return diskStalledNote + "; " + diskFullNote
	case stalled:
		return diskStalledNote
	case full:
		return diskFullNote
	}
	return ""
}
