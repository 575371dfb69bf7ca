// Package linearizability records client histories of a Strand cluster in virtual time and checks
// them: a Porcupine model of a partition log (and of committed consumer-group offsets) decides
// linearizability, and cheap exact Jepsen-style checks name the log anomalies (lost write,
// duplicate, inconsistent offsets, non-monotonic send and poll, poll skip, G1a, unseen). It depends
// on nothing in Strand, so the simulator (simnet), the node tests and the real-process tests of
// clientlib all record and check the same way.
//
// Values produced must be unique in a history (e.g. "c3-17"): every check identifies a record by
// its value. A retry that a client records as a new operation must send a new value; a retry hidden
// inside one recorded operation is only sound once producers are idempotent.
//
// History records calls and returns (times given by the caller; nothing here reads a clock).
// Produces are ok, Fail (certainly not written) or Indefinite; fetches and polls record records,
// high-water mark and log start. Produced values are unique across the history.
//
// # Partition-log model
//
// In logmodel.go, partitioned by topic-partition:
//
//   - produce(vs) ok(base): base == len(log); new state: log += vs
//   - fetch(o) ok(recs, hwm, ls): hwm == len(log), ls ≤ o ≤ hwm, recs == log[o:o+k]; new state:
//     start = ls
//   - fetch(o) out of range: hwm == len(log), o < ls or o > hwm; new state: start = ls
//   - list latest → x / earliest → x: x == len(log) / start ≤ x ≤ len(log); new state: — / start =
//     x
//
// Indefinite produces are bounded by a layout built before the search (layout.go), so step stays
// deterministic: the positions some outcome accounts for (acknowledged batches, records a read
// returned) and, per time, the least log length known. One a read saw is pinned at its offset and
// returns by the first operation that needed the log longer than it. Those nobody saw can only fill
// the gaps between accounted positions; gaps are split at every length an outcome gives exactly,
// and each becomes one produce of anonymous records, allowed only if enough unseen records were
// called in time (on a drained partition only below the largest log start reported). Beyond every
// observation an unseen produce changes nothing and is left out. One unseen batch may still be
// counted across two adjacent gaps. The log start never moves back, and a poll after
// OFFSET_OUT_OF_RANGE may resume only at the log start it named. State is immutable with prefix
// hashes. A correct ~1,800-op history checks in ~25 ms. Committed-offset model (offsetmodel.go): a
// register per (group, partition); it tracks per member the highest epoch a heartbeat gave and
// refuses a landed commit in an older one (the zombie fence).
//
// # Jepsen-style checks
//
// CheckLog is exact and deterministic. Anomalies: lost-write (what lies below the largest log start
// seen is retention's), unseen, duplicate, inconsistent-offsets, G1a, nonmonotonic-send, key-order,
// poll-skip, nonmonotonic-poll, read-beyond-hwm, nonmonotonic-hwm/log-start. Check runs both;
// Unknown is ErrInconclusive, a failure to re-run, never a pass. Every anomaly has a hand-built
// history, rapid generates valid and corrupted histories, and ~20 planted checker bugs each fail a
// test. Not checked: keys/timestamps/headers (values only), int-send-skip.
//
// # Transactions
//
// CheckTxn (txncheck.go) checks a TxnHistory of transactional producers (each transaction's writes,
// the records it consumed, its EndTxn outcome and times), consumers' polls (read_committed or not)
// and InitProducerId fences, after Elle and Jepsen's Kafka checks: G1a (a read_committed read of an
// aborted write), G1b (a read returned before the writer's EndTxn was called), G1c (a cycle of
// write-read dependencies: each consumed the other's output), non-atomic visibility (a read spanning
// a visible write's offset skipped it; on drained partitions part of a transaction read, part never),
// lost committed writes, duplicates, inconsistent offsets, and zombie writes (a transaction whose
// EndTxn was called after a newer epoch of its id was handed out, yet visible or committed).
//
// The dependency graph (Elle's): between visible transactions (committed, or read), a wr edge
// from a writer to each transaction that consumed its record, and a ww edge per partition from a
// write to the next visible write of another transaction in offset order (the version order of an
// append log). G1c: a cycle of wr edges, always checked (read_committed forbids it); G0 (a ww
// cycle) and mixed ww/wr G1c only with TxnOptions.WriteCycles, since Kafka orders no two
// overlapping transactions across partitions (a ww cycle through overlapping transactions is
// Kafka's documented behaviour). G0-realtime, always: a committed transaction's write after the
// write of a transaction that began once the first one's EndTxn had returned (a cycle of one
// real-time and one ww edge: the records of a transaction are appended before its EndTxn
// returns). G1b for an append log, where a transaction writes each record once: a read_committed
// read of a record before its transaction's EndTxn was called (a state the transaction had not
// decided yet); seeing part of a committed transaction's records in a partition without the
// rest is the non-atomic check (a poll skipping a visible write inside its span, or on a drained
// partition part read and part never). Every anomaly has a hand-made history that fails
// (txncheck_test.go; removing any check fails a row). Consumed offsets committed with their
// outputs are checked by the simulator (simnet's TransactSession members against the group's
// final stable offsets), not here.
package linearizability
