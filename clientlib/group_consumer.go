package clientlib

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// GroupOpt configures a GroupConsumer.
type GroupOpt func(*groupConfig)

type groupConfig struct {
	instanceID string
	rack       string
	autoCommit time.Duration // 0: off
	start      Offset        // for partitions the group has no committed offset for
	onAssigned func(ctx context.Context, ps []TopicPartition)
	onRevoked  func(ctx context.Context, ps []TopicPartition)
	onLost     func(ps []TopicPartition)
	consumer   []ConsumerOpt
	// requireStable: committed offsets are read only once no transaction
	// holds pending offsets for them (KIP-447; set by TransactSession).
	requireStable bool
}

// AutoCommitIntervalDefault is how often Poll commits positions unless
// AutoCommitInterval says otherwise.
const AutoCommitIntervalDefault = 5 * time.Second

// InstanceID makes the member static: restarted within the session
// timeout with the same instance id, it gets its partitions back without a
// rebalance. Two live consumers must never share one.
func InstanceID(id string) GroupOpt { return func(c *groupConfig) { c.instanceID = id } }

// GroupRack names the member's failure domain.
func GroupRack(rack string) GroupOpt { return func(c *groupConfig) { c.rack = rack } }

// AutoCommitInterval sets how often Poll commits the positions of owned
// partitions (default 5 s): the offsets after the records earlier Polls
// returned, never those of the records it is about to return. 0 turns
// auto-commit off (call Commit).
func AutoCommitInterval(d time.Duration) GroupOpt { return func(c *groupConfig) { c.autoCommit = d } }

// StartWithoutCommit sets where a partition the group never committed
// starts: OffsetEarliest (the default), OffsetLatest or a timestamp. A
// committed offset always wins; a committed offset below the log start is
// an *OffsetOutOfRangeError, never a silent jump (R22).
func StartWithoutCommit(o Offset) GroupOpt { return func(c *groupConfig) { c.start = o } }

// OnAssigned runs inside Poll when partitions are given to the member,
// after their start positions are set.
func OnAssigned(fn func(ctx context.Context, ps []TopicPartition)) GroupOpt {
	return func(c *groupConfig) { c.onAssigned = fn }
}

// OnRevoked runs inside Poll before partitions move to another member (and
// in Close): commit what was processed there (with auto-commit on, the
// positions of everything Poll returned there were just committed).
func OnRevoked(fn func(ctx context.Context, ps []TopicPartition)) GroupOpt {
	return func(c *groupConfig) { c.onRevoked = fn }
}

// OnLost runs when the member lost its partitions without a chance to
// commit (fenced, its session lapsed, or their topic was deleted or
// re-created): their commits would be refused.
func OnLost(fn func(ps []TopicPartition)) GroupOpt { return func(c *groupConfig) { c.onLost = fn } }

// GroupConsumerOpts passes options to the underlying Consumer.
func GroupConsumerOpts(opts ...ConsumerOpt) GroupOpt {
	return func(c *groupConfig) { c.consumer = append(c.consumer, opts...) }
}

// GroupConsumer consumes topics as a member of a consumer group: the
// group's coordinator assigns each partition to one member, incrementally
// (KIP-848), and the group keeps a committed offset per partition. Poll
// heart-beats, reconciles the assignment (running OnRevoked and OnAssigned)
// and auto-commits; all of it happens on the goroutine calling Poll, so
// Poll, Commit and Close must be called from one goroutine. Not calling
// Poll for a session timeout (45 s) loses the partitions, as Kafka's
// max.poll.interval does.
type GroupConsumer struct {
	c      *Client
	k      *Consumer
	cfg    groupConfig
	group  string
	topics []string
	member string

	epoch int32
	seq   uint64
	owned []TopicPartition // sorted

	interval, session time.Duration
	nextBeat          time.Time
	beatFails         int       // consecutive retriable heartbeat failures
	lastOK            time.Time // last successful heartbeat
	nextCommit        time.Time
	committed         map[TopicPartition]int64 // last committed by this member
	// gone are the errors of partitions whose topic was deleted (or
	// re-created) under the member: every later Poll reports them, even
	// once the coordinator took the partitions away.
	gone   Fetches
	closed bool
	// commitMeta, set while Handle runs, gives each commit's metadata
	// (its dead-letter count).
	commitMeta func(TopicPartition) string
}

// NewGroupConsumer returns a member of group subscribed to topics; it joins
// at its first Poll.
func NewGroupConsumer(c *Client, group string, topics []string, opts ...GroupOpt) (*GroupConsumer, error) {
	cfg := groupConfig{autoCommit: AutoCommitIntervalDefault, start: OffsetEarliest()}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case group == "" || len(group) > 255:
		return nil, &OptionError{Option: "group", Reason: "a group id of 1..255 bytes"}
	case len(topics) == 0:
		return nil, &OptionError{Option: "topics", Reason: "at least one topic to subscribe to"}
	case cfg.autoCommit < 0:
		return nil, &OptionError{Option: "AutoCommitInterval", Reason: "0 (off) or a positive interval"}
	}
	member, err := c.randomMemberID(rand.Read)
	if err != nil {
		return nil, fmt.Errorf("clientlib: member id: %w", err)
	}
	return &GroupConsumer{
		c: c, k: NewConsumer(c, cfg.consumer...), cfg: cfg, group: group, topics: append([]string(nil), topics...),
		member: member, interval: time.Second, session: 45 * time.Second,
		committed: make(map[TopicPartition]int64),
	}, nil
}

// MemberID is the id this consumer joins with.
func (g *GroupConsumer) MemberID() string { return g.member }

// Epoch is the member epoch the coordinator last gave (0 before joining).
func (g *GroupConsumer) Epoch() int32 { return g.epoch }

// Assigned lists the partitions the member owns now, sorted.
func (g *GroupConsumer) Assigned() []TopicPartition { return append([]TopicPartition(nil), g.owned...) }

// Poll heart-beats when due, reconciles the assignment, auto-commits when
// due, then fetches from the owned partitions (see Consumer.Poll). With
// nothing owned it waits until the next heartbeat is due (at least one
// backoff step, at most one heartbeat interval) and returns no records; a
// heartbeat that fails retriably (no coordinator) is retried after a
// backoff that grows with each failure in a row, up to the interval.
//
// Auto-commit runs before the fetch, so it commits only what earlier Polls
// returned (as Kafka's auto-commit does): calling Poll again says the
// records it returned last time were processed. A member that dies while
// processing a batch has not committed it, and the partition's next owner
// reads it again (at least once). Revocation and Close commit the
// positions of what was returned, the same way.
func (g *GroupConsumer) Poll(ctx context.Context) Fetches {
	if g.closed {
		return Fetches{{Err: ErrClientClosed}}
	}
	if err := g.maintain(ctx); err != nil && len(g.owned) == 0 {
		g.k.retryWait(ctx)
		return Fetches{{Err: err}}
	}
	if len(g.owned) == 0 {
		g.idleUntilBeat(ctx)
		return append(Fetches(nil), g.gone...)
	}
	if !bugAutoCommitFetched() {
		// Positions move only when a Poll hands records out, so here they
		// are exactly what the previous Polls returned.
		g.autoCommit(ctx)
	}
	fs := g.k.Poll(ctx)
	if bugAutoCommitFetched() {
		g.autoCommit(ctx) // planted: commits the records this Poll is about to return
	}
	if len(g.gone) > 0 {
		fs = mergeFetches(append(fs, g.gone...))
	}
	return fs
}

// idleUntilBeat waits, owning nothing, until the next heartbeat is due
// (at least one idle backoff step, at most one heartbeat interval).
func (g *GroupConsumer) idleUntilBeat(ctx context.Context) {
	d := max(g.c.backoffDelay(1), min(g.nextBeat.Sub(g.c.now()), g.interval))
	g.c.sleep(ctx, d)
}

// autoCommit commits the owned partitions' positions when auto-commit is
// on and due.
func (g *GroupConsumer) autoCommit(ctx context.Context) {
	if g.cfg.autoCommit > 0 && !g.c.now().Before(g.nextCommit) {
		if err := g.Commit(ctx); err == nil {
			g.nextCommit = g.c.now().Add(g.cfg.autoCommit)
		}
	}
}

// maintain heart-beats when due (or after a change to report) and drops
// everything when the session lapsed on this side.
func (g *GroupConsumer) maintain(ctx context.Context) error {
	now := g.c.now()
	if len(g.owned) > 0 && !g.lastOK.IsZero() && now.Sub(g.lastOK) > g.session {
		g.lose() // the coordinator has expired us by now: another member may own them
	}
	if now.Before(g.nextBeat) {
		return nil
	}
	return g.heartbeat(ctx, g.epoch)
}

// heartbeat sends one heartbeat and reconciles with its answer.
func (g *GroupConsumer) heartbeat(ctx context.Context, epoch int32) error {
	g.seq++
	req := &strandpb.ConsumerGroupHeartbeatRequest{
		Group: g.group, MemberId: g.member, InstanceId: g.cfg.instanceID, Rack: g.cfg.rack, MemberEpoch: epoch,
		Seq: g.seq, Subscriptions: g.topics, Owned: partitionsToWire(g.owned),
	}
	sent := g.c.now()
	resp, err := g.c.groupRequest(ctx, g.group, &strandpb.Request{Body: &strandpb.Request_GroupHeartbeat{GroupHeartbeat: req}})
	if err != nil {
		switch {
		case errors.Is(err, ErrFencedMemberEpoch), errors.Is(err, ErrUnknownMemberID):
			g.lose()
			g.nextBeat = g.c.now() // rejoin at once
		case IsRetriable(err):
			g.beatFails++
			g.nextBeat = g.c.now().Add(min(g.interval, g.c.backoffDelay(g.beatFails)))
		default:
			g.nextBeat = g.c.now().Add(g.interval)
		}
		return err
	}
	g.beatFails = 0
	hb := resp.GetGroupHeartbeat()
	if epoch < 0 {
		return nil
	}
	if ms := hb.GetHeartbeatIntervalMs(); ms > 0 {
		g.interval = time.Duration(ms) * time.Millisecond
	}
	if ms := hb.GetSessionTimeoutMs(); ms > 0 {
		g.session = time.Duration(ms) * time.Millisecond
	}
	g.epoch, g.lastOK = hb.GetMemberEpoch(), sent
	changed := g.reconcile(ctx, partitionsFromWire(hb.GetAssigned()))
	g.nextBeat = g.c.now().Add(g.interval)
	if changed {
		g.nextBeat = g.c.now() // report the revocation or the new ownership at once
	}
	return nil
}

// reconcile makes the owned set the assigned one: revoke first (commit,
// OnRevoked, stop fetching), then start the new partitions at their
// committed offsets. Reports whether anything changed.
func (g *GroupConsumer) reconcile(ctx context.Context, assigned []TopicPartition) bool {
	sortPartitions(assigned)
	revoked, added := minusTP(g.owned, assigned), minusTP(assigned, g.owned)
	if len(revoked) > 0 {
		revoked = g.dropGone(ctx, revoked)
		if g.cfg.autoCommit > 0 {
			_ = g.commitPartitions(ctx, revoked) // best effort: a refusal means another member's epoch moved on
		}
		if g.cfg.onRevoked != nil {
			g.cfg.onRevoked(ctx, revoked)
		}
		for _, tp := range revoked {
			g.k.Unassign(tp.Topic, tp.Partition)
			delete(g.committed, tp)
		}
		g.owned = minusTP(g.owned, revoked)
	}
	if len(added) > 0 {
		if err := g.seekCommitted(ctx, added); err != nil {
			return len(revoked) > 0 // not taken yet: they come again in the next answer
		}
		if g.staleLease() {
			// Reading the committed offsets outlived the answer that gave
			// them (TestSim seed 114: 1.18 s, a lost OffsetFetch and its
			// retry, with a 1 s session): the coordinator may have expired
			// the member and handed them on. Not taken: heartbeat at once,
			// and a fresh answer gives them again.
			for _, tp := range added {
				g.k.Unassign(tp.Topic, tp.Partition)
				delete(g.committed, tp)
			}
			if g.c.now().Sub(g.lastOK) > g.session {
				g.lose() // the session lapsed: what it owned is gone too
			}
			return true
		}
		g.owned = append(g.owned, added...)
		sortPartitions(g.owned)
		if g.cfg.onAssigned != nil {
			g.cfg.onAssigned(ctx, added)
		}
	}
	return len(revoked) > 0 || len(added) > 0
}

// staleLease reports whether the last answered heartbeat was sent more
// than half a session ago. Partitions are taken only under a fresher one:
// the coordinator times the session on its own clock from when it
// answered, and a clock that runs fast (or an answer that took long)
// expires the member well before a whole session on this side.
func (g *GroupConsumer) staleLease() bool {
	return !g.lastOK.IsZero() && g.c.now().Sub(g.lastOK) > g.session/2
}

// seekCommitted moves ps to the group's committed offsets; a partition
// without one (or with one for a deleted namesake) starts at
// StartWithoutCommit.
func (g *GroupConsumer) seekCommitted(ctx context.Context, ps []TopicPartition) error {
	committed, err := g.fetchCommitted(ctx, ps)
	if err != nil {
		return err
	}
	at := make(map[TopicPartition]int64, len(committed))
	for _, o := range committed {
		if now := g.c.topicID(o.Topic); len(o.TopicID) > 0 && len(now) > 0 && !bytes.Equal(o.TopicID, now) {
			continue // committed for a deleted namesake: start as without a commit
		}
		at[o.TopicPartition] = o.Offset
	}
	for _, tp := range ps {
		if off, ok := at[tp]; ok {
			g.k.Assign(tp.Topic, tp.Partition, OffsetExact(off))
			g.committed[tp] = off
		} else {
			g.k.Assign(tp.Topic, tp.Partition, g.cfg.start)
			delete(g.committed, tp)
		}
	}
	return nil
}

// dropGone takes the partitions of topics deleted or re-created under the
// member out of revoked: their positions belong to a topic that no longer
// exists, so they are not committed (a namesake must not inherit them)
// and their TopicRecreatedError stays for every later Poll. The
// coordinator revokes a deleted topic's partitions, often before a fetch
// has seen the topic go, so the topic is asked about by name here.
func (g *GroupConsumer) dropGone(ctx context.Context, revoked []TopicPartition) []TopicPartition {
	kept := revoked[:0:0]
	asked := map[string]bool{}
	for _, tp := range revoked {
		id, err := g.k.topicState(tp.Topic, tp.Partition)
		var re *TopicRecreatedError
		if !errors.As(err, &re) && len(id) > 0 {
			if !asked[tp.Topic] {
				asked[tp.Topic] = true
				_ = g.c.refreshTopic(ctx, tp.Topic) // on failure the cache decides
			}
			if info := g.c.cachedTopic(tp.Topic); info != nil && !bytes.Equal(info.ID, id) &&
				(len(info.ID) > 0 || info.Err == strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION) {
				re = &TopicRecreatedError{Topic: tp.Topic, Partition: tp.Partition, OldID: id, NewID: info.ID}
			}
		}
		if re == nil {
			kept = append(kept, tp)
			continue
		}
		g.gone = append(g.gone, FetchPartition{Topic: tp.Topic, Partition: tp.Partition, Err: re})
		g.k.Unassign(tp.Topic, tp.Partition)
		g.owned = minusTP(g.owned, []TopicPartition{tp})
		delete(g.committed, tp)
	}
	sortFetches(g.gone)
	if lost := minusTP(revoked, kept); len(lost) > 0 && g.cfg.onLost != nil {
		g.cfg.onLost(lost) // nothing to commit: the topic is gone
	}
	return kept
}

// lose drops every partition without committing (fenced or expired).
func (g *GroupConsumer) lose() {
	lost := g.owned
	for _, tp := range lost {
		g.k.Unassign(tp.Topic, tp.Partition)
	}
	g.owned, g.epoch = nil, 0
	clear(g.committed)
	if len(lost) > 0 && g.cfg.onLost != nil {
		g.cfg.onLost(lost)
	}
}

// Commit commits the position (the next offset Poll returns) of every
// owned partition that moved since its last commit, in the member's epoch.
func (g *GroupConsumer) Commit(ctx context.Context) error { return g.commitPartitions(ctx, g.owned) }

// commitPartitions commits the positions of ps.
func (g *GroupConsumer) commitPartitions(ctx context.Context, ps []TopicPartition) error {
	offsets := make(map[TopicPartition]int64)
	for _, tp := range ps {
		if _, err := g.k.topicState(tp.Topic, tp.Partition); errors.Is(err, ErrUnknownTopicID) {
			continue // read from a deleted topic: nothing to commit
		}
		if pos, ok := g.k.Position(tp.Topic, tp.Partition); ok {
			if last, done := g.committed[tp]; !done || last != pos {
				offsets[tp] = pos
			}
		}
	}
	return g.CommitOffsets(ctx, offsets)
}

// CommitOffsets commits the given offsets (the next offset to read, per
// partition) in the member's epoch, tied to the id of the topic each was
// read from; partitions stopped by a TopicRecreatedError are left out. A
// refusal (ErrStaleMemberEpoch, ErrFencedMemberEpoch, ErrUnknownMemberID)
// means the partitions may have moved: nothing was committed.
func (g *GroupConsumer) CommitOffsets(ctx context.Context, offsets map[TopicPartition]int64) error {
	live := make(map[TopicPartition]int64, len(offsets))
	for tp, off := range offsets {
		if _, err := g.k.topicState(tp.Topic, tp.Partition); !errors.Is(err, ErrUnknownTopicID) {
			live[tp] = off // else read from a deleted topic: the coordinator would refuse it
		}
	}
	offsets = live
	if len(offsets) == 0 {
		return nil
	}
	ids := func(tp TopicPartition) []byte {
		id, _ := g.k.topicState(tp.Topic, tp.Partition)
		return id
	}
	if err := g.c.commitAs(ctx, g.group, g.member, g.epoch, offsets, ids, g.commitMeta); err != nil {
		return err
	}
	for tp, off := range offsets {
		g.committed[tp] = off
	}
	return nil
}

// Close commits (when auto-commit is on), runs OnRevoked for the owned
// partitions and leaves the group: a static member (InstanceID) leaves for
// a restart and keeps its partitions until the session timeout.
func (g *GroupConsumer) Close(ctx context.Context) error {
	if g.closed {
		return nil
	}
	g.closed = true
	var err error
	if g.cfg.autoCommit > 0 && g.epoch > 0 {
		err = g.Commit(ctx)
	}
	if len(g.owned) > 0 && g.cfg.onRevoked != nil {
		g.cfg.onRevoked(ctx, g.owned)
	}
	for _, tp := range g.owned {
		g.k.Unassign(tp.Topic, tp.Partition)
	}
	g.owned = nil
	if g.epoch > 0 {
		leave := int32(-1)
		if g.cfg.instanceID != "" {
			leave = -2
		}
		if lerr := g.heartbeat(ctx, leave); err == nil {
			err = lerr
		}
	}
	return err
}

// minusTP returns the sorted elements of a not in b.
func minusTP(a, b []TopicPartition) []TopicPartition {
	in := make(map[TopicPartition]bool, len(b))
	for _, p := range b {
		in[p] = true
	}
	var out []TopicPartition
	for _, p := range a {
		if !in[p] {
			out = append(out, p)
		}
	}
	return out
}

// Position is the next offset Poll returns for an owned partition (ok
// false while its start is not resolved).
func (g *GroupConsumer) Position(topic string, partition int32) (int64, bool) {
	return g.k.Position(topic, partition)
}
