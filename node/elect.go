package node

import (
	"slices"

	"go.etcd.io/raft/v3"
)

// The first election of a new partition (issue 19 item 10).
//
// Raft elects a group's first leader only when some replica's randomized
// election timeout (ElectionTicks to twice that: 1–2 s in production)
// runs out, so the first produce to a topic just created waited 1–1.6 s
// for a leader. Instead a new partition's preferred replica (the
// metadata's first) campaigns as soon as raft lets it (once the bootstrap
// configuration is applied), and again on each of its next raft ticks
// while it knows no leader, at most freshCampaignsMax times: its peers
// drop a (pre-)vote for a replica they have not opened yet, as they apply
// the topic's creation a moment later. After that raft's own timeout
// goes on as before. Campaigning is always safe in raft (with PreVote a
// replica whose log is behind, or whose peers follow a live leader,
// disturbs nothing); only the timing changes. Kafka's controller names a
// new partition's leader at creation for the same reason.
//
// Only a replica that has seen no election (term 1: its log is the
// bootstrap configuration alone), placed first, on a node that never lost
// its state (rejoin.go), of a partition with no move, campaigns early; a
// full node never does (diskfull.go).

// freshCampaignsMax bounds the early campaigns of one new replica.
const freshCampaignsMax = 5

// noteFreshLead queues g for an early campaign when it is a new
// partition's preferred replica (see above).
func (c *Core) noteFreshLead(g *group, spec PartitionSpec) {
	if !g.sm.policy().freshCampaigns || g.rejoin != nil || len(spec.Replicas) == 0 || spec.Replicas[0] != c.cfg.ID ||
		len(spec.Target) > 0 || len(spec.Leaving) > 0 ||
		(len(spec.Bootstrap) > 0 && !slices.Equal(sortedIDs(spec.Bootstrap), sortedIDs(spec.Replicas))) {
		return
	}
	if g.raw.BasicStatus().GetTerm() != 1 {
		return
	}
	g.freshCampaigns = freshCampaignsMax
	c.freshLeads = append(c.freshLeads, g)
}

// campaignFresh makes each queued new replica campaign when due, and
// drops those that found a leader, ran out of campaigns or were stopped.
// Tick calls it; the queue is empty but for a moment after a topic is
// created.
func (c *Core) campaignFresh() {
	if len(c.freshLeads) == 0 {
		return
	}
	kept := c.freshLeads[:0]
	for _, g := range c.freshLeads {
		if c.campaignFreshOnce(g) {
			kept = append(kept, g)
		}
	}
	clear(c.freshLeads[len(kept):])
	c.freshLeads = kept
}

// campaignFreshOnce campaigns g if it is due: no leader known, not a
// candidate already (its votes are on their way), the bootstrap
// configuration applied (raft refuses to campaign before) and a raft tick
// passed since its last campaign. It reports whether g stays queued.
func (c *Core) campaignFreshOnce(g *group) bool {
	if c.byTP[g.tp] != g || g.freshCampaigns <= 0 || c.holdsOffLeadership(g) {
		return false
	}
	st := g.raw.BasicStatus()
	switch {
	case st.Lead != 0 || st.RaftState == raft.StateLeader || st.RaftState == raft.StateCandidate:
		return false
	case st.Applied < st.GetCommit() || c.ticks < g.freshCampaignAt:
		return true
	}
	g.freshCampaigns--
	g.freshCampaignAt = c.ticks + uint64(c.cfg.TicksPerRaftTick)
	c.touch(g)
	if err := g.raw.Campaign(); err != nil {
		return false
	}
	c.stats.FreshCampaigns++
	return g.freshCampaigns > 0
}
