// Package server runs a node.Core in a real process: one goroutine (the loop) owns the Core; TCP
// listeners, connections, the peer transport, the OS disk and the real clock live here, so package
// node stays pure and go list proves what the core imports.
//
// server.Start(cfg) runs one Core with the Clock (time.Now), the Disk (osdisk under the data
// directory) and the Network (TCP) of a real process. The loop's socket-free part is package
// node/loop (a loop.Round: the inputs handed to the Core, Process, the post-round steps, the quota
// meter), which the simulator drives too; what stays here (the storage pool's goroutines, budgets,
// transport, TLS, the SASL steps' socket IO, a throttled connection's read pause) runs outside it.
//
//	native conns: reader ─► requests chan (8192) ◄─ Kafka conns (kafkaproto) ─┐    storage pool (8 workers):
//	              writer ◄─ answers chan (1024)                               │    SyncJob.Run ─► results + wake ─┐
//	peer connections (readers) ───────► frames chan (4096) ───────────────────┤                                   │
//	ticker (10 ms) ───────────────────────────────────────────────────────────┤◄──────────────────────────────────┘
//	                                                                          ▼
//	  loop goroutine: take inputs (the first, then up to 4096 waiting) into a loop.Round, Round.Run()
//	  (Process, metadata note, security view, bootstrap user), submit the round's storage jobs ─► pool
//
// The parts:
//
//   - One goroutine owns the Core; everything else talks to it through bounded channels, so the
//     Core needs no lock.
//   - Storage pool: after each Process the loop submits the Core's sync
//     jobs to syncWorkersMax (8) workers; a finished job queues its result and wakes the
//     loop through a capacity-1 channel. Job and result queues are slices under a mutex, so neither
//     side blocks on the other (bounded by one job per log). A job has no deadline: an fsync that
//     never returns stalls its group's appends (and, on a leader, its acknowledgements) while
//     heartbeats keep it leader; a watchdog that fail-stops is an open gap. Rejected: channels both
//     ways (a bounded channel in both directions can deadlock the loop with its workers).
//   - Kafka listener (kafka.go): Config.KafkaListen/KafkaAdvertise start a kafkaproto server whose
//     backend is the loop's request queue (same byte budget, same Core.HandleAs); the advertised
//     address is registered in the metadata group. Node flags fill the Core's node.Config:
//     --min-free-bytes (MinFreeBytes), --catchup-bytes-per-sec (CatchUpBytesPerSec),
//     --disk-stall-after (DiskStallAfter); strand dev
//     also sets SegmentBytesMax/SegmentAgeMax.
//   - Ticks: 10 ms; election 100 ticks, heartbeat 10, request timeout 500. Fail-stop: a Process
//     error shuts the node down, Done() closes, Err() says why; strand serve exits 1.
//   - Backpressure: 1024 request slots per connection (the answer channel has the same capacity, so
//     the loop never blocks on a slow client); a byte budget of 256 MiB for everything queued for
//     the loop (a weighted semaphore: a frame's units taken at once, waiters in order); a fetch reserves its max_bytes until its answer is written, from its connection (32
//     MiB: past it the reader takes no new request, so TCP pushes back) and the node (512 MiB);
//     produces reserve nothing; at most 4096 connections. Both listeners run on one connection
//     stack (package listener: accept, TLS, reader and ordered writer, slots, answer budgets,
//     throttle, close, drain), so Kafka fetches reserve the same way, from the same 512 MiB, and
//     give the room back only once their answer is written. A malformed or oversized frame closes
//     only its connection, with a logged reason.
//   - Peer transport: Send never blocks; per peer a bounded queue (1024 frames, 64 MiB), dropped
//     when full (raft retransmits); one outbound connection per peer with a jittered reconnect
//     backoff (drawn from [d/2, d], d doubling 20 ms → 1 s, so nodes restarted together do not
//     redial in lock-step); the Request{raft} envelope is built and parsed by hand around the frame
//     bytes (no re-marshal).
//   - Shutdown (SIGTERM/SIGINT): stop inputs, close both listeners, then the pool (fsyncs in
//     progress finish), then Core.Close fails waiters; then every connection of both listeners has
//     2 s in all to write the answers that are in (one not in is not waited for) before it closes.
//   - Data-directory lock: Start takes an exclusive non-blocking flock on DATA_DIR/LOCK and writes
//     its pid there; a second holder (another process, or another server in this process: flock
//     belongs to the open file description) gets *DataDirLockedError naming the pid. The kernel
//     drops the lock with the process, so kill -9 needs no clean-up. Rejected: pid files checked
//     with kill(pid, 0) (stale after kill -9, pid reuse), O_EXCL create (manual clean-up).
//   - Bounded raft frames: at most frame.PeerFrameBytesTarget (2 MiB; with one message over it,
//     under ~3.2 MiB), well below the 9 MiB read limit both sides share (proto/frame), so a
//     restarted node's catch-up is never refused. At a failed dial the transport drops what is
//     queued for the peer (fresh catch-up instead of stale heartbeats).
//   - Hello answers with the node id, frame_bytes_max (clients size requests by it) and the cluster
//     id.
//   - Fault switch for real-process tests, only with -tags faultinject: while
//     STRAND_FAULT_ISOLATE_FILE exists the node drops (or, if it says stall, stalls) its peer
//     traffic. make test-faults runs the heal test with it.
//   - Admin listener (admin*.go, console/): --admin-listen (strand dev: base port + 200) serves
//     /metrics, /healthz, /readyz, /debug/pprof/*, a JSON API (/api/cluster, /api/topics,
//     /api/groups, /api/transactions) and the console at /, for every Server of the process. One source: the HTTP side
//     asks the loop for Core.AdminView (a copy of metadata, hosted replicas with follower progress,
//     coordinated groups with lag, stats) through a 16-slot queue, answered between two Process
//     calls (0.5–0.7 ms at 600 replicas; a full queue fails at once, 5 s deadline). A node serving
//     TLS serves it over HTTPS with its certificate (reloaded with it) and --tls-client-auth
//     (TestAdminServesTLS); without TLS it is plain HTTP, and serve warns when it listens beyond
//     loopback. Metrics are one custom prometheus.Collector over one view per scrape, every series
//     labelled node: per replica high-water mark, log start, size, leader, term, under-replicated,
//     offline; follower lag; group committed offset, lag in records (to the high-water mark, and
//     strand_group_lag_stable_records to the LSO: Kafka does not record a group's isolation) and
//     seconds, retention headroom; move progress (strand_partition_move_progress_ratio on the leader,
//     strand_partition_moves_in_progress); histograms of commit latency (proposal → apply by the
//     Core's Clock), storage jobs (SyncJob.Run), each Core.Process call on the loop
//     (strand_loop_process_seconds: its top bucket is the longest stall of every partition),
//     produce (by acks) and fetch requests; bytes in/out; disk
//     free. Transactions: strand_txn_begun_total, _committed_total, _aborted_total (every abort
//     decided: by the client, a timeout, a new producer of the id or strand txn abort),
//     _timed_out_total (counted by the coordinator that proposed them), _marker_retries_total,
//     strand_txn_open and strand_txn_oldest_open_seconds (coordinators the node leads) and per
//     replica strand_partition_lso_lag_records (high-water mark − last stable offset); test:
//     TestMetricsTransactions. /api/transactions has the same figures per node and summed, with
//     the partitions held back (LSO < high-water mark), and the console draws them
//     (TestAdminAPITransactions, cmd/strand TestConsoleTransactionsInBrowser). Compacted topics
//     (issue 24, admin_metrics_compaction.go), per replica of a topic that compacts or did:
//     strand_partition_compaction_dirty_ratio (dirty / (clean + dirty), what
//     min.cleanable.dirty.ratio is compared with), _dirty_bytes, _clean_bytes (the prefix: the last
//     pass's output), _generation and _cleaned_to_offset (the last pass reported done),
//     _last_decision_timestamp_seconds, _in_progress, _stuck, and the replica's last pass:
//     _last_pass_bytes_in, _last_pass_bytes_out, _last_pass_seconds (gathering to switch, on the
//     node's monotonic clock); per node strand_compaction_passes_total,
//     strand_compaction_diverged_total, strand_compaction_bytes_in_total and _bytes_out_total.
//     /api/topics carries the same per partition (the last pass's figures too) and the
//     console lists it under the topic's table (TestCompactionVisible). /readyz is 200 once the node is registered, knows a metadata leader and every hosted
//     replica knows a leader and is within 256 entries of its commit; else 503 naming why. /readyz
//     is the node's *own* readiness: a peer that is down leaves the others 200 (what a load
//     balancer wants). Cluster health (liveness.go): every node sends every peer a liveness frame
//     per raft tick (carrying its disk state); a peer not heard from for three election timeouts is
//     down (≈3 s). A follower on a down node counts as under-replicated whatever its lag
//     (FollowerView.Silent), in strand_partition_under_replicated,
//     strand_partitions_under_replicated, the admin JSON and DescribePartitions.lagging_replicas.
//     Health is exposed as strand_peer_up, strand_peer_last_contact_seconds,
//     strand_cluster_nodes_down (each node's view), /api/cluster (liveness, last_contact_ms per
//     node, nodes_down, under_replicated_partitions) and ClusterMembers (down, last_contact_ms,
//     disk_full as the metadata leader sees them), which strand cluster and strand cluster health
//     print. Rejected: raft's Progress.RecentActive (reset only by a ticking leader's CheckQuorum:
//     quiesced groups never clear it); a 503 on the survivors' /readyz (they can serve; taking them
//     out of rotation makes it worse). The console (embedded HTML/CSS/JS, no CDN, CSP self) redraws
//     every 5 s from the JSON API; group lag history is a per-listener ring (360 points every 10
//     s). Rejected: gauges updated by the loop (a second copy of state that drifts), chromedp for
//     the browser test (two Chromium command lines suffice).
//   - Logs at the default level: leadership changes and problems only; a peer unreachable for 10 s
//     is one warning, then "reachable again"; --stats-interval logs the loop's counters (rounds,
//     time in Process, syncs, frames, replicas_lagging).
//
// # Security: TLS, SASL, ACLs and quotas
//
// TLS in this package (tls*.go), SASL in package sasl, ACLs in package node (auth*.go), their state
// in engine/metadata. Off by default (strand dev: the banner says so; serve logs it at start). R27.
//
//   - TLS (serve --tls-cert --tls-key --tls-ca [--tls-client-auth none|request|require]; dev --tls
//     makes a throwaway ECDSA CA and certificates): native and Kafka listeners and every peer link.
//     Peers are always mutual TLS: a node's certificate names it by the SAN URI strand://node/ID
//     (checked at start and reload); a Hello claiming a peer id on a connection whose verified
//     certificate does not name exactly that id is PEER_NOT_AUTHENTICATED and the connection
//     closes, so no frame of a refused peer reaches the Core; the dialer verifies the chain and the
//     id (not the host name). SIGHUP reloads certificate and CA through an atomically swapped pair
//     read at every handshake; a bad file keeps the old pair. A TLS ClientHello on a plaintext
//     listener (frame.LooksLikeTLS: 0x16 0x03, which as a length exceeds every frame limit) and a
//     plaintext client on a TLS listener (TLS_REQUIRED in the clear) are both named in the log and
//     in the client's definite clientlib.TLSError. Rejected: CN as identity (free text).
//   - Principals: node.Caller{Principal, Host} reaches Core.HandleAs (no authentication = User:ANONYMOUS;
//     the simulator is unchanged). A verified client certificate gives User:<subject> (Kafka's
//     default), SASL User:<name>.
//   - SASL/SCRAM-SHA-256/512 (--sasl-enabled) through github.com/xdg-go/scram in package sasl (it
//     owns randomness, so outside node/): native SaslAuthenticate steps right after the Hello;
//     Kafka SaslHandshake (17) and SaslAuthenticate (36), advertised only when on. Before success
//     only those are read; anything else, a failed or replayed step closes the connection (Kafka's
//     rule: most answers cannot carry an error). Credentials (salt, iterations ≥ 4096, StoredKey,
//     ServerKey; never a password: the client salts) are metadata commands; the server reads them
//     from a copy rebuilt when the metadata version moves (loop.Security, built by the round), so
//     a login that succeeds never waits on the loop; the copy is brought up to date before any
//     answer leaves the node, so a user acknowledged as created can authenticate at once on this
//     node. A step about to be refused (unknown user, proof not matching) waits first, on the
//     connection's goroutine, for the loop to confirm the credentials current (confirmCredentials:
//     a metadata read index started then, bounded by helloTimeout): a node that has not applied a
//     user the metadata group acknowledged does not refuse it; unconfirmed, the native answer is
//     UNAVAILABLE and the Kafka listener closes unanswered (both retried). --sasl-bootstrap-user
//     creates the first super user (the round's post-round step). PLAIN
//     is not offered. kcat here (librdkafka 2.0.2, which repeats the client nonce; fixed in 2.6.1)
//     cannot authenticate against the strict RFC 5802 check (Kafka 4's too).
//   - ACLs (--authorization --super-users): bindings (principal or User:*, topic/group/cluster,
//     literal or prefixed, operation, allow/deny, host) in the metadata group; Kafka's
//     StandardAuthorizer rules (deny wins; read, write, delete, alter imply describe); checks
//     search only the caller's and User:*'s runs (597 ns at 1,000 bindings). Produce, Fetch and
//     ListOffsets are refused per partition, every other request whole, before anything is
//     proposed; a refusal only on metadata confirmed current for the request (a metadata
//     ReadIndex started after it arrived; until then it waits, at most the request timeout, then
//     a retriable error: node/auth.go); listings drop what the caller may not describe; a
//     request type with no mapping needs ALTER on the cluster. Kafka CreateAcls/DescribeAcls/DeleteAcls (30, 29, 31) map onto
//     the same bindings.
//   - Quotas: per principal produce and fetch byte rates in the metadata group; each node meters
//     its own traffic with a token bucket (an x/time/rate limiter of one second's burst, in the
//     Core's Clock's time: loop.Round.Meter, which the simulator runs too); an overdraft is served, answered with throttle_ms (Kafka ThrottleMillis, at most
//     30 s; debt past that is forgiven), and the connection's reader pauses that long, as Kafka
//     mutes a channel. Rejected: holding the answer (the client times out and
//     resends).
//
// Negative tests (authorization on; anonymous / authenticated without ACL / denied; every row also
// checks nothing was written or revealed):
//
//   - Metadata(named), Produce, Fetch, ListOffsets, CreateTopics, DeleteTopics, DescribeTopics,
//     AlterConfigs, DeleteRecords, DescribePartitions, CreatePartitions, InitProducerId:
//     TOPIC_AUTHORIZATION_FAILED; test: node/TestAuthorizationNegativeTable
//   - FindCoordinator, ConsumerGroupHeartbeat, OffsetCommit, OffsetFetch, DescribeGroups,
//     DeleteGroups, OffsetDelete: GROUP_AUTHORIZATION_FAILED; test: same
//   - AlterUsers, ListUsers, AlterAcls, DescribeAcls, AlterQuotas, membership and move requests:
//     CLUSTER_AUTHORIZATION_FAILED; test: same
//   - Metadata, DescribeTopics, ListGroups without names: filtered: nothing the caller may not
//     describe; test: same
//   - Produce/Fetch naming an allowed and a refused topic: refused partition in place, the other
//     served; test: node/TestAuthorizationPerPartition
//   - native request before SASL, wrong password: SASL_AUTHENTICATION_FAILED, closed; test:
//     node/server/TestSecureClusterRefusesAndAllows
//   - Kafka produce (franz-go SCRAM) without ACL / denied / before SASL: TOPIC_AUTHORIZATION_FAILED
//     / closed unanswered; test: same
//   - Kafka SaslAuthenticate wrong, replayed, truncated: SASL_AUTHENTICATION_FAILED, closed; test:
//     node/server/TestKafkaSASLExchanges, sasl/TestReplayedAndTruncatedExchange
//   - Kafka CreateAcls without ALTER cluster: CLUSTER_AUTHORIZATION_FAILED, nothing added; test:
//     node/server/TestKafkaACLAdmin
//   - peer without certificate, other CA, wrong node id: PEER_NOT_AUTHENTICATED / handshake
//     refused; no frame taken; test: node/server/TestTLSPeerWithWrongCertificateRefused,
//     TestTLSPeerDialVerifiesNodeID
//   - plaintext ↔ TLS mismatch: TLSError naming the fix; test: node/server/TestTLSMismatchErrors
//   - CLI produce without ACL, topic list unauthenticated (real processes): exit 1 naming the
//     refusal; test: cmd/strand/TestSecureClusterCommands
//   - SCRAM server, Kafka SASL handshake, first bytes of a connection: no panic, never
//     authenticated; test: FuzzServerExchange, FuzzSASLHandshake, FuzzFirstBytes
package server
