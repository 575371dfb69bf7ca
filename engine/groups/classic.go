package groups

import (
	"fmt"
	"slices"

	"github.com/strandlog/strand/proto/strandpb"
)

// ClassicStep is the classic group protocol request a heartbeat stands for
// (kafkaproto's JoinGroup, SyncGroup and Heartbeat); ClassicNone is a
// KIP-848 heartbeat.
type ClassicStep uint8

// The classic steps.
const (
	ClassicNone ClassicStep = iota
	// ClassicJoin joins or rejoins at the member's current epoch (0 for a
	// new member), reporting the owned partitions of its metadata, and
	// records what the member is told: its generation and assignment.
	ClassicJoin
	// ClassicSync answers the assignment the member's join recorded.
	ClassicSync
	// ClassicHeartbeat is a KIP-848 heartbeat built from the recorded
	// view; it answers Rejoin when anything about the assignment moved.
	ClassicHeartbeat
)

// Classic is the classic part of a heartbeat.
type Classic struct {
	Step ClassicStep
	// Generation is the one the client speaks (sync and heartbeat).
	Generation int32
	// Protocol, ClientID and Host are a join's, kept for DescribeGroups.
	Protocol, ClientID, Host string
}

// ClassicView is what the coordinator told a classic member. It is part of
// the replicated state (and its snapshots), not of the answering node's
// memory, so a new coordinator answers the member's SyncGroup, Heartbeat
// and OffsetCommit as the old one would: a fail-over alone neither expels
// the member nor makes it rejoin.
type ClassicView struct {
	// Generation is the member epoch its last join answered; the client
	// speaks it until it rejoins (the epoch moves past it when a
	// heartbeat only adds partitions).
	Generation int32
	// Given is what the join gave; Held is Given plus what the member
	// owned when it joined: a cooperative client may hold those until it
	// rejoins, so they count as its own until then. Both sorted.
	Given, Held []TopicPartition
	Synced      bool
	Protocol    string
	ClientID    string
	Host        string
}

func (v *ClassicView) clone() *ClassicView {
	if v == nil {
		return nil
	}
	c := *v
	c.Given, c.Held = slices.Clone(v.Given), slices.Clone(v.Held)
	return &c
}

// validClassic checks a classic step's names.
func validClassic(c Classic) error {
	if c.Step > ClassicHeartbeat || !validName(c.Protocol, true) || !validName(c.ClientID, true) || !validName(c.Host, true) {
		return fmt.Errorf("%w: classic step %d names", ErrInvalid, c.Step)
	}
	return nil
}

// classic applies one classic step.
func (s *State) classic(hb Heartbeat) (HeartbeatResult, error) {
	if err := validClassic(hb.Classic); err != nil {
		return HeartbeatResult{}, err
	}
	switch hb.Classic.Step {
	case ClassicJoin:
		return s.classicJoin(hb)
	case ClassicSync:
		return s.classicSync(hb)
	}
	k, v, early, err := s.classicBeat(hb)
	if early != nil || err != nil {
		return deref(early), err
	}
	r, err := s.Heartbeat(k)
	if err != nil {
		return r, err
	}
	return classicAnswer(r, v), nil
}

func deref(r *HeartbeatResult) HeartbeatResult {
	if r == nil {
		return HeartbeatResult{}
	}
	return *r
}

// classicJoin joins at the member's current epoch (one command: no other
// heartbeat moves the epoch between the read and the write) and records
// the view the answer gives.
func (s *State) classicJoin(hb Heartbeat) (HeartbeatResult, error) {
	k := hb
	k.Classic, k.MemberEpoch = Classic{}, EpochJoin
	if g := s.group(hb.Group, false); g != nil {
		if m := g.find(hb.MemberID); m != nil && !m.leftStatic {
			k.MemberEpoch = m.epoch
		}
	}
	r, err := s.Heartbeat(k)
	if err != nil {
		return r, err
	}
	m := s.group(hb.Group, false).find(hb.MemberID)
	m.classic = &ClassicView{
		Generation: r.MemberEpoch, Given: slices.Clone(r.Assigned), Held: normalise(append(slices.Clone(hb.Owned), r.Assigned...)),
		Protocol: hb.Classic.Protocol, ClientID: hb.Classic.ClientID, Host: hb.Classic.Host,
	}
	r.Generation, r.Protocol = r.MemberEpoch, hb.Classic.Protocol
	return r, nil
}

// classicSync answers the assignment the member's join recorded: Rejoin
// when there is no such record, ErrFencedMemberEpoch (the classic
// ILLEGAL_GENERATION) for another generation.
func (s *State) classicSync(hb Heartbeat) (HeartbeatResult, error) {
	m := s.classicMember(hb)
	switch {
	case m == nil || m.classic == nil || m.leftStatic:
		return HeartbeatResult{Rejoin: true}, nil
	case m.classic.Generation != hb.Classic.Generation:
		return HeartbeatResult{}, ErrFencedMemberEpoch
	}
	m.classic.Synced = true
	v := m.classic
	return HeartbeatResult{MemberEpoch: m.epoch, Assigned: slices.Clone(v.Given), Generation: v.Generation, Protocol: v.Protocol}, nil
}

func (s *State) classicMember(hb Heartbeat) *member {
	g := s.group(hb.Group, false)
	if g == nil {
		return nil
	}
	return g.find(hb.MemberID)
}

// classicBeat is the KIP-848 heartbeat a classic Heartbeat stands for: at
// the member's epoch, owning what it holds, with its own subscriptions and
// rack, and the command's topics and sequence number. early is the answer
// when there is none to send: Rejoin for a member not synced in the
// generation the client speaks.
func (s *State) classicBeat(hb Heartbeat) (k Heartbeat, v *ClassicView, early *HeartbeatResult, err error) {
	m := s.classicMember(hb)
	switch {
	case m == nil:
		return Heartbeat{}, nil, nil, ErrUnknownMember
	case m.classic == nil || !m.classic.Synced || m.classic.Generation != hb.Classic.Generation || m.leftStatic:
		return Heartbeat{}, nil, &HeartbeatResult{Rejoin: true}, nil
	}
	k = Heartbeat{Group: hb.Group, MemberID: m.id, InstanceID: m.instanceID, Rack: m.rack, MemberEpoch: m.epoch, Seq: hb.Seq,
		Subscriptions: slices.Clone(m.subs), Owned: slices.Clone(m.classic.Held), Topics: hb.Topics, NowMs: hb.NowMs}
	return k, m.classic.clone(), nil, nil
}

// classicAnswer is a classic heartbeat's answer: Rejoin when the member's
// epoch or assignment moved, or it still holds something it must give up
// (its rejoin reports what it really owns, which is how the coordinator
// learns a revocation finished).
func classicAnswer(r HeartbeatResult, v *ClassicView) HeartbeatResult {
	r.Generation, r.Protocol = v.Generation, v.Protocol
	r.Rejoin = r.MemberEpoch != v.Generation || !slices.Equal(r.Assigned, v.Given) || !slices.Equal(v.Held, v.Given)
	return r
}

// ClassicHeartbeatUnchanged is HeartbeatUnchanged for a classic Heartbeat
// step: the answer, when the heartbeat it stands for would change nothing.
func (s *State) ClassicHeartbeatUnchanged(hb Heartbeat) (HeartbeatResult, bool) {
	if hb.Classic.Step != ClassicHeartbeat || validClassic(hb.Classic) != nil {
		return HeartbeatResult{}, false
	}
	k, v, early, err := s.classicBeat(hb)
	if err != nil || early != nil {
		return HeartbeatResult{}, false
	}
	r, ok := s.HeartbeatUnchanged(k)
	if !ok {
		return HeartbeatResult{}, false
	}
	return classicAnswer(r, v), true
}

// Subscriptions returns a member's subscriptions (nil when there is no
// such member): the coordinator resolves their topics for a classic
// Heartbeat, which names none.
func (s *State) Subscriptions(group, memberID string) []string {
	m := s.classicMember(Heartbeat{Group: group, MemberID: memberID})
	if m == nil {
		return nil
	}
	return slices.Clone(m.subs)
}

// classicEpoch is the epoch a classic member's commit at generation
// commits in: the member's epoch when generation is the one its last join
// answered and it synced (the epoch moved without a rejoin only by
// gaining partitions, and a partition it still holds goes to no one else
// until its rejoin reports it gone, so Kafka's "commit in the current
// generation while a rebalance is prepared" is safe); else generation.
func (m *member) classicEpoch(generation int32) int32 {
	if m != nil && m.classic != nil && m.classic.Synced && m.classic.Generation == generation {
		return m.epoch
	}
	return generation
}

// ClassicFromWire is a request's classic step in this package's terms (the
// zero Classic, a KIP-848 heartbeat, when w is nil).
func ClassicFromWire(w *strandpb.ClassicGroupStep) Classic {
	if w == nil {
		return Classic{}
	}
	return Classic{Step: ClassicStep(w.GetStep()), Generation: w.GetGeneration(), Protocol: w.GetProtocol(), ClientID: w.GetClientId(), Host: w.GetHost()}
}

// ClassicToWire is a classic member's view as DescribeGroups shows it.
func ClassicToWire(v *ClassicView) *strandpb.ClassicMemberState { return classicToWire(v) }
