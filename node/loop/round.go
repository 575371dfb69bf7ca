package loop

import (
	"io"
	"log/slog"
	"sync/atomic"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
)

// InputsPerProcessMax bounds the inputs a round takes after its first
// before Process runs.
const InputsPerProcessMax = 4096

// Core is what a round drives: node.Core's loop methods.
type Core interface {
	Tick()
	Receive(frame []byte)
	HandleAs(caller node.Caller, req *strandpb.Request, respond func(*strandpb.Response))
	ConfirmMetadata(done func(error))
	SyncDone(token uint64, err error)
	Process() error
	TakeSyncJobs(dst []node.SyncJob) []node.SyncJob
	MetadataLeader() (leader node.NodeID, version uint64, ok bool)
	MetadataVersion() uint64
	SecurityState() (version uint64, creds []metadata.Credential, quotas []metadata.Quota)
}

var _ Core = (*node.Core)(nil)

// Config configures a Round.
type Config struct {
	// Clock is the quotas' time (the Core's Clock).
	Clock node.Clock
	// BootstrapUser, when set, is created with BootstrapPassword for every
	// SCRAM mechanism once the metadata has a leader, unless it exists.
	BootstrapUser     string
	BootstrapPassword string
	// BootstrapIterations is the bootstrap credentials' PBKDF2 rounds (0:
	// sasl's default); BootstrapRand their salts' source (nil:
	// crypto/rand).
	BootstrapIterations int
	BootstrapRand       io.Reader
	// Logger receives the bootstrap user's failures (nil: discard).
	Logger *slog.Logger
}

// Round is one node's loop between waits: feed it inputs, then Run.
// Owned by one goroutine (the loop); Security and LookupCredential may be
// called from any.
type Round struct {
	core   Core
	cfg    Config
	logger *slog.Logger
	inputs int // since the last Run

	security   atomic.Pointer[Security]
	secVersion uint64

	metaLeader  node.NodeID
	metaVersion uint64
	secLeader   node.NodeID // metaLeader at the last rebuild (the planted bug's)

	bootstrapping bool // a bootstrap request is in flight
	bootstrapSent int  // bootstrap requests sent (Stats)

	quotas Quotas
	jobs   []node.SyncJob
}

// New is a round driving core; it builds the security view at once.
func New(core Core, cfg Config) *Round {
	r := &Round{core: core, cfg: cfg, logger: cfg.Logger}
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	r.NoteSecurity()
	return r
}

// Tick gives the Core a tick.
func (r *Round) Tick() { r.inputs++; r.core.Tick() }

// Receive gives the Core a peer frame.
func (r *Round) Receive(frame []byte) { r.inputs++; r.core.Receive(frame) }

// SyncDone gives the Core a storage job's result.
func (r *Round) SyncDone(token uint64, err error) { r.inputs++; r.core.SyncDone(token, err) }

// Handle gives the Core a client request of caller; respond gets the
// answer after the security view was brought up to date.
func (r *Round) Handle(caller node.Caller, req *strandpb.Request, respond func(*strandpb.Response)) {
	r.inputs++
	if caller.Principal == "" {
		caller.Principal = node.Anonymous
	}
	r.core.HandleAs(caller, req, func(resp *strandpb.Response) {
		r.NoteSecurity()
		respond(resp)
	})
}

// ConfirmSecurity asks the Core to confirm its applied metadata current
// (node.Core.ConfirmMetadata: a metadata read index started now); done
// gets the outcome after the security view was rebuilt from the state so
// confirmed, so a SASL lookup made after done(nil) reads every user the
// metadata group acknowledged before the call. done runs on the loop and
// must not block. A SASL exchange asks it before a refusal
// (sasl.ServerStep.Confirm).
func (r *Round) ConfirmSecurity(done func(error)) {
	r.inputs++
	r.core.ConfirmMetadata(func(err error) {
		r.NoteSecurity()
		done(err)
	})
}

// Inputs is how many inputs the round has taken since the last Run.
func (r *Round) Inputs() int { return r.inputs }

// Full reports whether the round has taken its bound of inputs (the first
// and InputsPerProcessMax more): Run is due.
func (r *Round) Full() bool { return r.inputs > InputsPerProcessMax }

// Outcome is what a Run did.
type Outcome struct {
	// Err is Process's error: the node must stop (fail-stop); nothing
	// after Process ran.
	Err error
	// Jobs are the storage jobs the round started, for the caller to run
	// and report through SyncDone; valid until the next Run.
	Jobs []node.SyncJob
	// MetadataLeader is the metadata leader the Core knows (0: none);
	// MetadataMoved is set when the metadata version moved since the
	// last Run (the registered nodes may have changed).
	MetadataLeader node.NodeID
	MetadataMoved  bool
	// MetadataKnown is false while the Core has no metadata group (static
	// mode): the two fields above are then zero.
	MetadataKnown bool
}

// Run ends the round: Process, the metadata note, the security view, the
// bootstrap user, and the storage jobs.
func (r *Round) Run() Outcome {
	r.inputs = 0
	clear(r.jobs)
	r.jobs = r.jobs[:0]
	if err := r.core.Process(); err != nil {
		return Outcome{Err: err}
	}
	out := r.noteMetadata()
	r.NoteSecurity()
	r.bootstrapUser()
	r.jobs = r.core.TakeSyncJobs(r.jobs)
	out.Jobs = r.jobs
	return out
}

// noteMetadata reads the metadata leader and whether the version moved.
func (r *Round) noteMetadata() Outcome {
	lead, v, ok := r.core.MetadataLeader()
	if !ok {
		return Outcome{}
	}
	r.metaLeader = lead
	out := Outcome{MetadataKnown: true, MetadataLeader: lead}
	if v != r.metaVersion {
		r.metaVersion = v
		out.MetadataMoved = true
	}
	return out
}

// Stats are a round's counters.
type Stats struct {
	// BootstrapRequests counts the bootstrap user's AlterUsers requests.
	BootstrapRequests int
}

// Stats is the round's counters.
func (r *Round) Stats() Stats { return Stats{BootstrapRequests: r.bootstrapSent} }
