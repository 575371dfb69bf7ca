//go:build simbugs

package node

import "github.com/strandlog/strand/engine"

// bugTierLocations (TierUploadShifted) uploads the range shifted by one
// batch: the object starts at the range's second batch while the segment
// keeps the range's offsets, so its first batch is nowhere remote.
func (c *Core) bugTierLocations(locs []engine.BatchLocation) []engine.BatchLocation {
	if !c.cfg.Bugs.TierUploadShifted || len(locs) < 2 {
		return locs
	}
	return locs[1:]
}

// bugTierDeleteOnPropose (TierDeleteOnPropose) deletes an uploaded
// object as soon as its TIER_ADD is proposed, as if the proposal were the
// stale outcome: the manifest then names an object the bucket lacks.
func (c *Core) bugTierDeleteOnPropose(g *group, key string) {
	if c.cfg.Bugs.TierDeleteOnPropose {
		g.tier.deletes = append(g.tier.deletes, key)
	}
}
