package groups

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"
)

// modelClient is a member process following the protocol: it owns what the
// last answer it read assigned; a crash forgets everything.
type modelClient struct {
	id, instance string
	incarnation  int
	epoch        int32
	seq          uint64
	owned        []TopicPartition
	alive        bool
}

// TestModel runs random joins, heartbeats (some answers lost), crashes,
// static and dynamic restarts, leaves, expiries, commits and topic growth,
// and checks after every step: Check's invariants; no partition owned by
// two clients at once (each client's own view); member and group epochs
// never fall; a commit lands exactly when its epoch is the member's; the
// committed offsets match a map. At the end a replay of the same commands
// gives the same state, and heart-beating every live client converges to a
// stable, balanced assignment.
func TestModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := New()
		var ops []func(*State)
		apply := func(op func(*State)) { ops = append(ops, op); op(s) }
		parts := int32(rapid.IntRange(1, 8).Draw(rt, "partitions"))
		var clients []*modelClient
		for i := range rapid.IntRange(1, 5).Draw(rt, "clients") {
			inst := ""
			if rapid.Bool().Draw(rt, "static") {
				inst = fmt.Sprintf("i%d", i)
			}
			clients = append(clients, &modelClient{id: fmt.Sprintf("c%d.0", i), instance: inst, alive: true})
		}
		offsets := make(map[TopicPartition]int64)
		epochs := make(map[string]int32)
		groupEpoch := int32(0)
		now := int64(0)
		beat := func(c *modelClient, epoch int32, lose bool) {
			c.seq++
			hb := Heartbeat{Group: "g", MemberID: c.id, InstanceID: c.instance, MemberEpoch: epoch, Seq: c.seq,
				Subscriptions: []string{"t"}, Owned: slices.Clone(c.owned), Topics: []TopicInfo{{Name: "t", Partitions: parts}}, NowMs: now}
			var r HeartbeatResult
			var err error
			quiet, unchanged := s.HeartbeatUnchanged(hb)
			before, _ := s.Describe("g")
			apply(func(s *State) { r, err = s.Heartbeat(hb) })
			if after, _ := s.Describe("g"); unchanged && (err != nil || !reflect.DeepEqual(quiet, r) || !reflect.DeepEqual(before, after)) {
				rt.Fatalf("HeartbeatUnchanged promised %+v, Heartbeat gave %+v, %v; state %+v → %+v", quiet, r, err, before, after)
			}
			switch {
			case lose || epoch < 0:
			case err == nil:
				c.epoch, c.owned = r.MemberEpoch, r.Assigned
			case errors.Is(err, ErrFencedMemberEpoch), errors.Is(err, ErrUnknownMember):
				c.epoch, c.owned = 0, nil
			}
		}
		restart := func(c *modelClient) {
			c.incarnation++
			c.id = fmt.Sprintf("%s.%d", c.id[:2], c.incarnation)
			c.epoch, c.owned, c.alive = 0, nil, true
		}
		for step := range rapid.IntRange(1, 120).Draw(rt, "steps") {
			now += 10
			c := clients[rapid.IntRange(0, len(clients)-1).Draw(rt, "client")]
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1, 2, 3:
				if c.alive {
					beat(c, c.epoch, rapid.IntRange(0, 5).Draw(rt, "lose") == 0)
				}
			case 4: // crash, then restart: static members keep their instance id
				c.alive = false
				c.owned = nil
				restart(c)
			case 5: // leave
				if c.alive {
					if c.instance != "" && rapid.Bool().Draw(rt, "staticLeave") {
						beat(c, EpochLeaveStatic, false)
					} else {
						beat(c, EpochLeave, false)
					}
					restart(c)
				}
			case 6: // the coordinator expires it at the epoch it sees; the client's own session timer lapsed first
				if v, ok := s.Describe("g"); ok {
					for _, m := range v.Members {
						if m.ID == c.id {
							at := now
							apply(func(s *State) { s.Expire("g", m.ID, m.Epoch, at) })
							c.epoch, c.owned = 0, nil
						}
					}
				}
			case 7, 8: // commit what it owns
				if !c.alive || len(c.owned) == 0 {
					continue
				}
				p := c.owned[rapid.IntRange(0, len(c.owned)-1).Draw(rt, "p")]
				o := int64(rapid.IntRange(0, 1000).Draw(rt, "offset"))
				v, _ := s.Describe("g")
				ok := false
				for _, m := range v.Members {
					ok = ok || (m.ID == c.id && m.Epoch == c.epoch && !m.LeftStatic)
				}
				cm := Commit{Group: "g", MemberID: c.id, MemberEpoch: c.epoch, Offsets: []OffsetCommit{{Partition: p, Offset: o}}, NowMs: now}
				var err error
				apply(func(s *State) { err = s.Commit(cm) })
				if (err == nil) != ok {
					rt.Fatalf("step %d: commit by %s at %d: %v, expected success %v", step, c.id, c.epoch, err, ok)
				}
				if err == nil {
					offsets[p] = o
				}
			case 9:
				if parts < 8 {
					parts++
				}
			}
			if err := s.Check(); err != nil {
				rt.Fatalf("step %d: %v", step, err)
			}
			holder := make(map[TopicPartition]string)
			for _, c := range clients {
				for _, p := range c.owned {
					if h, ok := holder[p]; ok {
						rt.Fatalf("step %d: %v owned by %s and %s", step, p, h, c.id)
					}
					holder[p] = c.id
				}
			}
			if v, ok := s.Describe("g"); ok {
				if v.Epoch < groupEpoch {
					rt.Fatalf("group epoch fell %d → %d", groupEpoch, v.Epoch)
				}
				groupEpoch = v.Epoch
				for _, m := range v.Members {
					if m.Epoch < epochs[m.ID] {
						rt.Fatalf("member %s epoch fell %d → %d", m.ID, epochs[m.ID], m.Epoch)
					}
					epochs[m.ID] = m.Epoch
				}
			}
			var got []CommittedOffset
			for _, o := range s.Fetch("g", nil) {
				if o.Offset != offsets[o.Partition] {
					rt.Fatalf("step %d: committed %v, model %d", step, o, offsets[o.Partition])
				}
				got = append(got, o)
			}
			if len(got) != len(offsets) {
				rt.Fatalf("step %d: %d committed, model %d", step, len(got), len(offsets))
			}
		}
		replay := New()
		for _, op := range ops {
			op(replay)
		}
		a, _ := s.Describe("g")
		b, _ := replay.Describe("g")
		if !reflect.DeepEqual(a, b) {
			rt.Fatalf("replay differs:\n%+v\n%+v", a, b)
		}
		// A replay through a snapshot and restore at a random point ends
		// in the same state (snapshots compared, so the sequence numbers
		// Describe does not show are compared too).
		cut := rapid.IntRange(0, len(ops)).Draw(rt, "snapshotAt")
		restored := New()
		for i, op := range ops {
			if i == cut {
				var err error
				if restored, err = Restore(restored.Snapshot(int64(i))); err != nil {
					rt.Fatalf("restore at op %d: %v", i, err)
				}
			}
			op(restored)
		}
		if want, got := s.Snapshot(0), restored.Snapshot(0); !proto.Equal(want, got) {
			rt.Fatalf("replay through a snapshot at op %d differs:\n%v\n%v", cut, want, got)
		}
		converge(rt, s, clients, beat)
	})
}

// converge heart-beats every client until the group is stable, then checks
// it is balanced and every client owns its target.
func converge(rt *rapid.T, s *State, clients []*modelClient, beat func(*modelClient, int32, bool)) {
	// The coordinator expires the crashed clients' members first.
	live := make(map[string]bool)
	for _, c := range clients {
		live[c.id] = true
	}
	if v, ok := s.Describe("g"); ok {
		for _, m := range v.Members {
			if !live[m.ID] {
				s.Expire("g", m.ID, m.Epoch, 0)
			}
		}
	}
	for range 10 {
		for _, c := range clients {
			beat(c, c.epoch, false)
		}
	}
	v, _ := s.Describe("g")
	if v.State != StateStable {
		rt.Fatalf("not stable after 10 rounds: %+v", v)
	}
	lo, hi := 1<<30, 0
	for _, m := range v.Members {
		lo, hi = min(lo, len(m.Target)), max(hi, len(m.Target))
	}
	if hi-lo > 1 {
		rt.Fatalf("unbalanced: %d..%d", lo, hi)
	}
	for _, c := range clients {
		for _, m := range v.Members {
			if m.ID == c.id && !slices.Equal(c.owned, m.Target) {
				rt.Fatalf("%s owns %v, target %v", c.id, c.owned, m.Target)
			}
		}
	}
}
