package simnet

import (
	"context"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/proto/strandpb"
)

// Adding partitions during a run (Options.AddPartitions).
//
// With the option on, in half the seeds the main topic is created with 1
// or 2 partitions fewer than its groups, and a second admin client grows
// it to all of them (CreatePartitions) once a drawn share of the
// operations was issued,
// under the seed's faults, through clientlib's CreatePartitions (growRun). The
// group indexes stay fixed: a group whose partition the topic does not
// have yet simply has no replicas. Clients use a partition once their own
// metadata lists it, as real clients do: until then a producer sends what
// it would have sent there to one of the partitions it knows (a keyed one
// hashes the key over the count it knows, so a key's records move to
// another partition after the grow, as in Kafka), a consumer or reader
// reads a known one. A client meeting a partition its metadata lacks
// refreshes its metadata now and then (metadata.max.age), so it learns of
// the grow without a hint from the simulator. The new partitions' groups
// go through every per-group check (history, digests, durability audit,
// leaders) like the others; the liveness leader check skips a group whose
// partition the cluster has not acknowledged yet.
//
// Not with GroupMembers: the group workload balances the main topic's
// partitions counted once at its start.
//
// Off in Standard for now: a grow changes its seed's trace, and seed-bound
// tests rest on single seeds (the planted-bug seeds), in
// this branch and in the branches merged beside it. TestSimAddPartitions
// runs grow seeds; turning it on in Standard means re-checking those.

// The grow's draws, from the grower's own stream (a new draw elsewhere
// never shifts them): in one seed in growOneIn, by 1..growMax partitions,
// once growFracMin..growFracMax percent of the operations were issued.
const (
	growOneIn   = 2
	growMax     = 2
	growFracMin = 5
	growFracMax = 40
	// growRefreshOneIn: a client that meets a partition its metadata
	// lacks asks for fresh metadata once in this many such meetings.
	growRefreshOneIn = 8
)

// growPlan is the run's partition grow of the main topic.
type growPlan struct {
	client  *wireClient
	initial int // partitions the main topic is created with
	at      int // operations issued before the grow is sent
	applied bool
	// unsure: an earlier run ended with an error that may have applied
	// the grow (clientlib gave up on it), so a later run's "already has
	// N" is the grow done.
	unsure bool
	// lib is client's clientlib Client, built when the grow is sent.
	lib *clientlib.Client
}

// newGrowPlan draws the run's grow, or nil when the seed has none.
func newGrowPlan(ww *wireWorkload) *growPlan {
	o := ww.w.opts
	main := ww.topics[0]
	if !o.AddPartitions || o.GroupMembers > 0 || main.partitions < 2 {
		return nil
	}
	c := newWireClient(ww, 0, 0)
	c.rng = newStream(o.Seed, streamWorkload+0xad01)
	// PCG's first output over neighbouring seeds is correlated in its top
	// bits (IntN(2) gave 1 for seeds 2-10): mixed, it spreads.
	if mix64(c.rng.Uint64())%growOneIn != 0 {
		return nil
	}
	added := 1 + c.rng.IntN(min(growMax, main.partitions-1))
	return &growPlan{client: c, initial: main.partitions - added,
		at: o.Ops * (growFracMin + c.rng.IntN(growFracMax-growFracMin+1)) / 100}
}

// createPartitions is the partition count topic t is created with.
func (ww *wireWorkload) createPartitions(t topicSpec) int {
	if ww.grow != nil && t.name == topicMain {
		return ww.grow.initial
	}
	return t.partitions
}

// groupCreated reports whether group g's partition exists as far as the
// cluster acknowledged.
func (ww *wireWorkload) groupCreated(g int) bool {
	t := ww.topicOf(g)
	return ww.grow == nil || t.name != topicMain || ww.grow.applied || g-t.first < ww.grow.initial
}

// startGrow starts the grower once the topics exist.
func (ww *wireWorkload) startGrow() {
	if ww.grow == nil {
		return
	}
	ww.active++
	ww.grow.client.after(0, ww.grow.client.awaitGrow)
}

// knownPartitions is how many of topic t's partitions the client may use:
// all unless t grows in this run, else those its metadata lists (at least
// the count t was created with).
func (c *wireClient) knownPartitions(t topicSpec) int {
	g := c.ww.grow
	if g == nil || t.name != topicMain {
		return t.partitions
	}
	n := g.initial
	if info := c.cache.Topic(t.name); info != nil {
		n = max(n, min(len(info.Partitions), t.partitions))
	}
	return n
}

// usable maps group p to a group the client's metadata lists: p itself,
// or for a keyed record (key != "") the key's partition over the known
// count, or else one of the known partitions. Meeting an unknown one now
// and then refreshes the client's metadata.
func (c *wireClient) usable(p int, key string) int {
	t := c.ww.topicOf(p)
	n := c.knownPartitions(t)
	if n == t.partitions {
		return p
	}
	if key != "" {
		p = t.first + int(clientlib.KeyPartition([]byte(key), int32(n)))
	}
	if p-t.first < n {
		return p
	}
	if c.rng.IntN(growRefreshOneIn) == 0 {
		c.refreshTopic(p)
	}
	return t.first + (p-t.first)%n
}

// awaitGrow waits until the drawn share of the budget was issued (or the
// budget ran out); then it sends the grow.
func (c *wireClient) awaitGrow() {
	w := c.ww.w
	if w.work.issued < c.ww.grow.at && !w.work.spent() { // in overtime, as when the budget ran out
		c.after(20*time.Millisecond, c.awaitGrow)
		return
	}
	c.attempts = 0
	c.growRun()
}

// growRunsMax bounds the grower's runs of clientlib's CreatePartitions
// (each retries up to clientlib's MaxRetries).
const growRunsMax = 100

// growRun grows the main topic to all its groups with clientlib's
// CreatePartitions (strand topic alter --partitions'), as a task of the
// grower's clientlib Client, and judges the outcome.
func (c *wireClient) growRun() {
	g := c.ww.grow
	if g.lib == nil {
		g.lib = c.ww.adminLib(c)
	}
	main := c.ww.topics[0]
	c.attempts++
	var got clientlib.PartitionsAdded
	var err error
	c.ww.w.simRun(g.lib, func(ctx context.Context) {
		got, err = g.lib.CreatePartitions(ctx, main.name, int32(main.partitions), false)
	},
		func() { c.onGrow(got, err) })
}

// onGrow judges CreatePartitions' outcome: success grew the topic by the
// partitions it lacked (Added -1: a retry found the count reached after an
// attempt that may have applied it, as clientlib checks);
// INVALID_PARTITIONS ("already has N") is success only after an attempt
// that may have applied it; a definite refusal fails the seed; a call
// clientlib gave up on is run again, as an operator reruns the command.
func (c *wireClient) onGrow(got clientlib.PartitionsAdded, err error) {
	w := c.ww.w
	main := c.ww.topics[0]
	reached := errCode(err) == strandpb.ErrorCode_ERROR_CODE_INVALID_PARTITIONS
	switch {
	case err == nil:
		if want := main.partitions - c.ww.grow.initial; got.Partitions != int32(main.partitions) || got.Added != int32(want) && got.Added != -1 {
			w.fail("create partitions of %s: answered %d partitions, %d added; want %d, %d",
				main.name, got.Partitions, got.Added, main.partitions, want)
		}
	case reached && (maybeApplied(err) || c.ww.grow.unsure):
	case reached:
		w.fail("create partitions: %v although no earlier attempt may have added them", err)
	case definiteRefusal(err):
		w.fail("create partitions refused: %v", err)
	case c.attempts < growRunsMax:
		// Seed 170: run 1 gave up after an attempt that may have applied
		// the grow; run 2 was told "already has 6"; the check, which
		// weighed run 2's error alone, failed the seed.
		c.ww.grow.unsure = c.ww.grow.unsure || maybeApplied(err)
		c.after(wireBackoff.Delay(c.attempts, c.rng), c.growRun)
		return
	default:
		w.fail("create partitions: given up after %d runs: %v", c.attempts, err)
	}
	if err == nil || reached {
		w.coverage.Inc("event/partitions-added")
	}
	c.ww.grow.applied = true
	c.finished = true
	c.ww.clientDone()
}

// describedCount reports whether a node may describe topic t with n
// partitions: the count it was created with, or, while it grows, any count
// from the one created to the grown one (a lagging node's metadata may not
// have applied the grow yet).
func (ww *wireWorkload) describedCount(t topicSpec, n int32) bool {
	if ww.grow != nil && t.name == topicMain {
		return int(n) >= ww.grow.initial && int(n) <= t.partitions
	}
	return int(n) == t.partitions
}
