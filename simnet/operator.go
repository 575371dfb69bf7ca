package simnet

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
)

// The operator actor (Options.Operator): an administrator who, while the
// workload runs under the seed's faults, sends every request type of the
// wire protocol at moments spread over the run (alter configs, delete
// records, group admin, users, ACLs, quotas, leader elections, membership
// and move requests, the reads of each), and in the seeds with
// authorization on an intruder who sends every request type too. Both
// send through clientlib's admin calls, the ones cmd/strand makes
// (CreateUser, SetQuota, AlterTopicConfig, DeleteRecords, DeleteGroup,
// MovePartitions, ...), as clientlib.SimRun tasks over the simulated
// transport with SASL as their principals, retries and all; the types no
// admin call sends go raw, one attempt each (rawRequestTypes in
// operator_requests.go says which and why). The operator records what
// each acknowledged, what each refused definitely and what stayed
// ambiguous (a timeout, a lost connection, a code that may have written),
// as clientlib reported it: a definite error from a call that retried
// over an attempt whose answer was lost is held to "not applied", the
// promise a cmd/strand user reads. Checks:
//   - every request of the intruder (a principal no ACL names) is refused
//     with an authorization error, per partition for produce, fetch and
//     list offsets; the answers that list everything list nothing; a
//     clientlib call of the intruder fails with an authorization error
//     or lists nothing (judgeIntruderLib);
//   - a request of the workload's or the operator's principal that
//     reached a node after the ACL grants allowing it were acknowledged is
//     never refused (operator_grants.go: the grant check, and the grant
//     probe that grants the operator a group mid-run and asks every node
//     about it at once);
//   - after the final drain, the state read back through the API (users,
//     ACLs, quotas, the topic's configs, log starts, committed offsets,
//     the members, the topics) shows each acknowledged change exactly as
//     acknowledged, or a change still ambiguous, and nothing an intruder
//     asked for or a definite refusal named (operator_verify.go).
//
// Authorization is on in two seeds of three of the standard run (drawn from
// the operator's own stream): the admin (a super user) creates the users
// and ACLs through AlterUsers and AlterAcls before the topics, and every
// client sends as a principal — the workload and its group members as
// User:app (ALL on topics and groups prefixed "sim"), the operator, the
// mover and the joins' administrator as User:ops (ALL on the cluster,
// topics prefixed "sim", groups prefixed "ops"), the transactional
// producers as the admin. Every workload mix draws it: until the group,
// moves and joins workloads had principals it was on only in seeds
// without them, 28 of the standard sample's 200 once those were drawn
// per seed. SASL
// itself lives in node/server: the simulator hands each client's principal
// to HandleAs as the server does after the exchange.

// streamOperator is the operator's random stream.
const streamOperator uint64 = 6

// The principals of the simulated clients.
const (
	principalAdmin    node.Principal = "User:admin"    // super user: topics, users, ACLs
	principalApp      node.Principal = "User:app"      // the workload's clients
	principalOperator node.Principal = "User:ops"      // the operator's requests
	principalIntruder node.Principal = "User:intruder" // named by no ACL
)

// operatorExtraActions is how many operator requests follow the sweep of
// every type, drawn among the ones that change state.
const operatorExtraActions = 24

// intruderSweeps is how many requests of each type the intruder sends:
// one can time out (its outcome then shows only in the read-back).
const intruderSweeps = 2

// b2i is 1 for true.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// operatorVerifyRetry spaces the final read-backs of a state still
// converging (a node that applied less of the metadata log).
const operatorVerifyRetry = 100 * time.Millisecond

// opAction is one planned request: its type and who sends it.
type opAction struct {
	kind     string // strandpb.Request body field name
	intruder bool
}

// operator is the operator actor of a run.
type operator struct {
	ww       *wireWorkload
	rng      *rand.Rand
	auth     bool        // authorization on in this run
	ops      *wireClient // sends as principalOperator
	intruder *wireClient // sends as principalIntruder
	// opsLib and intruderLib are clientlib Clients over ops' and
	// intruder's transport (SASL as their principals when on): the admin
	// calls cmd/strand makes run on them as tasks (SimRun).
	opsLib, intruderLib *clientlib.Client
	plan                []opAction
	next                int  // plan index of the next action
	busy                bool // an action is in flight
	started             bool
	done                bool // every action ended
	verified            bool // the final read-back ended
	ledger              *opLedger
	// trims is each partition's highest log start a DeleteRecords
	// acknowledged, by group index.
	trims map[int]int64
	// coordinator is the node index last named for each operator group.
	coordinator map[string]int
	values      int64 // distinct values for the requests
	verify      *opVerify
	// grants are the ACL bindings acknowledged so far: bootstrapACLs once
	// the admin's AlterAcls was, then the grant probe's (operator_grants.go).
	grants []*strandpb.AclBinding
	probe  *grantProbe
}

// newOperator draws the run's authorization and plans the requests; nil
// when Options.Operator is off.
func newOperator(ww *wireWorkload) *operator {
	o := ww.w.opts
	if !o.Operator {
		return nil
	}
	op := &operator{ww: ww, rng: newStream(o.Seed, streamOperator), ledger: newOpLedger(), trims: map[int]int64{},
		coordinator: map[string]int{}}
	// In every workload mix: the group members send as the workload, the
	// movers and the joins' administrator as the operator (caller).
	op.auth = op.rng.IntN(3) != 0
	op.ops = newWireClient(ww, 0, kindOperator)
	op.ops.rng = newStream(o.Seed, streamOperator+1)
	op.intruder = newWireClient(ww, 0, kindOperator)
	op.intruder.rng = newStream(o.Seed, streamOperator+2)
	op.plan = op.drawPlan()
	return op
}

// adminLib builds the clientlib Client of an administrator's transport
// client c (the operator's, the intruder's, the mover's, the joins'):
// clientlib's defaults (retries, unknown-topic waits) but the run's
// request timeout and backoff, SASL as c's principal. The admin calls
// cmd/strand makes run on it as tasks (SimRun).
func (ww *wireWorkload) adminLib(c *wireClient) *clientlib.Client {
	seeds := make([]string, len(ww.peers))
	for i, p := range ww.peers {
		seeds[i] = p.Address
	}
	opts := []clientlib.Opt{clientlib.Simulated(libTransport{c}), clientlib.SeedAddresses(seeds...),
		clientlib.RandSeed(c.rng.Uint64()), clientlib.RequestTimeout(ww.w.opts.libRequestTimeout()), clientlib.StallTimeout(ww.w.opts.libStallTimeout()),
		clientlib.RetryBackoff(wireBackoff.Base, wireBackoff.Max), clientlib.MetadataMaxAge(libMetadataMaxAge)}
	cl, err := clientlib.NewClient(append(opts, ww.sasl.libOpts(c)...)...) // SASL: sasl.go
	if err != nil {
		panic("simnet: admin client options: " + err.Error())
	}
	return cl
}

// kindOperator marks the operator's transport clients.
const kindOperator clientKind = 101

// appendedRequestTypes are request types added to the protocol after the
// plan's shuffle was fixed: drawPlan sends them after the shuffled plan,
// so adding one leaves every seed's earlier actions (and the traces the
// other helpers' and the lead's runs compare) as they were.
var appendedRequestTypes = []string{"abort_transaction", "describe_producers"}

// drawPlan shuffles one request of every type by the operator,
// intruderSweeps of every type by the intruder when authorization is on,
// and extra operator changes; appendedRequestTypes follow, in order.
func (op *operator) drawPlan() []opAction {
	var plan, appended []opAction
	for _, t := range requestTypes() {
		add := &plan
		if slices.Contains(appendedRequestTypes, t) {
			add = &appended
		}
		*add = append(*add, opAction{kind: t})
		for range intruderSweeps * b2i(op.auth) {
			*add = append(*add, opAction{kind: t, intruder: true})
		}
	}
	changes := []string{"alter_configs", "delete_records", "offset_commit", "offset_delete", "delete_groups",
		"alter_users", "alter_acls", "alter_quotas", "elect_leaders"}
	for range operatorExtraActions {
		plan = append(plan, opAction{kind: changes[op.rng.IntN(len(changes))]})
	}
	op.rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	return append(plan, appended...)
}

// caller is who client c sends as.
func (ww *wireWorkload) caller(c *wireClient) node.Caller {
	op := ww.ops
	switch {
	case op == nil || !op.auth:
		return node.Caller{Principal: node.Anonymous}
	case c == ww.admin:
		return node.Caller{Principal: principalAdmin, Host: "admin"}
	case c == op.ops || ww.moves.owns(c) || ww.joins.owns(c) || op.probe != nil && c == op.probe.client:
		// Moves, joins and decommissions are cluster administration:
		// the operator's ACLs (ALL on the cluster) allow them.
		return node.Caller{Principal: principalOperator, Host: "ops"}
	case c == op.intruder:
		return node.Caller{Principal: principalIntruder, Host: "intruder"}
	case ww.txn.owns(c):
		// A super user: bootstrapACLs grant the transactional
		// workload's clients nothing of their own.
		return node.Caller{Principal: principalAdmin, Host: "admin"}
	}
	return node.Caller{Principal: principalApp, Host: "app"}
}

// configure turns authorization on in a node's config.
func (op *operator) configure(cfg *node.Config) {
	if op.auth {
		cfg.Authorization = true
		cfg.SuperUsers = []node.Principal{principalAdmin}
	}
}

// bootstrap runs the admin's set-up of authorization (users and ACLs)
// and of the workload principal's quota (Options.AppQuota), then then; at
// once when there is neither.
func (op *operator) bootstrap(then func()) {
	if op == nil {
		then()
		return
	}
	reqs := op.quotaRequests()
	if op.auth {
		op.ww.w.coverage.Inc("auth/run")
		reqs = append(op.bootstrapRequests(), reqs...)
	}
	if len(reqs) == 0 {
		then()
		return
	}
	a := op.ww.admin
	a.attempts = 0
	op.bootstrapStep(a, reqs, a.randomNode(), func() {
		if op.auth {
			op.ww.sasl.startImpostor() // sasl.go
		}
		then()
	})
}

// quotaRequests set Options.AppQuota on the principal the workload's
// clients run as (User:app with authorization, User:ANONYMOUS without);
// none when the seed drew no quota.
func (op *operator) quotaRequests() []*strandpb.Request {
	q := op.ww.w.opts.AppQuota
	if q <= 0 {
		return nil
	}
	principal := node.Anonymous
	if op.auth {
		principal = principalApp
	}
	return []*strandpb.Request{{Body: &strandpb.Request_AlterQuotas{AlterQuotas: &strandpb.AlterQuotasRequest{
		Quotas: []*strandpb.Quota{{Principal: string(principal), ProduceBytesPerSec: q, FetchBytesPerSec: q}}}}}}
}

// bootstrapRequests are the admin's requests that set up authorization.
func (op *operator) bootstrapRequests() []*strandpb.Request {
	users := &strandpb.AlterUsersRequest{}
	if s := op.ww.sasl; s != nil {
		// The users the clients authenticate as, salted from the
		// run's stream (sasl.go); the intruder is a user no ACL names.
		for _, name := range []string{"app", "ops", intruderName} {
			users.Upserts = append(users.Upserts, &strandpb.AlterUsersRequest_Upsert{Name: name, Credential: s.credential(name)})
		}
	} else {
		for _, name := range []string{"app", "ops"} {
			users.Upserts = append(users.Upserts, &strandpb.AlterUsersRequest_Upsert{Name: name, Credential: op.credential(4096)})
		}
	}
	acls := &strandpb.AlterAclsRequest{Add: bootstrapACLs()}
	return []*strandpb.Request{
		{Body: &strandpb.Request_AlterUsers{AlterUsers: users}},
		{Body: &strandpb.Request_AlterAcls{AlterAcls: acls}},
	}
}

// bootstrapStep sends reqs[0] to target until acknowledged (upserts and
// additions are idempotent), then the rest.
func (op *operator) bootstrapStep(a *wireClient, reqs []*strandpb.Request, target int, then func()) {
	if len(reqs) == 0 {
		then()
		return
	}
	a.attempts++
	op.ww.call(a, target, reqs[0], func(resp *strandpb.Response, err error) {
		if err == nil {
			err = wireErr(resp.GetError())
		}
		for _, r := range resp.GetAlterUsers().GetResults() {
			if err == nil {
				err = wireErr(r.GetError())
			}
		}
		if err == nil {
			if reqs[0].GetAlterUsers() != nil && op.ww.sasl != nil {
				op.ww.sasl.usersCreated() // sasl.go
			}
			if reqs[0].GetAlterAcls() != nil {
				op.grants = append(op.grants, reqs[0].GetAlterAcls().GetAdd()...)
			}
			a.attempts = 0
			op.bootstrapStep(a, reqs[1:], target, then)
			return
		}
		if act := clientlib.ClassifyErr(err); !act.Retriable {
			op.ww.w.fail("operator: bootstrap request %s refused: %v", requestType(reqs[0]), err)
			op.ww.w.stop()
			return
		}
		a.refresh()
		next := a.controllerTarget(err)
		a.after(wireBackoff.Delay(a.attempts, a.rng), func() { op.bootstrapStep(a, reqs, next, then) })
	})
}

// bootstrapACLs are the bindings authorization runs with: the workload's
// and the operator's. The operator has no transactional-id binding: with
// authorization on, its transaction requests are refused
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED (definite, changing nothing), as
// they are refused for other reasons without it.
func bootstrapACLs() []*strandpb.AclBinding {
	return []*strandpb.AclBinding{
		aclBinding(principalApp, "topic", "sim", "prefixed", "all"),
		aclBinding(principalApp, "group", "sim", "prefixed", "all"), // simgroup, simclassic
		aclBinding(principalOperator, "cluster", "kafka-cluster", "literal", "all"),
		aclBinding(principalOperator, "topic", "sim", "prefixed", "all"),
		aclBinding(principalOperator, "group", "ops", "prefixed", "all"),
	}
}

// aclBinding is an allow binding for any host.
func aclBinding(p node.Principal, typ, name, pattern, operation string) *strandpb.AclBinding {
	return &strandpb.AclBinding{Principal: string(p), ResourceType: typ, ResourceName: name, PatternType: pattern,
		Operation: operation, Permission: "allow", Host: "*"}
}

// credential is a well-formed SCRAM-SHA-256 credential of random bytes
// (the simulator never authenticates with it: PBKDF2 would cost more CPU
// than the rest of a request's path).
func (op *operator) credential(iterations int32) *strandpb.UserCredential {
	b := make([]byte, 96)
	for i := range b {
		b[i] = byte(op.rng.Uint32())
	}
	return &strandpb.UserCredential{Mechanism: "SCRAM-SHA-256", Salt: b[:32], Iterations: iterations,
		StoredKey: b[32:64], ServerKey: b[64:]}
}

// start begins the actions once the topics exist.
func (op *operator) start() {
	if op == nil {
		return
	}
	op.started = true
	op.ops.refresh()
	op.opsLib = op.ww.adminLib(op.ops)
	if op.auth {
		op.intruderLib = op.ww.adminLib(op.intruder)
	}
	op.ops.after(op.pace(), op.step)
	op.startGrantProbe() // operator_grants.go
}

// pace spaces the actions over the run: the workload issues its
// operations in about a tenth of a virtual minute; once it finished, the
// remaining actions follow each other.
func (op *operator) pace() time.Duration {
	if op.ww.active == 0 {
		return time.Duration(op.rng.Int64N(int64(20 * time.Millisecond)))
	}
	return time.Duration(20+op.rng.Int64N(180)) * time.Millisecond
}

// step sends the next planned action, if no other is in flight.
func (op *operator) step() {
	if op.busy {
		return
	}
	if op.next == len(op.plan) {
		op.done = true
		return
	}
	if op.ww.w.work.overtime {
		// Past the time limit the run only drains (overtime.go): the
		// actions not sent yet are dropped, what was sent is verified.
		// Seed 40 ran 135 of its 150 actions after the limit (each took
		// seconds under the faults before) and its drain waited on them
		// past the grace.
		op.ww.w.coverage.Inc("operator/plan-cut-by-time-limit")
		op.plan = op.plan[:op.next]
		op.done = true
		return
	}
	a := op.plan[op.next]
	op.next++
	op.busy = true
	op.send(a, func() {
		op.busy = false
		op.ops.after(op.pace(), op.step)
	})
}

// send sends one action and judges its answer; done runs once it ended.
func (op *operator) send(a opAction, done func()) {
	c := op.ops
	if a.intruder {
		c = op.intruder
	}
	r := op.request(a)
	if !a.intruder && (r.lib == nil) != slices.Contains(rawRequestTypes, a.kind) {
		panic("simnet: the operator's " + a.kind + " disagrees with rawRequestTypes")
	}
	op.ww.w.coverage.Inc("operator/sent")
	if r.lib != nil {
		op.ww.w.coverage.Inc("operator/lib")
		cl := op.opsLib
		if a.intruder {
			cl = op.intruderLib
		}
		var listed int
		var err error
		op.ww.w.simRun(cl, func(ctx context.Context) { listed, err = r.lib(ctx, cl) }, func() {
			if a.intruder {
				op.judgeIntruderLib(a, listed, err)
			} else {
				op.judgeLib(a, r, err)
			}
			done()
		})
		return
	}
	op.ww.call(c, r.target, r.req, func(resp *strandpb.Response, err error) {
		if a.intruder {
			op.judgeIntruder(a, r, resp, err)
		} else {
			op.judge(a, r, resp, err)
		}
		done()
	})
}

// judge records an operator request's outcome in the ledger.
func (op *operator) judge(a opAction, r *opRequest, resp *strandpb.Response, err error) {
	if err == nil {
		err = wireErr(resp.GetError())
	}
	if err == nil && r.itemErr != nil {
		err = r.itemErr(resp)
	}
	if err != nil {
		op.ops.react(0, err)
	}
	op.record(a, r, err, func() {
		if r.onAck != nil {
			r.onAck(resp)
		}
	})
}

// judgeLib records the outcome of an operator's clientlib admin call in
// the ledger, as clientlib reports it: success is acknowledged, an error
// that may have written (a lost answer, a code that may have written, a
// leader or controller change clientlib gave up on) is ambiguous, any
// other error is a definite refusal, changing nothing — the contract a
// cmd/strand user relies on, retries included.
func (op *operator) judgeLib(a opAction, r *opRequest, err error) {
	op.record(a, r, err, func() {
		if r.libAck != nil {
			r.libAck()
		}
	})
}

// record files an operator action's outcome in the ledger: acknowledged
// (then onAck runs), ambiguous (an error that may have written: a lost
// answer, a code that may have written, retries spent after one), or a
// definite refusal that changed nothing.
func (op *operator) record(a opAction, r *opRequest, err error, onAck func()) {
	w := op.ww.w
	act := clientlib.ClassifyErr(err)
	switch {
	case err == nil:
		w.coverage.Inc("operator/acked")
		op.ledger.acked(r.writes)
		onAck()
	case act.MaybeWritten || act.RefreshMetadata || clientlib.MaybeWritten(err):
		w.coverage.Inc("operator/ambiguous")
		op.ledger.ambiguous(r.writes)
	default:
		w.coverage.Inc("operator/refused")
		if r.mustSucceed {
			w.fail("operator: %s refused: %v", a.kind, err)
		}
	}
}

// judgeIntruderLib checks that the intruder's clientlib admin call failed
// with an authorization refusal (a listing call: listed nothing). An
// error that decides nothing (a lost connection, a node still replaying
// its metadata, retries spent on a retriable code, an authentication a
// lagging node could not check yet, any of them after an attempt whose
// answer was lost) proves nothing; its change must still never show
// (operator_verify.go).
func (op *operator) judgeIntruderLib(a opAction, listed int, err error) {
	w := op.ww.w
	var e *clientlib.Error
	isErr := errors.As(err, &e)
	switch a.kind {
	case "metadata", "describe_topics", "list_groups", "list_transactions", "offset_fetch", "list_users":
		if err != nil || listed == 0 {
			w.coverage.Inc("auth/refused")
			w.coverage.Inc("auth/refused/" + a.kind)
			return
		}
	}
	switch {
	case isErr && authRefusal(&strandpb.Error{Code: e.Code}):
		w.coverage.Inc("auth/refused")
		w.coverage.Inc("auth/refused/" + a.kind) // TestSimRequestCoverage: every type, refused
		return
	case err != nil && (decidesNothing(err) || !isErr || clientlib.Classify(e.Code).Retriable || clientlib.MaybeWritten(err)):
		// Retries spent on a retriable code, also after an attempt whose
		// answer was lost (clientlib then reports it maybe-written,
		// wrapping the code): nothing decided.
		w.coverage.Inc("auth/undecided")
		return
	case err == nil:
		w.fail("authorization: %s by %s (no ACL names it): clientlib's call succeeded as if allowed", a.kind, principalIntruder)
	default:
		w.fail("authorization: %s by %s (no ACL names it): clientlib's call failed with %v, not an authorization refusal", a.kind, principalIntruder, err)
	}
}

// decidesNothing reports whether a failed clientlib call's error says
// nothing about authorization: not a node's answer (a lost connection), a
// retriable code (a node still replaying its metadata), an authentication
// a lagging node could not check yet, or retries spent whose last attempt
// failed so. Retries spent after an attempt whose answer was lost come
// back as a *clientlib.RetriesExhaustedError wrapping the last attempt's
// error, which is itself never retriable (the client already retried):
// its last attempt decides (seed 241: the intruder's describe_acls, its
// last attempt answered UNAVAILABLE by a node replaying its metadata, was
// judged a wrong refusal).
func decidesNothing(err error) bool {
	var spent *clientlib.RetriesExhaustedError
	if errors.As(err, &spent) {
		err = spent.Err
	}
	var e *clientlib.Error
	return !errors.As(err, &e) || clientlib.IsRetriable(err) || e.Code == strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED
}

// judgeIntruder checks that an intruder's request was refused for want of
// authorization (a lost answer proves nothing; its change must still never
// show, operator_verify.go).
func (op *operator) judgeIntruder(a opAction, r *opRequest, resp *strandpb.Response, err error) {
	w := op.ww.w
	if err != nil {
		return
	}
	if resp.GetError().GetCode() == strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE {
		// A node whose metadata is not confirmed current within the
		// request timeout, or is rebuilding, decides no refusal
		// (node/auth.go confirmThenHandle): retriable, nothing done.
		w.coverage.Inc("auth/undecided")
		return
	}
	if why := intruderAnswerWrong(a.kind, resp); why != "" {
		w.fail("authorization: %s by %s (no ACL names it): %s", a.kind, principalIntruder, why)
		return
	}
	w.coverage.Inc("auth/refused")
	w.coverage.Inc("auth/refused/" + a.kind) // TestSimRequestCoverage: every type, refused
}

// authRefusal reports whether e is an authorization refusal.
func authRefusal(e *strandpb.Error) bool {
	switch e.GetCode() {
	case strandpb.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED, strandpb.ErrorCode_ERROR_CODE_GROUP_AUTHORIZATION_FAILED,
		strandpb.ErrorCode_ERROR_CODE_CLUSTER_AUTHORIZATION_FAILED, strandpb.ErrorCode_ERROR_CODE_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
		return true
	}
	return false
}

// intruderAnswerWrong says what is wrong with the answer to an intruder's
// request of type kind ("" when it is a proper refusal).
func intruderAnswerWrong(kind string, resp *strandpb.Response) string {
	e := resp.GetError()
	switch kind {
	case "hello", "raft", "write_txn_markers": // the runtime's, never Handle's: refused whoever asks
		if e.GetCode() == strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST || authRefusal(e) {
			return ""
		}
	case "metadata", "describe_topics", "list_groups", "list_transactions": // filtered: lists nothing the intruder may not describe
		if e != nil || len(resp.GetMetadata().GetTopics())+len(resp.GetDescribeTopics().GetTopics())+len(resp.GetListGroups().GetGroups())+
			len(resp.GetListTransactions().GetTransactions()) == 0 {
			return "" // an error reveals nothing either
		}
		return "the answer lists what the caller may not describe"
	case "produce", "fetch", "list_offsets": // refused as a whole, or per partition
		if authRefusal(e) || e == nil && partitionsRefused(resp) {
			return ""
		}
	default:
		if authRefusal(e) {
			return ""
		}
	}
	if e == nil {
		return "answered as if allowed"
	}
	return "answered " + e.GetCode().String() + " (" + e.GetMessage() + "), not an authorization refusal"
}

// partitionsRefused reports whether a produce, fetch or list offsets answer
// refused every partition it names for want of authorization (and names
// at least one).
func partitionsRefused(resp *strandpb.Response) bool {
	var errs []*strandpb.Error
	for _, p := range resp.GetProduce().GetPartitions() {
		errs = append(errs, p.GetError())
	}
	for _, p := range resp.GetFetch().GetPartitions() {
		errs = append(errs, p.GetError())
	}
	for _, p := range resp.GetListOffsets().GetPartitions() {
		errs = append(errs, p.GetError())
	}
	return len(errs) > 0 && !slices.ContainsFunc(errs, func(e *strandpb.Error) bool { return !authRefusal(e) })
}

// nextValue is a fresh value for a request.
func (op *operator) nextValue() int64 {
	op.values++
	return op.values
}

// intruderName marks what an intruder asks to create or set: the final
// read-back fails on any name holding it.
const intruderName = "intruder"

// namesIntruder reports whether s names something an intruder asked for.
func namesIntruder(s string) bool { return strings.Contains(s, intruderName+"-") }

// configureOperator gives a node's config the operator's settings:
// authorization, and one partition of __strand_offsets for the operator's
// groups when the group workload does not size it.
func (ww *wireWorkload) configureOperator(cfg *node.Config) {
	if ww.ops == nil {
		return
	}
	ww.ops.configure(cfg)
}

// operatorOffsetsPartitions is the partition count of __strand_offsets in
// a run without the group workload: one for the operator's groups or the
// transactional workload's consume-transform-produce members, none
// without either. (Without the operator a transactional seed's nodes made
// the offsets topic at the node's default count, which the checks did not
// number: "node 3 reports unknown partition {__strand_offsets 0}".)
func operatorOffsetsPartitions(o Options) int {
	if o.Operator || o.Txn {
		return 1
	}
	return 0
}

// txnPartitions is the partition count of __strand_transactions in a run
// (node Config.Txn.Partitions): 1 with the operator, whose transaction
// requests create it, or with the transactional workload (wire_txn.go),
// else 0. Its groups follow the __strand_offsets ones in the checks.
func txnPartitions(o Options) int {
	if o.Operator || o.Txn {
		return 1
	}
	return 0
}

// coordinatorPartitions counts the internal topics' groups the checks
// number after the metadata group.
// The transactional workload's topics are numbered after them
// (wire_txn.go), then the compacted topic (wire_kv.go).
func coordinatorPartitions(o Options) int {
	return groupOffsetsPartitions(o) + txnPartitions(o) + txnWorkloadPartitions(o) + kvPartitions(o)
}
