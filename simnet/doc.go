// Package simnet is Strand's deterministic simulator: one goroutine runs a cluster of node.Cores,
// their disks (memdisk), their network and their clients in virtual time, injects the faults a seed
// chooses, and checks every step and the final history (linearizability). A failing seed replays
// bit for bit.
//
// etcd raft draws election timeouts from crypto/rand, so runs are only deterministic inside go test
// after testing/cryptotest.SetGlobalRandom (see sim_test.go, which is the entry point: go test
// ./simnet -run TestSim).
//
// The cluster is the production node.Core, the metadata group, Handle with marshalled protobuf, and
// clientlib's real retry and leader logic (its pure pieces). Every random choice comes from one
// seed; to replay one: go test ./simnet -run '^TestSim$' -sim.seed-start=S -sim.seeds=1.
//
// # The world
//
// A heap of events ordered by (virtual time, sequence). Independent PCG streams per component
// (network, disk, storage, faults, options, each client, each node incarnation), so a new draw in
// one never shifts another; etcd raft's crypto/rand runs under testing/cryptotest.SetGlobalRandom.
// Nodes have a memdisk that outlives crashes, a clock with per-node skew, ticks every 10 ms with a
// seeded phase, and Process after every delivered event. The network has per-link latency, jitter,
// drops, duplicates and partitions, counted per directed link so overlapping faults heal
// independently. Clients cross the same network.
//
// Configuration knobs (knobs.go), FoundationDB style: each seed draws its nodes' node.Config from
// its own stream, production's value the most common draw of each knob: node/server's timing (raft
// ticked every 10th tick, 1 s elections, 5 s request timeouts) in half the seeds, raft ticked
// every tick (the simulator's old timing) in a fifth, other ticks (2, 5 or 10 per raft tick,
// elections of 6–15 raft ticks, heartbeats of 1–2, request timeouts of 0.5–10 s) in the rest;
// node's default checkpoint interval, segment size, retention check, tail-cache total, fetch read
// budget, pending-request bound, disk-stall threshold and segment-age cap in 40–60% of the seeds,
// small ones otherwise. TestKnobsCoverEveryConfigField lists node.Config's fields by reflection
// and fails on one no seed varies or sets to production's value, unless knobExempt says why
// (identity, seams, hooks; authorization is the operator actor's). The draw is on in the standard
// sample (TestSim, make sim, CI) and in every test built on seedOptions; -sim.knobs=false (make sim
// KNOBS=0) runs the simulator's old fixed configuration (Options.FixedKnobs) instead. The clients
// follow the nodes' timing as production's do: every clientlib Client waits the nodes' request
// timeout plus Options.ClientTimeout (Options.libRequestTimeout; production's client waits 15 s
// against the node's 5 s, so the node's TIMEOUT or NOT_LEADER reaches it) and gives a silent node
// up after two election timeouts (libStallTimeout, production's 2 s against 1 s elections); the
// group session is three election timeouts, at least a second (world.groupSession). The
// simulator's own clients keep Options.ClientTimeout.
//
// Fault timing per election timeout, a decision for the whole sample: the fault mix's timing is
// drawn for the fixed knobs' 100 ms election timeout and stretched by the seed's election timeout
// over it (Options.scaleFaultTiming: ×10 with production's ticks, ×1.2–15 in the other draws, ×1 for
// raft ticked every tick): the mean gap between faults, how long a crashed node stays down and how
// long a network fault lasts, so every draw sees the same faults per election timeout. Unscaled,
// production's 1 s elections met a fault every 150 ms in some seeds, seven per election timeout, and
// seed 183 never elected a leader long enough to acknowledge a produce in 60 s. The liveness bounds
// are not scaled (10 s is ten of production's election timeouts; a scaled TimeLimit would make the
// few safety seeds that reach it, 7 of 200 then, 12 now, cost ten times as much; they then drain in overtime); instead a node restarting after
// the heal restarts them, and the check waits while a restart is pending, as after a disk stall or
// the quiet probe's crash: a rolling restart is an operation that runs after the heal too, and with
// restarts scaled to 5–10 s it kept a group without a majority 10 s after the heal (seeds 89, 139,
// 151). Fault timing that is about elections already scales on its own: pauses, the quiet probe's
// bound and the disk-stall check. Planted ElectionInCoreTicks (raft handed the election timeout in
// Core ticks) shows only when raft ticks less often than the node: of seeds 1–200 without the
// feature draw, caught in 0 with fixed knobs, 103 with drawn ones, before the scaling
// (TestSimCatchesElectionInCoreTicksWithKnobs -sim.knob-catch-seeds=200); in the standard sample
// (make sim-bugs BUGS=ElectionInCoreTicks SEEDS=200) 103 with the fault timing unscaled, 82 scaled
// (fewer faults per second, so fewer elections after the heal), 81 with only the gap between faults
// scaled (which also failed seed 71): the scaling costs this bug a fifth of its catches. The
// election watch (elections.go) sees it under the faults too, where a safety seed only ran into
// the time limit: 120 of 200 in the standard sample (119 of the 123 seeds with 10 Core ticks per
// raft tick; TestSimCatchesElectionInCoreTicksWithKnobs: 12 of its 20, 0 with fixed knobs).
// Production's ticks found two rejoin bugs (node/rejoin.go: a recovering replica acknowledged a stale leader's
// appends; a metadata group finished recovering at open, before its partition replicas opened),
// and, once on in the standard sample, two more: a stalled leader handed its leadership, attempt
// after attempt, to a move's leaver that could not campaign (node/diskfull.go handOffTarget, seed
// 68), and a restarted node refused an allowed principal on metadata it had not confirmed current
// (node/auth.go, seed 197; then a node that had confirmed it once in the leader's term refused the
// same on a grant it had not heard of, seed 45 without features: the grant check and its probe,
// operator_grants.go).
// Cost: 192 seeds per CPU-minute drawn against 160 for the old fixed configuration, on 2 shared
// cores at load 3 (fewer checkpoints, segment rolls and raft ticks outweigh the longer virtual time);
// the standard sample with the draw on, 150–156 at load 10–15, 189 at load 3. Later features
// lowered it to 135–146 at load 6–10 (seeds 1-200, CPU time of the test binary); cutting waste
// without touching what a seed does (same hash) brought it to 166–168 side by side (issue 21
// item 4): the durability audit keeps a WAL-mode view across other logs' syncs and decodes and
// reads only a write-ahead log segment's new records, memdisk projections share durable bytes
// copy on write, partition digests are recomputed only when an input changed, raft's dropped
// debug lines are not formatted. What remains is flat (60-seed profile): the node core about half
// (Process, Receive, SyncDone, Tick, the wire requests), every replica's status after every event
// 10%, the audit 8%, allocation 20% spread over all of them, the final checks 3%.
//
// # The path
//
// At time 0 an admin client creates topics sim and sim2, RF 3, through CreateTopics (retention.ms
// 8–16 s, retention.bytes unlimited or 96/192 KiB, segment.ms 0.3–1.5 s, drawn per seed after every
// older draw). Producers (6: 3 keyed through murmur2, 3 keyless): every one runs clientlib's own
// producer on a simulated Client (clientlib.Simulated: batching, sequences, resends, leader cache,
// InitProducerId, topic ids in virtual time; wire_libproducer.go); producers 0–4 are idempotent, one in
// three with 2–5 retries, so batches fail while an attempt's outcome is unknown; the history files each
// record under the topic incarnation its promise names (Record.TopicID, TopicGoneError.OldID). The last
// producer is not idempotent (clientlib.DisableIdempotence) and never resends (MaxRetries 0, Kafka's
// retries=0, one batch in flight), so a record applied twice shows as a duplicate; Kafka's acks are per
// producer, so it runs three clients and sends each push at acks −1, or at 1 or 0 one push in five (never
// on the re-created topic; an acks=0/1 success is indefinite). 1–4 records per push, 1–5 batches in
// flight, one record in 24 of 1–2 KiB, records stamped on the nodes' epoch.
// Consumers: every one runs clientlib's plain Consumer over both topics (wire_libconsumer.go:
// Assign and Seek at an exact, earliest, latest, last-stable or timestamp start, long-polling Poll,
// read_committed in a third, metadata kept 2-8 s, as clientlib.SimRun tasks); every batch handed
// out must start at the position, in one topic incarnation (FetchPartition.TopicID), and is a
// history read; every raw fetch answer is recorded too, its high-water mark never below one an
// earlier fetch returned; a TopicRecreatedError seeks the new incarnation from its beginning, an
// OffsetOutOfRangeError anew; after the heal each reads every acknowledged record of the current
// incarnation from its seek point. Random readers (checkers) seek to random offsets (also below the log start, which must
// be refused; one fetch in three with a budget below a batch), half of them at any node, and issue
// ListOffsets and DescribeTopics. The admin deletes and re-creates sim2 three times a run
// (-sim.recreate) with clientlib's DeleteTopic and CreateTopic (strand topic delete/create's, as
// clientlib.SimRun tasks), each delete naming the id fresh metadata lists, kept for all the call's
// attempts (a run without an id sends nothing; 19 late deletes refused by their id in seeds 1-200, a delete held by a paused
// node and carried out after the admin's retry had re-created the topic removed the new
// incarnation by name: seed 516; UNKNOWN_TOPIC_ID from a lagging node's id re-learns it), and a
// re-create may meet TOPIC_EXISTS when an earlier create was left unanswered (it may still land
// after a delete; an acknowledged create after an unanswered attempt counts as one, from the
// simulator's network: clientlib's success does not say): clients name the topic id on every request and react to UNKNOWN_TOPIC_ID as
// clientlib does; the history and every per-replica check key on the incarnation (slots by topic
// id). Every request is a marshalled strandpb.Request over the simulated client link to
// Core.HandleAs; with -sim.kafka every other client's produces and fetches go through kafkaproto's
// encoder and handlers instead (acks=0 stays native). Options.GroupMembers (TestSimGroups: 4
// members, two static) runs the consumer group: applications consume the main topic on clientlib's
// own GroupConsumer (wire_libgroup.go: Poll, heartbeat, reconcile, commit on revoke, auto-commit or
// manual commits drawn per seed, run as clientlib.SimRun tasks in virtual time), process batches
// (now and then past the session timeout), crash mid-batch and restart, under the seed's faults.
// The session timeout is a second, or three election timeouts when the seed draws slower elections
// (world.groupSession: 3 s with production's ticks), so a coordinator's fail-over fits in a session
// as in production.
// Their OnAssigned/OnRevoked/OnLost callbacks say what each holds (never a partition another
// member held within half a session of its last answered heartbeat), their heartbeats, commits
// and offset reads are history ops (linearizable offsets, epochs fencing zombies, a member's
// epochs never going back; a probe commits at the epoch a live member just left behind), and
// after the heal they converge, balanced, and every acknowledged record below the final
// committed offset was processed. Every fresh coordinator's state, and a throwaway restore the
// leader runs each sweep, must equal the replay of its partition's whole uncompacted history
// (offsets_replay.go; planted OffsetsRestoreSkipsTail and OffsetsTombstoneInFlight), for
// __strand_offsets and __strand_transactions alike; with Options.CompactCoordinators (TestSimGroups,
// TestSimTxn, the Offsets bugs' catch tests; not the standard sample, where it made seeds 23 and
// 32 run out of events or not drain, undiagnosed) their segments roll each second, any dirt is
// worth a pass and snapshots come every 10 commands, so the restores meet compacted logs;
// Options.ClassicMembers (TestSimClassicGroups:
// 3) adds members of a second group speaking Kafka's classic protocol (JoinGroup, SyncGroup,
// Heartbeat through kafkaproto; commits in their generation) checked across coordinator fail-overs,
// their acknowledged commits read back while they run and once more after the heal
// (wire_classic.go). Options.Compacted (every seed; TestSimCompacted) runs a key-value
// workload on a compacted topic, sim-kv (cleanup.policy=compact; compact,delete in half those
// seeds, with small retention, DeleteRecords and an alter to compact at the end: wire_kv.go): clientlib's producer writes updates and tombstones over 24 keys (one write event
// in three a burst sent as one batch), clientlib's Consumer reads the partition from the start
// every 1.5 s and after the heal, and each read is held to compaction's promises ("kv:"
// failures); every replica's compacted prefix is checked as a power loss would leave it, after
// every pass and at every durable step of one, against its decision and every other replica's
// outcome for the generation ("compaction:" failures, prefixes.go), every offset below the
// highest prefix end stays on a majority of the replicas less the replaced or damaged disks, in
// their prefixes below a raft log's start (prefixheld.go), and crashes and power cuts
// are armed inside passes (compaction_cuts.go). Planted: CompactKeepsOlder, TombstoneEarly and
// CompactDropsLastRecord in engine/compact, CompactSwitchNotAtomic in raftlog/compacted,
// CompactActiveSegment, CompactDeleteUncut and PrefixTrimUnheld in node. Options.Txn (seven seeds in ten) runs the transactional workload
// (wire_txn.go): three transactional producers, each process a simulated clientlib Client with the
// id's TransactionalID driven as an application drives it (InitTransactions, BeginTransaction,
// Produce, CommitTransaction or AbortTransaction, in clientlib.SimRun tasks; half the commits right
// after the last Produce), commit and abort transactions over sim-txn's 3 partitions, crash
// mid-transaction (the task abandoned) or as their EndTxn(commit) leaves or just after, and
// re-initialize (fencing; the old process sometimes finishes as a zombie); each outcome is what
// clientlib reported (committed, aborted, indefinite once an EndTxn(commit) left). A reader (the
// simulator's own: a checker) follows the partitions at read_committed and after the heal reads them
// whole; the history goes to linearizability.CheckTxn ("txn:" failures); zombies are paused processes
// that wake up to 1.5 s later, often straight into their commit; such seeds checkpoint every 16 or 32 entries
// (WithTxn) so replicas restore the partitions' transactional state mid-run (digest: compares it);
// and every TXN_MARKER entry must apply after the coordinator's committed decision of its producer
// epoch, with the same outcome (wire_txn_decisions.go replays __strand_transactions). On the same
// seeds 1-3 members run consume-transform-produce with clientlib's TransactSession, as production
// clients do (wire_txn_session.go): they read the main topic, sim-txn and their own sim-txn-out at
// read_committed, write one output per input to sim-txn-out, and commit the consumed offsets in the
// transaction (AddOffsetsToTxn/TxnOffsetCommit), or abort one in three after sending them; crashes,
// crashes just before EndTxn(commit), pauses into zombies. Their transactions join the history
// CheckTxn checks (reads of sim-txn and sim-txn-out are write-read edges: G1a, G1b, G1c), and each
// input below the group's final committed offset has exactly one committed output, none at or
// above it has any, and none below it was consumed only by aborted transactions ("txn(session):"
// failures; the planted TxnOffsetsOnAbort, an abort committing the pending offsets, is caught in
// 62 of seeds 1-100 of the standard sample, 62 of the 69 that drew the workload, when 6 of the 7
// misses hit the 60 s time limit before the final checks; 68 of 69 once such seeds drain in
// overtime, the same seeds otherwise). They cost about 0.04 s of CPU per seed
// of the sample (151 against 168 seeds per CPU-minute over seeds 1-60, +8–16% in alternated runs),
// mostly the nodes' and the durability audit's work on their replicated writes. Storage is
// asynchronous as in the server: each sync job runs as an event after a drawn device delay
// (0.1–1.5 ms; one in 50 up to 20 ms, so logs complete out of order) — the memdisk makes the
// writes durable only then — and SyncDone a hand-off later; draws from their own stream. A log
// sync's job (SyncJob.RunWrite, RunSync) is two events: its writes within 0.1 ms of the hand-off,
// its fsync at the drawn delay, so a kill or power loss can land between them (a job's writes and
// fsync as one event left no unsynced bytes in the page cache once the appends' writes moved into
// the job, and the planted RecoverTrustsPageCache went uncaught). The recovery check (audit.go
// afterOpen) covers the logs Open recovers and, without the write-ahead log, each replica log that
// held unsynced data at the restart, when the replay starts its replica (audit/recovered-later). A fetch's
// cold log read is such a job too (its delay drawn as a fsync's; storage/cold-read counts them,
// fault/crash-before-read-done the crashes between one and its completion).
// Rejected: fsync at once with only the completion delayed (a crash in the window would keep the
// data, hiding an acknowledgement given before the fsync).
//
// # The operator and authorization
//
// An operator actor (operator.go, Options.Operator, on in Standard) sends every request type of the
// wire protocol once, in a drawn order spread over the run, plus 24 further changes: AlterConfigs
// (the main topic's max.message.bytes), DeleteRecords, committed offsets, OffsetDelete and
// DeleteGroups of its own group (one partition of __strand_offsets), users, ACLs and quotas of its
// own principals, ElectLeaders, and the reads of each; requests that must be refused (a NodeAdmin
// REMOVE of an unknown node, a move onto one, CreatePartitions not above the count, hello and raft
// frames). Every type with a clientlib admin call (what cmd/strand runs: CreateUser, SetQuota,
// AlterACLs, AlterTopicConfig, DeleteRecords, CommitOffsets, DeleteGroup, MovePartitions,
// ElectPreferredLeaders, RemoveNode, the transaction admin calls, ...) goes through it, as a
// clientlib.SimRun task of a Simulated Client authenticated as User:ops, retries included; the rest
// go raw, one attempt each (rawRequestTypes says which and why). It records what each acknowledged,
// what stayed ambiguous (timeouts, codes that may have written) and what was refused, as clientlib
// reported it (a definite error is "not applied" even after a retry over a lost answer). After the
// final drain it reads the state back through clientlib's reads (each part retried until it
// matches or LivenessBound passed): every cell must
// hold its last acknowledged value or an ambiguous one, a trimmed partition's log start at least the
// acknowledged one, the main topic its first id, every node active. In two seeds of three (its own
// stream; with every workload mix) authorization is on: the admin is a super user and
// creates users and ACLs through AlterUsers and AlterAcls before the topics; the workload and its
// group members send as User:app, the operator, the mover and the joins' administrator as User:ops, each
// principal proved by a SASL/SCRAM exchange on each simulated connection (sasl.go: production's
// sasl.ServerSession and sasl.ClientSession; clientlib's producers run their own per-connection
// exchange; the super user's clients connect with a TLS certificate principal), each with the ACLs
// it needs; a connection dies with its node's incarnation or when either side closes it, and the
// next request authenticates again (sasl/reauth-after-restart). An impostor claiming User:app with
// a wrong password must be refused every time and nothing it sends may reach HandleAs; a node may
// refuse a valid user's login only if the users' creation was not acknowledged when its connection
// was dialed (a login's refusal waits for the node's credentials confirmed current by a metadata
// read index, sasl.ServerStep.Confirm and loop.Round.ConfirmSecurity, as the ACL check's does; a
// confirmation that fails is a retriable UNAVAILABLE, or an unanswered close on the Kafka listener).
// Right after the admin's AlterUsers is acknowledged a probe logs in as User:app on every node that
// has not applied it (sasl/lag-probe). Planted SASLRefusesUnconfirmed (the refusal without the
// confirmation) is caught in 10 of seeds 1-30, the 18 that draw authorization
// (TestSimCatchesSASLRefusesUnconfirmed). Seeds 1-200 of make sim: 9,336 confirmations, 8,738 on a
// node lacking the user, 8,884 failed (nearly all: no metadata leader known, a restarted or cut-off
// node) and answered UNAVAILABLE; 53 lag probes; no refusal of an acknowledged user. A client that
// speaks Kafka for a request (the Kafka codec's, classic members) authenticates a Kafka connection
// of its own through the Kafka listener's gate, kafkaproto.SASLGate (kafka_sasl.go: SaslHandshake
// v1, SaslAuthenticate v2 steps carrying sasl.ClientSession's messages); a request passes a gate
// only after its client verified the exchange, as its own principal; a Kafka impostor (six
// attempts: a fetch right after the handshake, a wrong password with a fetch pipelined behind, a
// fetch before any handshake) gets only refusals and closed connections. Seeds 1-200 of make sim:
// 1,575 Kafka exchanges (386 after a restart), 1,113 refusals (470 of a request before
// authentication, 604 of the impostor's attempts). Planted KafkaHandshakeAuthenticates (the gate
// passes requests once SaslHandshake named a mechanism) is caught in 23 of seeds 1-40 and 121 of
// 1-200 (TestSimCatchesKafkaHandshakeAuthenticates; 0 before the gate ran in the simulator). Planted
// AcceptsAnyProof (the server's step takes a wrong proof) is caught by the impostor check in 60 of
// seeds 1-100 (TestSimCatchesAcceptsAnyProof; 0 before SASL ran in the simulator). Seeds 1-200:
// 32,980 exchanges (22,587 by clientlib's own), 9,945 after a restart, 534 impostor refusals and
// 13,514 refusals by a node whose metadata lagged; CPU as before (14.4 s against 15.0 s, seeds 1-20). An intruder (a user no ACL names) sends every
// request type twice, through a clientlib Client with its own SASL credentials where the operator's
// goes through clientlib (raw where clientlib would route by what it may not read: partition leaders,
// group and transactional-id coordinators), and each answer must be an authorization refusal (per partition for produce,
// fetch and list offsets; listings list nothing; UNAVAILABLE from a node still replaying its
// metadata), and nothing it asked for may show in the read-back. Every request that reaches a
// node counts in a request/<type> coverage row, one per field of strandpb.Request's body read from
// the descriptor; TestSimRequestCoverage fails on a zero. Planted AuthSkipsAlterQuotas (one request
// type's authorization check skipped) is caught in 118 of the standard sample's 200 seeds
// (TestSimCatchesAuthSkipsAlterQuotasInSample; 3 of 30 while authorization stayed off in seeds with
// groups, moves or joins), in 0 of 200 without the operator (TestSimAuthCatchRate). Planted
// LibAdminDropsRefusal (clientlib's user, ACL and quota calls take a definite refusal for success)
// is caught by the intruder's clientlib calls in 125 of seeds 1-200 (TestSimCatchesLibAdminDropsRefusal;
// 0 while the operator sent raw requests: no simulated client called them).
// The grant check (operator_grants.go): a request of User:app or User:ops that reached a node after
// the grants allowing it were acknowledged is never refused (whether they allow it all is asked of
// package node/authz over a state of those grants alone; any request kind, native or Kafka). The
// bootstrap grants come before the workload, when every node has just applied them, so a grant
// probe grants User:ops DESCRIBE on a group "probe-N" of its own up to 16 times a run while the
// workload runs and, once acknowledged, asks every node for that group's coordinator. Planted
// AuthRefusesUnconfirmed (a refusal decided on applied metadata no read index confirmed current) is
// caught in 17 of seeds 1-30 of the standard sample (TestSimCatchesAuthRefusesUnconfirmed; 13 with 8
// probes, 0 with the bootstrap grants alone), and in seed 45 without features, which found the
// production bug.
//
// # Quotas and throttled connections
//
// In half the seeds (Options.AppQuota, drawn last) the admin's bootstrap sets a produce and
// fetch quota of 16 or 64 KiB/s per node on the workload's principal (User:app with
// authorization, User:ANONYMOUS without), so its clientlib clients are throttled. A node that
// answers a clientlib connection with a throttle reads nothing more on it until the throttle ends
// (wire.go deliver, loop/throttle-held), as node/server's listener pauses its reader, and the
// check in libTransport.Close (sasl.go) fails the run when a client gives up a connection inside
// the throttle its node told it (throttle_ms from the answer's arrival, as clientlib counts it):
// that is a healthy node suspected and a fresh, unthrottled connection. A connection closed for
// another reason the client cannot help (an answer that did not decode, a frame the node refused)
// is exempt, and a throttled answer the network lost tells the client nothing. Planted
// LibIgnoresThrottle (clientlib ignores throttle_ms, as clients did before KIP-219): 7 of seeds
// 1-60 (27 drew a quota); it shows only when a throttle outlasts a following call's wait plus the
// stall bound. The first run of the check found two bugs: clientlib ignored throttle_ms
// (TestClientHoldsThrottledConnection, real processes), and the Kafka codec's client-side decode
// dropped it (kafkaproto TestTranslateRoundTrip). A clientlib coordinator request (a heartbeat, a
// commit, a transaction call) on a connection its node throttled for a produce or fetch fails the
// run (coordconn_check.go; clientlib keeps a coordinator connection of its own): planted
// LibCoordinatorBehindThrottle, 11 of seeds 1-60 with groups forced on (27 drew a quota).
//
// Every native fetch answer goes to its client as a node's listener writes it: through
// frame.AppendSpliced (the envelope marshalled around the stored batches, which are written as
// they are), every batch spliced, the bytes marshalWire's (corrupt.go answerFrame). Planted
// SpliceStaleHead (a spliced batch written with the head piece of the batch before it, a reused
// write vector): caught at seed 1 by the linearizability check. Every Kafka fetch answer goes
// through kafkaproto's spliced encoder too (Translation.Answer, every stored Kafka batch spliced,
// the bytes kmsg's). Planted KafkaSpliceStaleBase (a spliced Kafka batch written with the base
// offset of the one before it): caught at seed 5, 6 of seeds 1-12 (every one with the Kafka codec).
//
// # Faults
//
// Each counted in the run's sim: coverage line (TestSim requires every kind in its sample):
//
//   - crash (power loss: unsynced data lost, the last write possibly torn) and process kill (page
//     cache survives); cuts inside a round (the disk stops at one of the next 16 writes), during
//     recovery (a second cut inside Open), 0–4 operations after a checkpoint or segment file is
//     created; a rolling restart; fsync failure (fail-stop); pipeline crash points:
//     fault/crash-before-fsync (fault/kill-before-fsync when a kill strikes after a log sync job's
//     writes, leaving them unsynced in the page cache) and fault/crash-after-fsync (before the node
//     heard of it);
//   - network: symmetric and asymmetric partitions, leader isolation, follower isolation for
//     retention.ms + 2 × segment.ms + 1–4 s (the leader's log start passes it: it catches up by
//     snapshot; one such cut at a time, as a group of three tolerates one node cut off), drops,
//     duplicates, reordering;
//   - disk damage on at most (RF-1)/2 nodes: bit flips in synced data and failed reads (the replica
//     is repaired), and whole-disk wipes (the node rejoins empty, -sim.wipe-rejoin, on by default);
//     full disks (capacity = used + the 256 KiB floor + up to 128 KiB, lifted later) in half the
//     seeds; the catch-up throttle in a third;
//   - client frames damaged in flight at 0–3% (-sim.corrupt): a bit flipped inside a carried batch
//     (a produce must be refused CORRUPT_BATCH, nothing committed may hold a damaged batch, a
//     damaged fetch answer is refused and retried, every delivered record is one a producer sent)
//     or a frame cut short (only that connection closes);
//   - starve-leader: an overloaded leader (one whose peers can elect without it) ticks at a fifth
//     and is cut off from its peers while clients still reach it; overload incidents (7 seeds in 8,
//     1–3 a run once 20–60% of the operations are issued): a leader's host whose peers are healthy
//     runs its timer 5, 10 or 20 times late and loses its peer links for 1–3 s, clients still
//     served, and no other fault starts meanwhile (the "one overloaded broker" of real clusters;
//     dense overlapping faults alone almost never let a deposed leader serve a read after a newer
//     acknowledged write);
//   - disk stalls (diskstall.go, half the seeds, 1–3 a run once 10–60% of the operations are
//     issued, a second apart): a partition leader's node whose peers are healthy and can elect
//     without it has every fsync hang for the stall threshold (Config.DiskStallAfter, else an
//     election timeout) plus two election timeouts plus 1.5–3 s (the quiet probe's heal ends it;
//     the liveness heal does not), with no other fault, overload, fsync crash point, rolling-restart
//     kill or move's targeted crash meanwhile; a due episode waits up to 1 s for the faults under
//     way to end, then ends them as an incident does, so it runs in every seed that draws it. Once
//     the cluster has been fair (peers up, unrestarted, connected, unpaused, with space; the victim
//     in the incarnation whose fsync hung) for the threshold plus two election timeouts plus 1 s,
//     counted from the first hung fsync at the earliest, every group it led then or leads now must
//     be led elsewhere (a restart meanwhile restarts the wait, and the episode runs up to a bound
//     longer for it; groups too few others run are skipped, and counted); a group led by nobody
//     while node frames were lost gets a second look an election round later, the stall extended
//     (seed 197: a handover's vote requests lost in two rounds). Planted
//     StalledLeaderKeepsLeading (the watchdog blind) is caught by nothing else: 139 of 200
//     sample seeds (stalls forced on where a seed drew none, as WALAckBeforeFsync forces the WAL),
//     against 51 before: in two seeds of three the episode never began (a spare not joined yet or
//     a node gone for good kept the peers "unhealthy"; faults under way outlasted the wait at
//     production's ticks) or its check was voided (a rolling-restart kill, the liveness heal
//     ending the stall); 0 of 100 with stalls off;
//   - scheduled disk-loss incidents (incidents.go, every seed once 2–8% of the operations are
//     issued; each heals the faults under way and holds the random mix while its chain runs):
//     *repair under a concurrent failure* (L cut off so X and A commit what it misses; X loses
//     power with a bit flipped in each newest segment, A loses power, X restarts and repairs: X's
//     vote alone decides whether L may lead); then one overload; then *disk replaced during a
//     broker outage past retention* (L down; every host's clock steps a minute or an hour so
//     retention trims and leaders compact past L; a survivor's disk fills for 1–3 s; X's disk is
//     replaced, A loses power, L and X return: X must withhold its vote, L must catch up by
//     snapshot). General chains, blind to any planted bug. Rejected: waiting out retention in
//     virtual time (the workload ends first), random incident order (a repair after the clock step
//     finds nothing to damage);
//   - clock jumps (±1 s, 1 min, 1 h), per-node skew, tick drift (10% or 50%, half the seeds);
//     crashes in a leadership change; pauses of 3–8 election timeouts (input delivered out of order
//     on resume, lost if the node crashes meanwhile); leader chains (uncommitted tails of several terms); raftlog's tail cache off in a
//     third of the seeds.
//
// # Teeth beyond the history
//
//   - Durability audit: whenever a node makes a durability promise, the simulator asks whether a
//     power loss at that instant would keep it: raftlog/audit reopens memdisk.ProjectCrash(dir)
//     (what a crash would leave; the live disk untouched) with the real raftlog.Open. The world
//     decodes every raft frame a node sends (no node hook): a message's term must be durable, an
//     accepting MsgAppResp promises its log up to Index, a vote promises the vote; every acks=1/all
//     answer must find its batch in the leader's projected log. One durable state in 6 is audited
//     (-sim.audit=N; votes always). A fsync or ordering bug then fails in nearly every seed.
//     Rejected: checking byte ranges of live files (leaks raftlog's layout into the checker).
//   - State digests: engine.Partition.Digest() (applied index, log start, high-water mark, sums of
//     per-element hashes of the offset index and producer table, O(1) per entry) and
//     metadata.State.Digest(); every replica reports its digest in GroupStatus.Digest, and the
//     simulator replays committed entries into a reference engine per group (__strand_offsets
//     partitions included) and compares every replica at every applied index, and each checkpoint
//     written (the newest a power loss would keep, again whenever its index chunks change). A restore or checkpoint that forgets state fails at the first divergent index
//     (RestoreIndexTimes is seen by no client-visible check, only here).
//   - Recovery check: right after Open, every log it recovered must already be synced (raft treats
//     recovered data as stable): the page cache of a killed process is never trusted.
//   - Full-disk leadership (fullcheck.go): a node whose disk is below its floor must lead, past its
//     space-check interval + two election timeouts + 1 s, no partition another voter with space
//     that reaches it and a majority could lead (check/full-disk-leader), and within four election
//     timeouts more some replica leads it (check/full-disk-served); seeds that draw full disks run
//     one episode holding a leader's disk at half its floor, in half of them crashing and
//     restarting it at once (fault/disk-full-restart; fulldisk.go). FullLeaderKeepsLeading.
//   - Coverage: each run prints a sorted table of faults fired, rare events (elections,
//     truncations, checkpoints, duplicates, TRIMs, compactions, snapshots sent and installed, rolls
//     by age, rejoins, repairs, full disks, throttled appends, ...) and checks made;
//     TestSim fails when an expected name stayed at zero over a sample of at least 160 seeds (CI's
//     200; the rarest, a power cut inside a checkpoint write, came first at seed 108).
//
// # Profiles
//
// Safety: faults throughout; a run that reaches the 60 s time limit without one successful produce
// fails (the cluster never came up). Any other safety run at the limit goes into overtime
// (overtime.go): no new operation is issued (no further re-creation or move; a grow or join still
// due is made, as when the budget runs out), the random faults, incidents, disk stalls, overloads
// and rolling restarts stop, and once a running incident's chain ended everything heals (nodes
// down restart); that heal starts the liveness bounds below. The clients end, the quiet probe is
// skipped, the final heal, settling and drain run with every final check; a run not drained
// DrainGrace (30 s virtual) after the limit fails, and the event budget grows by DrainGraceEvents
// (100,000). Before, such a run stopped undrained and skipped every check that needs the drain:
// 12 of seeds 1-200 of the standard sample reach the limit, each drains 1.5–10 s after it; the
// other 188 run as before (same hashes). Of seeds 1-100, planted TxnOffsetsOnAbort is caught in 68
// instead of 62, AckLeaderEarly 42 instead of 41; LSOPassesOpenTxn (58), RecoverTrustsPageCache
// (82) and WALAckBeforeFsync (46) miss no time-limited seed. With the re-creation by id (every
// trace shifted) 7 reach it and drain 1.6–12.2 s after it, and the five bugs are caught in 65 (of
// 69), 59 (of 69), 43, 85 and 44 of seeds 1-100: the shift loses a few seeds caught before the limit
// (TxnOffsetsOnAbort: 62, 66, 97) and gains others. An intermediate variant (the admin
// asked a node for the id before every delete) failed seed 149: two of clientlib's producers held
// records for sim/1 whose promise never ran, 15 s past their 8 s delivery timeout (open: a latent
// bug of clientlib's producer loop that seeds 1-200 no longer reach).
// Liveness: after half the operations (or 10 s virtual) everything
// heals once the incidents ran (a set-up not done by then gets a pause of the faults), and every
// partition must have a leader and every operation finish within 10 s virtual (not counted while the
// quiet probe runs: it crashes a leader on purpose and bounds the election itself). Mixed picks per
// seed. Quiet probe (every seed, once the clients finish): faults stop and the network heals but no
// node restarts (a restart's fresh campaign would wake what quiescence put to sleep); after 500 ms
// idle the node leading most groups crashes in two seeds of three, and within 3 s plus 8 election
// timeouts every group with
// a live majority must have a leader a majority names. The election watch (elections.go, every
// seed, all run long, faults and all) holds every group to the same bound wherever the faults leave
// a majority of its voters healthy and reaching each other: its time without a leader counts only
// then, in windows, each window after the first allowing two more election timeouts (a replica's
// timer fires within two of a window's start). The final heal then restarts every node that
// can, and the liveness bounds count again from that restart. A final drain reads every partition
// to its high-water mark. A Porcupine check that runs out of time fails the seed (counted apart as
// inconclusive=); with the layout-bounded model none does in 200 seeds.
//
// # The standard sample's features
//
// TestSim and make sim draw each seed's workload features from a stream of their own (features.go,
// DrawFeatures; -sim.features=false, make sim FEATURES=0, runs without): the group workload in half
// the seeds; 5 nodes with moves, with joins (half of them then decommission nodes: one, two in series,
// two overlapping, or one while the last spare joins) or with both in half; topic growth wherever groups do not run; the WAL in one in eight; the Kafka codec in half. So a
// seed sees a move of the group's __strand_offsets partition off its coordinator (one move in two
// with groups; the added node takes the coordinator's place as preferred replica, and once the move
// settled the mover balances the leaders as `strand cluster leaders --balance` does, so the
// coordinator restarts on a replica new to the partition) during a rebalance, a join during a disk
// replacement, a decommission racing the mover. A group member reads every partition's committed
// offset (one OffsetFetch, a history op per partition) from every coordinator it finds, so a
// coordinator's restored state meets the history at once. The coverage table has a feature/... row
// per feature, and TestSim (40 seeds or more) requires each feature and its main event. Moves and joins together: a move adds only active
// unfenced nodes; a move or cancel refused because the membership changed under it (a node fenced,
// the decommission's own move) is the operator's race, not a finding; a move the decommission moved
// on must be settled where the metadata puts it; a removed node's metadata is not consulted. The
// side runs (TestSimGroups, TestSimMoves, TestSimJoins, TestSimWAL, TestSimKafkaCodec,
// TestSimAddPartitions) stay as focused extras on seedOptions, which draws none of these.
//
// # Invariants
//
//   - at most one leader per term per group (metadata group included): checker.onStatus, after
//     every Process
//   - replicas that applied index i applied the same entry (term, digest): checker.onApply (the
//     Observer)
//   - replicas at the same applied index report the same high-water mark:
//     checker.checkHighWatermark
//   - a client's high-water mark never moves back; a fetch below one already seen is never out of
//     range: the clients
//   - served batches decode: fetch replies
//   - a node with no injected disk fault never fail-stops or panics; no event storm (200,000
//     events, 100,000 more in overtime): the world
//   - liveness after the heal: leaders for every partition, every operation done within the bound:
//     checker.onOpDone, checker.livenessCheck
//   - a replica restored from a snapshot matches by TailDigest inside the snapshot's window, by the
//     whole digest after its TRIM: simnet/digests.go
//   - groups: no partition held by two members (each by its own timer), zombie commits refused,
//     convergence to a balanced cover after the heal: the group workload
//   - clientlib's group: every batch handed out is a history read; no commit passes a record handed
//     out and not processed; at-least-once: every acknowledged record below the final committed
//     offset processed by some member (wire_libgroup.go)
//   - clientlib's plain Consumer: every batch handed out starts at its position (seek target,
//     resolved start, or past the last handout) and Position agrees; after the heal every
//     acknowledged record from its seek point was handed out (wire_libconsumer.go)
//   - linearizability per partition (Porcupine; Unknown fails) and the Jepsen log checks (lost
//     write, duplicate, inconsistent offsets, nonmonotonic send/poll, poll skip, G1a, key order,
//     read beyond hwm, unseen): linearizability.Check with FinalDrain
//
// # Determinism
//
// Every event, node open, crash, fault and applied entry is folded into an FNV-1a trace hash;
// TestSimDeterministic runs a seed twice. Every failure prints its replay command.
//
// # Figures
//
// On 2 shared cores: make sim SEEDS=200 failed=0 inconclusive=0, same hash twice; FEATURES=0 ran 174
// seeds per CPU-minute at load 2 (frames and applied entries hashed by length and CRC-32C; the
// profile is flat: Process 33%, wire workload 14%, audit 7%); with the feature draw 175 against 191
// for FEATURES=0 side by side at load 2 (145 against 156 at load 10). Planted MoveRacesRebalance (a coordinator on a moved-in
// replica starts at the log's end): 0 of 200 seeds with FEATURES=0, 122 of 200 with the draw and
// groups and moves forced (sampleOptions), against 70 before the coordinator's partition moved to a
// preferred replica new to it with the leaders balanced after, and before members read every
// partition's offset from each coordinator they find (54 against 66 of seeds 1-100 for that read
// alone). Planted LibAutoCommitFetched (clientlib's auto-commit
// after Poll's fetch: records committed before the application processed them): 149 of 200 group
// seeds (groupOptions; TestSimCatchesLibAutoCommitFetched), 0 of 200 without the clientlib members
// (the simulator before them ran no clientlib consumer code); the library members add 4.5% events
// to seeds 1-200 (149 seeds per CPU-minute against 145 without them, side by side at load 10). Planted
// LibSeekSkipsTarget (clientlib's Seek to an exact offset lands one past it): 181 of the sample's 200
// seeds with the plain consumers (TestSimCatchesLibSeekSkipsTarget), 0 of 30 without them (nothing
// else the simulator runs calls Consumer.Seek); they cost 5–11% CPU (120 against 133 seeds per
// CPU-minute over seeds 1-200 side by side at load 4, 90 against 94 over 30 seeds at load 35) and found two clientlib bugs: a lagging node's metadata made a
// live topic look deleted (the consumer stopped for good), and a Poll handed out records before a
// corrupt batch with a high-water mark below them. Catch rates (make sim-bugs SEEDS=N,
// TestSimCatchRate with StopAtFailure): every planted bug of the standard run in 30–50 of 50 seeds;
// the three that need an incident's chain, of 200 seeds: RepairTrustsItself 113, WipedNodeVotes
// 127, StaleSnapshot 138. TestSimCatchesPlantedBugs runs each bug's pinned first catching seed and
// falls back to a 1–200 search that names the seed to pin. Options off by default (each re-draws
// every seed): Moves (TestSimMoves, 5 nodes: moves proposed during the workload, one in four
// cancelled, targeted crashes of the leader mid-move, in the joint configuration, or of an added
// node; checks every move finishes or rolls back after the heal and hosts and voters equal the
// metadata; planted MoveDropsOldReplicaEarly caught in 17 of 20), Joins (TestSimJoins, -sim.joins,
// make sim JOINS=1: 3 voters and 2 spares; spares are registered over the wire and open with
// Config.Join; half the seeds decommission through the planner, MovePartitions and REMOVE (wire_joins.go
// decomMode): one node after the joins (2 in 5 of them), two nodes in series (1 in 5) or
// overlapping, the second's DECOMMISSION sent once the first's moves were recorded (1 in 5), or one
// node whose DECOMMISSION follows the last spare's ADD, the joiner not yet a metadata voter (1 in 5;
// event/decommission-during-join counts only those answered before its promotion); the node
// refuses none of these (as Redpanda and Kafka, it fences a second node while the first drains: a
// plan with no eligible target waits, and startDecommission keeps three active nodes for rf 3);
// the drain plans no move onto a node lost for good (it redirects one in progress that adds one, and
// cancels the latest decommission, ACTIVATE, when too few nodes remain for the replication factor);
// crashes of the joiner, of the metadata leader while a learner waits, of each drained node (one
// decommission in six holds it down from its DECOMMISSION until its REMOVE is answered, one REMOVE in
// four stops it first: a node down across its own removal); after
// the heal the metadata configuration must be what the state asks (a removed node that is down may
// stay a learner, or a voter never demoted, through the leader's removal grace, 30 election
// timeouts: not checked after it),
// joined nodes active, every removed node listed by no partition and hosting nothing, every
// partition a decommission moved hosted with raft voters exactly its metadata replicas on every
// live member (unsettledDrain); planted RemoveBeforeCaughtUp caught in 4 of 50 seeds of make sim-bugs
// with -sim.joins (seeds 2, 21, 30, 45; 6 of 50 before the decommission modes and the held-down
// drained node: still rare, the drained node must miss its own moves), pinned at seed 21 of
// TestSimCatchesJoinBugs), WAL (TestSimWAL, -sim.wal: the node-wide write-ahead log with its pipeline crash points;
// planted WALAckBeforeFsync at seed 1), AddPartitions. Entry points: make sim (SEEDS, SEED_START,
// PROFILE, BUG (builds with simbugs), OUT for Porcupine HTML, V), go test ./simnet -run '^TestSim$'
// -sim.seeds=N -sim.seed-start=S -sim.v; make test runs 200 seeds.
//
// The other administrators (the mover and its canceller, the joins' administrator, the grower,
// the admin's topic creates and re-creation) send through clientlib too, since the eleventh session: MovePartitions
// (moves, cancels, roll-backs, the decommission's drain moves), AddNode, SetNodeDecommissioning,
// ActivateNode, RemoveNode, CreatePartitions, DeleteTopic and CreateTopic, as SimRun tasks with
// clientlib's retries; a call clientlib gave up on is run again as an operator reruns the command
// (bounded). Their outcomes go to the same checks as before: acknowledged, maybe applied as
// clientlib reports it (clientlib.MaybeWritten, also after a node took the request unanswered and
// another refused it within one attempt), or definitely refused. What they still send raw is
// rawAdminRequestTypes (operator_requests.go; ww.call panics on any other): their metadata view,
// the bootstrap of authorization and of the workload's quota, and the leader balance after a move.
// Planted LibUnsureForgotten (clientlib's admin calls forget, within one attempt, a node's
// unanswered attempt when another node then answers) is caught by the admin's creates
// (TOPIC_EXISTS with no attempt that may have created it) in 49 of seeds 1-200
// (TestSimCatchesLibUnsureForgotten; below half: the path needs a lost answer followed, in the same
// attempt, by another node's refusal; clientlib's own check is
// TestAdminLostAnswerAtOneNodeIsMaybeWritten).
//
// Not covered: Byzantine disks and damage on a majority of a group; damage within 4 KiB of a file's
// end (indistinguishable from a torn write); Kafka admin APIs (the Kafka codec carries produce,
// fetch and, in TestSimClassicGroups, the classic group protocol); slow disks beyond the drawn
// fsync delay; memory pressure; clocks that run fast (ticks are slowed and stopped, never sped up,
// so a lease outliving an election is never made short); clients that refresh metadata
// unprompted; chains of faults beyond the scheduled incidents; more than two decommissions, or a
// decommission cancelled (ACTIVATE); two operators' decommission tools running at once (one admin
// client interleaves both drains); TLS (node/server), the Kafka SASL gate on clientlib's
// connections (they authenticate natively; their Kafka-encoded requests ride those), SaslHandshake
// v0 and ApiVersions before authentication, SASL in the seeds with authorization off, corruption
// of SASL frames. Nor: elections asked for (answered, not checked), concurrent admin requests
// (the operator sends one at a time), clientlib's sockets and wall-clock timers (its connections
// run inside, the transactional producers' and consume-transform-produce members' too: a Hello
// answered by node.AnswerHello, a refusal from a node whose process is down, SASL, the request
// deadline, stall verdicts and quota throttles in virtual time, clientlib/sim_conns.go and
// sim_watch.go; a node pauses a connection it throttled, wire.go deliver), node/server's sockets,
// goroutines and budgets (its loop round, security view, bootstrap user, quota meter and storage
// pool shape run inside: node/loop), and the kafkaproto server's per-connection ordering. Random
// readers (they read any replica), the drain, the classic members and the transactional
// workload's read_committed reader are the simulator's own clients; so are the administrators'
// metadata views, the authorization bootstrap and the mover's leader
// balance (rawAdminRequestTypes), and the operator's request types no admin call sends
// (rawRequestTypes: offset_delete, which cmd/strand offers no command for, find_coordinator on its
// own, and the protocol's runtime and data-path types).
package simnet
