package linearizability

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

var (
	txnP0 = TopicPartition{Topic: "out", Partition: 0}
	txnP1 = TopicPartition{Topic: "out", Partition: 1}
)

// cleanTxnHistory is a correct run: x commits a→P0@0 and b→P1@0; y's c→P0@1
// aborts (its marker at P0@2); x's next transaction (epoch 1, after
// KIP-890's bump) consumes a and commits d→P1@2 (x's first marker at
// P1@1); read_committed polls of the drained partitions see a, b, d.
func cleanTxnHistory() *TxnHistory {
	return &TxnHistory{
		Txns: []Txn{
			{Client: 1, TransactionalID: "x", Producer: TxnProducerEpoch{1, 0}, Outcome: TxnCommitted, Begin: 1, EndCall: 5, EndReturn: 6,
				Writes: []TxnWrite{{txnP0, "a", 0}, {txnP1, "b", 0}}},
			{Client: 2, TransactionalID: "y", Producer: TxnProducerEpoch{2, 0}, Outcome: TxnAborted, Begin: 2, EndCall: 8, EndReturn: 9,
				Writes: []TxnWrite{{txnP0, "c", 1}}},
			{Client: 1, TransactionalID: "x", Producer: TxnProducerEpoch{1, 1}, Outcome: TxnCommitted, Begin: 10, EndCall: 12, EndReturn: 13,
				Reads: []TxnRead{{txnP0, 0, "a"}}, Writes: []TxnWrite{{txnP1, "d", 2}}},
		},
		Polls: []TxnPoll{
			{Client: 3, TP: txnP0, ReadCommitted: true, Records: []TxnRead{{txnP0, 0, "a"}}, Call: 19, Return: 20},
			{Client: 3, TP: txnP1, ReadCommitted: true, Records: []TxnRead{{txnP1, 0, "b"}, {txnP1, 2, "d"}}, Call: 19, Return: 20},
		},
		Fences:  []TxnFence{{"x", TxnProducerEpoch{1, 0}, 0}, {"y", TxnProducerEpoch{2, 0}, 0}},
		Drained: []TopicPartition{txnP0, txnP1},
	}
}

// kinds lists the anomaly kinds found, sorted and distinct.
func kinds(as []TxnAnomaly) []TxnAnomalyKind {
	var out []TxnAnomalyKind
	for _, a := range as {
		out = append(out, a.Kind)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// The clean history passes, with and without the write-cycle checks.
func TestCheckTxnClean(t *testing.T) {
	for _, wc := range []bool{false, true} {
		if as := CheckTxn(cleanTxnHistory(), TxnOptions{WriteCycles: wc}); len(as) != 0 {
			t.Fatalf("write cycles %v: %v", wc, as)
		}
	}
}

// Each hand-made anomaly, planted in the clean history, is reported with
// its kind (and a check removed from CheckTxn fails its row).
func TestCheckTxnAnomalies(t *testing.T) {
	rows := []struct {
		name  string
		plant func(h *TxnHistory)
		opts  TxnOptions
		want  TxnAnomalyKind
	}{
		{"aborted read", func(h *TxnHistory) {
			h.Polls[0].Records = append(h.Polls[0].Records, TxnRead{txnP0, 1, "c"})
		}, TxnOptions{}, TxnAbortedRead},
		{"intermediate read: d read before its EndTxn was called", func(h *TxnHistory) {
			h.Polls = append(h.Polls, TxnPoll{Client: 4, TP: txnP1, ReadCommitted: true, Records: []TxnRead{{txnP1, 2, "d"}}, Call: 10, Return: 11})
		}, TxnOptions{}, TxnIntermediateRead},
		{"read of an open transaction: u never ended (EndCall is the run's end)", func(h *TxnHistory) {
			h.Txns = append(h.Txns, Txn{TransactionalID: "u", Producer: TxnProducerEpoch{10, 0}, Outcome: TxnIndefinite, Begin: 14, EndCall: 99, EndReturn: 99,
				Writes: []TxnWrite{{txnP0, "u1", 3}}})
			h.Polls = append(h.Polls, TxnPoll{Client: 4, TP: txnP0, ReadCommitted: true, Records: []TxnRead{{txnP0, 3, "u1"}}, Call: 20, Return: 21})
		}, TxnOptions{}, TxnIntermediateRead},
		{"write cycle: e before g in P0, h before f in P1", func(h *TxnHistory) {
			h.Txns = append(h.Txns,
				Txn{TransactionalID: "z", Producer: TxnProducerEpoch{3, 0}, Outcome: TxnCommitted, Begin: 30, EndCall: 40,
					Writes: []TxnWrite{{txnP0, "e", 3}, {txnP1, "f", 5}}},
				Txn{TransactionalID: "w", Producer: TxnProducerEpoch{4, 0}, Outcome: TxnCommitted, Begin: 30, EndCall: 40,
					Writes: []TxnWrite{{txnP0, "g", 4}, {txnP1, "h", 4}}})
			h.Polls = append(h.Polls,
				TxnPoll{TP: txnP0, ReadCommitted: true, Records: []TxnRead{{txnP0, 3, "e"}, {txnP0, 4, "g"}}, Return: 50},
				TxnPoll{TP: txnP1, ReadCommitted: true, Records: []TxnRead{{txnP1, 4, "h"}, {txnP1, 5, "f"}}, Return: 50})
		}, TxnOptions{WriteCycles: true}, TxnWriteCycle},
		{"write cycle against real time: n began after m committed, yet n's write precedes m's in P0", func(h *TxnHistory) {
			h.Txns = append(h.Txns,
				Txn{TransactionalID: "m", Producer: TxnProducerEpoch{8, 0}, Outcome: TxnCommitted, Begin: 30, EndCall: 31, EndReturn: 32,
					Writes: []TxnWrite{{txnP0, "m1", 4}}},
				Txn{TransactionalID: "n", Producer: TxnProducerEpoch{9, 0}, Outcome: TxnCommitted, Begin: 33, EndCall: 34, EndReturn: 35,
					Writes: []TxnWrite{{txnP0, "n1", 3}}})
			h.Polls = append(h.Polls, TxnPoll{TP: txnP0, ReadCommitted: true, Records: []TxnRead{{txnP0, 3, "n1"}, {txnP0, 4, "m1"}}, Return: 50})
		}, TxnOptions{}, TxnWriteCycleRealtime},
		{"circular information flow: each consumed the other's output", func(h *TxnHistory) {
			h.Txns = append(h.Txns,
				Txn{TransactionalID: "p", Producer: TxnProducerEpoch{5, 0}, Outcome: TxnCommitted, Begin: 30, EndCall: 40,
					Reads: []TxnRead{{txnP1, 3, "j"}}, Writes: []TxnWrite{{txnP0, "i", 3}}},
				Txn{TransactionalID: "q", Producer: TxnProducerEpoch{6, 0}, Outcome: TxnCommitted, Begin: 30, EndCall: 40,
					Reads: []TxnRead{{txnP0, 3, "i"}}, Writes: []TxnWrite{{txnP1, "j", 3}}})
			h.Polls = append(h.Polls,
				TxnPoll{TP: txnP0, ReadCommitted: true, Records: []TxnRead{{txnP0, 3, "i"}}, Return: 50},
				TxnPoll{TP: txnP1, ReadCommitted: true, Records: []TxnRead{{txnP1, 3, "j"}}, Return: 50})
		}, TxnOptions{}, TxnCircularFlow},
		{"non-atomic: k read in P0, l never read in drained P1", func(h *TxnHistory) {
			h.Txns = append(h.Txns, Txn{TransactionalID: "r", Producer: TxnProducerEpoch{7, 0}, Outcome: TxnIndefinite, Begin: 30, EndCall: 40,
				Writes: []TxnWrite{{txnP0, "k", -1}, {txnP1, "l", -1}}})
			h.Polls = append(h.Polls, TxnPoll{TP: txnP0, ReadCommitted: true, Records: []TxnRead{{txnP0, 3, "k"}}, Return: 50})
		}, TxnOptions{}, TxnNonAtomic},
		{"non-atomic: a poll of P1 spanning d's offset skipped it", func(h *TxnHistory) {
			h.Txns = append(h.Txns, Txn{TransactionalID: "s", Producer: TxnProducerEpoch{8, 0}, Outcome: TxnCommitted, Begin: 14, EndCall: 15,
				Writes: []TxnWrite{{txnP1, "n", 4}}})
			h.Polls = append(h.Polls, TxnPoll{TP: txnP1, ReadCommitted: true, Records: []TxnRead{{txnP1, 0, "b"}, {txnP1, 4, "n"}}, Return: 50})
		}, TxnOptions{}, TxnNonAtomic},
		{"lost committed write: d never read", func(h *TxnHistory) {
			h.Polls[1].Records = h.Polls[1].Records[:1]
		}, TxnOptions{}, TxnLostWrite},
		{"duplicate: a at two offsets", func(h *TxnHistory) {
			h.Polls = append(h.Polls, TxnPoll{TP: txnP0, ReadCommitted: true, Records: []TxnRead{{txnP0, 3, "a"}}, Return: 50})
		}, TxnOptions{}, TxnDuplicate},
		{"duplicate: one value written by two transactions", func(h *TxnHistory) {
			h.Txns[2].Writes = append(h.Txns[2].Writes, TxnWrite{txnP1, "b", -1})
		}, TxnOptions{}, TxnDuplicate},
		{"inconsistent offsets: two values at P1@2", func(h *TxnHistory) {
			h.Txns = append(h.Txns, Txn{TransactionalID: "t", Producer: TxnProducerEpoch{9, 0}, Outcome: TxnCommitted, Begin: 30, EndCall: 40,
				Writes: []TxnWrite{{txnP1, "o", -1}}})
			h.Polls = append(h.Polls, TxnPoll{TP: txnP1, ReadCommitted: true, Records: []TxnRead{{txnP1, 2, "o"}}, Return: 50})
		}, TxnOptions{}, TxnInconsistentOffsets},
		{"fenced zombie commit: v's EndTxn(commit) at epoch 0 answered ok after epoch 1's fence, nothing read", func(h *TxnHistory) {
			h.Txns = append(h.Txns, Txn{TransactionalID: "v", Producer: TxnProducerEpoch{11, 0}, Outcome: TxnCommitted, Begin: 14, EndCall: 16, EndReturn: 17,
				Writes: []TxnWrite{{TopicPartition{Topic: "other", Partition: 0}, "v1", -1}}})
			h.Fences = append(h.Fences, TxnFence{"v", TxnProducerEpoch{11, 1}, 15})
		}, TxnOptions{}, TxnZombieWrite},
		{"zombie: x's first transaction ended after a newer epoch was handed out", func(h *TxnHistory) {
			h.Fences = append(h.Fences, TxnFence{"x", TxnProducerEpoch{1, 5}, 4})
		}, TxnOptions{}, TxnZombieWrite},
	}
	for _, row := range rows {
		h := cleanTxnHistory()
		row.plant(h)
		got := CheckTxn(h, row.opts)
		if !slices.Contains(kinds(got), row.want) {
			t.Errorf("%s: want %s, got %v", row.name, row.want, got)
		}
	}
}

// A write cycle is Kafka-legal for overlapping transactions, so without
// WriteCycles it is not reported; circular information flow always is.
func TestCheckTxnWriteCyclesOptional(t *testing.T) {
	h := cleanTxnHistory()
	h.Txns = append(h.Txns,
		Txn{TransactionalID: "z", Producer: TxnProducerEpoch{3, 0}, Outcome: TxnCommitted, Begin: 30, EndCall: 40,
			Writes: []TxnWrite{{txnP0, "e", 3}, {txnP1, "f", 5}}},
		Txn{TransactionalID: "w", Producer: TxnProducerEpoch{4, 0}, Outcome: TxnCommitted, Begin: 30, EndCall: 40,
			Writes: []TxnWrite{{txnP0, "g", 4}, {txnP1, "h", 4}}})
	h.Polls = append(h.Polls,
		TxnPoll{TP: txnP0, ReadCommitted: true, Records: []TxnRead{{txnP0, 3, "e"}, {txnP0, 4, "g"}}, Return: 50},
		TxnPoll{TP: txnP1, ReadCommitted: true, Records: []TxnRead{{txnP1, 4, "h"}, {txnP1, 5, "f"}}, Return: 50})
	if as := CheckTxn(h, TxnOptions{}); len(as) != 0 {
		t.Fatalf("reported without WriteCycles: %v", as)
	}
	as := CheckTxn(h, TxnOptions{WriteCycles: true})
	if len(as) != 1 || !slices.Equal(as[0].Txns, []int{3, 4}) {
		t.Fatalf("want one G0 over txns 3 and 4, got %v", as)
	}
}

// A read_uncommitted poll may see an aborted write and an open
// transaction's: neither is an anomaly.
func TestCheckTxnReadUncommitted(t *testing.T) {
	h := cleanTxnHistory()
	h.Polls = append(h.Polls, TxnPoll{TP: txnP0, Records: []TxnRead{{txnP0, 0, "a"}, {txnP0, 1, "c"}}, Return: 7})
	if as := CheckTxn(h, TxnOptions{}); len(as) != 0 {
		t.Fatal(as)
	}
}

// CheckTxn's answer does not depend on map order: the same history gives
// the same anomalies, in the same order, every time.
func TestCheckTxnDeterministic(t *testing.T) {
	h := cleanTxnHistory()
	h.Polls[0].Records = append(h.Polls[0].Records, TxnRead{txnP0, 1, "c"})
	h.Polls[1].Records = h.Polls[1].Records[:1]
	h.Fences = append(h.Fences, TxnFence{"x", TxnProducerEpoch{1, 5}, 4})
	want := fmt.Sprint(CheckTxn(h, TxnOptions{WriteCycles: true}))
	for range 20 {
		if got := fmt.Sprint(CheckTxn(h, TxnOptions{WriteCycles: true})); got != want {
			t.Fatalf("second answer differs:\n%s\n%s", got, want)
		}
	}
}

// TestCheckTxnCorrectRuns generates histories of a correct transactional
// log (producers with interleaved open transactions over shared partitions,
// commits and aborts with markers taking offsets, consume-transform-produce
// reads of committed output, read_committed drains) and checks CheckTxn
// finds nothing: no false alarm on what the simulator will record.
func TestCheckTxnCorrectRuns(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := correctTxnRun(rt)
		if as := CheckTxn(h, TxnOptions{}); len(as) != 0 {
			rt.Fatalf("false alarm: %v", as)
		}
	})
}

// correctTxnRun simulates a correct broker: writes take the partition's
// next offset, a decision appends a marker to each partition the
// transaction wrote, a read_committed reader sees exactly the committed
// records.
func correctTxnRun(rt *rapid.T) *TxnHistory {
	tps := []TopicPartition{txnP0, txnP1, {Topic: "out", Partition: 2}}
	next := make([]int64, len(tps))
	type rec struct {
		off   int64
		value string
		txn   int
	}
	logs := make([][]rec, len(tps))
	h := &TxnHistory{Drained: tps}
	open := map[int]int{} // producer → index of its open transaction
	now, values := int64(0), 0
	committedOut := []TxnRead{}
	for range rapid.IntRange(1, 60).Draw(rt, "steps") {
		now++
		prod := rapid.IntRange(0, 2).Draw(rt, "producer")
		i, isOpen := open[prod]
		if !isOpen {
			h.Txns = append(h.Txns, Txn{Client: ClientID(prod), TransactionalID: fmt.Sprint("p", prod),
				Producer: TxnProducerEpoch{int64(prod + 1), int16(len(h.Txns))}, Begin: now})
			i = len(h.Txns) - 1
			open[prod] = i
			if len(committedOut) > 0 && rapid.Bool().Draw(rt, "consume") {
				h.Txns[i].Reads = append(h.Txns[i].Reads, rapid.SampledFrom(committedOut).Draw(rt, "input"))
			}
		}
		if rapid.IntRange(0, 2).Draw(rt, "end") > 0 || len(h.Txns[i].Writes) == 0 {
			p := rapid.IntRange(0, len(tps)-1).Draw(rt, "partition")
			values++
			v := fmt.Sprint("v", values)
			h.Txns[i].Writes = append(h.Txns[i].Writes, TxnWrite{tps[p], v, next[p]})
			logs[p] = append(logs[p], rec{next[p], v, i})
			next[p]++
			continue
		}
		commit := rapid.Bool().Draw(rt, "commit")
		h.Txns[i].EndCall, h.Txns[i].EndReturn = now, now+1
		h.Txns[i].Outcome = TxnAborted
		if commit {
			h.Txns[i].Outcome = TxnCommitted
		}
		for p := range tps {
			if slices.ContainsFunc(h.Txns[i].Writes, func(w TxnWrite) bool { return w.TP == tps[p] }) {
				next[p]++ // the marker
			}
		}
		if commit {
			for _, w := range h.Txns[i].Writes {
				committedOut = append(committedOut, TxnRead{w.TP, w.Offset, w.Value})
			}
		}
		delete(open, prod)
	}
	for _, i := range open { // still open at the end: aborted by the coordinator
		h.Txns[i].Outcome, h.Txns[i].EndCall = TxnAborted, now+1
	}
	for p, tp := range tps {
		poll := TxnPoll{TP: tp, ReadCommitted: true, Call: now + 2, Return: now + 3}
		for _, r := range logs[p] {
			if h.Txns[r.txn].Outcome == TxnCommitted {
				poll.Records = append(poll.Records, TxnRead{tp, r.off, r.value})
			}
		}
		h.Polls = append(h.Polls, poll)
	}
	return h
}

// TestCheckTxnCorrectRunsPlanted plants an aborted transaction's write
// into a generated correct run's drain: CheckTxn reports G1a, so the
// correct-run test above is not passing for want of reads.
func TestCheckTxnCorrectRunsPlanted(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := correctTxnRun(rt)
		var aborted []TxnWrite
		for _, tx := range h.Txns {
			if tx.Outcome == TxnAborted {
				aborted = append(aborted, tx.Writes...)
			}
		}
		if len(aborted) == 0 {
			return
		}
		w := rapid.SampledFrom(aborted).Draw(rt, "planted")
		for i := range h.Polls {
			if h.Polls[i].TP == w.TP {
				h.Polls[i].Records = append(h.Polls[i].Records, TxnRead{w.TP, w.Offset, w.Value})
			}
		}
		if !slices.Contains(kinds(CheckTxn(h, TxnOptions{})), TxnAbortedRead) {
			rt.Fatalf("planted aborted read of %+v not found", w)
		}
	})
}
