package simnet

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/linearizability"
	"github.com/strandlog/strand/proto/strandpb"
)

// Topic delete and re-create under the same name (Options.RecreateTopic).
//
// Once a drawn share of the operations was issued, the admin deletes the
// second topic and creates it again with the same partitions, while the
// clients keep working. Clients name the topic id (from their metadata) on
// every request for it, as real clients do, so a node refuses a request
// meant for another incarnation with UNKNOWN_TOPIC_ID. The history keys
// each incarnation apart: the first id seen of a topic is "sim2", later
// ones "sim2#1", ... (by the order the clients first saw them), so each
// incarnation is its own log for Porcupine and the log checks. A client
// that meets UNKNOWN_TOPIC_ID does what clientlib's consumer does with a
// TopicRecreatedError: it refreshes its metadata and starts the new
// incarnation from its beginning. Only the final drain's incarnations
// count as drained: the deleted ones' writes are not expected to survive.
//
// A producer's window of a partition is bound to one topic id: its
// sequence numbers mean nothing to another incarnation's producer table.
// Once the client knows a new id and the window is empty, it starts a new
// window (sequences from 0, as for a partition it never wrote); until
// then, batches for that partition go to the main topic. Batches in
// flight under the old id fail with UNKNOWN_TOPIC_ID (recorded
// indefinite). Every batch is bound to the topic id it was pushed under.
//
// Rejected: inferring the incarnation from the time of the delete (a
// stale node serves the old incarnation well after it).

// The admin re-creates the topic recreations times, each once a share of
// the operation budget between recreateFracMin and recreateFracMax
// percent (drawn, sorted) was issued: every re-creation is a new window
// in which clients hold the old id.
const (
	recreations     = 3
	recreateFracMin = 15
	recreateFracMax = 75
)

// recreateTimes draws the operation counts at which the admin deletes the
// topic, ascending.
func recreateTimes(ops int, rng *rand.Rand) []int {
	at := make([]int, recreations)
	for i := range at {
		at[i] = ops * (recreateFracMin + rng.IntN(recreateFracMax-recreateFracMin+1)) / 100
	}
	slices.Sort(at)
	return at
}

// recreatable reports whether group p's topic is deleted and re-created
// in this run.
func (ww *wireWorkload) recreatable(p int) bool {
	return ww.w.opts.RecreateTopic && ww.topicOf(p).name == topicSecond
}

// incarnation is the ordinal of topic's id id: 0 for the first id the
// clients saw, then 1, 2, ... (nil ids are 0: a topic never re-created).
func (ww *wireWorkload) incarnation(topic string, id []byte) int {
	if len(id) == 0 {
		return 0
	}
	for i, seen := range ww.topicIDs[topic] {
		if bytes.Equal(seen, id) {
			return i
		}
	}
	ww.topicIDs[topic] = append(ww.topicIDs[topic], bytes.Clone(id))
	return len(ww.topicIDs[topic]) - 1
}

// topicID is the id a request for group p names and its incarnation.
// ok is false when p's topic is re-created in this run and the client
// knows no id for it yet: it must refresh its metadata first.
func (c *wireClient) topicID(p int) (id []byte, inc int, ok bool) {
	t := c.ww.tps[p].Topic
	if info := c.cache.Topic(t); info != nil && len(info.ID) > 0 {
		return info.ID, c.ww.incarnation(t, info.ID), true
	}
	return nil, 0, !c.ww.recreatable(p)
}

// histKey is group p's incarnation inc in the history.
func (hs *history) key(p, inc int) linearizability.TopicPartition {
	tp := hs.tps[p]
	if inc > 0 {
		tp.Topic += "#" + strconv.Itoa(inc)
	}
	return tp
}

// floor is the highest high-water mark any read returned of group p's
// incarnation inc (0 for an incarnation older than the newest seen: its
// floor was dropped).
func (wl *workload) floor(p, inc int) int64 {
	if inc != wl.maxHwmInc[p] {
		return 0
	}
	return wl.maxHwm[p]
}

// raise records a high-water mark a read returned of p's incarnation inc.
func (wl *workload) raise(p, inc int, hwm int64) {
	switch {
	case inc > wl.maxHwmInc[p]:
		wl.maxHwmInc[p], wl.maxHwm[p] = inc, hwm
	case inc == wl.maxHwmInc[p]:
		wl.maxHwm[p] = max(wl.maxHwm[p], hwm)
	}
}

// seekIncarnation switches a consumer's position in p to incarnation
// inc: a new incarnation starts at its beginning (what a consumer does
// after a TopicRecreatedError); a stale metadata answer that names the
// old id again gets the position the client had there.
func (c *wireClient) seekIncarnation(p, inc int) {
	if inc == c.positionInc[p] {
		return
	}
	if c.savedPositions == nil {
		c.savedPositions = map[[2]int]int64{}
	}
	c.savedPositions[[2]int{p, c.positionInc[p]}] = c.positions[p]
	c.positionInc[p], c.positions[p] = inc, c.savedPositions[[2]int{p, inc}]
}

// awaitRecreate is the admin's wait until the drawn share of the budget
// was issued (or the budget ran out); then it deletes the topic. In
// overtime (overtime.go) the re-creations still due are not made.
func (c *wireClient) awaitRecreate() {
	w := c.ww.w
	if w.work.overtime {
		c.finished = true
		c.ww.clientDone()
		return
	}
	if w.work.issued < c.recreateAts[0] && w.work.issued < w.opts.Ops {
		c.after(20*time.Millisecond, c.awaitRecreate)
		return
	}
	c.attempts, c.maybeDone, c.deletesInferred = 0, false, 0
	c.deleteRun()
}

// errNoTopicID: the admin's fresh metadata lists no id of the topic to
// delete (every node answering has it deleted, or has not applied it).
var errNoTopicID = errors.New("simnet: no id known for the topic to delete")

// deleteRun deletes the second topic with clientlib's DeleteTopic
// (strand topic delete's) as a task of the admin's clientlib Client, after
// fresh metadata: the delete names the id that metadata lists, so it
// removes that incarnation or nothing, whatever its retries: a delete the
// admin gave up on (its node paused, it held the request and carried it
// out after a later run had deleted the topic and created it again)
// cannot remove the newer incarnation. By name only it did (seed 516: no
// node hosted sim2 after the heal), so without an id the run sends
// nothing (errNoTopicID).
func (c *wireClient) deleteRun() {
	c.attempts++
	if c.attempts > createRunsMax {
		c.ww.w.fail("delete topic %s: not done in %d runs", topicSecond, createRunsMax)
		c.recreated()
		return
	}
	if c.adminLib == nil {
		c.adminLib = c.ww.adminLib(c)
	}
	cl := c.adminLib
	var err error
	c.ww.w.simRun(cl, func(ctx context.Context) {
		var info clientlib.ClusterInfo
		if info, err = cl.Metadata(ctx); err != nil {
			return
		}
		i := slices.IndexFunc(info.Topics, func(t clientlib.TopicMetadata) bool { return t.Name == topicSecond })
		if i < 0 || len(info.Topics[i].ID) == 0 || info.Topics[i].Err != nil {
			err = errNoTopicID
			return
		}
		err = cl.DeleteTopic(ctx, topicSecond) // names the id Metadata just cached
	}, func() { c.onDelete(err) })
}

// onDelete judges a delete run: TOPIC_NOT_FOUND, or no id listed, is
// success only after an attempt that may have deleted it; a definite
// refusal fails the seed; anything else runs the delete again.
func (c *wireClient) onDelete(err error) {
	w := c.ww.w
	gone := errCode(err) == strandpb.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND || errors.Is(err, errNoTopicID)
	switch {
	case err == nil:
	case gone && (c.maybeDone || maybeApplied(err)):
	case errors.Is(err, errNoTopicID):
		// Not known yet at the node that answered (a lagging one).
		c.after(wireBackoff.Delay(c.attempts, c.rng), c.deleteRun)
		return
	case gone:
		w.fail("delete topic %s: unknown although no earlier attempt may have deleted it", topicSecond)
		c.recreated()
		return
	case errCode(err) == strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID:
		// The topic of that name has another id: the metadata was stale
		// (a lagging node's). Nothing was deleted by this attempt; learn
		// the id again.
		w.coverage.Inc("event/topic-delete-stale-id")
		c.maybeDone = c.maybeDone || maybeApplied(err)
		c.after(wireBackoff.Delay(c.attempts, c.rng), c.deleteRun)
		return
	case definiteRefusal(err):
		w.fail("delete topic refused: %v", err)
		c.recreated()
		return
	default:
		c.maybeDone = c.maybeDone || maybeApplied(err)
		c.after(wireBackoff.Delay(c.attempts, c.rng), c.deleteRun)
		return
	}
	w.coverage.Inc("event/topic-delete")
	c.deleteInferred = errors.Is(err, errNoTopicID) // taken as gone, not answered
	c.recreating = true
	for i, t := range c.ww.topics {
		if t.name == topicSecond {
			c.creating = i
		}
	}
	c.createTopic()
}

// recreated ends the admin's work: the topic exists again.
func (c *wireClient) recreated() {
	if c.recreating {
		c.ww.w.coverage.Inc("event/topic-recreate")
	}
	c.recreating = false
	c.recreateAts = c.recreateAts[1:]
	if len(c.recreateAts) > 0 {
		c.after(0, c.awaitRecreate)
		return
	}
	c.finished = true
	c.ww.clientDone()
}

// onTopicGone handles an UNKNOWN_TOPIC_ID answer for group p: the topic
// was deleted (and perhaps re-created) under the client. Like clientlib's
// consumer it refreshes its metadata; the next attempt names the new id
// and starts the new incarnation from its beginning.
func (c *wireClient) onTopicGone(p int) {
	c.ww.w.coverage.Inc("event/unknown-topic-id")
	c.cache.ForgetLeader(c.ww.tps[p].Topic, c.ww.tps[p].Partition)
	c.refreshTopic(p)
}
