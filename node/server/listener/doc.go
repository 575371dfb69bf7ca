// Package listener is the one connection stack of a node's two client protocols, the native one
// (node/server) and Kafka's (kafkaproto): accept with a connection limit, TLS, a reader and an
// ordered writer per connection, in-flight slots, answer byte budgets, quota throttling, close and
// the drain at shutdown. A protocol brings only its reader (Config.Serve: framing, handshakes,
// decoding) and its answers (Answer: bytes, maybe still to come).
//
//	accept ─► Conn ─► Config.Serve (protocol reader): Take a Slot, Reserve a fetch's answer room, hand
//	          │       the request on, Send the Answer (at once, or when the answer comes)
//	          └─────► writer: answers in the order sent; flush before waiting for one not in; give
//	                  the Slot back once written
//
// A SplicedAnswer (the native fetch answer) gives its bytes as pieces: its own bytes in the writer's
// head buffer and stored slices between them (record batches as the log holds them), which the
// writer sends in one writev on TCP after flushing what is buffered, never copying the stored ones;
// on any other connection (TLS) each piece goes through the buffered writer.
//
// Bounds, the same for both protocols:
//
//   - Slots: a request takes one (Take) before it is handed on, and the writer gives it back once
//     its answer is written; the answer queue has as many places, so Send never blocks whoever
//     answers (the node's loop): a client that does not read stops being read.
//   - Answer room: a fetch reserves its max_bytes (capped at one answer frame, FetchAnswerBytes)
//     from its connection (Config.ConnAnswerBytesMax: past it the reader waits) and from the node's
//     Budget (Config.Answers, shared by both listeners: a weighted semaphore, waiters in order),
//     and holds it until the answer is written, so answers queued for slow readers, or being
//     written to them, are bounded by the budget (1,000 tailing consumers took 3-6 GB per node when
//     they were not). What the write buffer holds (64 KiB a connection) counts as written.
//   - Throttle: a quota's throttle pauses the reader (ThrottleFor, at most ThrottleMax).
//   - Shutdown: stop accepting; each writer sends the answers that are in until a deadline, an
//     answer still to come stops waiting (ErrStopped); then every connection closes.
//
// Close gives back everything a connection's requests hold at once; later releases are no-ops.
// Rejected: reservations kept per request id in a map (the native listener's first version; a Slot
// travelling with its request needs no lookup); a goroutine per request (reorders pipelined
// requests).
package listener
