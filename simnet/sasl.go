package simnet

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/internal/clientcore"
	"github.com/strandlog/strand/kafkaproto"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/sasl"
)

// SASL in the simulator. In the seeds with authorization on the nodes
// require SASL, as `strand serve --authorization --sasl-enabled` does, and
// the run models connections: a client dials a connection to a node, runs
// the SCRAM exchange on it (production's steps: sasl.ClientSession on the
// client, sasl.ServerSession on the node, over the simulated network,
// with nonces and salts from the seed), and its requests on an
// authenticated connection reach Core.HandleAs as the principal the
// exchange proved, as node/server's connections do. A request on a
// connection not yet authenticated is answered as production answers it
// (SASL_AUTHENTICATION_FAILED, and the node closes the connection); a
// connection dies with its node's incarnation (a crash, a restart), when
// the node closes it, and when its client closes it (a lost answer), and
// the next request dials and authenticates again.
//
// Who authenticates: clientlib's own producers, plain consumers and group
// members (their transports implement clientcore.Conns, so clientlib's
// simulated Client runs its connection exchange itself:
// clientlib/sim_sasl.go; a member's every process dials its own); the
// simulator's other clients (and clientlib's transactional sessions)
// through gate below, with the same sasl.ClientSession. The admin and the
// transactional clients (super users) connect with a TLS client
// certificate naming User:admin, as an operator's tooling would: their
// connections start authenticated (TLS handshakes stay outside the
// simulator). An impostor claims User:app with a wrong password a few
// times per run: every answer it gets must be a refusal, and nothing it
// sends may reach HandleAs.

// streamSASL is the SASL nonces' and salts' random stream.
const streamSASL uint64 = 31

// saslMechanism is the mechanism the simulated clients use.
const saslMechanism = metadata.ScramSHA256

// saslIterations is the simulated users' PBKDF2 rounds (the least
// allowed: each client computes its salted password once).
const saslIterations = metadata.ScramIterationsMin

// impostorAttempts is how many times the impostor tries.
const impostorAttempts = 6

// errSASLLag fails a simulator's client's request whose connection a
// node refused for want of the user's credential.
var errSASLLag = errors.New("the node has not applied the user's credential yet")

// hasCredential reports whether node n has applied user's credential.
func (s *simSASL) hasCredential(n *simNode, user string) bool {
	_, creds, _ := n.core.SecurityState()
	for _, cr := range creds {
		if cr.Name == user && cr.Mechanism == saslMechanism {
			return true
		}
	}
	return false
}

// impostorWindow is how long after the users exist the impostor's
// attempts fall.
const impostorWindow = 3 * time.Second

// impostorTopic is the topic the impostor asks to create.
const impostorTopic = "sim-impostor"

// simSASL is a run's connections and SASL sessions.
type simSASL struct {
	ww     *wireWorkload
	random *rand.ChaCha8 // nonces and salts
	conns  map[uint64]*simConn
	next   uint64 // the last connection id
	// gates are the simulator's own clients' connections, per node
	// (a client's Kafka connections apart: kafka_sasl.go).
	gates map[gateKey]map[int]*gateConn
	// clients are the users' client identities, shared by the
	// simulator's own clients (the salted password once per user).
	clients  map[string]*sasl.Client
	impostor *wireClient
	// kafkaImpostor speaks Kafka's SASL framing (kafka_sasl.go).
	kafkaImpostor *wireClient
	// authedAt is, per client and node, the incarnation of the node's
	// last exchange that authenticated it (coverage of re-authentication).
	authedAt map[*wireClient]map[int]uint32
	// kafkaAuthed is authedAt for Kafka connections (kafka_sasl.go).
	kafkaAuthed map[*wireClient]map[int]uint32
	// lagRefused are the connections whose exchange a node refused for
	// want of the user's credential (its metadata lags).
	lagRefused map[uint64]bool
	// usersAcked: the admin's AlterUsers creating the clients' users
	// was acknowledged (operator.go bootstrapStep).
	usersAcked bool
	// lagProbe logs in as User:app right after the users' creation
	// (usersCreated).
	lagProbe *wireClient
}

// simConn is one simulated connection, as the node sees it.
type simConn struct {
	client *wireClient
	node   int
	inc    uint32 // the node's incarnation at the dial
	closed bool
	sess   *sasl.ServerSession // nil until the first step
	// principal is set once the connection authenticated.
	principal node.Principal
	lib       bool // dialed by clientlib's simulated Client
	// kafka is a Kafka connection's SASL gate, the listener's own
	// (kafkaproto.SASLGate); nil on a connection in Strand's protocol.
	// proven: the client verified the node's last exchange message
	// (the simulator's own record, not the gate's: kafka_sasl.go).
	kafka  *kafkaproto.SASLGate
	proven bool
	// afterUsers: dialed after the users' creation was acknowledged
	// (usersAcked), so no refusal may name a user its node lacks.
	afterUsers bool
}

// gateKey names a simulator's client's connections: its Kafka ones
// apart from its ones in Strand's protocol.
type gateKey struct {
	c     *wireClient
	kafka bool
}

// gateConn is one connection of a simulator's own client.
type gateConn struct {
	id      uint64
	kafka   bool // a Kafka connection (kafka_sasl.go)
	authed  bool
	started bool
	waiting []gateWaiting
}

// gateWaiting is a request waiting for its connection's exchange.
type gateWaiting struct {
	req  *strandpb.Request
	call *wireCall
}

// saslPasswords are the simulated users' passwords.
var saslPasswords = map[string]string{"app": "app-secret", "ops": "ops-secret", intruderName: "intruder-secret"}

// newSimSASL turns SASL on for a run with authorization on; nil
// otherwise.
func newSimSASL(ww *wireWorkload) *simSASL {
	if ww.ops == nil || !ww.ops.auth {
		return nil
	}
	var seed [32]byte
	r := newStream(ww.w.opts.Seed, streamSASL)
	for i := range seed {
		seed[i] = byte(r.Uint32())
	}
	s := &simSASL{ww: ww, random: rand.NewChaCha8(seed), conns: map[uint64]*simConn{},
		gates: map[gateKey]map[int]*gateConn{}, clients: map[string]*sasl.Client{}, authedAt: map[*wireClient]map[int]uint32{}, kafkaAuthed: map[*wireClient]map[int]uint32{}, lagRefused: map[uint64]bool{}}
	s.impostor = newWireClient(ww, 0, kindOperator)
	s.impostor.rng = newStream(ww.w.opts.Seed, streamSASL+1)
	s.kafkaImpostor = newWireClient(ww, 0, kindOperator)
	s.kafkaImpostor.rng = newStream(ww.w.opts.Seed, streamSASL+2)
	return s
}

// credential is user's stored credential, salted from the run's stream.
func (s *simSASL) credential(user string) *strandpb.UserCredential {
	c, err := sasl.NewCredentialRand(saslMechanism, user, saslPasswords[user], saslIterations, s.random)
	if err != nil {
		panic("simnet: credential: " + err.Error())
	}
	return c
}

// certified reports whether client c connects with a TLS certificate
// (authenticated before any SASL): the super user's clients.
func (s *simSASL) certified(c *wireClient) bool {
	return s.ww.caller(c).Principal == principalAdmin
}

// dial opens a connection from c to node target (a Kafka one: to its
// Kafka listener).
func (s *simSASL) dial(c *wireClient, target int, lib, kafka bool) uint64 {
	s.next++
	sc := &simConn{client: c, node: target, inc: s.ww.w.nodes[target].incarnation, lib: lib, afterUsers: s.usersAcked}
	if kafka {
		sc.kafka = kafkaproto.NewSASLGate(s.lookup(s.ww.w.nodes[target]), s.random)
	}
	if s.certified(c) {
		sc.principal, sc.proven = principalAdmin, true
		if kafka {
			sc.kafka.Authenticate(string(principalAdmin))
		}
	}
	s.conns[s.next] = sc
	return s.next
}

// open reports whether connection id is still open.
func (s *simSASL) open(id uint64) bool {
	sc := s.conns[id]
	return sc != nil && !sc.closed && s.ww.w.nodes[sc.node].incarnation == sc.inc
}

// closed closes connection id (either side); 0 is none.
func (s *simSASL) closed(id uint64) {
	if s == nil {
		return
	}
	if sc := s.conns[id]; sc != nil {
		sc.closed = true
		delete(s.conns, id)
	}
}

// admit is the node's side of a request that reached node n: on an
// authenticated connection, the caller it runs as; otherwise the
// request is a step of the connection's exchange (answered here) or is
// refused, and ok is false.
func (s *simSASL) admit(c *wireClient, n *simNode, req *strandpb.Request, call *wireCall) (caller node.Caller, ok bool) {
	w := s.ww.w
	sc := s.conns[call.conn]
	if call.conn == 0 {
		w.fail("sasl: a %s request reached node %d outside any connection", requestType(req), n.index)
		return node.Caller{}, false
	}
	if sc == nil || sc.closed || sc.inc != n.incarnation {
		s.closedAnswer(c, n, call) // the connection it travelled on is gone
		return node.Caller{}, false
	}
	if sc.principal != "" {
		if c == s.impostor {
			w.fail("sasl: the impostor (User:app with a wrong password) authenticated as %s: its %s request reached node %d",
				sc.principal, requestType(req), n.index)
		}
		return node.Caller{Principal: sc.principal, Host: fmt.Sprintf("client-%d", c.index)}, true
	}
	if sc.sess == nil {
		sc.sess = sasl.NewServerSession(s.lookup(n), s.random)
	}
	st := sc.sess.Step(req)
	if st.Confirm {
		// A refusal waits for the node's credentials confirmed
		// current, as node/server's connections wait (confirmCredentials).
		s.confirmThen(c, n, func(err error) { s.stepped(c, n, req, call, sc, sc.sess.Confirmed(req, err)) })
		return node.Caller{}, false
	}
	s.stepped(c, n, req, call, sc, st)
	return node.Caller{}, false
}

// confirmThen asks node n's round to confirm its credentials current
// (loop.Round.ConfirmSecurity, what node/server's connections ask before
// a SASL refusal) for client c's exchange, and runs then with the outcome
// unless the node crashed or restarted meanwhile (the connection died
// with it).
func (s *simSASL) confirmThen(c *wireClient, n *simNode, then func(error)) {
	w := s.ww.w
	w.coverage.Inc("sasl/confirm")
	if c != s.impostor && c != s.kafkaImpostor && !s.hasCredential(n, principalUser(s.ww.caller(c).Principal)) {
		w.coverage.Inc("sasl/confirm-metadata-lag") // a node that has not applied the user yet
	}
	inc, round := n.incarnation, n.round
	w.guardCall(n, func() {
		round.ConfirmSecurity(func(err error) {
			if !n.up || n.incarnation != inc {
				return
			}
			if err != nil {
				w.coverage.Inc("sasl/confirm-failed") // answered retriably
			}
			then(err)
		})
	})
	w.endInput(n)
}

// stepped answers a step of client c's exchange on connection sc at node
// n as st says, and checks it: a refusal of a user whose creation was
// acknowledged before the connection was dialed is decided on confirmed
// state, so it never names a user the node lacks.
func (s *simSASL) stepped(c *wireClient, n *simNode, req *strandpb.Request, call *wireCall, sc *simConn, st sasl.ServerStep) {
	w := s.ww.w
	switch {
	case st.Refused != nil && st.Answer.GetError().GetCode() == strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE:
		w.coverage.Inc("sasl/refused-retriable") // not confirmed current: the client authenticates again
		s.closed(call.conn)
	case st.Refused != nil:
		w.coverage.Inc("sasl/refused")
		switch {
		case req.GetSaslAuthenticate() == nil:
			w.coverage.Inc("sasl/refused-unauthenticated-request")
		case c == s.impostor:
		case !s.hasCredential(n, principalUser(s.ww.caller(c).Principal)) && sc.afterUsers:
			w.fail("sasl: node %d refused %s's login (%v) without the user's credential, created and acknowledged before the connection was dialed: a refusal decided on metadata not confirmed current",
				n.index, s.ww.caller(c).Principal, st.Refused)
		case !s.hasCredential(n, principalUser(s.ww.caller(c).Principal)):
			// The users' creation not acknowledged yet when the
			// connection was dialed: the simulator's own clients
			// try elsewhere (lagRefused); clientlib's fail the call.
			w.coverage.Inc("sasl/refused-metadata-lag")
			if !sc.lib {
				s.lagRefused[call.conn] = true
			}
		default:
			w.fail("sasl: node %d refused %s (%v) although it has applied the user's credential", n.index,
				s.ww.caller(c).Principal, st.Refused)
		}
		s.closed(call.conn) // the node closes it once the answer is written
	case st.Done:
		sc.principal = node.Principal(st.Principal)
		w.coverage.Inc("sasl/authenticated")
		if sc.lib {
			w.coverage.Inc("sasl/authenticated-clientlib")
		}
		at := s.authedAt[c]
		if at == nil {
			at = map[int]uint32{}
			s.authedAt[c] = at
		}
		if prev, ok := at[n.index]; ok && prev != n.incarnation {
			w.coverage.Inc("sasl/reauth-after-restart")
		}
		at[n.index] = n.incarnation
	}
	s.ww.reply(n, n.incarnation, c, st.Answer, call)
}

// closedAnswer: call reached node n on a connection that is gone (or
// that n closes without answering it); the client learns it as a closed
// connection one trip later.
func (s *simSASL) closedAnswer(c *wireClient, n *simNode, call *wireCall) {
	w := s.ww.w
	w.sched.schedule(w.net.clientDelay(c.index, n.index), &event{kind: evCall, node: -1, from: n.index, call: func() {
		if !call.done {
			call.done = true
			call.onDone(nil, s.ww.closedConn(n.index))
		}
	}})
}

// lookup is node n's credential store, read at each step: its round's
// security view (loop.Round.LookupCredential), as node/server's listeners
// read it; hasCredential reads the core's applied state instead, so a
// view that lags it is caught.
func (s *simSASL) lookup(n *simNode) sasl.Lookup {
	return func(name, mechanism string) (metadata.Credential, bool) {
		if n.round == nil {
			return metadata.Credential{}, false
		}
		return n.round.LookupCredential(name, mechanism)
	}
}

// gate sends call from the simulator's own client c on its connection
// to target, authenticating the connection first.
func (s *simSASL) gate(c *wireClient, target int, req *strandpb.Request, call *wireCall) {
	key := gateKey{c: c, kafka: s.ww.speaksKafka(c, req)}
	gs := s.gates[key]
	if gs == nil {
		gs = map[int]*gateConn{}
		s.gates[key] = gs
	}
	g := gs[target]
	if g == nil || !s.open(g.id) {
		g = &gateConn{id: s.dial(c, target, false, key.kafka), kafka: key.kafka}
		g.authed = s.conns[g.id].principal != ""
		gs[target] = g
	}
	if g.authed {
		s.sendOn(c, target, g, req, call)
		return
	}
	g.waiting = append(g.waiting, gateWaiting{req: req, call: call})
	if !g.started {
		g.started = true
		if g.kafka {
			s.kafkaExchange(c, target, g) // kafka_sasl.go
		} else {
			s.exchange(c, target, g)
		}
	}
}

// sendOn sends call on g; a transport error closes g (the client's side).
func (s *simSASL) sendOn(c *wireClient, target int, g *gateConn, req *strandpb.Request, call *wireCall) {
	call.conn = g.id
	onDone := call.onDone
	call.onDone = func(resp *strandpb.Response, err error) {
		if err != nil {
			s.drop(c, target, g)
		}
		onDone(resp, err)
	}
	s.ww.send(c, target, req, call)
}

// drop closes g and forgets it.
func (s *simSASL) drop(c *wireClient, target int, g *gateConn) {
	s.closed(g.id)
	if gs := s.gates[gateKey{c: c, kafka: g.kafka}]; gs[target] == g {
		delete(gs, target)
	}
}

// clientExchange is the client side of one exchange.
type clientExchange interface {
	First() (*strandpb.Request, error)
	Next(*strandpb.Response) (*strandpb.Request, bool, error)
}

// session begins client c's exchange: as its principal's user, or, for
// the impostor, as User:app with a wrong password.
func (s *simSASL) session(c *wireClient) clientExchange {
	user, password := principalUser(s.ww.caller(c).Principal), ""
	if c == s.impostor {
		user, password = "app", "not-app-secret"
	} else {
		password = saslPasswords[user]
	}
	cl := s.clients[user+"\x00"+password]
	if cl == nil {
		var err error
		if cl, err = sasl.NewClientRand(saslMechanism, user, password, s.random); err != nil {
			panic("simnet: sasl client: " + err.Error())
		}
		s.clients[user+"\x00"+password] = cl
	}
	if c == s.impostor {
		return impostorSession{cl.Session()}
	}
	return cl.Session()
}

// impostorSession is an attacker's exchange: it does not check the
// node's final message, and goes on as soon as the node says done.
type impostorSession struct{ *sasl.ClientSession }

func (i impostorSession) Next(resp *strandpb.Response) (*strandpb.Request, bool, error) {
	if a := resp.GetSaslAuthenticate(); a.GetDone() && resp.GetError() == nil {
		return nil, true, nil
	}
	return i.ClientSession.Next(resp)
}

// principalUser is a principal's user name.
func principalUser(p node.Principal) string {
	const prefix = "User:"
	if len(p) > len(prefix) && string(p[:len(prefix)]) == prefix {
		return string(p[len(prefix):])
	}
	return string(p)
}

// exchange runs g's authentication, then sends the waiting requests; a
// failure fails them (a refusal as clientlib's TCP path fails its call).
func (s *simSASL) exchange(c *wireClient, target int, g *gateConn) {
	sess := s.session(c)
	req, err := sess.First()
	if err != nil {
		panic("simnet: sasl first step: " + err.Error())
	}
	var step func(*strandpb.Request)
	step = func(req *strandpb.Request) {
		call := &wireCall{conn: g.id, clean: true, onDone: func(resp *strandpb.Response, err error) {
			if err != nil {
				var ce *clientlib.ConnError
				if errors.As(err, &ce) {
					err = &clientlib.ConnError{Addr: ce.Addr, Err: ce.Err} // the waiting requests were not sent
				}
				s.fail(c, target, g, err)
				return
			}
			s.answered(c, target, g, sess, resp, step)
		}}
		s.ww.send(c, target, req, call)
	}
	step(req)
}

// answered takes the node's answer resp to a step of g's exchange: the
// next step goes out by step; once done, the waiting requests go.
func (s *simSASL) answered(c *wireClient, target int, g *gateConn, sess clientExchange, resp *strandpb.Response, step func(*strandpb.Request)) {
	next, done, err := sess.Next(resp)
	switch {
	case err != nil && s.lagRefused[g.id]:
		// The node has not applied the user yet: the simulator's
		// own clients take it as a node not ready and try
		// elsewhere (not sent: retriable, definitely not written).
		s.fail(c, target, g, &clientlib.ConnError{Addr: s.ww.peers[target].Address, Err: errSASLLag})
	case err != nil:
		s.fail(c, target, g, s.stepErr(err))
	case done:
		g.authed = true
		if sc := s.conns[g.id]; sc != nil {
			sc.proven = true
		}
		waiting := g.waiting
		g.waiting = nil
		for _, wt := range waiting {
			s.sendOn(c, target, g, wt.req, wt.call)
		}
	default:
		step(next)
	}
}

// stepErr is a failed exchange as the waiting requests' error.
func (s *simSASL) stepErr(err error) error {
	var refused *sasl.RefusedError
	if errors.As(err, &refused) {
		return &clientlib.Error{Code: refused.Err.GetCode(), Message: refused.Err.GetMessage()}
	}
	return &clientlib.Error{Code: strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED, Message: err.Error()}
}

// fail ends g's exchange: every waiting request fails with err.
func (s *simSASL) fail(c *wireClient, target int, g *gateConn, err error) {
	delete(s.lagRefused, g.id)
	s.drop(c, target, g)
	waiting := g.waiting
	g.waiting = nil
	for _, wt := range waiting {
		if !wt.call.done {
			wt.call.done = true
			wt.call.onDone(nil, err)
		}
	}
}

// usersCreated: the admin's AlterUsers creating the clients' users was
// acknowledged, so from now on no login of theirs may be refused for
// want of the user (stepped). At once a probe logs in as User:app on
// every node that has not applied the user yet (a follower the leader's
// commit has not reached: the login right after a user's creation on a
// lagging node, which such a node refused before its refusals waited for
// a confirmed read); any answer but a refusal is fine.
func (s *simSASL) usersCreated() {
	s.usersAcked = true
	w := s.ww.w
	for _, n := range w.nodes {
		if !n.up || s.hasCredential(n, "app") {
			continue
		}
		w.coverage.Inc("sasl/lag-probe")
		if s.lagProbe == nil {
			s.lagProbe = newWireClient(s.ww, 0, kindOperator)
			s.lagProbe.rng = newStream(w.opts.Seed, streamSASL+3)
		}
		req := &strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}}
		s.ww.call(s.lagProbe, n.index, req, func(resp *strandpb.Response, err error) {
			if err == nil && resp.GetError() == nil {
				w.coverage.Inc("sasl/lag-probe-answered")
			}
		})
	}
}

// startImpostor schedules the impostor's attempts over the run.
func (s *simSASL) startImpostor() {
	if s == nil {
		return
	}
	for range impostorAttempts {
		d := time.Duration(s.impostor.rng.Int64N(int64(impostorWindow)))
		s.impostor.after(d, s.impostorTry)
	}
	s.startKafkaImpostor() // kafka_sasl.go
}

// impostorTry sends one CreateTopics as the impostor: every answer
// must be a refusal (a lost one is no answer).
func (s *simSASL) impostorTry() {
	w := s.ww.w
	req := &strandpb.Request{Body: &strandpb.Request_CreateTopics{CreateTopics: &strandpb.CreateTopicsRequest{
		Topics: []*strandpb.CreateTopicsRequest_Topic{{Name: impostorTopic, Partitions: 1, ReplicationFactor: 1}}}}}
	s.ww.call(s.impostor, s.impostor.randomNode(), req, func(resp *strandpb.Response, err error) {
		var se *clientlib.Error
		switch {
		case errors.As(err, &se) && se.Code == strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED:
			w.coverage.Inc("sasl/impostor-refused")
		case err != nil:
		default:
			w.fail("sasl: the impostor (User:app with a wrong password) was answered %v, want SASL_AUTHENTICATION_FAILED", resp)
		}
	})
}

// libTransport models connections (clientcore.Conns): clientlib's
// simulated Client opens each with a Hello and, with the SASL option,
// authenticates it itself. With SASL on, simSASL keeps the connections;
// without, plainConns.

// Every transport simnet hands a clientlib Client models connections.
var _ = []clientcore.Conns{libTransport{}, libConsumerTransport{}, libMemberTransport{}, txnTransport{}, sesTransport{}}

// plainConns are the connections of clientlib's simulated Clients in a
// run without SASL: open until the client closes one or its node
// restarts. Requests on them travel as the run's other requests do.
type plainConns struct {
	next  uint64
	conns map[uint64]plainConn
	// clientClosed are the connections, plain or SASL, that clientlib
	// closed: answers on them are never read (wire.go reply).
	clientClosed map[uint64]bool
}

// plainConn is one connection: its node and that node's incarnation.
type plainConn struct {
	node int
	inc  uint32
}

// Dial opens a connection to addr (an unknown address gets one that is
// never open).
func (t libTransport) Dial(addr string) uint64 {
	ww := t.c.ww
	target, ok := ww.indexOf[addr]
	switch {
	case !ok:
		return ^uint64(0)
	case ww.sasl != nil:
		return ww.sasl.dial(t.c, target, true, false)
	}
	if ww.plain.conns == nil {
		ww.plain.conns = map[uint64]plainConn{}
	}
	ww.plain.next++
	ww.plain.conns[ww.plain.next] = plainConn{node: target, inc: ww.w.nodes[target].incarnation}
	return ww.plain.next
}

// Open reports whether connection id is open.
func (t libTransport) Open(id uint64) bool {
	ww := t.c.ww
	if ww.sasl != nil {
		return ww.sasl.open(id)
	}
	pc, ok := ww.plain.conns[id]
	return ok && ww.w.nodes[pc.node].incarnation == pc.inc
}

// CallOn is Call on connection id (0: none).
func (t libTransport) CallOn(id uint64, addr string, req *strandpb.Request, done func(*strandpb.Response, error)) {
	target, ok := t.c.ww.indexOf[addr]
	if !ok {
		t.c.after(0, func() { done(nil, &clientlib.ConnError{Addr: addr, Err: errUnknownAddr}) })
		return
	}
	t.c.ww.callOn(t.c, id, target, req, done)
}

// callOn is call on connection id of clientlib's simulated Client (0:
// none: call, through the gate when SASL is on). The client keeps its own
// deadline, so the simulator ends a lost answer's call only at
// libBackstop.
func (ww *wireWorkload) callOn(c *wireClient, id uint64, target int, req *strandpb.Request, onDone func(*strandpb.Response, error)) *wireCall {
	ww.checkCoordinatorConn(id, req) // coordconn_check.go
	call := &wireCall{onDone: onDone, backstop: libBackstop(ww.w.opts, req), hello: req.GetHello() != nil && id != 0, libConn: id}
	if id == 0 || ww.sasl == nil {
		ww.dispatch(c, target, req, call)
		return call
	}
	sc := ww.sasl.conns[id]
	call.conn, call.clean = id, req.GetSaslAuthenticate() != nil && sc != nil && sc.principal == ""
	ww.send(c, target, req, call)
	return call
}

// The library consumers' and group members' transports model
// connections as libTransport does, on their wire client.

// Dial opens a connection to addr.
func (t libConsumerTransport) Dial(addr string) uint64 { return libTransport{t.lc.c}.Dial(addr) }

// Open reports whether connection id is open.
func (t libConsumerTransport) Open(id uint64) bool { return libTransport{t.lc.c}.Open(id) }

// Close closes connection id from the client's side.
func (t libConsumerTransport) Close(id uint64) { libTransport{t.lc.c}.Close(id) }

// Dial opens a connection to addr.
func (t libMemberTransport) Dial(addr string) uint64 { return libTransport{t.m.c}.Dial(addr) }

// Open reports whether connection id is open.
func (t libMemberTransport) Open(id uint64) bool { return libTransport{t.m.c}.Open(id) }

// Close closes connection id from the client's side.
func (t libMemberTransport) Close(id uint64) { libTransport{t.m.c}.Close(id) }

// The transactional producers' and session members' transports model
// connections on their wire client too; each process (life) has its own
// Client, so its own connections.

// Dial opens a connection to addr.
func (t txnTransport) Dial(addr string) uint64 { return libTransport{t.l.p.c}.Dial(addr) }

// Open reports whether connection id is open.
func (t txnTransport) Open(id uint64) bool { return libTransport{t.l.p.c}.Open(id) }

// Close closes connection id from the client's side.
func (t txnTransport) Close(id uint64) { libTransport{t.l.p.c}.Close(id) }

// Dial opens a connection to addr.
func (t sesTransport) Dial(addr string) uint64 { return libTransport{t.l.m.c}.Dial(addr) }

// Open reports whether connection id is open.
func (t sesTransport) Open(id uint64) bool { return libTransport{t.l.m.c}.Open(id) }

// Close closes connection id from the client's side.
func (t sesTransport) Close(id uint64) { libTransport{t.l.m.c}.Close(id) }

// Close closes connection id from the client's side.
//
// A client never gives up on a connection inside a quota throttle its
// node told it (clientlib honours throttle_ms: clientcore.Throttle): that
// would be a healthy node suspected, and a fresh connection the node
// does not throttle, escaping the quota.
func (t libTransport) Close(id uint64) {
	ww := t.c.ww
	if until := ww.told[id]; until > ww.w.now() && t.Open(id) {
		ww.w.fail("clientlib closed connection %d inside the quota throttle its node told it (until %v): a throttle taken for a stall", id, until)
	}
	ww.sasl.closed(id)
	delete(ww.plain.conns, id)
	if ww.plain.clientClosed == nil {
		ww.plain.clientClosed = map[uint64]bool{}
	}
	ww.plain.clientClosed[id] = true
	ww.w.coverage.Inc("event/lib-conn-closed") // a stall or timeout verdict, a failed Hello or exchange
}

// libOpts are the SASL options of client c's clientlib.Client: none when
// SASL is off or c connects with a certificate.
func (s *simSASL) libOpts(c *wireClient) []clientlib.Opt {
	if s == nil || s.certified(c) {
		return nil
	}
	user := principalUser(s.ww.caller(c).Principal)
	return []clientlib.Opt{clientlib.SASL(saslMechanism, user, saslPasswords[user])}
}
