// Command strand runs Strand nodes and talks to a Strand cluster.
//
//	strand dev                      # a local 3-node cluster in one process: Strand on :9192-9194, Kafka on :9092-9094
//	strand serve --id 1 --peers 1=HOST:PORT,2=...,3=... --data-dir DIR
//	strand topic create NAME --partitions N [--replication-factor R]
//	strand topic list | describe NAME | delete NAME
//	strand produce TOPIC            # lines from stdin
//	strand consume TOPIC [--from earliest|latest|OFFSET|TIME] [--until-end] [--group G]
//	strand group list | describe G | reset G --topic T --to-... [--execute] | delete G
//	strand consume TOPIC --group G --exec CMD [--max-attempts N] [--retry-backoff D] [--dlq-topic T]
//	strand dlq describe TOPIC.dlq | redrive TOPIC.dlq [--to T] [--filter-error TEXT]
//	strand cluster                  # nodes, partitions, leaders, high-water marks
//	strand node list | partition move T/P --replicas ... | profile create|use|list|delete | completion SHELL
//	strand bench produce|consume|e2e
//	strand version | help [CMD]
//
// help.go holds the one table every help text is printed from; errors.go the one function
// (userMessage) that renders errors for users.
//
// Every flag can also be set through an environment variable STRAND_<FLAG> (upper case, dashes as
// underscores: --data-dir is STRAND_DATA_DIR); a flag on the command line wins. Client commands
// default to --brokers 127.0.0.1:9192, where strand dev listens, so a new user needs no flags;
// short flags follow kcat and rpk (-b brokers, -t topic, -p partition(s), -o offset, -e exit at
// end, -f format). Client flags may also come before the command (hoistGlobalFlags), and a client
// flag not given on the command line or in the environment is taken from the selected profile
// (profile.go): command line > STRAND_<FLAG> > profile > default. List and describe commands take
// --format json (output.go); strand completion bash|zsh|fish prints completion scripts generated
// from the command table (completion.go).
//
// # Commands
//
// pflag; every flag is also STRAND_<FLAG>. Exit 0 success, 1 failure, 2 usage. serve (one node;
// --kafka-listen, --kafka-advertise, --min-free-bytes, --catchup-bytes-per-sec,
// --disk-stall-after), dev (N nodes in
// one process, temp data dir), topic
// create|list|describe|alter|add-partitions|delete-records|delete|recover, produce, consume (--group G
// [--instance-id ID]: commits exactly what it printed; --exec CMD: clientlib's GroupConsumer.Handle
// runs sh -c CMD per record, retries, dead-letters, dlq_exec.go), dlq describe|redrive (dlq.go:
// clientlib's ReadDeadLetters and Redrive), group list|describe|reset|delete (reset
// prints a plan unless --execute, refused while members exist), cluster (nodes with state, up/DOWN
// and last contact as the metadata leader sees them, metadata role, moves in progress, full and
// stalled disks;
// internal __ topics only with --internal; --format json), cluster health (one line per problem or
// healthy, exit 1 when unhealthy; --format json), cluster rebalance|leaders, node add|decommission,
// partition move, user create|delete|list, acl add|list|remove, quota set|list, bench
// produce|consume|e2e|cluster (cluster --phases fanout runs produce beside 1, 100 and 1,000 tailing
// groups read by a bench readers child; --tls; the benches are cmd/strand/internal/bench, this
// package parses their client flags), version. serve also takes --join, --admin-listen,
// --tls-*, --sasl-enabled, --authorization, --super-users, --sasl-bootstrap-user, --wal, the
// tiered storage's object store --tier-dir or --s3-* (tier_flags.go, opened before the node
// starts); dev --tls;
// every client command --tls* and --sasl-user/--sasl-password/--sasl-mechanism. Ports: native 9192;
// strand dev serves Kafka on 9092.. (every Kafka tool's default) and the native protocol on
// base-port+100 (9192..); --base-port moves both. Rejected: one port sniffing both protocols (both
// start with a 4-byte big-endian length).
//
// # Conventions
//
// Each in one place:
//
//   - Help comes from one table (help.go): the usage, every CMD --help, group help and strand help
//     CMD [SUB] print a synopsis, a one-line summary and an example, on stdout.
//   - Errors are rendered by one function (userMessage): strand: <one line> on stderr, the cause
//     kept for errors.Is; connection errors become "cannot reach the cluster at ADDR: connection
//     refused (is a cluster running there? ...)" or "ADDR does not speak the Strand protocol"; wire
//     errors lose their package prefixes; a record is never echoed, only its line number and size.
//   - Client commands first probe the brokers with one short metadata call (an unreachable endpoint
//     fails in ms). Values are honest: bad counts, partitions and --from are refused before
//     anything is sent; topic create, topic alter print what the cluster says was applied.
//   - produce reads lines by size without keeping more than 1 MiB of one; a longer line stops the
//     run after flushing the lines before it and says how many records were written.
//   - serve: --peers must name --id; the node listens on its own entry (a --listen must keep that
//     port); anything else is refused at once. dev waits (bounded) for a metadata leader and every
//     registration before it prints ready and the commands as invoked (./bin/strand ... under make
//     run).
//   - kcat/rpk short flags: -b, -t, -p, -o, -e, -f, -c, -K, -r. --log-format, --log-level on
//     serve/dev. Rejected: cobra (a dependency for what a 150-line table does).
//
// # End-to-end tests
//
// Real processes on 127.0.0.1, skipped with -short; "checker" = drain + linearizability.Check with
// FinalDrain. TestKillRestartKeepsAcknowledgedRecords (four writers at acks=all while each node is
// SIGKILLed; checker), TestRestartedNodeCatchesUpUnderLoad (caught up within 7 s, then node 1
// killed; checker), TestPausedLeaderWritesContinue (SIGSTOP a leader 6 s; checker),
// TestWipedNodeRejoinsAndCatchesUp (rm -rf a node's data dir under load, restart, kill another;
// checker), TestFreeSpaceFloorRefusesProduceKeepsReads, TestGroupMembersUnderKills (every node and
// one member killed: 0 lost, 0 re-delivered), TestKafkaIdempotentProducerSurvivesKill (franz-go
// producers under SIGKILL; checker), TestKafkaKcatAgainstDev, TestDevSmoke (the README's commands
// word for word), TestServeRefusesDataDirInUse, TestDevBannerReadyAndQuiet,
// TestPartitionMoveUnderKill, TestOperateClusterUnderKill (join, rebalance, decommission with the
// node killed mid-move; checker), TestJoinFourthNode, TestSecureClusterCommands,
// TestKcatSCRAMOverTLS, TestDevTLS, TestServeReloadsTLSOnSIGHUP, TestConsoleInBrowser,
// TestConsoleShowsMoveInBrowser, and behind -tags faultinject TestHealPartitionDoesNotStallWrites
// (no write gap over 2.5 s after a heal). Processes, ports and peer lists come from
// internal/localcluster, which bench cluster starts its servers with too (ports probed then
// listened on: a rare "address already in use" is that race).
package main
