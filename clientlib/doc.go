// Package clientlib is Strand's Go client, modeled on franz-go's kgo: one Client with functional
// options holds the connections (one per node, pipelined, and one more to a coordinator), the metadata cache and the producer; a
// Consumer reads assigned partitions through it; admin calls are Client methods.
//
// Blocking: NewClient does not connect; the first request does. Produce blocks only while
// MaxBufferedRecords records are buffered; ProduceSync, Flush, Poll and admin calls block until
// done or their context ends.
//
// The retry and leader-discovery decisions are pure pieces: Classify/ClassifyErr (what an error
// means, by the one table strandpb.ErrorCode.Info), Backoff (how long to wait), KeyPartition/Murmur2,
// SaltedKey; and, internal to the module (internal/clientcore, shared with the simulator),
// LeaderCache (who leads what), Window (what an idempotent partition sends next, told what errors
// mean by window.go), Stalled and Suspects (when a silent node is given up on) and
// Sticky/AdaptivePartition (where keyless records go).
//
// The client owns goroutines, sockets and real time in a real process. The simulator (simnet) runs
// this package's own producer instead, on a Client built with Simulated: the producer loop is a
// step function of the time (producer.drive), its requests, timers and promises go through a
// clientcore.Transport in virtual time (sim.go), and no goroutine starts. Its Consumer and
// GroupConsumer run there too: each blocking call (Poll, Commit, Close, ...) runs as a SimRun task,
// a coroutine the Transport's callbacks resume where a real process would block (sim_task.go).
// So do the admin calls cmd/strand makes (simnet's operator actor runs them as tasks); a simulated
// CreateUser salts from the client's seeded source (saltSource), a real one from crypto/rand.
//
//	Produce ─► intake chan ─► producer loop (one goroutine owns all producer state: per partition a Builder + Window)
//	                             ├─► per node: the loop writes under the connection's lock when the node's unanswered
//	                             │   batch bytes stay ≤ 32 KiB, else the node's sender goroutine does (pipelined)
//	                             ◄── results ◄── the connection's reader (a callback per request, no goroutine each)
//	                             └─► promises chan ─► promise goroutine (callbacks in order)
//	Consumer.Poll ─► one fetch in flight per leader (written from Poll) ─► landed by the reader ─► apply, decode ─► Fetches
//
// # Connections (conn.go)
//
// One data connection per node, pipelined by correlation id, and one coordinator connection to
// each node that coordinates a group or transactional id of the Client (coordconn.go: a fetch's or
// produce's quota throttle pauses only the data connection, so a member's heartbeats reach its
// coordinator within the session, as Kafka's consumer keeps its coordinator on a connection of its
// own; TestCoordinatorConnectionNotHeldByFetchThrottle). A caller numbers, frames and writes its
// own request under the connection's write lock (franz-go's way; no writer goroutine); the
// producer's large batches go out as they are beside the marshalled rest
// (frame.AppendProduceSpliced, writev), not copied into the frame. One reader goroutine matches
// answers to calls and completes each where it waits: a done channel (admin calls, metadata), or a
// callback run on the reader (the producer's requests report to the loop; the consumer's fetches
// land for Poll). One watchdog goroutine per connection keeps every call's deadline and the stall
// rule (Stalled) on a single timer, armed for the earliest deadline or the next stall check.
// Rejected: a goroutine per request awaiting its answer with a timer and a ticker each (the bench
// client's profile at 1,000 msgs/s: scheduling 20%, stack growth of those goroutines 9%, timer
// adds 7%); the producer loop writing every request itself (a paused node's full socket would stop
// every partition). It writes one only while the node's unanswered batch bytes, this request's
// included, stay within 32 KiB, far below a socket's buffers, on a live connection with a free slot
// and every earlier request written (beginInline: a light producer skips a goroutine hand-off per
// request); otherwise a sender goroutine per node writes, keeping the loop off a full
// socket. A sealed batch's buffer is reused for a later batch once the batch resolved and no write
// can read it (batchPool; the simulator reuses only never-sent ones: its transport may keep the
// bytes). A fetch begun on a connection with no free slot, under a throttle or not yet dialed
// waits on a goroutine of its own.
//
// # Consumer
//
// Poll keeps one fetch in flight per leader and returns once any answer brings records or an error,
// leaving the others in flight; before returning it starts the next fetch to every idle leader, so
// fetching overlaps the caller's work (franz-go's buffered fetches). An answer moves positions only
// when a Poll hands it out, and is dropped when its partition was sought, paused or unassigned
// meanwhile (generations from one counter); a Poll has one entry per partition (answers it waited
// through are merged). Reads are linearizable from the fetch's send time, FetchPartition.FetchedAt,
// which may precede the Poll by one call; the real-process histories record each read from then
// (Kafka consumers prefetch the same way). FetchPartition.TopicID and PositionTopicID name the
// topic id a batch was read from and a position counts in: a topic re-created under its name has a
// new one. Rejected: one round to every leader per Poll (a record
// at one leader waits behind the others' long polls); a goroutine per partition (thousands of long
// polls).
//
// # Guarantees
//
// Every promise is called exactly once, in offset order per partition. Produce blocks only while
// 10,000 records are buffered. Flush seals every open batch and waits; Close flushes then fails the
// rest.
//
// Idempotence and retries (R11, R15), implemented by the pure Window: batches sealed, sent and
// numbered in order, at most 5 unresolved; a retriable failure drains the window and resends the
// unresolved batches with the same numbers; a batch that fails for good leaves a hole, and the
// later batches are renumbered under epoch+1 from sequence 0 (KIP-360 per partition) only once none
// of them may already be in the log; an UNKNOWN_PRODUCER_ID (the partition lost the producer's
// state) or OUT_OF_ORDER_SEQUENCE for a batch an earlier attempt of which may be in the log fails
// it (maybe written) instead of renumbering it. A record's promise gets a definite failure only
// when no attempt of its batch can be in the log or get there later (every answer was definite, or
// an earlier batch of the epoch failed definitely, so the node accepts no later sequence of it);
// otherwise *RetriesExhaustedError with MaybeWritten (not retriable), even when the last answer
// was a refusal: an attempt whose answer was lost may still wait at a node (a paused leader's
// queue) and be written after a later attempt was refused. A rapid model test against a server
// with the engine's dedup rules, whose queued attempts are applied late or never, checks no loss,
// no duplicate, order kept, and every definite failure absent from the log for good.
//
// Topic ids (KIP-516, produce v13; producer.go renewWindow, bindID, goneError): every produce
// names the topic id the client's metadata gave, and each partition's window is bound to one id,
// since sequence numbers mean nothing to another incarnation of the topic. A new partition binds to
// the id its record was partitioned under; an empty window moves to a newer id (starting at
// sequence 0), never to a stale one: an id a window left, or one seen at an older metadata version
// (LeaderCache's TopicInfo.Version) than the id a window last moved to. While a window holds
// batches of an id the metadata no longer names, new records wait; the held batches are still sent
// under their id, and the node decides: it refuses them with UNKNOWN_TOPIC_ID, which fails them
// with *TopicGoneError (OldID, NewID, MaybeWritten: an earlier attempt may be in the deleted topic),
// or, lagging, writes them to the old topic. When metadata asked by name says no topic of the name
// exists, the held batches fail at once (no leader to send to). UNKNOWN_TOPIC_ID asks about the
// topic by name (an answer older than metadata already applied is refused); while the metadata
// still names the batch's id (the node lags), the batch is retried after that answer. Every
// promise's Record.TopicID names the id its batch was produced under, and MaybeWritten(err) reads
// either maybe-written error. Rejected: resending a held batch under the new id (its sequence
// numbers are the old topic's, and an earlier attempt may be in the old topic: the record could
// end up in both); failing held batches as soon as metadata names a new id (the node's check is the
// authority, and a client that guesses hides a node that does not check).
//
// # Transactions (issue 23; txn.go, txn_io.go)
//
// TransactionalID(id) makes a Client Kafka's transactional producer (KIP-890 transactions v2):
// InitTransactions (run by the first BeginTransaction) takes the id's producer id at a new epoch
// from its coordinator (FindCoordinator with transactional_id; NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE and CONCURRENT_TRANSACTIONS back off and retry), fencing older Clients
// with the id. Records are produced only between BeginTransaction and its end (else
// ErrNoTransaction at once); the producer loop sends AddPartitionsToTxn for the partitions a
// transaction has not touched yet (batched, one request at a time) before their first batch, which
// carries transactional=true. CommitTransaction flushes, then EndTxn(commit); the answer's epoch is
// the next transaction's, and a partition's window restarts at sequence 0 under it.
// AbortTransaction fails unsent records (ErrTransactionAborted), waits for those sent and for an
// AddPartitionsToTxn in flight (an EndTxn the coordinator took first would leave the add to open a
// transaction nobody ends), then EndTxn(abort). SendOffsetsToTransaction: AddOffsetsToTxn, then TxnOffsetCommit with the member's
// GroupMetadata (KIP-447). PRODUCER_FENCED is fatal (*ProducerFencedError); any other failure in
// the transaction makes Commit answer *TransactionAbortableError until AbortTransaction. An EndTxn
// whose outcome is unknown (ctx ended, coordinator unreachable) leaves the transaction open, not
// abortable: only a resend of the same decision gets its answer. A transaction that reached no
// coordinator ends locally, and so does one whose first EndTxn is refused INVALID_TXN_STATE when no
// add was answered (every add refused, or the one whose answer was lost not applied: Kafka's
// producer skips that EndTxn). Close aborts an open transaction (bounded like InitTransactions), as
// Kafka's and franz-go's producers do. KIP-360: a transactional batch refused UNKNOWN_PRODUCER_ID or
// OUT_OF_ORDER_SEQUENCE fails at once (txnWindowErrors: never renumbered under a local epoch) and
// marks the transaction bumpNeeded; AbortTransaction then sends InitProducerId with the ids EndTxn
// answered as expected, and the coordinator (engine/txn) bumps the same producer id's epoch;
// BeginTransaction retries a re-init the abort could not finish. A fenced producer's abort fails
// PRODUCER_FENCED first and is never re-initialized. Not done: KIP-588's recovery from a
// coordinator timeout (the coordinator's timeout abort bumps the epoch exactly as a fence does, so
// the producer is fenced). A Simulated Client is transactional too: its
// AddPartitionsToTxn goes on the Transport by txnCall's rules and Flush waits as a task (simnet's
// TransactSession members, sim_txn_test.go). Proven: txn_test.go, txn_reinit_test.go.
//
// # Consume-transform-produce (txn_session.go)
//
// NewTransactSession(txnClient, group, topics, opts...) is franz-go's GroupTransactSession: a
// GroupConsumer with auto-commit off, read_committed fetches and stable offset reads
// (OffsetFetch.require_stable; unstable partitions are retried with backoff, else taken at the next
// heartbeat), so a new owner never starts before its predecessor's pending offsets are decided.
// Poll begins a transaction when none is open; Produce writes into it; End(ctx, commit) flushes,
// sends every owned partition's position with SendOffsetsToTransaction and the member's
// GroupMetadata, and commits, reporting whether it did. It aborts instead when commit is false, when
// the commit is abortable, or when a revoke or loss (OnRevoked/OnLost, wrapped) came after the
// transaction handed out records; after any abort every owned partition seeks back to its stable
// committed offset (retried by the next Poll if the read fails), so the input is delivered again.
// An End whose EndTxn outcome is unknown answers *SessionEndPendingError (retriable); the next End
// or Poll finishes it with the same decision and without resending the offsets. Close aborts and
// leaves. Proven (txn_session_test.go, fake cluster with GroupHeartbeat 20 ms): abort re-delivers
// the same input; a revoke mid-transaction aborts and the new owner's output is the only one
// committed; exactly once of output over input across a rebalance and a member closed
// mid-transaction; no start while offsets are pending; an unknown EndTxn finished by the next Poll;
// a failed rewind redone by the next Poll.
//
// # Group consumer
//
// NewGroupConsumer(c, group, topics, opts...): Poll/Commit/CommitOffsets/Close on the caller's
// goroutine, which heartbeats when due (with a growing sequence number) and reconciles — revoke
// first (auto-commit, OnRevoked, stop fetching), then start new partitions at their committed
// offsets, else at StartWithoutCommit (earliest), and only while the heartbeat that gave them was
// sent less than half a session ago (a slow offset read: heartbeat again first, a lapsed session
// loses everything; the coordinator's clock may run fast); auto-commits every 5 s, at the start of a Poll
// before it fetches, so only what earlier Polls returned is committed (positions move only when a
// Poll hands records out); drops everything on FENCED/UNKNOWN or when its own session timer lapsed
// (OnLost); leaves on Close (static members, InstanceID, leave with epoch −2). The coordinator is
// found with FindCoordinator at any node; when the node it names refuses (NOT_COORDINATOR), the
// next lookup asks the node that named it last (a node with stale metadata kept a member out); a
// node that names none (COORDINATOR_NOT_AVAILABLE: a removed node) does not end a lookup while
// another candidate may name one; a coordinator request that timed out (TIMEOUT) or lost its
// connection looks the coordinator up again, for groups and transactional ids. A committed offset
// below the log start is the Consumer's OffsetOutOfRangeError (R22), never a reset. Admin:
// AlterTopicConfig, DeleteRecords, DescribePartitionLogs, FetchOffsets, CommitOffsets (empty
// groups), ListGroups (merged over nodes), DescribeGroup, DeleteGroup, GroupLag (committed,
// high-water mark, lag in records and in time, retention headroom, AtRisk under 10%).
//
// # Poison records (R25)
//
// GroupConsumer.Handle(ctx, handler, Handling) consumes with a func per record (HandleBatches: per
// partition batch; a batch that fails every attempt is retried record by record). A RetryPolicy
// bounds each record: MaxAttempts, Backoff (equal jitter) between them, AttemptTimeout on each
// attempt's context; a panic is a failed attempt; MaxDelay is the most one record holds its
// partition (records of a partition are handled in order, one record at a time per member, so the
// member's other partitions wait with it). A record that fails every attempt is
// written to its dead-letter topic (Handling.DeadLetterTopic, default TOPIC.dlq, created on first
// use with the source's partition count and replication factor, in the source partition's
// number) as the source's key, value, timestamp and headers plus HeaderDLQ* headers (topic,
// partition, offset, timestamp, key, group, attempts, error; decimal text), readable by any Kafka
// client. Handle turns auto-commit off and commits per partition after each batch, and on
// revocation, only offsets after records handled or whose dead letter was acknowledged; between
// attempts it heart-beats. A dead letter that cannot be written stops Handle with a
// *DeadLetterError after seeking back to the record, nothing past it committed. At least once: a
// member killed between the dead letter's ack and the commit leaves the record to the next owner,
// which may dead-letter it again. Each commit carries the partition's dead-letter count as its
// metadata (DeadLetterMetadata, "strand.dlq=N"; read before the member's first commit of the
// partition, so it survives member changes), which GroupLag, /metrics and the console show. With
// transactions (issue 23) handling.deadLetter and the commit
// after it become one transaction; nothing else changes. Handling.RetryTopic (opt-in) retries out of
// order instead: one attempt in the source partition, then the record goes to the retry topic
// (subscribed to) with HeaderRetryDue one backoff later and the partition moves on; a retry
// partition whose first record is not due is sought back and paused until it is; a due record is
// tried as its source record (HandlerAttempt counts on) and goes back, or to the dead-letter topic.
//
// Redrive writes dead letters back (to the source topic or RedriveOptions.To, in the source
// partition, with HeaderRedriveFrom) and records them in DLQ+".redriven": per batch an intent
// (destination and its high-water mark), the records, then done entries. A later run skips what
// is done, skips a second dead letter of a source record already written back, and finishes an
// interrupted batch by looking for HeaderRedriveFrom in the destination from the intent's mark, so
// reruns never duplicate. Rejected: a consumer group over the dead-letter topic (a filtered
// redrive would commit past the letters it left out, or re-drive the ones it wrote on the next
// unfiltered run). Two redrives of one topic must not run at once.
//
// # Errors
//
// One table, next to the enum (proto/strandpb/errorcode.go), gives every ErrorCode its name and
// whether it is retriable, may have been written, or calls for a metadata refresh; Definite()
// follows. The node's sentinels carry their code (strandpb.NewSentinel, strandpb.CodeOf), and
// clientlib.Classify and error texts read this table for a code's meaning; TestErrorCodeTable
// fails when an enum value has no row. Errors carry data (*Error{Code, Message, LeaderID,
// LeaderAddress, LogStartOffset, HighWatermark}), match sentinels with errors.Is, and answer
// Retriable(); callers never match strings. Typed failures a caller acts on: *UnreachableError
// ("cannot reach the cluster at ADDR", within the dial timeout, not retried; only while no node
// ever answered the Client: after, a cluster that refuses every connection is restarting and is retried; a node
// that refused is dialled again only after a jittered ReconnectBackoff, redial.go), *NotStrandError,
// *RetriesExhaustedError{MaybeWritten}, *TopicGoneError{MaybeWritten} (a produce's topic was
// deleted or re-created), *OffsetOutOfRangeError (R22: never a silent seek),
// *TopicRecreatedError and *ClusterChangedError (sticky until Seek; a lagging node's
// UNKNOWN_TOPIC_ID is retried while the client's own metadata still names the old id),
// *TopicIDChangedError (DeleteTopic names the topic id its metadata knows, so neither its own retry
// nor a stale client deletes a topic re-created under the name; nothing was deleted), *OptionError
// from NewClient. An unknown topic fails after UnknownTopicRetries (4) metadata answers unless the
// caller asks to wait (-1).
//
// # Stalled nodes (a paused leader)
//
// Stalled (pure, internal/clientcore) gives up on a call once its own legitimate wait (a long poll) plus StallTimeout (2
// s, about an election) has passed with no byte at all on the connection; the connection is dropped
// (the call is retriable and maybe written), the node marked suspect (Suspects, pure, internal/clientcore) and requests
// re-routed through fresh metadata. Each further stall within a minute doubles that node's bound,
// up to the request timeout, so a slow but live node is not abandoned forever. Rejected: a fixed ~2
// s deadline per produce (a leader without quorum legitimately holds a produce), a ping request
// (the bytes on the connection already say the node is alive).
//
// A quota throttle is not a stall: an answer with throttle_ms (clientcore.Throttle) holds the
// connection's next writes until it ends (the node reads nothing on it meanwhile, as Kafka mutes
// the channel; Kafka's clients hold their sends the same way since KIP-219), and the stall rule and
// the request deadline count from the throttle's end (clientcore.PastThrottle). Before, a throttle
// past StallTimeout made the client suspect a healthy node and reconnect on a fresh connection the
// node did not throttle, escaping the quota (TestClientHoldsThrottledConnection). The throttle
// holds the connection its answer came on, never the coordinator connection (coordconn.go). A call
// waits it out before taking the connection's write lock, so a call behind it still ends with its
// ctx (lockUnthrottled), and lookups (metadata, FindCoordinator) ask throttled nodes last
// (throttled.go).
//
// # Partitioner (R13, R17)
//
// ManualPartitioner() sends to Record.Partition; keyed records go to murmur2(key) & 0x7fffffff % n
// (Kafka's vectors); SaltedKey(key, n, pick) trades per-key order for spread of hot keys; keyless
// records are sticky with adaptive partitioning (KIP-794, pure AdaptivePartition in internal/clientcore): partitions whose
// leader is unknown or suspect, or whose window is full, are skipped; the rest are weighted by free
// queue space. With none available (no leader known yet) the current partition is kept rather than
// each record drawing anew.
//
// # Acks (R12)
//
//	acks           promise succeeds when                   Record.Offset
//	all (default)  a majority committed and applied it     the offset
//	1              the leader appended it to its raft log  -1 (offsets are assigned at apply)
//	0              the request was written to the socket   -1
//
// Any level but all turns idempotence off.
//
// # Limits
//
// A record over 1 MiB fails before Produce returns. Batches seal at BatchBytes (16 KiB), after
// Linger (5 ms) when the window has room, or on Flush. A produce request stops below the node's
// frame limit (min of the client's 9 MiB and the frame_bytes_max the node announced in Hello;
// frame.ProduceBytesMax), and each round starts one partition further on so none starves; fetches
// ask for at most frame.FetchBytesMax (7 MiB), whatever FetchMaxBytes says. NewClient refuses
// options beyond the limits (BatchBytes over the batch limit, negative timeouts).
//
// # The fake cluster (clientlib/fake)
//
// fake.New(fake.Nodes(3), fake.Topic("t", 4)) starts real node/server servers on 127.0.0.1 on
// memdisks, so clientlib's tests run against the real Handle, raft and engine (a second
// implementation of the server drifts). Each node is fronted by a frame-level proxy whose address
// is the node's in Config.Nodes; per request a test may inject an error, drop before forwarding,
// forward then drop the answer, hold, or forward twice. MoveLeader forces a real election;
// RecreateTopic and Replace (a new cluster id) exercise the identity checks; TrimLogStart answers
// as if the log start had moved. No hook in a production type; readiness waits are bounded (30 s).
package clientlib
