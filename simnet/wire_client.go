package simnet

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/internal/clientcore"
	"github.com/strandlog/strand/proto/strandpb"
)

// The clients' settings.
const (
	wireOutstandingMax = 6 // batches a producer has pushed and not completed
)

// The producers' shapes, drawn per producer from its stream: how many
// batches a partition window pipelines and how many records a batch holds
// at most (1 + IntN(max)), so fetches and ListOffsets start inside batches.
var (
	wireInFlightChoices = []int{1, 2, 3, 5}
	wireBatchChoices    = []int{1, 2, 3, 4}
)

// wireBackoff is the clients' retry policy (the standard clients' range).
var wireBackoff = clientlib.Backoff{Base: 5 * time.Millisecond, Max: 160 * time.Millisecond}

// wireClient is one wire-mode client: the admin, a producer, a consumer or
// the drain. Its view of the cluster is a clientcore.LeaderCache.
type wireClient struct {
	ww          *wireWorkload
	index       int
	kind        clientKind // 0: the admin
	rng         *rand.Rand
	cache       *clientcore.LeaderCache
	metaPending bool
	// topicPending: a metadata request for that topic alone is in flight.
	topicPending map[string]bool
	attempts     int // attempts of the current single request (admin, init, fetch)
	maybeDone    bool
	creating     int   // the admin: index of the topic it creates
	recreating   bool  // the admin: creating the deleted topic again
	recreateAts  []int // the admin: operations issued before each delete of the topic
	// createInDoubt: the admin: an earlier create of the re-created topic
	// ended with an attempt unanswered, which a node may still carry out
	// (held by a paused process) after a later delete: a later create may
	// then find the topic there (TOPIC_EXISTS).
	createInDoubt bool
	// adminLib is the admin's clientlib Client for the re-creation's
	// delete and create (wire_recreate.go), built at the first.
	adminLib *clientlib.Client
	// libInDoubt counts the requests of c's clientlib Client whose
	// outcome stayed unknown (an answer lost, a code that may have
	// written): the simulator's own view of what clientlib's success
	// hides (libTransport).
	libInDoubt int
	// deleteInferred: the admin's last delete was taken as done because
	// fresh metadata listed no id after a delete that may have applied,
	// not because a delete was answered; deletesInferred counts how
	// often the create then found the topic still there.
	deleteInferred  bool
	deletesInferred int

	// Producers.
	idempotent  bool
	keyed       bool
	inFlightMax int // batches in flight per partition
	batchMax    int // records per batch at most
	outstanding int
	values      int
	recordTimer bool // a nextRecord is scheduled
	// lib: the clientlib.Client whose producer this one runs on
	// (wire_libproducer.go); the non-idempotent producer's at acks=all.
	lib *clientlib.Client
	// libAcks: the non-idempotent producer's clients at acks=0 and
	// acks=1 (clientlib's acks are per client); nil for the others.
	libAcks    [2]*clientlib.Client
	libPushes  map[*libPush]bool // pushes not yet completed
	budgetDone bool
	finished   bool

	// Consumers and the drain.
	positions   []int64
	positionInc []int // the topic incarnation positions[p] counts in
	// savedPositions keeps positions in other incarnations, by (p, inc).
	savedPositions map[[2]int]int64
	nextPartition  int
	readOffset     int64 // a random reader's current offset
	opStart        time.Duration
	fetching       bool // a fetch operation is running (since opStart)
	// libCons: the clientlib Consumer a consumer slot runs on (every
	// one does: wire_libconsumer.go); nil for the other kinds.
	libCons *libConsumer
}

// pendingSince reports the start of the client's oldest unfinished
// operation, for the liveness bound.
func (c *wireClient) pendingSince() (time.Duration, bool) {
	start, pending := c.opStart, c.fetching
	for push := range c.libPushes { // the minimum does not depend on map order
		if !pending || push.start < start {
			start, pending = push.start, true
		}
	}
	return start, pending
}

func newWireClient(ww *wireWorkload, index int, kind clientKind) *wireClient {
	o := ww.w.opts
	stream := streamWorkload + uint64(index)
	if kind == 0 {
		stream = streamWorkload + 0xad00
	}
	c := &wireClient{ww: ww, index: index, kind: kind, rng: newStream(o.Seed, stream),
		cache: clientcore.NewLeaderCache(), positions: make([]int64, o.Partitions), positionInc: make([]int, o.Partitions),
		nextPartition: index % o.Partitions}
	if kind == kindProducer {
		c.keyed = index%2 == 0
		// The last producer is not idempotent (producer id -1) and never
		// resends (clientlib's MaxRetries 0, one batch in flight): its
		// values stay unique, so an entry applied twice shows as a
		// duplicate.
		c.idempotent = index != o.Producers-1
		c.inFlightMax = wireInFlightChoices[c.rng.IntN(len(wireInFlightChoices))]
		c.batchMax = wireBatchChoices[c.rng.IntN(len(wireBatchChoices))]
		if !c.idempotent {
			c.inFlightMax = 1 // order without sequence numbers
		}
		c.libPushes = map[*libPush]bool{}
		c.lib = newLibClient(c, clientlib.AcksAll)
		if !c.idempotent {
			c.libAcks[clientlib.AcksNone] = newLibClient(c, clientlib.AcksNone)
			c.libAcks[clientlib.AcksLeader] = newLibClient(c, clientlib.AcksLeader)
		}
	}
	return c
}

// after runs fn after d of virtual time.
func (c *wireClient) after(d time.Duration, fn func()) {
	c.ww.w.sched.schedule(d, &event{kind: evCall, node: -1, from: c.index, call: fn})
}

func (c *wireClient) thinkTime() time.Duration {
	return time.Duration(c.rng.Int64N(int64(2 * time.Millisecond)))
}

// randomNode is any node's index.
func (c *wireClient) randomNode() int { return c.rng.IntN(len(c.ww.w.nodes)) }

// nodeIndex maps a node id to its index through the cache's address, or a
// random node when the id or its address is unknown.
func (c *wireClient) nodeIndex(id uint64) int {
	if addr, ok := c.cache.Address(id); ok && id != 0 {
		if i, ok := c.ww.indexOf[addr]; ok {
			return i
		}
	}
	return c.randomNode()
}

// leaderOf is the node to send partition p's requests to.
func (c *wireClient) leaderOf(p int) int {
	tp := c.ww.tps[p]
	if _, addr, ok := c.cache.Leader(tp.Topic, tp.Partition); ok {
		if i, ok := c.ww.indexOf[addr]; ok {
			return i
		}
	}
	return c.randomNode()
}

// refresh asks a random node for the metadata of every topic, once at a
// time.
func (c *wireClient) refresh() {
	if c.metaPending {
		return
	}
	c.metaPending = true
	c.askMetadata(c.ww.topicNames(), func() { c.metaPending = false })
}

// refreshTopic asks for the metadata of group p's topic only, once at a
// time per topic: an error on one topic refreshes that topic (as sparse
// metadata clients such as librdkafka do), so a client may go on holding
// another topic's old id until that topic fails it.
func (c *wireClient) refreshTopic(p int) {
	t := c.ww.tps[p].Topic
	if c.metaPending || c.topicPending[t] {
		return
	}
	if c.topicPending == nil {
		c.topicPending = map[string]bool{}
	}
	c.topicPending[t] = true
	c.askMetadata([]string{t}, func() { c.topicPending[t] = false })
}

// askMetadata sends one Metadata request for topics to a random node and
// merges the answer into the cache; done runs once it ended.
func (c *wireClient) askMetadata(topics []string, done func()) {
	req := &strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{Topics: topics}}}
	c.ww.call(c, c.randomNode(), req, func(resp *strandpb.Response, err error) {
		done()
		if err == nil && resp.GetError() == nil && resp.GetMetadata() != nil {
			c.cache.ApplyMetadata(resp.GetMetadata())
		}
	})
}

// react applies what an error says about partition p: a NOT_LEADER hint
// to the cache, a lost connection forgets the leader, and a refresh when
// Classify asks for one.
func (c *wireClient) react(p int, err error) clientlib.Action {
	a := clientlib.ClassifyErr(err)
	var e *clientlib.Error
	switch {
	case asWireError(err, &e) && e.Code == strandpb.ErrorCode_ERROR_CODE_NOT_LEADER && e.LeaderID != 0:
		c.cache.ApplyNotLeader(c.ww.tps[p].Topic, c.ww.tps[p].Partition, e.LeaderID, e.LeaderAddress)
	case !asWireError(err, &e):
		c.cache.ForgetLeader(c.ww.tps[p].Topic, c.ww.tps[p].Partition)
	case e.Code == strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID:
		c.onTopicGone(p)
	}
	if a.RefreshMetadata {
		c.refreshTopic(p)
	}
	return a
}

// controllerTarget is the node to send a controller request to after err:
// the node believed to lead the metadata group, a NOT_CONTROLLER hint
// winning over the cache; after a request that got no answer (err a
// *clientlib.ConnError) any node, which forwards, as clientlib's
// controllerRequest does: a dead node cached as the metadata leader would
// otherwise hold the request until it is back (seed 27 of -sim.joins; seed
// 88 retried a decommission's MovePartitions at a stopped node 152 times).
func (c *wireClient) controllerTarget(err error) int {
	if _, unreachable := errors.AsType[*clientlib.ConnError](err); unreachable {
		return c.randomNode()
	}
	var e *clientlib.Error
	if asWireError(err, &e) && e.LeaderID != 0 && int(e.LeaderID) <= len(c.ww.w.nodes) {
		return int(e.LeaderID) - 1
	}
	if id := c.cache.ControllerID(); id != 0 {
		return c.nodeIndex(id)
	}
	return c.randomNode()
}

// createTopic creates topic c.creating (the admin's set-up of each
// topic, and the re-creation's create: wire_recreate.go) with clientlib's
// CreateTopic (strand topic create's) as a task of the admin's clientlib
// Client, run again until the topic exists; TOPIC_EXISTS is success only
// after an attempt that may have created it (onCreate).
func (c *wireClient) createTopic() {
	c.attempts, c.maybeDone = 0, false
	c.createRun()
}

// createRunsMax bounds the runs of each of the admin's topic calls, the
// re-creation's deletes and every create (each retries up to clientlib's
// MaxRetries).
const createRunsMax = 100

// createRun runs clientlib's CreateTopic of topic c.creating once.
func (c *wireClient) createRun() {
	o := c.ww.w.opts
	t := c.ww.topics[c.creating]
	c.attempts++
	configs := map[string]string{}
	for _, e := range retentionConfigs(o) {
		configs[e.GetName()] = e.GetValue()
	}
	if c.adminLib == nil {
		c.adminLib = c.ww.adminLib(c)
	}
	cl := c.adminLib
	inDoubt := c.libInDoubt
	var err error
	c.ww.w.simRun(cl, func(ctx context.Context) {
		err = cl.CreateTopic(ctx, t.name, int32(c.ww.createPartitions(t)), int32(o.Replication), configs)
	}, func() {
		// A create acknowledged after an attempt whose outcome stayed
		// unknown may still be carried out late (held by a paused
		// node) after the next delete: clientlib's success does not
		// say so, the simulator's network does. (Only a success: a
		// failure's maybe-written is clientlib's to report, and the
		// checks hold it to that.)
		if err == nil {
			c.maybeDone = c.maybeDone || c.libInDoubt > inDoubt
		}
		c.onCreate(err)
	})
}

// onCreate judges a create run: TOPIC_EXISTS is success after an attempt
// that may have created it, or, late, after an earlier re-creation's
// create whose attempt is still in doubt; otherwise a finding, as is a
// definite refusal; anything else runs the create again.
func (c *wireClient) onCreate(err error) {
	w := c.ww.w
	maybe := c.maybeDone || maybeApplied(err)
	switch {
	case err == nil:
		c.createInDoubt = c.createInDoubt || maybe
		c.created()
	case errCode(err) == strandpb.ErrorCode_ERROR_CODE_TOPIC_EXISTS && c.recreating && c.deleteInferred && !maybe:
		// The delete was inferred from a node's metadata that listed no
		// topic (one still replaying its metadata lists none): it had
		// not applied. Delete again; an earlier delete may still apply.
		w.coverage.Inc("event/topic-delete-inferred-early")
		c.deletesInferred++
		if c.deletesInferred > createRunsMax {
			w.fail("delete topic %s: inferred done %d times, and the topic still there", c.ww.topics[c.creating].name, c.deletesInferred)
			w.stop()
			return
		}
		c.recreating, c.deleteInferred = false, false
		c.attempts, c.maybeDone = 0, true
		c.after(wireBackoff.Delay(c.deletesInferred, c.rng), c.deleteRun)
	case errCode(err) == strandpb.ErrorCode_ERROR_CODE_TOPIC_EXISTS:
		if !maybe && c.recreating && c.createInDoubt {
			w.coverage.Inc("event/topic-create-late")
		} else if !maybe {
			w.fail("create topic %s: TOPIC_EXISTS although no earlier attempt may have created it", c.ww.topics[c.creating].name)
		}
		c.createInDoubt = true // an earlier attempt created it
		c.created()
	case definiteRefusal(err):
		w.fail("create topic refused: %v", err)
		w.stop()
	case c.attempts >= createRunsMax:
		w.fail("create topic %s: not done in %d runs: %v", c.ww.topics[c.creating].name, createRunsMax, err)
		w.stop()
	default:
		c.maybeDone = maybe
		c.after(wireBackoff.Delay(c.attempts, c.rng), c.createRun)
	}
}

// created moves the admin to the next topic, or starts the clients once
// every topic exists.
func (c *wireClient) created() {
	if c.recreating {
		c.recreated()
		return
	}
	c.creating++
	if c.creating < len(c.ww.topics) {
		c.createTopic()
		return
	}
	c.ww.topicCreated()
}

// begin starts a client's work once the topic exists.
func (c *wireClient) begin() {
	if c.libCons != nil {
		c.libCons.begin()
		return
	}
	c.refresh()
	switch c.kind {
	case kindProducer:
		// clientlib's producers (wire_libproducer.go); the last one is
		// not idempotent.
		c.recordTimer = true
		c.after(c.thinkTime(), c.nextRecord)
	case kindReader:
		c.nextPoll()
	case kindDrain:
		c.nextPartition = 0
		c.drainNext()
	}
}

// retentionConfigs are the topic configs of the run's retention options.
func retentionConfigs(o Options) []*strandpb.ConfigEntry {
	var out []*strandpb.ConfigEntry
	add := func(name string, v int64) {
		if v != 0 {
			out = append(out, &strandpb.ConfigEntry{Name: name, Value: strconv.FormatInt(v, 10)})
		}
	}
	add("retention.bytes", o.RetentionBytes)
	add("retention.ms", o.RetentionMs)
	add("segment.ms", o.SegmentMs)
	if o.Tiered {
		// Local retention (tier.go): a third of the total, or two
		// segments' worth when the total is unbounded.
		out = append(out, &strandpb.ConfigEntry{Name: "remote.storage.enable", Value: "true"})
		if o.RetentionMs > 0 {
			add("local.retention.ms", max(1, o.RetentionMs/3))
		}
		local := 2 * o.SegmentBytesMax
		if o.RetentionBytes > 0 {
			local = max(1, o.RetentionBytes/3)
		}
		add("local.retention.bytes", local)
	}
	return out
}
