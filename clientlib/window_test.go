package clientlib

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/strandlog/strand/internal/clientcore"
	"github.com/strandlog/strand/proto/strandpb"
)

// The tests drive clientcore's Window with the producer's own error
// vocabulary (windowErrors): they check the two together.
type (
	BatchID      = clientcore.BatchID
	Attempt      = clientcore.Attempt
	Completion   = clientcore.Completion
	Window       = clientcore.Window
	WindowConfig = clientcore.WindowConfig
)

// addSequence is the Window's sequence arithmetic, for the model server.
func addSequence(seq, n int32) int32 { return clientcore.AddSequence(seq, n) }

// NewWindow is clientcore.NewWindow with the producer's vocabulary.
func NewWindow(cfg WindowConfig) *Window {
	cfg.Errors = windowErrors()
	return clientcore.NewWindow(cfg)
}

// modelServer is one partition of a server with the engine's idempotence
// rules: per producer epoch, the last 5 batches; a retry of one of them is
// a duplicate answered with its original offset; any other sequence but the
// next is OUT_OF_ORDER_SEQUENCE; a higher epoch must start at 0.
type modelServer struct {
	log      []BatchID // one element per record
	epoch    int32
	started  bool
	recent   []modelBatch
	poisoned map[BatchID]bool // refused with RECORD_TOO_LARGE
}

type modelBatch struct {
	seq, count int32
	offset     int64
}

// modelRequest is an attempt on the wire.
type modelRequest struct {
	id      BatchID
	attempt Attempt
}

func (s *modelServer) apply(r modelRequest) (int64, error) {
	if s.poisoned[r.id] {
		return 0, &Error{Code: strandpb.ErrorCode_ERROR_CODE_RECORD_TOO_LARGE}
	}
	a := r.attempt
	if !s.started || a.Epoch > s.epoch {
		if a.BaseSequence != 0 {
			return 0, &Error{Code: strandpb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE}
		}
		s.started, s.epoch, s.recent = true, a.Epoch, nil
		return s.append(r), nil
	}
	if a.Epoch < s.epoch {
		return 0, &Error{Code: strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED}
	}
	for _, b := range s.recent {
		if b.seq == a.BaseSequence && b.count == a.RecordCount {
			return b.offset, nil
		}
	}
	last := s.recent[len(s.recent)-1]
	if a.BaseSequence != addSequence(last.seq, last.count) {
		return 0, &Error{Code: strandpb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE}
	}
	return s.append(r), nil
}

func (s *modelServer) append(r modelRequest) int64 {
	offset := int64(len(s.log))
	for i := int32(0); i < r.attempt.RecordCount; i++ {
		s.log = append(s.log, r.id)
	}
	s.recent = append(s.recent, modelBatch{seq: r.attempt.BaseSequence, count: r.attempt.RecordCount, offset: offset})
	if len(s.recent) > 5 {
		s.recent = s.recent[1:]
	}
	return offset
}

// windowHarness runs a Window against a modelServer with a network that
// delivers in-flight attempts in any order and may fail them.
type windowHarness struct {
	w         *Window
	server    *modelServer
	now       time.Duration
	wire      []modelRequest
	held      []modelRequest   // attempts waiting at the server, their answers lost
	lost      map[BatchID]bool // some attempt's answer was lost (faults 2 and 4)
	counts    map[BatchID]int32
	pushed    []BatchID
	completed []Completion
}

// sendAll takes every attempt the window hands out, checking that Peek
// names each one beforehand (the producer sizes requests by it).
func (h *windowHarness) sendAll() {
	for {
		id, peeked := h.w.Peek(h.now)
		a, ok := h.w.Next(h.now)
		if ok != peeked || ok && a.ID != id {
			panic(fmt.Sprintf("Peek gave %d %v, Next %d %v", id, peeked, a.ID, ok))
		}
		if !ok {
			return
		}
		h.wire = append(h.wire, modelRequest{id: a.ID, attempt: a})
	}
}

// deliver takes request i off the wire with a fault: 0 none, 1 a
// retriable refusal (not applied), 2 applied but the answer lost, 3 lost
// before sending, 4 held at the server (a paused leader's queue) and the
// answer lost: applied later, or never (applyHeld), 5 refused for good
// (not applied: an ACL removed for a moment) though an earlier attempt may
// still be written.
func (h *windowHarness) deliver(i int, fault int) {
	r := h.wire[i]
	h.wire = append(h.wire[:i], h.wire[i+1:]...)
	if r.attempt.RecordCount != h.counts[r.id] {
		panic("attempt record count differs from the pushed count")
	}
	retryAt := h.now + time.Millisecond
	switch fault {
	case 1:
		h.w.Report(r.id, 0, &Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_LEADER}, h.now, retryAt)
	case 2:
		h.lost[r.id] = true
		h.server.apply(r)
		h.w.Report(r.id, 0, &ConnError{Addr: "n1", Sent: true, Err: errors.New("reset")}, h.now, retryAt)
	case 3:
		h.w.Report(r.id, 0, &ConnError{Addr: "n1", Err: errors.New("refused")}, h.now, retryAt)
	case 4:
		h.lost[r.id] = true
		h.held = append(h.held, r)
		h.w.Report(r.id, 0, &ConnError{Addr: "n1", Sent: true, Err: errors.New("timeout")}, h.now, retryAt)
	case 5:
		h.w.Report(r.id, 0, &Error{Code: strandpb.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED}, h.now, retryAt)
	default:
		offset, err := h.server.apply(r)
		h.w.Report(r.id, offset, err, h.now, retryAt)
	}
}

// applyHeld applies held request i at the server; nobody hears the answer.
func (h *windowHarness) applyHeld(i int) {
	r := h.held[i]
	h.held = append(h.held[:i], h.held[i+1:]...)
	h.server.apply(r)
}

func (h *windowHarness) pop() {
	for {
		c, ok := h.w.Pop()
		if !ok {
			return
		}
		h.completed = append(h.completed, c)
	}
}

// The Window against a model server, under reordered delivery, lost
// answers, attempts that wait at the server and are applied later (or
// never), refusals, poisoned batches, delivery timeouts and a closing
// client failing its waiting batches: every batch completes exactly once
// and in push order; an acked batch is in the log once, at its reported
// offset, and acked batches are in the log in push order. Every outcome is checked against every later server action: the
// attempts still waiting at the end are applied (in a drawn order) before
// the check, so a batch failed without MaybeWritten is not in the log even
// then; and a batch failed with MaybeWritten had an attempt whose answer
// was lost.
func TestWindowModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := &windowHarness{
			w: NewWindow(WindowConfig{
				Idempotent:      true,
				InFlightMax:     rapid.IntRange(1, 5).Draw(rt, "inflight"),
				AttemptsMax:     rapid.IntRange(1, 8).Draw(rt, "attempts"),
				DeliveryTimeout: rapid.SampledFrom([]time.Duration{0, 3 * time.Millisecond, 20 * time.Millisecond}).Draw(rt, "timeout"),
			}),
			server: &modelServer{poisoned: map[BatchID]bool{}},
			counts: map[BatchID]int32{},
			lost:   map[BatchID]bool{},
		}
		steps := rapid.IntRange(1, 200).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			h.step(rt)
			h.pop()
		}
		h.quiesce(rt)
		for len(h.held) > 0 { // the server's queues empty, in any order
			h.applyHeld(rapid.IntRange(0, len(h.held)-1).Draw(rt, "held"))
		}
		h.check(rt)
	})
}

// step takes one drawn action: push, send, deliver with a fault, apply a
// waiting attempt, let time pass, expire batches, or (rarely) fail the
// waiting batches as a closing client does.
func (h *windowHarness) step(rt *rapid.T) {
	switch rapid.IntRange(0, 7).Draw(rt, "op") {
	case 0:
		n := rapid.Int32Range(1, 4).Draw(rt, "records")
		id := h.w.Push(n, h.now)
		h.counts[id] = n
		h.pushed = append(h.pushed, id)
		if rapid.IntRange(0, 9).Draw(rt, "poison") == 0 {
			h.server.poisoned[id] = true
		}
	case 1:
		h.sendAll()
	case 2, 3:
		if len(h.wire) > 0 {
			j := rapid.IntRange(0, len(h.wire)-1).Draw(rt, "which")
			h.deliver(j, rapid.IntRange(0, 5).Draw(rt, "fault"))
		}
	case 4:
		h.now += time.Millisecond
	case 5:
		if len(h.held) > 0 {
			h.applyHeld(rapid.IntRange(0, len(h.held)-1).Draw(rt, "held"))
		}
	case 6:
		h.w.Expire(h.now)
	case 7:
		if rapid.IntRange(0, 9).Draw(rt, "close") == 0 {
			h.w.FailQueued(ErrClientClosed)
		}
	}
}

// quiesce runs without faults until every batch has completed.
func (h *windowHarness) quiesce(rt *rapid.T) {
	for round := 0; h.w.Len() > 0; round++ {
		if round > 10000 {
			rt.Fatalf("window did not drain: %d batches left", h.w.Len())
		}
		h.now += time.Millisecond
		h.w.Expire(h.now)
		h.sendAll()
		for len(h.wire) > 0 {
			h.deliver(0, 0)
		}
		h.pop()
	}
}

func (h *windowHarness) check(rt *rapid.T) {
	if len(h.completed) != len(h.pushed) {
		rt.Fatalf("%d completions for %d batches", len(h.completed), len(h.pushed))
	}
	failures := 0
	for _, c := range h.completed {
		if c.Err != nil {
			failures++
		}
	}
	if failures == 0 && h.w.Epoch() != 0 {
		rt.Fatalf("epoch bumped to %d with no batch failed: reordering alone must not renumber", h.w.Epoch())
	}
	firstOffset := map[BatchID]int64{}
	occurrences := map[BatchID]int32{}
	var order []BatchID
	for offset, id := range h.server.log {
		if occurrences[id] == 0 {
			firstOffset[id] = int64(offset)
			order = append(order, id)
		}
		occurrences[id]++
	}
	for i := 1; i < len(order); i++ {
		if order[i] < order[i-1] {
			rt.Fatalf("log order %v is not push order", order)
		}
	}
	for i, c := range h.completed {
		if c.ID != h.pushed[i] {
			rt.Fatalf("completion %d is batch %d, pushed %d", i, c.ID, h.pushed[i])
		}
		n := occurrences[c.ID]
		if n != 0 && n != h.counts[c.ID] {
			rt.Fatalf("batch %d written %d records, has %d (duplicate)", c.ID, n, h.counts[c.ID])
		}
		if c.Err == nil {
			if n == 0 || firstOffset[c.ID] != c.BaseOffset {
				rt.Fatalf("acked batch %d at %d: in log %d times at %d", c.ID, c.BaseOffset, n, firstOffset[c.ID])
			}
			continue
		}
		var re *RetriesExhaustedError
		maybe := errors.As(c.Err, &re) && re.MaybeWritten
		if n != 0 && !maybe {
			rt.Fatalf("batch %d failed definitely (%v) but is in the log", c.ID, c.Err)
		}
		if maybe && !h.lost[c.ID] {
			rt.Fatalf("batch %d failed maybe written (%v), but no answer to it was lost", c.ID, c.Err)
		}
	}
}

// A batch that fails for good leaves a hole; the next batch is renumbered
// under a new epoch from sequence 0.
func TestWindowRenumbersAfterHole(t *testing.T) {
	w := NewWindow(WindowConfig{Idempotent: true, InFlightMax: 5, AttemptsMax: 3})
	a := w.Push(2, 0)
	b := w.Push(3, 0)
	first, _ := w.Next(0)
	second, _ := w.Next(0)
	if first.ID != a || second.ID != b || second.BaseSequence != 2 {
		t.Fatalf("attempts %+v %+v", first, second)
	}
	w.Report(a, 0, &Error{Code: strandpb.ErrorCode_ERROR_CODE_RECORD_TOO_LARGE}, 0, 0)
	w.Report(b, 0, &Error{Code: strandpb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE}, 0, 0)
	retry, ok := w.Next(0)
	if !ok || retry.ID != b || retry.Epoch != 1 || retry.BaseSequence != 0 {
		t.Fatalf("after the hole got %+v %v, want batch %d at epoch 1 sequence 0", retry, ok, b)
	}
	w.Report(b, 7, nil, 0, 0)
	c1, _ := w.Pop()
	c2, _ := w.Pop()
	if !errors.Is(c1.Err, ErrRecordTooLarge) || c2.Err != nil || c2.BaseOffset != 7 {
		t.Fatalf("completions %+v %+v", c1, c2)
	}
}

// A batch waiting past its delivery timeout fails at Expire with a
// RetriesExhaustedError that wraps a TIMEOUT; one in flight is left alone.
func TestWindowDeliveryTimeout(t *testing.T) {
	w := NewWindow(WindowConfig{Idempotent: true, InFlightMax: 1, AttemptsMax: 10, DeliveryTimeout: time.Second})
	a := w.Push(1, 0)
	b := w.Push(1, 0)
	sent, _ := w.Next(0)
	w.Expire(2 * time.Second)
	if w.InFlight() != 1 || sent.ID != a {
		t.Fatalf("in flight %d, sent %d", w.InFlight(), sent.ID)
	}
	w.Report(a, 0, nil, 2*time.Second, 0)
	c1, _ := w.Pop()
	c2, ok := w.Pop()
	var re *RetriesExhaustedError
	if c1.Err != nil || !ok || c2.ID != b || !errors.As(c2.Err, &re) || !errors.Is(c2.Err, ErrTimeout) || re.MaybeWritten {
		t.Fatalf("completions %+v %+v", c1, c2)
	}
}

// When retention deletes a producer's batches the server forgets it, and a
// resend of a batch that may already be in the log (its first attempt timed
// out, its successor was accepted) is refused with UNKNOWN_PRODUCER_ID
// (OUT_OF_ORDER_SEQUENCE from nodes that folded the two together).
// Renumbering it would write it a second time, after its successor (found
// by the simulator with short retention); it fails, maybe written, and only
// the batches after it are renumbered.
func TestWindowStateLostAfterMaybeWritten(t *testing.T) {
	for _, code := range []strandpb.ErrorCode{strandpb.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID, strandpb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE} {
		t.Run(code.Name(), func(t *testing.T) { checkStateLostAfterMaybeWritten(t, code) })
	}
}

// checkStateLostAfterMaybeWritten is TestWindowStateLostAfterMaybeWritten
// with the resend refused by code.
func checkStateLostAfterMaybeWritten(t *testing.T, code strandpb.ErrorCode) {
	w := NewWindow(WindowConfig{Idempotent: true, InFlightMax: 5, AttemptsMax: 10})
	a := w.Push(1, 0)
	b := w.Push(1, 0)
	first, _ := w.Next(0)
	w.Report(first.ID, 0, nil, 0, 0) // a acked at 0
	sent, _ := w.Next(0)
	w.Report(sent.ID, -1, &Error{Code: strandpb.ErrorCode_ERROR_CODE_TIMEOUT}, 0, 0) // b maybe written
	c := w.Push(1, 0)
	resend, ok := w.Next(0)
	if !ok || resend.ID != b || resend.Epoch != 0 {
		t.Fatalf("resend %+v %v", resend, ok)
	}
	w.Report(b, -1, &Error{Code: code}, 0, 0)
	next, ok := w.Next(0)
	if !ok || next.ID != c || next.Epoch != 1 || next.BaseSequence != 0 {
		t.Fatalf("after the lost state got %+v %v, want batch %d at epoch 1 sequence 0", next, ok, c)
	}
	w.Report(c, 5, nil, 0, 0)
	var re *RetriesExhaustedError
	ca, _ := w.Pop()
	cb, _ := w.Pop()
	cc, _ := w.Pop()
	if ca.ID != a || cb.ID != b || !errors.As(cb.Err, &re) || !re.MaybeWritten || cc.Err != nil || cc.BaseOffset != 5 {
		t.Fatalf("completions %+v %+v %+v", ca, cb, cc)
	}
}

// A window's resend after a NOT_LEADER, with the batch that overtook it
// refused as out of order, in virtual time: both go again in order, each
// on its second attempt, and complete at the offsets the resends got.
func TestWindowResendsInOrderAfterNotLeader(t *testing.T) {
	backoff := Backoff{Base: 10 * time.Millisecond, Max: 100 * time.Millisecond}
	w := NewWindow(WindowConfig{Idempotent: true, InFlightMax: 5, AttemptsMax: 10})
	now := time.Duration(0)
	w.Push(3, now)
	w.Push(2, now)
	first, _ := w.Next(now)
	second, _ := w.Next(now)
	if first.BaseSequence != 0 || second.BaseSequence != 3 {
		t.Fatalf("sequences %d %d, want 0 3", first.BaseSequence, second.BaseSequence)
	}
	notLeader := &Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_LEADER, LeaderID: 2}
	w.Report(first.ID, -1, notLeader, now, now+backoff.Delay(first.Number, rand.New(rand.NewPCG(42, 42))))
	w.Report(second.ID, -1, &Error{Code: strandpb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE}, now, now)
	now = w.ReadyAt()
	var resent []string
	for a, ok := w.Next(now); ok; a, ok = w.Next(now) {
		resent = append(resent, fmt.Sprintf("%d@%d", a.BaseSequence, a.Number))
		w.Report(a.ID, int64(100+a.BaseSequence), nil, now, now)
	}
	var done []string
	for c, ok := w.Pop(); ok; c, ok = w.Pop() {
		done = append(done, fmt.Sprintf("%d:%d", c.ID, c.BaseOffset))
	}
	if fmt.Sprint(resent) != "[0@2 3@2]" || fmt.Sprint(done) != "[1:100 2:103]" {
		t.Fatalf("resent %v, done %v; want [0@2 3@2] and [1:100 2:103]", resent, done)
	}
}

// An attempt can wait at a server (a paused leader's queue) after the
// client gave up on it, and be written after a newer attempt of the same
// batch was refused OUT_OF_ORDER_SEQUENCE for overtaking its predecessor.
// Once a later batch is acked the refused batch is known written: it must
// be resent under its old number (a duplicate, answered with its offset),
// never renumbered, even with a renumbering pending after an earlier
// failed batch; renumbered it was written twice, after its successor
// (simulator seed 40 on i23-sim).
func TestWindowRefusedBatchWrittenByWaitingAttempt(t *testing.T) {
	for _, ackFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("ack-first=%v", ackFirst), func(t *testing.T) {
			checkRefusedBatchWrittenByWaitingAttempt(t, ackFirst)
		})
	}
}

// checkRefusedBatchWrittenByWaitingAttempt is
// TestWindowRefusedBatchWrittenByWaitingAttempt with the successor's ack
// before (ackFirst) or after the refusal.
func checkRefusedBatchWrittenByWaitingAttempt(t *testing.T, ackFirst bool) {
	const timeout = 10 * time.Second
	w := NewWindow(WindowConfig{Idempotent: true, InFlightMax: 5, AttemptsMax: 100, DeliveryTimeout: timeout})
	server := &modelServer{poisoned: map[BatchID]bool{}}
	a := w.Push(1, 0)
	ids := []BatchID{a, w.Push(1, time.Second), w.Push(1, time.Second), w.Push(1, time.Second)}
	first := map[BatchID]modelRequest{}
	for _, id := range ids {
		at, _ := w.Next(time.Second)
		if at.ID != id {
			t.Fatalf("sent %d, want %d", at.ID, id)
		}
		first[id] = modelRequest{id: id, attempt: at}
	}
	for _, id := range ids { // every first attempt waits at the server, unanswered
		w.Report(id, -1, &Error{Code: strandpb.ErrorCode_ERROR_CODE_TIMEOUT}, time.Second, time.Second)
	}
	w.Expire(timeout) // a fails, maybe written: the batches after it wait for a renumbering
	b, c, d := ids[1], ids[2], ids[3]
	resend := map[BatchID]modelRequest{}
	for range 3 { // b, c and d, which may be in the log, go again under their numbers
		at, ok := w.Next(timeout)
		if !ok || at.Epoch != 0 {
			t.Fatalf("resend %+v %v, want epoch 0", at, ok)
		}
		resend[at.ID] = modelRequest{id: at.ID, attempt: at}
	}
	// The server: a's first attempt, then c's resend (out of order: b is
	// missing), then b's, c's and d's first attempts, then b's and d's resends.
	server.apply(first[a])
	_, refused := server.apply(resend[c])
	var se *Error
	if !errors.As(refused, &se) || se.Code != strandpb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE {
		t.Fatalf("c's resend got %v, want OUT_OF_ORDER_SEQUENCE", refused)
	}
	cOffset := int64(len(server.log)) + 1
	for _, id := range []BatchID{b, c, d} {
		server.apply(first[id])
	}
	bOffset, _ := server.apply(resend[b])
	dOffset, _ := server.apply(resend[d])
	w.Report(b, bOffset, nil, timeout, timeout)
	if ackFirst {
		w.Report(d, dOffset, nil, timeout, timeout)
		w.Report(c, -1, refused, timeout, timeout)
	} else {
		w.Report(c, -1, refused, timeout, timeout)
		w.Report(d, dOffset, nil, timeout, timeout)
	}
	again, ok := w.Next(timeout)
	if !ok || again.ID != c || again.Epoch != 0 || again.BaseSequence != 2 {
		t.Fatalf("after the refusal got %+v %v, want batch %d again at epoch 0 sequence 2", again, ok, c)
	}
	offset, err := server.apply(modelRequest{id: c, attempt: again})
	w.Report(c, offset, err, timeout, timeout)
	var done []string
	for cp, ok := w.Pop(); ok; cp, ok = w.Pop() {
		done = append(done, fmt.Sprintf("%d:%d:%v", cp.ID, cp.BaseOffset, cp.Err == nil))
	}
	want := fmt.Sprintf("[%d:-1:false %d:%d:true %d:%d:true %d:%d:true]", a, b, bOffset, c, cOffset, d, dOffset)
	if fmt.Sprint(done) != want || len(server.log) != 4 {
		t.Fatalf("completions %v, log %v; want %s, each batch written once", done, server.log, want)
	}
}

// An attempt that waits at the server with its answer lost (a paused
// leader's queue) may be written after a later attempt of the same batch
// was refused OUT_OF_ORDER_SEQUENCE for overtaking its predecessor. A
// batch refused so on its last attempt is therefore maybe written, not
// definitely failed: the rapid model's seed 8808143160094038289 (with
// waiting attempts) got "giving up after 2 attempts: out_of_order_sequence"
// for a batch the waiting attempt then wrote at offset 1.
func TestWindowRefusedBatchMaybeWrittenByWaitingAttempt(t *testing.T) {
	w := NewWindow(WindowConfig{Idempotent: true, InFlightMax: 2, AttemptsMax: 2})
	server := &modelServer{poisoned: map[BatchID]bool{}}
	a, b := w.Push(1, 0), w.Push(1, 0)
	sentA, _ := w.Next(0)
	sentB, _ := w.Next(0)
	w.Report(a, -1, &Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_LEADER}, 0, time.Millisecond)
	waiting := modelRequest{id: b, attempt: sentB} // held at the server, its answer lost
	w.Report(b, -1, &ConnError{Addr: "n1", Sent: true, Err: errors.New("timeout")}, 0, time.Millisecond)
	now := time.Millisecond
	resendA, _ := w.Next(now)
	resendB, ok := w.Next(now)
	if !ok || resendA.ID != a || resendB.ID != b || resendB.BaseSequence != sentB.BaseSequence || resendB.Number != 2 {
		t.Fatalf("resends %+v %+v (first %+v), want a and b again under their numbers", resendA, resendB, sentA)
	}
	offset, err := server.apply(modelRequest{id: b, attempt: resendB}) // overtakes a: refused
	w.Report(b, offset, err, now, now)
	offset, err = server.apply(modelRequest{id: a, attempt: resendA})
	w.Report(a, offset, err, now, now)
	server.apply(waiting) // the waiting first attempt of b is written now
	ca, _ := w.Pop()
	cb, ok := w.Pop()
	var re *RetriesExhaustedError
	if ca.Err != nil || !ok || !errors.As(cb.Err, &re) || !re.MaybeWritten || IsRetriable(cb.Err) {
		t.Fatalf("completions %+v %+v, want a written and b maybe written (not retriable)", ca, cb)
	}
	if fmt.Sprint(server.log) != fmt.Sprint([]BatchID{a, b}) {
		t.Fatalf("log %v, want [%d %d]", server.log, a, b)
	}
}

// A batch refused for good (an ACL removed for a moment) after an earlier
// attempt's answer was lost fails maybe written, wrapping the refusal: the
// earlier attempt may be in the log.
func TestWindowFinalRefusalAfterLostAnswerMaybeWritten(t *testing.T) {
	w := NewWindow(WindowConfig{Idempotent: true, InFlightMax: 1, AttemptsMax: 5})
	a := w.Push(1, 0)
	w.Next(0)
	w.Report(a, -1, &Error{Code: strandpb.ErrorCode_ERROR_CODE_TIMEOUT}, 0, 0)
	w.Next(0)
	denied := &Error{Code: strandpb.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED}
	w.Report(a, -1, denied, 0, 0)
	c, _ := w.Pop()
	var re *RetriesExhaustedError
	if !errors.As(c.Err, &re) || !re.MaybeWritten || !errors.Is(c.Err, denied) || IsRetriable(c.Err) {
		t.Fatalf("completion %+v, want maybe written wrapping %v", c, denied)
	}
}

// A batch that failed definitely (every answer definite) ends its epoch's
// numbering: the server accepts no later sequence of that epoch, so a
// later batch whose attempt's answer was lost cannot be in the log under
// its old number. It is renumbered at once, not resent under its old
// number until its attempts run out and failed as maybe written.
func TestWindowDefiniteHoleEndsOldNumbering(t *testing.T) {
	w := NewWindow(WindowConfig{Idempotent: true, InFlightMax: 5, AttemptsMax: 3})
	hole, b := w.Push(1, 0), w.Push(1, 0)
	w.Next(0)
	w.Next(0)
	w.Report(b, -1, &Error{Code: strandpb.ErrorCode_ERROR_CODE_TIMEOUT}, 0, 0)
	w.Report(hole, -1, &Error{Code: strandpb.ErrorCode_ERROR_CODE_RECORD_TOO_LARGE}, 0, 0)
	next, ok := w.Next(0)
	if !ok || next.ID != b || next.Epoch != 1 || next.BaseSequence != 0 {
		t.Fatalf("after the hole got %+v %v, want batch %d at epoch 1 sequence 0", next, ok, b)
	}
	w.Report(b, 4, nil, 0, 0)
	c1, _ := w.Pop()
	c2, _ := w.Pop()
	var re *RetriesExhaustedError
	if !errors.Is(c1.Err, ErrRecordTooLarge) || errors.As(c1.Err, &re) || c2.Err != nil || c2.BaseOffset != 4 {
		t.Fatalf("completions %+v %+v, want the hole definite and b at 4", c1, c2)
	}
}
