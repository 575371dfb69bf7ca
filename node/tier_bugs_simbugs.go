//go:build simbugs

package node

import (
	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/tier"
)

// bugTierLocations (TierUploadShifted) uploads the range shifted by one
// batch: the object leaves out the range's first batch and holds the
// applied batch after its end instead, while the segment keeps the
// range's offsets. A range of one batch with none applied after it is
// uploaded as it is.
func (c *Core) bugTierLocations(g *group, locs []engine.BatchLocation) []engine.BatchLocation {
	if !c.cfg.Bugs.TierUploadShifted {
		return locs
	}
	last := locs[len(locs)-1]
	next, err := g.part.AppendLocations(nil, last.BaseOffset+int64(last.RecordCount), 1)
	if err != nil || len(next) == 0 || next[0].RaftIndex > g.appliedRaft {
		return locs
	}
	return append(locs[1:len(locs):len(locs)], next[0])
}

// bugTierDeleteOnPropose (TierDeleteOnPropose) deletes an uploaded
// object as soon as its TIER_ADD is proposed, as if the proposal were the
// stale outcome: the manifest then names an object the bucket lacks.
func (c *Core) bugTierDeleteOnPropose(g *group, key string) {
	if c.cfg.Bugs.TierDeleteOnPropose {
		g.tier.deletes = append(g.tier.deletes, key)
	}
}

// bugTierLocalBound (TierLocalEarly) lets local retention drop raft
// segments whose records no applied TIER_ADD covers yet: the bound is the
// applied index instead of the remote log's end, so a local segment goes
// before it is uploaded.
func (c *Core) bugTierLocalBound(g *group, bound uint64) uint64 {
	if c.cfg.Bugs.TierLocalEarly {
		return g.appliedRaft
	}
	if c.cfg.Bugs.TierUploadNotReplicated && g.tierCursor > g.part.TierNext() {
		return min(g.part.RaftTrimBound(g.tierCursor), g.appliedRaft)
	}
	return bound
}

// bugTierRemoteOffByOne (TierRemoteOffByOne): a remote read starts at the
// frame after the one holding the fetch's offset (tier_read.go).
func (c *Core) bugTierRemoteOffByOne() bool { return c.cfg.Bugs.TierRemoteOffByOne }

// bugTierUploaded (TierUploadNotReplicated) records an upload as remote
// when its Put answers, in this node's memory: the uploader's cursor,
// which local retention (bugTierLocalBound) and the next upload
// (bugTierNextUpload) then go by, while the TIER_ADD that would make it
// remote for every replica may yet be lost with the leadership or dropped.
// The realistic shortcut: the object is in the bucket, so it is remote.
func (c *Core) bugTierUploaded(g *group, seg tier.Segment) {
	if c.cfg.Bugs.TierUploadNotReplicated {
		g.tierCursor = max(g.tierCursor, seg.End)
	}
}

// bugTierNextUpload (TierUploadNotReplicated) starts the next upload at
// the uploader's cursor when it is past the manifest's end: a range whose
// ADD was lost is never uploaded again, and the next ADD leaves a gap.
func (c *Core) bugTierNextUpload(g *group, sealed []tier.Range, stable int64, rng tier.Range, ok bool) (tier.Range, bool) {
	if !c.cfg.Bugs.TierUploadNotReplicated || g.tierCursor <= g.part.TierNext() {
		return rng, ok
	}
	return tier.Manifest{}.NextUpload(g.tierCursor, sealed, stable)
}
