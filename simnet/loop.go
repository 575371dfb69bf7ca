package simnet

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/strandlog/strand/internal/clientcore"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/node/loop"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/sasl"
)

// The node's loop round in the simulator. Each up node has a loop.Round,
// production's socket-free loop (node/server drives the same type): every
// input (a tick, a peer frame, a client request, a storage completion) is
// handed to it, and its Run — Process, the metadata note, the security
// view the SASL lookups read, the bootstrap user, the storage jobs — ends
// a round. Rounds batch as production's do: in the seeds that draw
// batching (loopBatchOneIn in loopBatchOf of them, the common draw), the
// first input of a round schedules the round's end a drawn moment later
// (up to roundDelayMax: the time a busy loop takes to come round to
// Process, during which production's inputs queue up), after the events
// already queued for that instant, so the inputs delivered meanwhile share
// one Process call; a round that reached loop.InputsPerProcessMax inputs
// ends at once. The other seeds end a round after every input (the
// simulator's behaviour before the round existed), which tries the same
// code with the smallest batches.
//
// The bootstrap user (server.Config.SASLBootstrapUser) is drawn in some
// seeds: every node's round creates it once the metadata has a leader.
// Checked: a round sends a bootstrap request only while its node's view
// lacks one of the user's mechanisms (a request sent with the user
// applied is a duplicate creation), and at the end the user exists on the
// most advanced node and authenticates there with its password (a SCRAM
// exchange against the node's view).
//
// Rejected: running Process after each input in every seed (production
// never does once a node is busy: a batch shares a Process and a sync,
// and the post-round steps ran nowhere).

// streamLoop draws the rounds' batching and the bootstrap user.
const streamLoop uint64 = 41

// A seed batches its rounds in loopBatchOneIn of loopBatchOf draws
// (Options.BatchRounds forces it); it has a bootstrap user in one of
// loopBootstrapOneIn.
const (
	loopBatchOneIn     = 3
	loopBatchOf        = 4
	loopBootstrapOneIn = 2
)

// simBootstrapUser and its password: the seeds' bootstrap user.
const (
	simBootstrapUser     = "sim-boot"
	simBootstrapPassword = "sim-boot-secret"
)

// roundDelayMax bounds how long after its first input a batching
// round's end comes.
const roundDelayMax = 200 * time.Microsecond

// loopOptions are a run's draws for the rounds.
type loopOptions struct {
	batch     bool       // inputs close together share a round
	bootstrap string     // the bootstrap user, "" for none
	rng       *rand.Rand // each round's delay
	// probeNext is the node the quota probe tries first; probeBatch its
	// reused batch bytes.
	probeNext  int
	probeBatch []byte
}

// drawLoop draws the run's round options from their own stream.
func drawLoop(opts Options) loopOptions {
	r := newStream(opts.Seed, streamLoop)
	o := loopOptions{batch: r.IntN(loopBatchOf) < loopBatchOneIn || opts.BatchRounds, rng: newStream(opts.Seed, streamLoop+1)}
	if r.IntN(loopBootstrapOneIn) == 0 {
		o.bootstrap = simBootstrapUser
	}
	return o
}

// countLoop declares the run's round draws in the coverage.
func (w *world) countLoop() {
	if w.loop.batch {
		w.coverage.Inc("run/rounds-batched")
	} else {
		w.coverage.Inc("run/rounds-unbatched")
	}
	if w.loop.bootstrap != "" {
		w.coverage.Inc("run/bootstrap-user")
	}
	w.coverage.Add("loop/batched-inputs", 0)
	w.coverage.Add("loop/bootstrap-requests", 0)
}

// configureLoop makes the bootstrap user a super user, as node/server
// does for Config.SASLBootstrapUser.
func (w *world) configureLoop(cfg *node.Config) {
	if w.loop.bootstrap != "" {
		cfg.SuperUsers = append(cfg.SuperUsers, node.Principal("User:"+w.loop.bootstrap))
	}
}

// newRound is n's round for incarnation inc, over core c.
func (w *world) newRound(n *simNode, c core, inc uint32) *loop.Round {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], w.opts.Seed)
	binary.LittleEndian.PutUint64(seed[8:], streamLoop)
	binary.LittleEndian.PutUint32(seed[16:], uint32(n.id))
	binary.LittleEndian.PutUint32(seed[20:], inc)
	return loop.New(c, loop.Config{Clock: n.clock, BootstrapUser: w.loop.bootstrap, BootstrapPassword: simBootstrapPassword,
		BootstrapIterations: saslIterations, BootstrapRand: rand.NewChaCha8(seed)})
}

// endInput ends n's round after an input, or schedules its end: at once
// when the seed does not batch or the round is full, else once the
// events already queued for this instant ran.
func (w *world) endInput(n *simNode) {
	if !n.up {
		return
	}
	if !w.loop.batch || n.round.Full() {
		w.process(n)
		return
	}
	if n.roundDue {
		w.coverage.Inc("loop/batched-inputs")
		return
	}
	n.roundDue = true
	inc := n.incarnation
	d := time.Duration(between(w.loop.rng, 0, int64(roundDelayMax)))
	w.sched.schedule(d, &event{kind: evCall, node: n.index, call: func() {
		if !n.up || n.incarnation != inc {
			return
		}
		n.roundDue = false
		w.roundEnds++
		w.process(n)
	}})
}

// afterRound checks n's bootstrap user after a round that sent
// bootstrap requests: sent is the count before the round.
func (w *world) afterRound(n *simNode, sent int) {
	now := n.round.Stats().BootstrapRequests
	if now == sent {
		return
	}
	w.coverage.Add("loop/bootstrap-requests", int64(now-sent))
	if w.bootstrapApplied(n) {
		w.fail("node %d sent a bootstrap request for %s although it has applied the user for every mechanism", n.id, w.loop.bootstrap)
	}
}

// bootstrapApplied reports whether n's core has applied the bootstrap
// user for every mechanism (the core's state, not the round's view).
func (w *world) bootstrapApplied(n *simNode) bool {
	_, creds, _ := n.core.SecurityState()
	have := 0
	for _, c := range creds {
		if c.Name == w.loop.bootstrap {
			have++
		}
	}
	return have >= len(sasl.Mechanisms)
}

// checkBootstrap is the end-of-run check of the bootstrap user: on the up
// node with the most advanced metadata it exists for every mechanism and
// authenticates with its password.
func (w *world) checkBootstrap() {
	if w.loop.bootstrap == "" {
		return
	}
	var best *simNode
	var bestVersion uint64
	for _, n := range w.nodes {
		if !n.up {
			continue
		}
		if v, _, _ := n.core.SecurityState(); best == nil || v > bestVersion {
			best, bestVersion = n, v
		}
	}
	if best == nil {
		return
	}
	if st, ok := best.core.MetadataStatus(); !ok || st.Leader == 0 && bestVersion == 0 {
		return // no metadata leader ever: nothing could be created
	}
	if !w.bootstrapApplied(best) {
		w.fail("node %d (metadata version %d) lacks the bootstrap user %s at the end", best.id, bestVersion, w.loop.bootstrap)
		return
	}
	if err := authenticate(best.round, w.loop.bootstrap, simBootstrapPassword, w.opts.Seed); err != nil {
		w.fail("the bootstrap user %s does not authenticate on node %d: %v", w.loop.bootstrap, best.id, err)
		return
	}
	w.coverage.Inc("loop/bootstrap-authenticated")
}

// authenticate runs a SCRAM exchange for user against r's security view.
func authenticate(r *loop.Round, user, password string, seed uint64) error {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	random := rand.NewChaCha8(s)
	for _, mech := range sasl.Mechanisms {
		cl, err := sasl.NewClientRand(mech, user, password, random)
		if err != nil {
			return err
		}
		cs, srv := cl.Session(), sasl.NewServerSession(r.LookupCredential, random)
		req, err := cs.First()
		for step := 0; err == nil && step < sasl.SessionStepsMax; step++ {
			st := srv.Step(req)
			if st.Refused != nil {
				return fmt.Errorf("%s: %v", mech, st.Refused)
			}
			var done bool
			if req, done, err = cs.Next(st.Answer); done {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %v", mech, err)
		}
	}
	return nil
}

// checkThrottle checks a produce or fetch answer of caller: a principal
// without a quota in n's view when the request arrived (hadQuota false) is
// never throttled (throttle_ms 0), and a throttle never exceeds
// loop.ThrottleMax.
func (w *world) checkThrottle(n *simNode, caller node.Caller, hadQuota bool, resp *strandpb.Response) {
	d := clientcore.Throttle(resp) // a produce's or fetch's throttle_ms, as clientlib reads it
	if d == 0 {
		return
	}
	w.coverage.Inc("loop/throttled")
	if !hadQuota {
		w.fail("node %d throttled %s %v, a principal without a quota", n.id, caller.Principal, d)
	}
	if d > loop.ThrottleMax {
		w.fail("node %d throttled %s %v, over the bound %v", n.id, caller.Principal, d, loop.ThrottleMax)
	}
}

// The quota probe. The operator (operator_requests.go) sets quotas on its
// own principals (User:ops-q0 ...), which no workload client uses, so
// every quotaProbeEvery the probe sends one produce as User:ops-q0 straight
// into an up node's round (as a connection already authenticated would;
// to a topic that does not exist, so nothing is written, and refused by
// the ACLs in the seeds with authorization: the answer is metered all the
// same, as production meters it), of twice the produce quota that node's
// view holds. A bucket holds at most one second of the rate, so the answer
// must say throttled at least one second (capped at loop.ThrottleMax).
const (
	quotaProbeEvery     = time.Second
	quotaProbePrincipal = node.Principal("User:ops-q0")
	quotaProbeTopic     = "sim-quota-probe"
	// quotaProbeBytesMax bounds the probe's batch (twice the quota): the
	// operator's rates are a few MiB/s.
	quotaProbeBytesMax = 32 << 20
)

// startQuotaProbe schedules the probe in the runs with the operator.
func (w *world) startQuotaProbe() {
	w.coverage.Add("loop/quota-probe-throttled", 0)
	if w.wire == nil || w.wire.ops == nil {
		return
	}
	w.sched.schedule(quotaProbeEvery, &event{kind: evCall, node: -1, call: w.quotaProbe})
}

// quotaProbe sends one probe, to the next up node whose view has a produce
// quota for the probe's principal, and schedules the next.
func (w *world) quotaProbe() {
	w.sched.schedule(quotaProbeEvery, &event{kind: evCall, node: -1, call: w.quotaProbe})
	for i := range w.nodes {
		n := w.nodes[(w.loop.probeNext+i)%len(w.nodes)]
		if !n.up || n.pausedUntil > w.now() {
			continue
		}
		q, ok := n.round.Security().Quota(quotaProbePrincipal)
		if !ok || q.ProduceBytesPerSec <= 0 || 2*q.ProduceBytesPerSec > quotaProbeBytesMax {
			continue
		}
		w.loop.probeNext = (w.loop.probeNext + i + 1) % len(w.nodes)
		w.sendQuotaProbe(n, q.ProduceBytesPerSec)
		return
	}
}

// sendQuotaProbe hands n's round a produce of twice rate bytes as the
// probe's principal and checks the throttle its answer reports.
func (w *world) sendQuotaProbe(n *simNode, rate int64) {
	size := int(2 * rate)
	if len(w.loop.probeBatch) < size {
		w.loop.probeBatch = make([]byte, size)
	}
	req := &strandpb.Request{Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{Acks: -1,
		Partitions: []*strandpb.ProduceRequest_Partition{{Topic: quotaProbeTopic, Batch: w.loop.probeBatch[:size]}}}}}
	caller := node.Caller{Principal: quotaProbePrincipal, Host: "quota-probe"}
	inc, round := n.incarnation, n.round
	want := time.Duration(size-int(rate)) * time.Second / time.Duration(rate) // at least the overdraft
	w.guardCall(n, func() {
		round.Handle(caller, req, round.Meter(caller, req, func(resp *strandpb.Response, wait time.Duration) {
			if !n.up || n.incarnation != inc || resp.GetProduce() == nil {
				return // a refusal without a produce answer is not metered
			}
			ms := resp.GetProduce().GetThrottleMs()
			w.coverage.Inc("loop/quota-probe-throttled")
			if time.Duration(ms)*time.Millisecond < min(want, loop.ThrottleMax)-time.Millisecond || wait > loop.ThrottleMax ||
				time.Duration(ms)*time.Millisecond != wait.Truncate(time.Millisecond) {
				w.fail("quota probe on node %d: %d B at %d B/s answered throttle_ms=%d (wait %v), want at least %v and at most %v",
					n.id, size, rate, ms, wait, min(want, loop.ThrottleMax), loop.ThrottleMax)
			}
		}))
	})
	w.endInput(n)
}
