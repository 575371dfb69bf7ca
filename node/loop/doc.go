// Package loop is one node's loop round without its sockets: what
// node/server's loop goroutine does between two waits, as a pure,
// deterministic piece that the simulator (simnet) drives too.
//
// A round takes inputs — ticks, peer frames, client requests, storage
// completions — handing each to the Core at once (Round.Tick, Receive,
// Handle, SyncDone), at most InputsPerProcessMax after the first, then
// Round.Run runs Core.Process once and the post-round steps, in this
// order:
//
//  1. the metadata note: the metadata leader and, when the metadata
//     version moved, a flag the server acts on (it dials nodes that joined);
//  2. the security view (Security): the applied credentials and quotas,
//     rebuilt when the metadata version moved. The SASL exchanges of both
//     listeners look credentials up in it (LookupCredential) and the quota
//     meters read it; an answer to a request is preceded by a refresh, so
//     a client told its CreateUser applied can authenticate at once;
//  3. the bootstrap user (Config.BootstrapUser): created, for every SCRAM
//     mechanism missing from the view, through Core.HandleAs as itself (a
//     super user: the server adds it to the Core's SuperUsers) once the
//     metadata has a leader, one request in flight at a time;
//  4. the storage jobs the round started (Core.TakeSyncJobs), returned for
//     the caller's storage (node/server's pool, simnet's events).
//
// A SASL exchange about to refuse (an unknown user, a proof that does not
// match) first asks Round.ConfirmSecurity: the Core confirms its metadata
// current with a read index started then (node.Core.ConfirmMetadata),
// and the view is rebuilt before the answer, so the refusal is decided on
// state holding every user the metadata group acknowledged before.
//
// Quotas (Quotas, Round.Meter) are the throttle decision of produce and
// fetch answers: a token bucket per principal and direction, with time
// passed in, read from the Core's Clock by the round.
//
// Nothing here reads the wall clock, starts a goroutine or iterates a map
// where order leaks out; the security view is published through an atomic
// pointer because node/server's connection goroutines read it.
// Rejected: keeping the round inside node/server (the simulator then ran
// Process after every event and none of the post-round steps, so a stale
// security view or a bootstrap user created twice went unseen).
package loop
