package simnet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/linearizability"
	"github.com/strandlog/strand/proto/strandpb"
)

// Producers on clientlib's own producer.
//
// Every producer runs a clientlib.Client built with clientlib.Simulated:
// its producer core (batching, sequence numbers and resends in its
// Windows, NOT_LEADER hints and metadata refreshes through its
// LeaderCache, InitProducerId, delivery timeout, topic ids) runs on the
// simulator's thread in virtual time, every request travelling the
// simulated network through libTransport. The simulator still draws what
// to produce (partition, keys, values, records per push) and records
// every record as its own history operation, acknowledged with the offset
// its promise returns; a failed record is indefinite when its error says
// it may have been written (clientlib.MaybeWritten), else failed for good,
// and the log check then holds the client to it: no reader may ever see
// the record.
//
// The last producer is not idempotent (clientlib.DisableIdempotence) and
// never resends (MaxRetries 0, Kafka's retries=0; one batch in flight, so
// its acknowledged records keep their order): each of its values is sent
// once, so a record the log holds twice is a duplicate the log check
// names, not a retry Kafka allows. Kafka's acks are per producer, so it
// has three clients: acks=all, and acks=1 and acks=0 for one push in five
// (drawn per push, never on the re-created topic). An acks=0/1 record's
// success promises no offset and it may be lost on a failover: it is
// indefinite in the history (event/produce-acks0, -acks1), never
// acknowledged; its acks=all records are held to everything the
// idempotent producers' are (no acknowledged record lost, key order).
//
// The re-created topic (wire_recreate.go): the library names the topic
// id on every produce and binds each partition's sequence window to it;
// on UNKNOWN_TOPIC_ID it asks about the topic by name and moves to the
// new incarnation with a new window, failing the batches it still held
// under the old id with a *clientlib.TopicGoneError. Which incarnation a
// record went to is the library's to say, not the simulator's guess: its
// promise names the id (Record.TopicID, or the error's OldID), and libDone
// files the history operation under that incarnation.

// errUnknownAddr fails a library client's call to an address that names no
// node of the run.
var errUnknownAddr = errors.New("simnet: no node at that address")

// libPush is one push of a library producer: records of one partition
// produced together, one operation of the budget.
type libPush struct {
	left  int // records whose promise has not run
	start time.Duration
	ok    bool // every record acknowledged so far
	acks  clientlib.Acks
}

// libTransport is the simulated network as client c's clientlib.Client
// sees it (clientcore.Transport).
type libTransport struct{ c *wireClient }

func (t libTransport) Now() time.Duration               { return t.c.ww.w.now() }
func (t libTransport) After(d time.Duration, fn func()) { t.c.after(d, fn) }

func (t libTransport) Call(addr string, req *strandpb.Request, done func(*strandpb.Response, error)) {
	target, ok := t.c.ww.indexOf[addr]
	if !ok {
		t.c.after(0, func() { done(nil, &clientlib.ConnError{Addr: addr, Err: errUnknownAddr}) })
		return
	}
	t.c.ww.callOn(t.c, 0, target, req, func(resp *strandpb.Response, err error) {
		if err != nil && clientlib.ClassifyErr(err).MaybeWritten || mayHaveApplied(resp) {
			t.c.libInDoubt++
		}
		done(resp, err)
	})
}

// mayHaveApplied reports whether an answer leaves its request possibly
// applied all the same: a code that may have written, or one a node
// answers after it proposed and lost its leadership (NOT_CONTROLLER,
// UNAVAILABLE), as a whole or for a created topic.
func mayHaveApplied(resp *strandpb.Response) bool {
	maybe := func(e *strandpb.Error) bool {
		a := clientlib.Classify(e.GetCode())
		return a.MaybeWritten || a.RefreshMetadata
	}
	return maybe(resp.GetError()) || slices.ContainsFunc(resp.GetCreateTopics().GetTopics(),
		func(t *strandpb.TopicResult) bool { return maybe(t.GetError()) })
}

// newLibClient builds producer c's simulated clientlib.Client with the
// producer's drawn shape, at acks level acks. The non-idempotent producer's
// clients (clientlib.DisableIdempotence) never retry (MaxRetries 0, Kafka's
// retries=0) and keep one batch in flight, so a batch is sent once and a
// record applied twice is a duplicate the log check names.
func newLibClient(c *wireClient, acks clientlib.Acks) *clientlib.Client {
	o := c.ww.w.opts
	seeds := make([]string, len(c.ww.peers))
	for i, p := range c.ww.peers {
		seeds[i] = p.Address
	}
	lingers := []time.Duration{0, time.Millisecond, 5 * time.Millisecond}
	// One idempotent producer in three runs with few retries (Kafka's
	// retries=2..5, as users set it to fail fast), so batches fail while
	// an attempt's outcome is unknown and the "maybe written" promise is
	// exercised, not only the delivery timeout's.
	retries, shape := 0, []clientlib.Opt{clientlib.DisableIdempotence()}
	if c.idempotent {
		retries, shape = attemptsMax, nil
		if c.rng.IntN(3) == 0 {
			retries = libFewRetriesMin + c.rng.IntN(4)
		}
	}
	opts := append([]clientlib.Opt{clientlib.Simulated(libTransport{c}), clientlib.SeedAddresses(seeds...),
		clientlib.RandSeed(c.rng.Uint64()), clientlib.ManualPartitioner(),
		clientlib.Linger(lingers[c.rng.IntN(len(lingers))]),
		clientlib.MaxInFlightBatches(c.inFlightMax), clientlib.RequestTimeout(o.libRequestTimeout()), clientlib.StallTimeout(o.libStallTimeout()),
		clientlib.DeliveryTimeout(o.OpDeadline), clientlib.MaxRetries(retries), clientlib.RequiredAcks(acks),
		clientlib.RetryBackoff(wireBackoff.Base, wireBackoff.Max), clientlib.MetadataMaxAge(libMetadataMaxAge)}, shape...)
	cl, err := clientlib.NewClient(append(opts, c.ww.sasl.libOpts(c)...)...) // SASL: sasl.go
	if err != nil {
		panic("simnet: library producer options: " + err.Error())
	}
	return cl
}

// libFewRetriesMin is the fewest retries a few-retries library producer
// draws (up to three more).
const libFewRetriesMin = 2

// libMetadataMaxAge bounds how long a library producer trusts its
// metadata without an error: long enough that errors drive most refreshes.
const libMetadataMaxAge = 2 * time.Second

// libProduce hands one push (records recs of group p's incarnation inc)
// to the client's clientlib producer at acks level acks (-1 but for the
// non-idempotent producer), one history operation per record.
//
// inc is only the simulator's guess: the library binds a batch to the
// topic id its own metadata names, and the record's promise says which
// (Record.TopicID, or TopicGoneError.OldID); libDone files the operation
// under that incarnation.
func (c *wireClient) libProduce(p, inc int, acks clientlib.Acks, recs []recordbatch.Record, sent []linearizability.Record) {
	w := c.ww.w
	push := &libPush{left: len(recs), start: w.now(), ok: true, acks: acks}
	c.libPushes[push] = true
	c.outstanding++
	tp := c.ww.tps[p]
	cl := c.lib
	if acks != clientlib.AcksAll {
		cl = c.libAcks[acks]
	}
	for i := range recs {
		op := w.hist.produceCall(c.index, p, inc, sent[i:i+1], w.now())
		r := &clientlib.Record{Topic: tp.Topic, Partition: tp.Partition, Key: recs[i].Key, Value: recs[i].Value,
			Timestamp: time.UnixMilli(recs[i].TimestampMs)}
		cl.Produce(context.Background(), r, func(r *clientlib.Record, err error) {
			c.libDone(push, p, op, r, err)
		})
	}
}

// libDone records one record's outcome (of group p); the push's last one
// ends it. The operation is filed under the incarnation the library
// produced it to: the topic id its promise names.
func (c *wireClient) libDone(push *libPush, p int, op *histOp, r *clientlib.Record, err error) {
	w := c.ww.w
	id := r.TopicID
	var gone *clientlib.TopicGoneError
	if errors.As(err, &gone) {
		id = gone.OldID
		w.coverage.Inc("event/lib-produce-topic-gone")
	}
	if len(id) > 0 {
		inc := c.ww.incarnation(c.ww.tps[p].Topic, id)
		w.hist.produceIn(op, p, inc)
		if inc > 0 && err == nil {
			w.coverage.Inc("event/lib-produce-recreated-topic")
		}
	}
	switch {
	case err == nil && push.acks != clientlib.AcksAll:
		// acks=0 and 1 promise no offset and may be lost on a failover:
		// never acknowledged in the history's sense.
		w.hist.produceUnknown(op, w.now())
	case err == nil && r.Offset >= 0:
		w.hist.produceOK(op, r.Offset, w.now())
		w.coverage.Inc("event/lib-produce-ok")
	case err != nil && libFailureDefinite(err):
		w.hist.produceFailed(op, w.now())
		w.coverage.Inc("event/lib-produce-failed-definite")
		push.ok = false
	default:
		w.hist.produceUnknown(op, w.now())
		w.coverage.Inc("event/lib-produce-failed")
		push.ok = false
	}
	push.left--
	if push.left > 0 {
		return
	}
	delete(c.libPushes, push)
	c.outstanding--
	w.checker.onOpDone(push.start, w.now())
	switch {
	case push.ok && push.acks != clientlib.AcksAll:
		// Neither acknowledged nor lost.
		w.coverage.Inc(fmt.Sprintf("event/produce-acks%d", push.acks))
	case push.ok:
		w.stats.ProducesOK++
	default:
		w.stats.ProducesLost++
	}
	if !c.recordTimer && !c.budgetDone {
		c.recordTimer = true
		c.after(c.thinkTime(), c.nextRecord)
	}
	c.checkFinished()
}

// libFailureDefinite reports whether a clientlib promise's error says the
// record is not in the log and never will be: every error but a
// *clientlib.RetriesExhaustedError or *clientlib.TopicGoneError with
// MaybeWritten (clientlib.MaybeWritten, the contract in its doc.go). The
// history records such a record as failed, and the log check fails the
// run if any reader ever sees it.
func libFailureDefinite(err error) bool { return !clientlib.MaybeWritten(err) }
