package loop

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/sasl"
)

// fakeCore records what a round asks of it; its metadata is set by the
// test, and AlterUsers requests are answered at the next Process (as the
// metadata group would once they commit) by adding the credentials.
type fakeCore struct {
	ticks, frames, syncs, processes int
	leader                          node.NodeID
	version                         uint64
	creds                           []metadata.Credential
	quotas                          []metadata.Quota
	pending                         []func()
	jobs                            int // storage jobs the next Process starts
	processErr                      error
	alterUsers                      []*strandpb.AlterUsersRequest
}

func (f *fakeCore) Tick()                   { f.ticks++ }
func (f *fakeCore) Receive([]byte)          { f.frames++ }
func (f *fakeCore) SyncDone(uint64, error)  { f.syncs++ }
func (f *fakeCore) MetadataVersion() uint64 { return f.version }
func (f *fakeCore) TakeSyncJobs(dst []node.SyncJob) []node.SyncJob {
	for i := range f.jobs {
		dst = append(dst, node.SyncJob{Token: uint64(i + 1)})
	}
	f.jobs = 0
	return dst
}
func (f *fakeCore) MetadataLeader() (node.NodeID, uint64, bool) {
	return f.leader, f.version, true
}
func (f *fakeCore) SecurityState() (uint64, []metadata.Credential, []metadata.Quota) {
	return f.version, f.creds, f.quotas
}
func (f *fakeCore) ConfirmMetadata(done func(error)) {
	f.pending = append(f.pending, func() { done(nil) })
}
func (f *fakeCore) Process() error {
	f.processes++
	p := f.pending
	f.pending = nil
	for _, fn := range p {
		fn()
	}
	return f.processErr
}
func (f *fakeCore) HandleAs(_ node.Caller, req *strandpb.Request, respond func(*strandpb.Response)) {
	if au := req.GetAlterUsers(); au != nil {
		f.alterUsers = append(f.alterUsers, au)
		f.pending = append(f.pending, func() {
			for _, u := range au.GetUpserts() {
				f.creds = append(f.creds, metadata.Credential{Name: u.GetName(), Mechanism: u.GetCredential().GetMechanism()})
			}
			f.version++
			respond(&strandpb.Response{})
		})
		return
	}
	f.pending = append(f.pending, func() { respond(req2resp(req)) })
}

// req2resp answers a produce or fetch with an empty answer of its kind.
func req2resp(req *strandpb.Request) *strandpb.Response {
	switch {
	case req.GetProduce() != nil:
		return &strandpb.Response{Body: &strandpb.Response_Produce{Produce: &strandpb.ProduceResponse{}}}
	case req.GetFetch() != nil:
		return &strandpb.Response{Body: &strandpb.Response_Fetch{Fetch: &strandpb.FetchResponse{}}}
	}
	return &strandpb.Response{}
}

// fixedClock is a Clock the test moves.
type fixedClock struct{ now time.Duration }

func (c *fixedClock) Monotonic() time.Duration { return c.now }
func (c *fixedClock) Realtime() time.Time      { return time.Unix(0, 0).Add(c.now) }

// TestRoundRunsProcessOncePerBatch: inputs go to the Core as they come;
// Run runs Process once for them and returns the storage jobs it started;
// Full says when the bound is reached.
func TestRoundRunsProcessOncePerBatch(t *testing.T) {
	f := &fakeCore{}
	r := New(f, Config{Clock: &fixedClock{}})
	r.Tick()
	r.Receive(nil)
	r.SyncDone(1, nil)
	if f.ticks != 1 || f.frames != 1 || f.syncs != 1 || r.Inputs() != 3 {
		t.Fatalf("inputs not handed on: %+v, inputs %d", f, r.Inputs())
	}
	f.jobs = 2
	out := r.Run()
	if f.processes != 1 || out.Err != nil || len(out.Jobs) != 2 || r.Inputs() != 0 {
		t.Fatalf("Run: processes %d, outcome %+v, inputs after %d", f.processes, out, r.Inputs())
	}
	for range InputsPerProcessMax {
		r.Tick()
	}
	if r.Full() {
		t.Fatalf("full after %d inputs: the first and %d more are allowed", InputsPerProcessMax, InputsPerProcessMax)
	}
	r.Tick()
	if !r.Full() {
		t.Fatalf("not full after %d inputs", InputsPerProcessMax+1)
	}
	f.processErr = errors.New("disk gone")
	f.jobs = 1
	if out := r.Run(); out.Err == nil || len(out.Jobs) != 0 {
		t.Fatalf("a failed Process: outcome %+v, want its error and no jobs", out)
	}
}

// TestRoundSecurityView: the view follows the metadata version after a
// round, and an answer refreshes it before it leaves.
func TestRoundSecurityView(t *testing.T) {
	f := &fakeCore{leader: 1}
	r := New(f, Config{Clock: &fixedClock{}})
	if _, ok := r.LookupCredential("alice", metadata.ScramSHA256); ok {
		t.Fatal("alice known before she exists")
	}
	f.creds, f.version = []metadata.Credential{{Name: "alice", Mechanism: metadata.ScramSHA256}}, 1
	if out := r.Run(); !out.MetadataMoved || out.MetadataLeader != 1 {
		t.Fatalf("outcome %+v: want the version moved, leader 1", out)
	}
	if _, ok := r.LookupCredential("alice", metadata.ScramSHA256); !ok {
		t.Fatal("alice unknown after the round that applied her")
	}
	// An answer refreshes the view first: bob applied inside the round
	// before the answer that says so leaves.
	var seen bool
	r.Handle(node.Caller{}, &strandpb.Request{}, func(*strandpb.Response) {
		_, seen = r.LookupCredential("bob", metadata.ScramSHA256)
	})
	f.pending = append([]func(){func() {
		f.creds = append(f.creds, metadata.Credential{Name: "bob", Mechanism: metadata.ScramSHA256})
		f.version++
	}}, f.pending...)
	r.Run()
	if !seen {
		t.Fatal("the answer left before the view knew bob")
	}
}

// TestRoundBootstrapUser: no leader, no request; then one request for
// both mechanisms, none while it is in flight, none once applied.
func TestRoundBootstrapUser(t *testing.T) {
	f := &fakeCore{}
	r := New(f, Config{Clock: &fixedClock{}, BootstrapUser: "root", BootstrapPassword: "pw",
		BootstrapIterations: metadata.ScramIterationsMin, BootstrapRand: rand.NewChaCha8([32]byte{})})
	r.Run()
	if len(f.alterUsers) != 0 {
		t.Fatal("bootstrap request sent without a metadata leader")
	}
	f.leader = 1
	r.Run() // sends it
	if len(f.alterUsers) != 1 || len(f.alterUsers[0].GetUpserts()) != len(sasl.Mechanisms) {
		t.Fatalf("bootstrap requests %v: want one for every mechanism", f.alterUsers)
	}
	for range 3 {
		r.Run() // the first applies it; none sends another
	}
	if len(f.alterUsers) != 1 || r.Stats().BootstrapRequests != 1 {
		t.Fatalf("%d bootstrap requests: want exactly one", len(f.alterUsers))
	}
	for _, m := range sasl.Mechanisms {
		if _, ok := r.LookupCredential("root", m); !ok {
			t.Fatalf("root has no %s credential", m)
		}
	}
}

// TestMeterThrottlesOnlyQuotaPrincipals: a produce of a principal with a
// quota past its second's worth is throttled (throttle_ms and the wait),
// time from the Clock pays it back, and another principal's produce is
// not throttled.
func TestMeterThrottlesOnlyQuotaPrincipals(t *testing.T) {
	clock := &fixedClock{now: time.Hour}
	f := &fakeCore{version: 1, quotas: []metadata.Quota{{Principal: "User:slow", ProduceBytesPerSec: 1000}}}
	r := New(f, Config{Clock: clock})
	produce := &strandpb.Request{Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{
		Partitions: []*strandpb.ProduceRequest_Partition{{Batch: make([]byte, 1500)}}}}}
	send := func(principal node.Principal) (time.Duration, int32) {
		var wait time.Duration
		var ms int32
		caller := node.Caller{Principal: principal}
		r.Handle(caller, produce, r.Meter(caller, produce, func(resp *strandpb.Response, d time.Duration) {
			wait, ms = d, resp.GetProduce().GetThrottleMs()
		}))
		r.Run()
		return wait, ms
	}
	if wait, ms := send("User:slow"); wait != 500*time.Millisecond || ms != 500 {
		t.Fatalf("1500 B at 1000 B/s: throttle %v (%d ms), want 500ms", wait, ms)
	}
	if wait, ms := send("User:fast"); wait != 0 || ms != 0 {
		t.Fatalf("a principal without a quota throttled %v (%d ms)", wait, ms)
	}
	clock.now += 3 * time.Second
	if wait, _ := send("User:slow"); wait != 500*time.Millisecond {
		t.Fatalf("after the debt was paid, 1500 B: throttle %v, want 500ms", wait)
	}
}

// TestTokenBucket shows the bucket: a second's worth passes unthrottled,
// the overdraft is the throttle, and time pays it back; an overdraft is
// throttled at most ThrottleMax.
func TestTokenBucket(t *testing.T) {
	var b tokenBucket
	t0 := time.Unix(1000, 0)
	if d := b.charge(1000, 1000, t0); d != 0 {
		t.Fatalf("first second's worth throttled %v", d)
	}
	if d := b.charge(1000, 500, t0); d != 500*time.Millisecond {
		t.Fatalf("500 B over at 1000 B/s: throttle %v, want 500ms", d)
	}
	if d := b.charge(1000, 100, t0.Add(time.Second)); d != 0 {
		t.Fatalf("after the debt was paid: throttle %v", d)
	}
	if d := b.charge(1000, 1<<30, t0.Add(2*time.Second)); d != ThrottleMax {
		t.Fatalf("huge overdraft: throttle %v, want the cap %v", d, ThrottleMax)
	}
	// The debt past the cap is forgiven: once the client has waited the
	// cap out (and a second has refilled), it is not throttled again.
	if d := b.charge(1000, 100, t0.Add(2*time.Second+ThrottleMax+time.Second)); d != 0 {
		t.Fatalf("after waiting the cap out: throttle %v, want none", d)
	}
}
