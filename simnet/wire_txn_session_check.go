package simnet

import (
	"cmp"
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

// endSessionTasks abandons the transactional producers' and the session
// members' tasks when the run ends early: their coroutines must not
// outlive the run.
func (s *txnSim) endSessionTasks() {
	if s != nil {
		s.endTasks() // wire_txn.go
		s.ses.endTasks()
	}
}

// readCommitted reads the group's committed offsets of the input topics
// with a fresh client on the first member's network position,
// retrying while the cluster settles, and hands them to then (nil: the
// group has no session members or the offsets stayed unreadable).
func (ses *txnSession) readCommitted(attempt int, then func(map[linearizability.TopicPartition]int64)) {
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
	cl, err := clientlib.NewClient(append([]clientlib.Opt{clientlib.Simulated(sesTransport{l}),
		clientlib.SeedAddresses(seeds...), clientlib.RandSeed(m.c.rng.Uint64()),
		clientlib.RetryBackoff(wireBackoff.Base, wireBackoff.Max), clientlib.RequestTimeout(ses.s.ww.w.opts.libRequestTimeout()), clientlib.StallTimeout(ses.s.ww.w.opts.libStallTimeout()),
		clientlib.MaxRetries(attemptsMax)}, ses.s.ww.sasl.libOpts(m.c)...)...) // SASL: sasl.go
	if err != nil {
		panic("simnet: session checker client: " + err.Error())
	}
	l.cl = cl
	var got []clientlib.CommittedOffset
	ses.checker = l
	// Stable offsets: EndTxn(commit) answers once the decision is logged,
	// and the group's partition applies the transaction's offsets only
	// with its marker, later; a plain read right after the last commit
	// saw the offsets before it while its outputs were already visible
	// (seed 45: input sim/3@72 output, committed offset 72).
	l.abandon = ses.s.ww.w.simRun(cl, func(ctx context.Context) { got, err = cl.FetchStableOffsets(ctx, txnSessionGroup) }, func() {
		l.alive = false
		switch {
		case err == nil:
			committed := map[linearizability.TopicPartition]int64{}
			for _, c := range got {
				if slices.Contains(txnSessionTopics, c.Topic) {
					committed[linearizability.TopicPartition{Topic: c.Topic, Partition: c.Partition}] = c.Offset
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
// group's final committed offsets. An input is a record of an input
// topic (txnSessionTopics) a member consumed; all but second-generation
// ones (ses.transforms) have an output. No input has two visible
// outputs, nor one at or above its partition's committed offset; an
// input below it that only transactions known aborted consumed (and no
// reset to the log start skipped since) is reported, drained or not.
// When every output partition was drained whole: each input below the
// committed offset has exactly one visible output, except where a reset
// skipped it — every offset of the main topic (plain writes: one record
// per offset), and every record the final reads saw of topicTxn's and
// topicTxnOut's partitions drained whole (their offsets hold markers and
// aborted records too).
func (ses *txnSession) checkExactlyOnce(committed map[linearizability.TopicPartition]int64) {
	if ses == nil || committed == nil {
		return
	}
	w := ses.s.ww.w
	outDrained := true
	for _, tp := range ses.s.drainTPs {
		if tp.Topic == topicTxnOut && !slices.Contains(ses.s.hist.Drained, tp) {
			outDrained = false
		}
	}
	seen, visible := ses.outputsSeen()
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
			report("input %s@%d has %d committed outputs", in.tp, in.offset, seen[in])
		case in.offset >= committed[in.tp] && committed[in.tp] >= 0:
			report("input %s@%d has a committed output, the group's committed offset is %d", in.tp, in.offset, committed[in.tp])
		}
	}
	consumed := ses.consumedInputs()
	for _, in := range slices.SortedFunc(maps.Keys(consumed), compareSesInput) {
		if !consumed[in] && in.offset < committed[in.tp] && seen[in] == 0 && !ses.isExcused(in.tp, in.offset) {
			report("input %s@%d is below the group's committed offset %d and only aborted transactions consumed it",
				in.tp, in.offset, committed[in.tp])
		}
	}
	if outDrained {
		missing := func(in sesInput) {
			if seen[in] == 0 && !ses.isExcused(in.tp, in.offset) {
				report("input %s@%d is below the group's committed offset %d and has no committed output", in.tp, in.offset, committed[in.tp])
			}
		}
		for p := range ses.parts {
			tp := linearizability.TopicPartition{Topic: topicMain, Partition: p}
			for off := int64(0); off < committed[tp]; off++ {
				missing(sesInput{tp: tp, offset: off})
			}
		}
		for _, in := range slices.SortedFunc(maps.Keys(visible), compareSesInput) {
			if in.offset < committed[in.tp] && ses.transforms(in, visible[in]) {
				missing(in)
			}
		}
	}
	if bad == 0 {
		w.coverage.Inc("txn/session-exactly-once")
	}
}

// outputsSeen counts, per input, the committed outputs of topicTxnOut the
// reads saw (seen), and maps every record the reads saw of a drained
// partition to its value (visible: the drained partitions' committed
// records of topicTxn and topicTxnOut).
func (ses *txnSession) outputsSeen() (seen map[sesInput]int, visible map[sesInput]string) {
	seen, visible = map[sesInput]int{}, map[sesInput]string{}
	for _, p := range ses.s.hist.Polls {
		drained := slices.Contains(ses.s.hist.Drained, p.TP)
		for _, r := range p.Records {
			if in, ok := ses.input[r.Value]; ok && p.TP.Topic == topicTxnOut {
				seen[in]++
			}
			if drained {
				visible[sesInput{tp: p.TP, offset: r.Offset}] = r.Value
			}
		}
	}
	return seen, visible
}

// consumedInputs maps each input a transaction read to whether some
// transaction not known aborted read it.
func (ses *txnSession) consumedInputs() map[sesInput]bool {
	consumed := map[sesInput]bool{}
	for _, t := range ses.s.hist.Txns {
		for _, r := range t.Reads {
			if slices.Contains(txnSessionTopics, r.TP.Topic) {
				in := sesInput{tp: r.TP, offset: r.Offset}
				consumed[in] = consumed[in] || t.Outcome != linearizability.TxnAborted
			}
		}
	}
	return consumed
}

func compareSesInput(a, b sesInput) int {
	if c := compareTPs(a.tp, b.tp); c != 0 {
		return c
	}
	return cmp.Compare(a.offset, b.offset)
}

func compareTPs(a, b linearizability.TopicPartition) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}
