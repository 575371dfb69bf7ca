//go:build !simbugs

package node

import (
	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/tier"
)

// Planted-bug hooks of tiered storage (tier_bugs_simbugs.go): nothing in
// production builds.
func (c *Core) bugTierLocations(_ *group, locs []engine.BatchLocation) []engine.BatchLocation {
	return locs
}
func (c *Core) bugTierDeleteOnPropose(*group, string)           {}
func (c *Core) bugTierLocalBound(_ *group, bound uint64) uint64 { return bound }
func (c *Core) bugTierRemoteOffByOne() bool                     { return false }
func (c *Core) bugTierUploaded(*group, tier.Segment)            {}
func (c *Core) bugTierNextUpload(_ *group, _ []tier.Range, _ int64, rng tier.Range, ok bool) (tier.Range, bool) {
	return rng, ok
}
