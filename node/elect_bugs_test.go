//go:build simbugs

package node

import "testing"

// ElectionInCoreTicks: raft handed the election timeout in Core ticks
// elects TicksPerRaftTick times late. With production's ticks (raft every
// 10th Core tick, 10 raft ticks an election) the metadata group of a new
// cluster has no leader after 3 election timeouts (300 Core ticks); with
// raft ticked every Core tick the bug changes nothing.
func TestBugElectionInCoreTicks(t *testing.T) {
	for _, tc := range []struct {
		perRaft, bug bool
		wantLeader   bool
	}{{true, false, true}, {true, true, false}, {false, true, true}} {
		c := newCluster(t, 51, 3, nil, func(cfg *Config) {
			cfg.ElectionTicks, cfg.HeartbeatTicks, cfg.TicksPerRaftTick = 10, 1, 1
			if tc.perRaft {
				cfg.TicksPerRaftTick = 10
			}
			cfg.Bugs.ElectionInCoreTicks = tc.bug
		})
		c.tick(3 * 10 * 10)
		led := false
		for _, id := range c.ids {
			if st, ok := c.cores[id].MetadataStatus(); ok && st.IsLeader {
				led = true
			}
		}
		if led != tc.wantLeader {
			t.Errorf("TicksPerRaftTick 10: %v, bug %v: metadata leader after 300 ticks %v, want %v", tc.perRaft, tc.bug, led, tc.wantLeader)
		}
	}
}
