package clientcore

import (
	"fmt"
	"math"
	"time"
)

// BatchID names a batch inside one Window; ids grow in Push order.
type BatchID uint64

// WindowConfig configures a Window.
type WindowConfig struct {
	// Idempotent: batches carry an epoch and sequence numbers and the
	// server deduplicates retries (R15). Without it, retries may write a
	// batch twice, and InFlightMax should be 1 to keep order.
	Idempotent bool
	// InFlightMax bounds the batches sent and not yet resolved, counted
	// from the oldest unresolved one: 1 to 5. The server remembers a
	// producer's last 5 batches, so with at most 5 any retry is still
	// recognised as a duplicate.
	InFlightMax int
	// AttemptsMax bounds sends per batch (1 = no retries).
	AttemptsMax int
	// DeliveryTimeout bounds a batch's life from its creation time (the
	// one Push is given); 0 means none. A batch past it fails when its
	// current attempt ends, or at Expire if it is waiting.
	DeliveryTimeout time.Duration
	// Errors says what an attempt's error means and builds the errors a
	// batch fails with: the client's error types live in clientlib.
	Errors WindowErrors
}

// WindowErrors is the error vocabulary a Window needs from its client.
type WindowErrors struct {
	// Classify says what an attempt's error means.
	Classify func(err error) ErrorMeaning
	// Exhausted is the error of a batch that failed retriably for the
	// last time (out of attempts or past its delivery timeout) after
	// attempts sends, the last failing with err; and of a batch that
	// failed for good (err) while an attempt of it may be in the log.
	// maybeWritten: an attempt may be in the log or still get there; the
	// error must then say the outcome is unknown.
	Exhausted func(attempts int, maybeWritten bool, err error) error
	// Timeout is the error of a batch whose delivery timeout passed while
	// it waited; last is its last attempt's error (nil: none).
	Timeout func(last error) error
}

// ErrorMeaning is what an attempt's error means to a Window.
type ErrorMeaning struct {
	// Retriable: sending the batch again may succeed.
	Retriable bool
	// MaybeWritten: the attempt may be in the log.
	MaybeWritten bool
	// SequenceRefused: the node refused the attempt for its sequence
	// (OUT_OF_ORDER_SEQUENCE, UNKNOWN_PRODUCER_ID): it is not in the log.
	SequenceRefused bool
}

// Attempt is one send of a batch, as Next hands it out.
type Attempt struct {
	ID           BatchID
	Epoch        int32
	BaseSequence int32
	RecordCount  int32
	Number       int // 1 for the first send
}

// Completion is a batch's final outcome, handed out by Pop in batch order.
type Completion struct {
	ID         BatchID
	BaseOffset int64 // -1 when unknown (acks 0 and 1)
	Err        error // nil: written
}

type entryState uint8

const (
	entryQueued entryState = iota
	entryInFlight
	entryAcked
	entryFailed
)

// windowEntry is one batch in a Window.
type windowEntry struct {
	id         BatchID
	count      int32
	seq        int32
	state      entryState
	attempts   int
	createdAt  time.Duration
	baseOffset int64
	err        error
	// maybeWrote: an attempt under the current numbering may be in the
	// log, or may still be written (it waits at a server, its answer
	// lost). A later attempt's refusal does not clear it: only the end of
	// that numbering does (numberingDead), or the batch's success.
	maybeWrote  bool
	sentAtEpoch int32
	// predAcked: every earlier batch was acked when this attempt was sent,
	// so an OUT_OF_ORDER_SEQUENCE answer means the server lost them, not
	// that the attempt overtook a predecessor.
	predAcked bool
	// lastErr is the last attempt's error, named when the delivery
	// timeout ends the retries (a full disk must say so, not "timeout").
	lastErr error
}

// Window is one partition's idempotent sequencer and in-flight window, a
// pure state machine: no goroutines, no clock (times are passed in as
// durations since any fixed origin), no randomness. The producer drives one
// per partition; the simulator can drive it with virtual time.
//
// Rules (Kafka's, made explicit):
//   - Batches get consecutive sequence numbers at Push and are sent in
//     Push order; at most InFlightMax are unresolved-and-sent at once, all
//     within the first InFlightMax unresolved batches.
//   - A retriable failure of any batch stops new sends until every batch
//     in flight has answered (drain); then the unresolved batches are sent
//     again in order, with the same sequence numbers, after the backoff.
//     A later batch that the server refused with OUT_OF_ORDER_SEQUENCE
//     (because the failed one is missing) is simply resent after it.
//   - A success of batch k+1 while k is unresolved means k is written; its
//     resend comes back as a duplicate with the original offset.
//   - A batch that fails for good leaves a hole in the sequence. Batches
//     after it are renumbered under a new epoch from sequence 0 (the
//     server accepts a higher epoch starting at 0), but only once nothing
//     is in flight, every batch before the hole is resolved, and no batch
//     after it may already be in the log; batches that may be are resent
//     with their old numbers first to find out (and fail maybe written
//     if their attempts run out first).
//   - A failure is definite ("not written") only if no attempt of the
//     batch can be in the log or get there later; otherwise it is maybe
//     written (Exhausted with maybeWritten). An attempt whose answer was
//     lost may wait at a server (a paused leader's queue) and be written
//     after a later attempt of the same batch was refused, so a refusal
//     says nothing of earlier attempts. Their numbering ends only when a
//     batch before them in the epoch failed definitely: the server then
//     accepts no later sequence of the epoch, and batches after it are
//     renumbered at once.
//   - UNKNOWN_PRODUCER_ID, or OUT_OF_ORDER_SEQUENCE for a batch sent when
//     every earlier batch was already acked, means the server lost the
//     producer state (retention deleted all its batches): the batch is renumbered the same way,
//     unless an earlier attempt of it may be in the log: then it fails,
//     maybe written, rather than risk being written twice. Sent while an earlier batch was
//     unresolved, it only means the attempt overtook its predecessor
//     (reordered on the wire, or the predecessor failed): it is resent.
//
// Completions come out of Pop strictly in Push order, so promises of one
// partition run in offset order.
type Window struct {
	cfg          WindowConfig
	entries      []*windowEntry // oldest first; popped from the front
	nextID       BatchID
	epoch        int32
	nextSeq      int32
	inFlight     int
	draining     bool
	renumber     bool
	renumberFrom BatchID
	// deadFrom (0: none) is the first batch of the current epoch that
	// failed definitely: no attempt of it is or will be in the log, so no
	// attempt of a later batch under this epoch's numbering can be either
	// (the server accepts a sequence only after every earlier one).
	deadFrom  BatchID
	notBefore time.Duration
}

// NewWindow returns an empty Window; it panics on a config outside the
// documented ranges.
func NewWindow(cfg WindowConfig) *Window {
	if cfg.InFlightMax < 1 || cfg.InFlightMax > 5 || cfg.AttemptsMax < 1 {
		panic(fmt.Sprintf("clientcore: window config %+v out of range", cfg))
	}
	if cfg.Errors.Classify == nil || cfg.Errors.Exhausted == nil || cfg.Errors.Timeout == nil {
		panic("clientcore: window config without its Errors")
	}
	return &Window{cfg: cfg, nextID: 1}
}

// Push appends a sealed batch of count records, created at created (when
// its first record was buffered: its delivery timeout counts from then),
// and returns its id.
func (w *Window) Push(count int32, created time.Duration) BatchID {
	if count <= 0 {
		panic(fmt.Sprintf("clientcore: push of a batch of %d records", count))
	}
	e := &windowEntry{id: w.nextID, count: count, seq: w.nextSeq, createdAt: created, baseOffset: -1}
	w.nextID++
	w.nextSeq = AddSequence(w.nextSeq, count)
	w.entries = append(w.entries, e)
	return e.id
}

// AddSequence adds n to a sequence number modulo 2^31, as Kafka's wrap.
func AddSequence(seq, n int32) int32 {
	return int32((int64(seq) + int64(n)) & math.MaxInt32)
}

// Len is the number of batches not yet popped.
func (w *Window) Len() int { return len(w.entries) }

// InFlight is the number of attempts sent and not yet reported.
func (w *Window) InFlight() int { return w.inFlight }

// Epoch is the producer epoch the window numbers batches under.
func (w *Window) Epoch() int32 { return w.epoch }

// ReadyAt is the earliest time Next may hand out a retry; Next before it
// returns nothing.
func (w *Window) ReadyAt() time.Duration { return w.notBefore }

// Next hands out the next attempt to send at now, if the rules allow one,
// and marks it in flight. Call it until it returns false.
func (w *Window) Next(now time.Duration) (Attempt, bool) {
	i, renumber := w.next(now)
	if i < 0 {
		return Attempt{}, false
	}
	w.draining = false
	if renumber {
		w.doRenumber()
	}
	e := w.entries[i]
	e.state = entryInFlight
	e.attempts++
	e.sentAtEpoch = w.epoch
	e.predAcked = w.ackedBefore(i)
	w.inFlight++
	return Attempt{ID: e.id, Epoch: w.epoch, BaseSequence: e.seq, RecordCount: e.count, Number: e.attempts}, true
}

// Peek names the batch Next would hand out at now, changing nothing, so a
// caller can see whether the batch fits a request before taking it.
func (w *Window) Peek(now time.Duration) (BatchID, bool) {
	i, _ := w.next(now)
	if i < 0 {
		return 0, false
	}
	return w.entries[i].id, true
}

// next is the index of the entry Next hands out at now (-1: none), and
// whether Next renumbers first. It changes nothing.
func (w *Window) next(now time.Duration) (int, bool) {
	if now < w.notBefore || w.draining && w.inFlight > 0 {
		return -1, false
	}
	renumber := w.renumber && w.inFlight == 0 && w.canRenumber()
	waiting := w.renumber && !renumber // batches after the hole wait for the new numbering
	limit := min(len(w.entries), w.cfg.InFlightMax)
	for i := 0; i < limit; i++ {
		e := w.entries[i]
		if e.state != entryQueued {
			continue
		}
		if waiting && e.id >= w.renumberFrom && !e.maybeWrote {
			continue
		}
		return i, renumber
	}
	return -1, false
}

// canRenumber: every batch before the hole is resolved and none after it
// may be in the log under its old number.
func (w *Window) canRenumber() bool {
	for _, e := range w.entries {
		if e.id < w.renumberFrom && (e.state == entryQueued || e.state == entryInFlight) {
			return false
		}
		if e.id >= w.renumberFrom && e.state == entryQueued && e.maybeWrote {
			return false
		}
	}
	return true
}

// doRenumber bumps the epoch and numbers the unwritten batches from 0.
func (w *Window) doRenumber() {
	if w.epoch == math.MaxInt32 {
		panic("clientcore: producer epoch exhausted")
	}
	w.epoch++
	w.nextSeq = 0
	w.deadFrom = 0
	for _, e := range w.entries {
		if e.state == entryQueued {
			e.seq = w.nextSeq
			w.nextSeq = AddSequence(w.nextSeq, e.count)
		}
	}
	w.renumber = false
}

// Report gives the outcome of an attempt Next handed out: err nil for a
// success (a duplicate is a success) with its base offset, else the error.
// retryAt is when a retry may go out, the caller's now plus its Backoff
// delay for attempt.Number. It panics if id is not in flight.
func (w *Window) Report(id BatchID, baseOffset int64, err error, now, retryAt time.Duration) {
	e := w.find(id)
	if e == nil || e.state != entryInFlight {
		panic(fmt.Sprintf("clientcore: report for batch %d, which is not in flight", id))
	}
	w.inFlight--
	if err == nil {
		e.state, e.baseOffset, e.maybeWrote = entryAcked, baseOffset, false
		w.markWrittenBefore(e)
		return
	}
	action := w.cfg.Errors.Classify(err)
	if action.MaybeWritten && e.sentAtEpoch == w.epoch && !w.numberingDead(e) {
		e.maybeWrote = true
	}
	if w.cfg.Idempotent && action.SequenceRefused {
		// Refused: this attempt is not in the log, but an earlier one
		// may be (written, or waiting at the server while this one
		// overtook it): maybeWrote stays. Resend after the missing
		// predecessor, or renumber if there is none.
		if e.predAcked && e.maybeWrote {
			// The server lost the producer's state (retention
			// deleted its batches) while an earlier attempt of this
			// batch may be in the log: a renumbered resend could
			// write it twice, after its successors. It fails, maybe
			// written; the batches after it are renumbered.
			w.fail(e, err, true)
			return
		}
		if e.predAcked && !e.maybeWrote && (!w.renumber || e.id < w.renumberFrom) {
			w.renumber, w.renumberFrom = true, e.id
		}
	}
	if !action.Retriable || e.attempts >= w.cfg.AttemptsMax || w.expired(e, now) {
		w.fail(e, err, action.Retriable)
		return
	}
	e.state, e.lastErr = entryQueued, err
	if w.cfg.Idempotent {
		w.draining = true
	}
	w.notBefore = max(w.notBefore, retryAt)
}

// markWrittenBefore records, when acked was acked under idempotence, that
// every unresolved batch before it is in the log: the server accepts a
// sequence only after all earlier ones of its epoch (every unresolved
// batch is numbered in the current epoch: renumbering waits for nothing
// in flight). An answer such a batch got or gets (a timeout, or an
// OUT_OF_ORDER_SEQUENCE to an attempt that overtook its predecessor while
// an older attempt still waited at the server) does not say otherwise, so
// the batch is resent under its old number, where it is a duplicate
// answered with its offset, and never renumbered: renumbered, it would be
// written a second time, after its successors (the simulator's seed 40:
// a leader paused with a queue of resends).
func (w *Window) markWrittenBefore(acked *windowEntry) {
	if !w.cfg.Idempotent {
		return
	}
	for _, e := range w.entries {
		if e == acked {
			return
		}
		if e.state == entryQueued || e.state == entryInFlight {
			e.maybeWrote = true
		}
	}
}

// ackedBefore reports whether every batch before index i is acked.
func (w *Window) ackedBefore(i int) bool {
	for _, e := range w.entries[:i] {
		if e.state != entryAcked {
			return false
		}
	}
	return true
}

// expired reports whether e's delivery timeout has passed.
func (w *Window) expired(e *windowEntry, now time.Duration) bool {
	return w.cfg.DeliveryTimeout > 0 && now-e.createdAt >= w.cfg.DeliveryTimeout
}

// fail resolves e as failed and, when idempotent, schedules renumbering of
// the batches after it. The error says "maybe written" (Exhausted) exactly
// when an attempt of e may be in the log or still be written; a retriable
// err is wrapped by Exhausted either way.
func (w *Window) fail(e *windowEntry, err error, retriable bool) {
	if retriable || e.maybeWrote {
		err = w.cfg.Errors.Exhausted(e.attempts, e.maybeWrote, err)
	}
	e.state, e.err = entryFailed, err
	if !w.cfg.Idempotent {
		return
	}
	w.draining = true
	if !w.renumber || e.id+1 < w.renumberFrom {
		w.renumber, w.renumberFrom = true, e.id+1
	}
	if !e.maybeWrote {
		w.killNumberingAfter(e)
	}
}

// killNumberingAfter records that e, of the current epoch, failed
// definitely: the server will never accept its sequence, so it accepts no
// later one of this epoch either, and no attempt of a later batch under
// its current number can be in the log or get there. Their maybeWrote
// ends, so they are renumbered, not failed as maybe written.
func (w *Window) killNumberingAfter(e *windowEntry) {
	if w.deadFrom != 0 && w.deadFrom < e.id {
		return
	}
	w.deadFrom = e.id
	for _, later := range w.entries {
		if later.id > e.id && (later.state == entryQueued || later.state == entryInFlight) {
			later.maybeWrote = false
		}
	}
}

// numberingDead reports whether e's attempts under the current epoch can
// never be written: an earlier batch of the epoch failed definitely.
func (w *Window) numberingDead(e *windowEntry) bool {
	return w.deadFrom != 0 && e.id > w.deadFrom
}

// ExpiresAt is the earliest time a waiting (not in flight) batch passes
// its delivery timeout, when Expire fails it; 0: none will.
func (w *Window) ExpiresAt() time.Duration {
	var at time.Duration
	if w.cfg.DeliveryTimeout <= 0 {
		return 0
	}
	for _, e := range w.entries {
		if e.state != entryQueued {
			continue
		}
		if t := e.createdAt + w.cfg.DeliveryTimeout; at == 0 || t < at {
			at = t
		}
	}
	return at
}

// Expire fails, at now, every waiting batch past its delivery timeout.
func (w *Window) Expire(now time.Duration) {
	for _, e := range w.entries {
		if e.state == entryQueued && w.expired(e, now) {
			w.fail(e, w.cfg.Errors.Timeout(e.lastErr), true)
		}
	}
}

// FailQueued fails every batch that is waiting (not in flight) with err:
// the client is closing and will not send them. The failure is definite
// unless an earlier attempt of the batch may be in the log (then it is
// Exhausted, maybe written).
func (w *Window) FailQueued(err error) {
	for _, e := range w.entries {
		if e.state == entryQueued {
			w.fail(e, err, false)
		}
	}
}

// Pop hands out the oldest batch if it is resolved.
func (w *Window) Pop() (Completion, bool) {
	if len(w.entries) == 0 {
		return Completion{}, false
	}
	e := w.entries[0]
	if e.state != entryAcked && e.state != entryFailed {
		return Completion{}, false
	}
	w.entries[0] = nil
	w.entries = w.entries[1:]
	return Completion{ID: e.id, BaseOffset: e.baseOffset, Err: e.err}, true
}

// find locates a batch by id; ids are dense and ordered, so it indexes.
func (w *Window) find(id BatchID) *windowEntry {
	if len(w.entries) == 0 {
		return nil
	}
	i := int(id - w.entries[0].id)
	if id < w.entries[0].id || i >= len(w.entries) {
		return nil
	}
	return w.entries[i]
}
