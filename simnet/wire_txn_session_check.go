package simnet

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/linearizability"
)

// stop closes the members once the run healed (a member closes at its
// next Poll, aborting nothing: its last transaction ended), waiting up to
// txnSessionStopWaits times 100 ms, then kills the rest; then runs then.
func (ses *txnSession) stop(wait int, then func()) {
	if ses == nil {
		then()
		return
	}
	ses.stopping = true
	open := 0
	for _, m := range ses.members {
		if m.life != nil && m.life.alive && !m.stopped {
			open++
		}
	}
	if open == 0 || wait >= txnSessionStopWaits {
		ses.endTasks()
		then()
		return
	}
	ses.s.reader.after(100*time.Millisecond, func() { ses.stop(wait+1, then) })
}

// endTasks kills every process of the members still running (zombies
// included: they are fenced).
func (ses *txnSession) endTasks() {
	if ses == nil {
		return
	}
	for _, m := range ses.members {
		m.stopped = true
		if m.life != nil {
			m.life.die()
		}
	}
	for _, l := range ses.zombies {
		l.die()
	}
	if ses.checker != nil {
		ses.checker.die()
	}
}

// endSessionTasks abandons the session members' tasks when the run ends
// early: their coroutines must not outlive the run.
func (s *txnSim) endSessionTasks() {
	if s != nil {
		s.ses.endTasks()
	}
}

// readCommitted reads the group's stable committed offsets of the main
// topic with a fresh client on the first member's network position,
// retrying while the cluster settles, and hands them to then (nil: the
// group has no session members or the offsets stayed unreadable).
func (ses *txnSession) readCommitted(attempt int, then func(map[int32]int64)) {
	if ses == nil {
		then(nil)
		return
	}
	m := ses.members[0]
	l := &sesLife{m: m, alive: true, txn: -1}
	seeds := make([]string, len(ses.s.ww.peers))
	for i, p := range ses.s.ww.peers {
		seeds[i] = p.Address // every node: one may stay down after the heal
	}
	cl, err := clientlib.NewClient(clientlib.Simulated(sesTransport{l}),
		clientlib.SeedAddresses(seeds...), clientlib.RandSeed(m.c.rng.Uint64()),
		clientlib.RetryBackoff(wireBackoff.Base, wireBackoff.Max), clientlib.RequestTimeout(ses.s.ww.w.opts.ClientTimeout),
		clientlib.MaxRetries(attemptsMax))
	if err != nil {
		panic("simnet: session checker client: " + err.Error())
	}
	l.cl = cl
	var got []clientlib.CommittedOffset
	ses.checker = l
	l.abandon = cl.SimRun(func(ctx context.Context) { got, err = cl.FetchOffsets(ctx, txnSessionGroup) }, func() {
		l.alive = false
		switch {
		case err == nil:
			committed := map[int32]int64{}
			for _, c := range got {
				if c.Topic == topicMain {
					committed[c.Partition] = c.Offset
				}
			}
			then(committed)
		case attempt+1 < libFinalReadsMax:
			m.c.after(100*time.Millisecond, func() { ses.readCommitted(attempt+1, then) })
		default:
			ses.s.ww.w.fail("txn(session): the group's final committed offsets are unreadable after the heal: %v", err)
			then(nil)
		}
	})
}

// checkExactlyOnce checks the drained output and the history against the
// group's final committed offsets: each input offset below its
// partition's committed offset has exactly one visible output (none when
// a reset to the log start skipped it), and no input at or above it has
// any; an input below it that only transactions known aborted consumed
// (and no reset skipped) is reported even when the output was not
// drained whole (retention, an incomplete read), where the first check
// looks for duplicates and outputs above the committed offset only.
func (ses *txnSession) checkExactlyOnce(committed map[int32]int64) {
	if ses == nil || committed == nil {
		return
	}
	w := ses.s.ww.w
	drained := len(ses.s.drainTPs) > 0
	for _, tp := range ses.s.drainTPs {
		if tp.Topic == topicTxnOut && !slices.Contains(ses.s.hist.Drained, tp) {
			drained = false
		}
	}
	seen := map[sesInput]int{}
	for _, p := range ses.s.hist.Polls {
		if p.TP.Topic != topicTxnOut {
			continue
		}
		for _, r := range p.Records {
			if in, ok := ses.input[r.Value]; ok {
				seen[in]++
			}
		}
	}
	bad := 0
	report := func(format string, args ...any) {
		if bad == 0 {
			w.fail("txn(session): "+format, args...)
		}
		bad++
	}
	for _, in := range slices.SortedFunc(maps.Keys(seen), compareSesInput) {
		switch {
		case seen[in] > 1:
			report("input %s/%d@%d has %d committed outputs", topicMain, in.partition, in.offset, seen[in])
		case in.offset >= committed[in.partition] && committed[in.partition] >= 0:
			report("input %s/%d@%d has a committed output, the group's committed offset is %d", topicMain, in.partition, in.offset, committed[in.partition])
		}
	}
	// Drained or not: an input below the committed offset that only
	// transactions known aborted consumed (no EndTxn(commit) left them),
	// and that no reset skipped since, has no committed output either.
	consumed := map[sesInput]bool{} // input → some transaction not known aborted read it
	for _, t := range ses.s.hist.Txns {
		for _, r := range t.Reads {
			if r.TP.Topic == topicMain {
				in := sesInput{r.TP.Partition, r.Offset}
				consumed[in] = consumed[in] || t.Outcome != linearizability.TxnAborted
			}
		}
	}
	for _, in := range slices.SortedFunc(maps.Keys(consumed), compareSesInput) {
		if !consumed[in] && in.offset < committed[in.partition] && seen[in] == 0 && !ses.isExcused(in.partition, in.offset) {
			report("input %s/%d@%d is below the group's committed offset %d and only aborted transactions consumed it",
				topicMain, in.partition, in.offset, committed[in.partition])
		}
	}
	if drained {
		for p := range ses.parts {
			for off := int64(0); off < committed[p]; off++ {
				if seen[sesInput{p, off}] == 0 && !ses.isExcused(p, off) {
					report("input %s/%d@%d is below the group's committed offset %d and has no committed output", topicMain, p, off, committed[p])
				}
			}
		}
	}
	if bad == 0 {
		w.coverage.Inc("txn/session-exactly-once")
	}
}

func compareSesInput(a, b sesInput) int {
	if a.partition != b.partition {
		return int(a.partition - b.partition)
	}
	return int(a.offset - b.offset)
}
