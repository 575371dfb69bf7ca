package simnet

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/internal/clientcore"
	"github.com/strandlog/strand/linearizability"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
)

// Trace record kinds of the client traffic.
const (
	kindWireRequest uint64 = 110 // a request reached a node
	kindWireReply   uint64 = 111 // a response reached a client
)

// metaTopicPartition is the metadata group's key in Observer calls and
// Status (node's metaTopic): the checks treat it as one more group.
var metaTopicPartition = node.TopicPartition{Topic: "@metadata", Partition: 0}

// errWireTimeout is the cause of a request that got no answer in time.
var errWireTimeout = errors.New("simnet: no answer within the client timeout")

// errConnRefused: a clientlib connection reached a node whose process is
// down (crashed, not yet restarted, or dead): its host refuses it.
var errConnRefused = errors.New("simnet: connection refused")

// refuseConn answers a connection's Hello that reached a node whose
// process is down with a refusal, one trip later, as a host whose port
// is closed resets a TCP connection at once: the client tries another
// node without waiting out its dial deadline. (A node cut off by the
// network still answers nothing.)
func (ww *wireWorkload) refuseConn(c *wireClient, target int, call *wireCall) {
	w := ww.w
	w.sched.schedule(w.net.clientDelay(c.index, target), &event{kind: evCall, node: -1, from: target, call: func() {
		if !call.done {
			call.done = true
			call.onDone(nil, &clientlib.ConnError{Addr: ww.peers[target].Address, Err: errConnRefused})
		}
	}})
}

// wireWorkload is the clients and their transport over the wire protocol.
type wireWorkload struct {
	w        *world
	peers    []node.Peer
	indexOf  map[string]int // node address -> node index
	nextCorr uint64
	topics   []topicSpec           // the scenario's topics
	tps      []node.TopicPartition // group index -> topic and partition
	admin    *wireClient
	clients  []*wireClient // producers, consumers, then random readers
	drain    *wireClient
	active   int  // producers and consumers still working
	created  bool // the topics exist: every node registered and hosts its replicas

	// classic is the classic group workload (wire_classic.go); nil
	// without Options.ClassicMembers. kafkaSeq numbers the Kafka
	// translations' classic heartbeats (wire_kafka.go).
	classic  *classicSim
	libGroup *libGroup // the consumer group's members (wire_libgroup.go); nil without Options.GroupMembers
	kafkaSeq uint64
	// topicIDs lists, per topic name, the ids clients saw, in the order
	// first seen: the index is the incarnation (wire_recreate.go).
	topicIDs map[string][][]byte
	drained  []linearizability.TopicPartition // the incarnations the final drain read whole
	grow     *growPlan                        // the main topic's partition grow; nil: none (wire_partitions.go)
	moves    *movePlan                        // the run's partition moves; nil: none (wire_moves.go)
	joins    *joinPlan                        // the run's node joins; nil: none (wire_joins.go)
	produced map[string]string                // every value a producer sent, to its key
	ops      *operator                        // the operator actor; nil: none (operator.go)
	sasl     *simSASL                         // connections and their SASL sessions; nil: SASL off (sasl.go)
	plain    plainConns                       // clientlib's connections when SASL is off (sasl.go)
	// throttled is, per clientlib connection id, when its node's quota
	// pause ends: node/server's reader reads nothing on a throttled
	// connection until then (deliver).
	throttled map[uint64]time.Duration
	// told is, per clientlib connection id, when the throttle its client
	// was told ends (an answer's throttle_ms from its arrival, as
	// clientlib counts it): the client must not give the connection up
	// before (sasl.go libTransport.Close).
	told map[uint64]time.Duration
	txn  *txnSim // the transactional workload; nil: none (wire_txn.go)
	kv   *kvSim  // the compacted-topic workload; nil: none (wire_kv.go)
	// finalHealAt is when the clients were done and the final heal ran
	// (0: not yet).
	finalHealAt time.Duration
}

// wireCall is one request in flight: it ends once, by its answer or by
// its timeout, whichever comes first.
type wireCall struct {
	done   bool
	onDone func(resp *strandpb.Response, err error)
	kafka  *kafkaCall // non-nil: the request travels in Kafka's protocol (wire_kafka.go)
	// reqDamaged: the request's partition whose batch had a bit flipped
	// in flight; respDamaged: a batch in the answer had (corrupt.go).
	reqDamaged  *strandpb.ProduceRequest_Partition
	respDamaged bool
	// conn is the simulated connection the call travels on (0: the run
	// models none: SASL off); clean: a SASL step, sent as is (sasl.go).
	conn  uint64
	clean bool
	// backstop, when set, replaces Options.ClientTimeout as the time the
	// simulator ends a call whose answer never came: a clientlib Client
	// gives a call up at its own deadline just before (libBackstop).
	backstop time.Duration
	// hello: the call is a clientlib connection's opening Hello.
	hello bool
	// libConn is the clientlib connection the call went on (0: none): an
	// answer that arrives once the client closed it (it gave the call, or
	// another on it, up) is never read.
	libConn uint64
}

// newWireWorkload names the nodes n1..nN and creates the clients.
func newWireWorkload(w *world) *wireWorkload {
	ww := &wireWorkload{w: w, indexOf: make(map[string]int), topics: scenarioTopics(w.opts.Partitions),
		tps: groupTopics(w.opts.Partitions), topicIDs: map[string][][]byte{},
		produced: map[string]string{}}
	for _, n := range w.nodes {
		addr := "n" + strconv.Itoa(int(n.id))
		ww.peers = append(ww.peers, node.Peer{ID: n.id, Address: addr, Rack: "r" + strconv.Itoa(n.index%2)})
		ww.indexOf[addr] = n.index
	}
	o := w.opts
	ww.admin = newWireClient(ww, 0, 0)
	ww.ops = newOperator(ww)
	ww.sasl = newSimSASL(ww)
	for i := 0; i < o.Producers; i++ {
		ww.clients = append(ww.clients, newWireClient(ww, i, kindProducer))
	}
	for i := o.Producers; i < o.Producers+o.Consumers; i++ {
		c := newWireClient(ww, i, kindConsumer)
		c.libCons = newLibConsumer(c) // wire_libconsumer.go
		ww.clients = append(ww.clients, c)
	}
	for i := o.Producers + o.Consumers; i < o.Producers+o.Consumers+o.Readers; i++ {
		ww.clients = append(ww.clients, newWireClient(ww, i, kindReader))
	}
	last := o.Producers + o.Consumers + o.Readers // the network's drain client index
	ww.drain = newWireClient(ww, last, kindDrain)
	if o.GroupMembers > 0 {
		ww.libGroup = newLibGroup(ww, last+1) // wire_libgroup.go
		if o.ClassicMembers > 0 {
			ww.classic = newClassicSim(ww, last+1+o.GroupMembers)
		}
	}
	ww.txn = newTxnSim(ww, last+1+o.GroupMembers+o.ClassicMembers)
	ww.kv = newKVSim(ww, last+1+o.GroupMembers+o.ClassicMembers+txnClients(o))
	ww.grow = newGrowPlan(ww)
	ww.moves = newMovePlan(ww)
	ww.joins = newJoinPlan(ww) // wire_joins.go
	return ww
}

// configure gives a node's config the cluster's nodes (the world's
// startNode hook).
func (ww *wireWorkload) configure(cfg *node.Config) {
	cfg.Nodes = ww.peers
	ww.configureJoin(cfg)
	if ww.libGroup != nil {
		ww.configureGroups(cfg)
	} else {
		// The checks number exactly these groups (world.groupOf).
		cfg.Groups.OffsetsPartitions = int32(groupOffsetsPartitions(ww.w.opts))
	}
	ww.configureOperator(cfg)
	ww.txn.configure(cfg) // wire_txn_session.go
	ww.kv.configure(cfg)  // wire_kv.go
}

// start begins the run: the admin client creates the topics.
func (ww *wireWorkload) start() {
	ww.admin.after(0, func() { ww.ops.bootstrap(ww.admin.createTopic) })
}

// topicOf is group p's topic.
func (ww *wireWorkload) topicOf(p int) topicSpec {
	for _, t := range ww.topics {
		if p >= t.first && p < t.first+t.partitions {
			return t
		}
	}
	panic(fmt.Sprintf("simnet: group %d belongs to no topic", p))
}

// topicNames lists the scenario's topic names.
func (ww *wireWorkload) topicNames() []string {
	names := make([]string, len(ww.topics))
	for i, t := range ww.topics {
		names[i] = t.name
	}
	return names
}

// topicCreated starts the producers and consumers.
func (ww *wireWorkload) topicCreated() {
	ww.created = true
	if ww.w.opts.RecreateTopic && len(ww.topics) > 1 {
		a := ww.admin
		ww.active++
		a.recreateAts = recreateTimes(ww.w.opts.Ops, a.rng)
		a.after(0, a.awaitRecreate)
	}
	ww.startGrow()
	ww.startMoves()
	ww.startJoins()
	for _, c := range ww.clients {
		ww.active++
		c.after(c.thinkTime(), c.begin)
	}
	if ww.libGroup != nil {
		ww.libGroup.start()
	}
	if ww.classic != nil {
		ww.classic.start()
	}
	ww.ops.start()
	if ww.txn != nil {
		ww.txn.start()
	}
	ww.kv.start()
}

// clientDone counts a client out; the last one heals everything and
// starts the final drain.
func (ww *wireWorkload) clientDone() {
	ww.active--
	if ww.active > 0 {
		return
	}
	ww.probeAfterIncident()
}

// probeAfterIncident starts the quiet probe once no incident runs (its
// down nodes must be back first). Past the time limit the probe is
// skipped: the grace is the drain's (overtime.go).
func (ww *wireWorkload) probeAfterIncident() {
	if ww.w.planner.inc.running {
		ww.w.sched.schedule(incidentPoll, &event{kind: evCall, node: -1, call: ww.probeAfterIncident})
		return
	}
	if ww.w.work.overtime && !ww.w.probe.ran {
		ww.w.coverage.Inc("event/time-limit-probe-skipped")
		ww.finalHeal()
		return
	}
	ww.w.probeLiveness(ww.finalHeal)
}

// finalHeal heals everything (restarting every node that can) and starts
// the final drain.
func (ww *wireWorkload) finalHeal() {
	ww.finalHealAt = ww.w.now()
	ww.w.planner.healAll()
	drain := func() {
		ww.txn.finish(func() {
			ww.kv.finish(func() { ww.finishLibConsumers(func() { ww.drain.after(0, ww.drain.begin) }) })
		})
	}
	if ww.libGroup != nil && !ww.libGroup.settling {
		ww.libGroup.settle(func() { ww.libGroup.finish(func() { ww.classic.finish(0, drain) }) })
		return
	}
	drain()
}

// call sends req from client c to node target across the simulated
// network; onDone runs once, with the answer or with a timeout error.
func (ww *wireWorkload) call(c *wireClient, target int, req *strandpb.Request, onDone func(*strandpb.Response, error)) *wireCall {
	if ww.administers(c) && !slices.Contains(rawAdminRequestTypes, requestType(req)) {
		panic("simnet: an administrator sends " + requestType(req) + " raw, not in rawAdminRequestTypes")
	}
	call := &wireCall{onDone: onDone}
	ww.dispatch(c, target, req, call)
	return call
}

// dispatch sends call: through the SASL gate when the run has one.
func (ww *wireWorkload) dispatch(c *wireClient, target int, req *strandpb.Request, call *wireCall) {
	if ww.sasl != nil {
		ww.sasl.gate(c, target, req, call) // on an authenticated connection (sasl.go)
		return
	}
	ww.send(c, target, req, call)
}

// libRequestTimeout is the RequestTimeout of every simulated clientlib
// Client: the nodes' request timeout (Knobs.RequestTimeoutTicks, node's
// default when 0) plus ClientTimeout, so a node that cannot complete a
// request answers it (TIMEOUT, NOT_LEADER) before the client gives up, as
// production's 15 s client timeout outlasts the node's 5 s. A client that
// gave up first (the simulator's 300 ms did, against every node timeout
// drawn) retries a leader that answers nothing and never hears why.
func (o Options) libRequestTimeout() time.Duration {
	ticks := o.Knobs.RequestTimeoutTicks
	if ticks <= 0 {
		ticks = nodeRequestTimeoutTicksDefault
	}
	return time.Duration(ticks)*o.TickInterval + o.ClientTimeout
}

// nodeRequestTimeoutTicksDefault is node's request timeout when the
// config sets none (node/open.go requestTimeoutTicksDefault).
const nodeRequestTimeoutTicksDefault = 50

// libStallTimeout is every simulated clientlib Client's StallTimeout: two
// election timeouts, production's ratio (2 s against 1 s elections), so a
// node that answers nothing is given up on, and suspected, well before
// the request timeout.
func (o Options) libStallTimeout() time.Duration {
	return 2 * o.Knobs.electionTimeout(o)
}

// libBackstop is when the simulator ends a clientlib Client's call whose
// answer never came: a nanosecond after the client's own deadline
// (clientlib's sim_watch.go, as roundTrip and the producer's await):
// RequestTimeout, which every simulated Client is given as
// Options.libRequestTimeout, plus a second for a produce that expects an
// answer, or a fetch's long-poll wait. The client gives the call up
// first (TIMEOUT, its connection closed); an answer after that is never
// read, as on the closed connection, so the checks never see it.
func libBackstop(o Options, req *strandpb.Request) time.Duration {
	var extra time.Duration
	switch {
	case req.GetProduce() != nil && req.GetProduce().GetAcks() != 0:
		extra = time.Second
	case req.GetFetch() != nil:
		extra = time.Duration(req.GetFetch().GetMaxWaitMs()) * time.Millisecond
	}
	return o.libRequestTimeout() + extra + 1
}

// send sends req as call (on its connection, call.conn, when the run
// models them: sasl.go) from client c to node target.
func (ww *wireWorkload) send(c *wireClient, target int, req *strandpb.Request, call *wireCall) {
	w := ww.w
	ww.nextCorr++
	req.CorrelationId = ww.nextCorr
	onDone := call.onDone
	var frame []byte
	damage := corruptNone
	if call.clean {
		frame = marshalWire(req) // a SASL step: neither Kafka's codec nor damaged
	} else if call.kafka != nil && call.kafka.encode != nil {
		frame, call.kafka.decode = call.kafka.encode(int32(req.CorrelationId)) // framed by its sender (kafka_sasl.go)
	} else if k, kframe, ok := ww.kafkaEncode(c, req); ok {
		// Kafka's bytes are not damaged: the corruption checks read
		// Strand's frames (corrupt.go).
		call.kafka, frame = k, kframe
	} else {
		frame, damage = w.corrupter.request(req)
		if damage == corruptBatchBit {
			call.reqDamaged = w.corrupter.damaged
		}
	}
	if call.kafka != nil && ww.sasl != nil {
		call.kafka.gated = ww.sasl.kafkaGated(call.conn)
	}
	if !w.net.lost() {
		w.sched.schedule(w.net.clientDelay(c.index, target), &event{kind: evCall, node: target, from: c.index,
			call: func() {
				if damage == corruptTruncate {
					ww.refuseFrame(c, target, call)
					return
				}
				ww.deliver(c, target, frame, call)
			}})
	}
	timeout := w.opts.ClientTimeout
	if call.backstop > 0 {
		timeout = call.backstop
	}
	var backstop func()
	backstop = func() {
		if call.done {
			return
		}
		// clientlib's deadline counts from its connection's throttle's
		// end, which it learns a trip after the node set it: the backstop
		// waits a timeout beyond that too.
		if until := ww.throttled[call.libConn]; call.libConn != 0 && until > 0 && w.now() < until+2*timeout {
			w.sched.schedule(until+2*timeout-w.now(), &event{kind: evCall, node: -1, from: c.index, call: backstop})
			return
		}
		call.done = true
		onDone(nil, &clientlib.ConnError{Addr: ww.peers[target].Address, Sent: true, Err: errWireTimeout})
	}
	w.sched.schedule(timeout, &event{kind: evCall, node: -1, from: c.index, call: backstop})
}

// throttle records that the node throttled clientlib connection id (0:
// none) for wait from now, as node/server's ThrottleFor pauses its reader.
func (ww *wireWorkload) throttle(id uint64, wait time.Duration) {
	if id == 0 || wait <= 0 {
		return
	}
	if ww.throttled == nil {
		ww.throttled = map[uint64]time.Duration{}
	}
	ww.throttled[id] = max(ww.throttled[id], ww.w.now()+wait)
}

// refuseFrame: a frame that does not decode reached node target, which
// closes that connection; the client learns it one trip later.
func (ww *wireWorkload) refuseFrame(c *wireClient, target int, call *wireCall) {
	w := ww.w
	w.traceNote(kindWireRequest, target, uint64(c.index), 0)
	if !w.nodes[target].up {
		return
	}
	ww.sasl.closed(call.conn)
	delete(ww.plain.conns, call.libConn) // the node closed it (a plain connection)
	delete(ww.throttled, call.libConn)
	w.sched.schedule(w.net.clientDelay(c.index, target), &event{kind: evCall, node: -1, from: target, call: func() {
		if !call.done {
			call.done = true
			call.onDone(nil, ww.closedConn(target))
		}
	}})
}

// deliver hands a request that reached its node to Core.HandleAs.
func (ww *wireWorkload) deliver(c *wireClient, target int, frame []byte, call *wireCall) {
	w := ww.w
	n := w.nodes[target]
	w.traceNote(kindWireRequest, target, uint64(c.index), hashBytes(frame))
	if !n.up {
		if call.hello {
			ww.refuseConn(c, target, call) // a down process's port refuses the connection
		}
		return
	}
	if until := ww.throttled[call.libConn]; call.libConn != 0 && until > w.now() {
		// The node's reader pauses a throttled connection
		// (listener.Conn.WaitThrottle): the request is read at the end.
		w.coverage.Inc("loop/throttle-held")
		w.sched.schedule(until-w.now(), &event{kind: evCall, node: target, from: c.index, call: func() { ww.deliver(c, target, frame, call) }})
		return
	}
	caller := ww.caller(c)
	gated := call.kafka != nil && call.kafka.gated
	if gated {
		// The node's Kafka listener runs the connection's SASL gate
		// before it decodes the request (kafka_sasl.go).
		var ok bool
		if caller, ok = ww.sasl.admitKafka(c, n, frame, call); !ok {
			return
		}
	}
	req := &strandpb.Request{}
	if call.kafka != nil {
		req = ww.kafkaTranslate(call, frame)
	} else if err := proto.Unmarshal(frame, req); err != nil {
		panic(fmt.Sprintf("simnet: unmarshal request: %v", err))
	}
	if f := req.GetFetch(); f != nil && len(f.GetPartitions()) == 1 && ww.cutOff(n, int(f.GetPartitions()[0].GetPartition())) {
		w.stats.StaleReads++
	}
	inc := n.incarnation
	if call.hello {
		// A connection's first request, answered by the listener before
		// any SASL step (node/server's handshake, node.AnswerHello). A
		// Hello later on a connection reaches HandleAs, which refuses it.
		w.coverRequest(req)
		var cluster []byte
		if id := n.core.ClusterID(); !id.IsZero() {
			cluster = id.Bytes()
		}
		resp, _ := node.AnswerHello(req, n.id, cluster)
		ww.reply(n, inc, c, resp, call)
		return
	}
	if ww.sasl != nil && !gated {
		var ok bool
		if caller, ok = ww.sasl.admit(c, n, req, call); !ok {
			return // a SASL step, or refused (sasl.go)
		}
	}
	w.coverRequest(req)
	_, hadQuota := n.round.Security().Quota(caller.Principal)
	grants := ww.ops.grantsAt() // operator_grants.go
	round := n.round
	w.guardCall(n, func() {
		round.Handle(caller, req, round.Meter(caller, req, func(resp *strandpb.Response, wait time.Duration) {
			if n.up && n.incarnation == inc {
				if grants != nil {
					ww.ops.checkGrantRefusal(n, caller, req, resp, grants)
				}
				w.checkThrottle(n, caller, hadQuota, resp)
				ww.throttle(call.libConn, wait)
				if req.GetProduce() != nil {
					w.checkCorruptProduce(n, call.reqDamaged, resp.GetProduce())
				}
				w.durability.onProduceAnswer(n, req.GetProduce(), resp.GetProduce())
				w.coverAnswer(resp)
			}
			ww.reply(n, inc, c, resp, call)
		}))
	})
	w.endInput(n)
}

// reply carries a response back to its client, unless the node crashed
// since or the network loses it.
func (ww *wireWorkload) reply(n *simNode, inc uint32, c *wireClient, resp *strandpb.Response, call *wireCall) {
	w := ww.w
	if call.done { // the client gave up on it: held by a paused node, or slow
		for _, t := range resp.GetDeleteTopics().GetTopics() {
			if t.GetError().GetCode() == strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID {
				w.coverage.Inc("event/topic-delete-late-refused") // its id is gone: seed 516's delete, refused
			}
		}
	}
	if !n.up || n.incarnation != inc || w.net.lost() {
		return
	}
	var frame []byte
	damage := corruptNone
	if call.kafka != nil {
		frame = call.kafka.answer(resp)
	} else {
		frame, damage = w.corrupter.response(resp)
	}
	w.sched.schedule(w.net.clientDelay(c.index, n.index), &event{kind: evCall, node: -1, from: n.index, call: func() {
		w.traceNote(kindWireReply, n.index, uint64(c.index), hashBytes(frame))
		if call.done {
			return
		}
		call.done = true
		if call.libConn != 0 && ww.plain.clientClosed[call.libConn] {
			// Never read: the client closed the connection (a stall or
			// timeout verdict). Its checks see it lost, as the client did.
			call.onDone(nil, ww.closedConn(n.index))
			return
		}
		if damage == corruptTruncate {
			// The client cannot decode the answer: it closes the
			// connection and fails the call (rightly, throttled or not).
			delete(ww.throttled, call.libConn)
			delete(ww.told, call.libConn)
			call.onDone(nil, ww.closedConn(n.index))
			return
		}
		call.respDamaged = damage == corruptBatchBit
		out := &strandpb.Response{}
		if call.kafka != nil {
			out = call.kafka.decodeAnswer(w, frame)
		} else if err := proto.Unmarshal(frame, out); err != nil {
			panic(fmt.Sprintf("simnet: unmarshal response: %v", err))
		}
		if d := clientcore.Throttle(out); d > 0 && call.libConn != 0 {
			if ww.told == nil {
				ww.told = map[uint64]time.Duration{}
			}
			ww.told[call.libConn] = max(ww.told[call.libConn], w.now()+d)
		}
		call.onDone(out, nil)
	}})
}

// marshalWire encodes a wire message deterministically.
func marshalWire(m proto.Message) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("simnet: marshal: %v", err))
	}
	return b
}

// wireErr turns a wire error into clientlib's error (nil for none).
func wireErr(e *strandpb.Error) error {
	if e == nil || e.GetCode() == strandpb.ErrorCode_ERROR_CODE_NONE {
		return nil
	}
	return &clientlib.Error{Code: e.GetCode(), Message: e.GetMessage(), LeaderID: e.GetLeaderId(),
		LeaderAddress: e.GetLeaderAddress(), LogStartOffset: e.GetLogStartOffset(), HighWatermark: e.GetHighWatermark()}
}

// errCode is err's wire code, NONE when it has none.
func errCode(err error) strandpb.ErrorCode {
	var e *clientlib.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return strandpb.ErrorCode_ERROR_CODE_NONE
}

// asWireError reports whether err is a *clientlib.Error, setting *e.
func asWireError(err error, e **clientlib.Error) bool { return errors.As(err, e) }

// coverAnswer counts the rare answers a node gives in the run's coverage.
func (w *world) coverAnswer(resp *strandpb.Response) {
	if resp.GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE {
		return
	}
	if resp.GetListOffsets() != nil {
		w.coverage.Inc("event/list-offsets")
	}
	for _, p := range resp.GetProduce().GetPartitions() {
		if p.GetDuplicate() {
			w.coverage.Inc("event/produce-duplicate")
		}
	}
}

// cutOff reports whether n believes it leads partition p while its links
// reach no majority: a read it serves now is from a deposed leader that
// may not know it, and only ReadIndex keeps it from being stale.
func (ww *wireWorkload) cutOff(n *simNode, p int) bool {
	w := ww.w
	if s, ok := w.statusOf(n, p); !ok || !s.IsLeader {
		return false
	}
	reach := 1
	for _, m := range w.nodes {
		if m != n && !w.net.isCut(n.index, m.index) && !w.net.isCut(m.index, n.index) {
			reach++
		}
	}
	return 2*reach <= len(w.nodes)
}
