package simnet

import (
	"errors"
	"fmt"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/kafkaproto"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
)

// SASL on the Kafka listener in the simulator. In the seeds with SASL on
// (sasl.go) a simulator's client that speaks Kafka for a request
// (speaksKafka: the Kafka codec's clients, classic members) sends it on a
// Kafka connection of its own, apart from its connections in Strand's
// protocol, and authenticates that connection as a Kafka client does:
// SaslHandshake v1 naming the mechanism, then SaslAuthenticate v2 steps
// carrying the SCRAM messages sasl.ClientSession produces (the client
// knows the exchange ended by SCRAM's round trips: the second answer is
// the last, and it verifies the node's final message). The node side is
// the Kafka listener's own gate, kafkaproto.SASLGate, one per connection,
// with the node's applied credentials and nonces from the seed: every
// request on the connection goes through it before it is decoded, as
// the listener's reader does, and a request it passes reaches
// Core.HandleAs as the principal the gate proved. A lost connection (the
// node's crash or restart, a closed one) is dialed and authenticated
// again before the next request.
//
// Checks: a request passes a gate only on a connection whose client
// verified the exchange (the simulator's own record, not the gate's),
// and as the client's principal; a Kafka impostor (kafkaImpostor) tries
// a few times per run — with a wrong password (its fetch pipelined behind
// its last step), with a request right after the handshake, with a
// request before any handshake — and every answer it gets must be a
// refusal or a closed connection: nothing it sends may pass a gate.
//
// Not modelled: clientlib's simulated clients speak Strand's protocol and
// authenticate natively (clientlib/sim_sasl.go); when the Kafka codec
// encodes their produce or fetch it rides their native connection, as
// before the gate ran here.

// kafkaImpostorAttempts is how many times the Kafka impostor tries.
const kafkaImpostorAttempts = 6

// kafkaGated reports whether connection id is a Kafka one whose gate
// the node runs (a connection already gone counts: the node closes it
// whatever it carries).
func (s *simSASL) kafkaGated(id uint64) bool {
	sc := s.conns[id]
	return sc == nil || sc.kafka != nil
}

// admitKafka is the node's Kafka listener reading a request (frame, its
// size prefix included) on a connection: the connection's SASL gate
// first. ok: the gate passed it, and caller is who it runs as;
// otherwise the gate answered it (a SASL step) or refused it, and the
// answer, or the closed connection, is on its way.
func (s *simSASL) admitKafka(c *wireClient, n *simNode, frame []byte, call *wireCall) (caller node.Caller, ok bool) {
	w := s.ww.w
	sc := s.conns[call.conn]
	if sc == nil || sc.closed || sc.inc != n.incarnation {
		s.closedAnswer(c, n, call)
		return node.Caller{}, false
	}
	st := sc.kafka.Step(frame[4:])
	if st.Pass {
		switch {
		case c == s.kafkaImpostor:
			w.fail("kafka-sasl: the Kafka impostor's request passed node %d's SASL gate as %q", n.index, st.Principal)
		case !sc.proven:
			w.fail("kafka-sasl: a request of client %d passed node %d's SASL gate as %q before its exchange ended",
				c.index, n.index, st.Principal)
		case st.Principal != string(s.ww.caller(c).Principal):
			w.fail("kafka-sasl: client %d's request passed node %d's SASL gate as %q, want %s",
				c.index, n.index, st.Principal, s.ww.caller(c).Principal)
		default:
			return node.Caller{Principal: node.Principal(st.Principal), Host: fmt.Sprintf("client-%d", c.index)}, true
		}
		s.closed(call.conn) // the run failed: nothing more on it
		s.closedAnswer(c, n, call)
		return node.Caller{}, false
	}
	if st.Confirm {
		// A refusal waits for the node's credentials confirmed current,
		// as the Kafka listener's SASLConfirm waits (sasl.go confirmThen).
		s.confirmThen(c, n, func(err error) { s.kafkaStepped(c, n, call, sc, sc.kafka.Confirmed(err)) })
		return node.Caller{}, false
	}
	s.kafkaStepped(c, n, call, sc, st)
	return node.Caller{}, false
}

// kafkaStepped answers a step of client c's Kafka exchange on connection
// sc at node n as st says, and checks it (as stepped does, sasl.go).
func (s *simSASL) kafkaStepped(c *wireClient, n *simNode, call *wireCall, sc *simConn, st kafkaproto.SASLStep) {
	w := s.ww.w
	if st.Authenticated {
		w.coverage.Inc("kafka-sasl/authenticated")
		if prev, ok := s.kafkaAuthedAt(c, n); ok && prev != n.incarnation {
			w.coverage.Inc("kafka-sasl/reauth-after-restart")
		}
		if c == s.kafkaImpostor {
			w.fail("kafka-sasl: the Kafka impostor (User:app with a wrong password) authenticated on node %d as %q", n.index, st.Principal)
		}
	}
	if st.Close != "" {
		w.coverage.Inc("kafka-sasl/refused")
		switch {
		case st.Answer == nil:
			w.coverage.Inc("kafka-sasl/refused-unauthenticated-request") // or not confirmed current: closed unanswered
		case c == s.kafkaImpostor:
		case !s.hasCredential(n, principalUser(s.ww.caller(c).Principal)) && sc.afterUsers:
			w.fail("kafka-sasl: node %d refused %s's Kafka login (%s) without the user's credential, created and acknowledged before the connection was dialed: a refusal decided on metadata not confirmed current",
				n.index, s.ww.caller(c).Principal, st.Close)
		case !s.hasCredential(n, principalUser(s.ww.caller(c).Principal)):
			w.coverage.Inc("kafka-sasl/refused-metadata-lag")
			s.lagRefused[call.conn] = true // the client tries elsewhere (sasl.go)
		default:
			w.fail("kafka-sasl: node %d refused %s's Kafka exchange (%s) although it has applied the user's credential",
				n.index, s.ww.caller(c).Principal, st.Close)
		}
		s.closed(call.conn) // once the answer is written
	}
	if st.Answer == nil {
		s.closedAnswer(c, n, call) // closed without an answer, as Kafka does
		return
	}
	call.kafka.gateAnswer = st.Answer
	s.ww.reply(n, n.incarnation, c, nil, call)
}

// kafkaStep sends one Kafka-framed step of a connection's exchange
// (encode frames it); onDone takes the answer.
func (s *simSASL) kafkaStep(c *wireClient, target int, id uint64, encode func(int32) ([]byte, func([]byte) (*strandpb.Response, error)),
	onDone func(*strandpb.Response, error)) {
	call := &wireCall{conn: id, onDone: onDone, kafka: &kafkaCall{encode: encode}}
	s.ww.send(c, target, &strandpb.Request{}, call)
}

// kafkaExchange authenticates g, a Kafka connection, as a Kafka client
// does (SaslHandshake, then SaslAuthenticate steps), then sends the
// waiting requests; a failure fails them (answered, sasl.go).
func (s *simSASL) kafkaExchange(c *wireClient, target int, g *gateConn) {
	sess := s.session(c)
	first, err := sess.First()
	if err != nil {
		panic("simnet: sasl first step: " + err.Error())
	}
	transport := func(err error) {
		var ce *clientlib.ConnError
		if errors.As(err, &ce) {
			err = &clientlib.ConnError{Addr: ce.Addr, Err: ce.Err} // the waiting requests were not sent
		}
		s.fail(c, target, g, err)
	}
	answers := 0
	var step func(*strandpb.Request)
	step = func(req *strandpb.Request) {
		auth := req.GetSaslAuthenticate().GetAuthBytes()
		s.kafkaStep(c, target, g.id, func(corr int32) ([]byte, func([]byte) (*strandpb.Response, error)) {
			return kafkaproto.EncodeSASLAuthenticate(auth, corr)
		}, func(resp *strandpb.Response, err error) {
			if err != nil {
				transport(err)
				return
			}
			if answers++; answers == 2 && resp.GetError() == nil && resp.GetSaslAuthenticate() != nil {
				resp.GetSaslAuthenticate().Done = true // SCRAM's second answer is its last
			}
			s.answered(c, target, g, sess, resp, step)
		})
	}
	mechanism := first.GetSaslAuthenticate().GetMechanism()
	s.kafkaStep(c, target, g.id, func(corr int32) ([]byte, func([]byte) (*strandpb.Response, error)) {
		return kafkaproto.EncodeSASLHandshake(mechanism, corr)
	}, func(resp *strandpb.Response, err error) {
		switch {
		case err != nil:
			transport(err)
		case resp.GetError() != nil:
			s.ww.w.fail("kafka-sasl: node %d refused client %d's SaslHandshake for %s: %v", target, c.index, mechanism, resp.GetError())
			s.fail(c, target, g, s.stepErr(errors.New(resp.GetError().GetMessage())))
		default:
			step(first)
		}
	})
}

// kafkaImpostorMode is how one Kafka impostor attempt goes.
type kafkaImpostorMode int

const (
	// impostorAfterHandshake sends a fetch once the handshake is
	// answered, with no SaslAuthenticate.
	impostorAfterHandshake kafkaImpostorMode = iota
	// impostorWrongPassword runs the exchange as User:app with a wrong
	// password, its fetch pipelined behind the last step.
	impostorWrongPassword
	// impostorNoHandshake sends a fetch first.
	impostorNoHandshake
)

// startKafkaImpostor schedules the Kafka impostor's attempts.
func (s *simSASL) startKafkaImpostor() {
	k := s.kafkaImpostor
	for range kafkaImpostorAttempts {
		d := k.rng.Int64N(int64(impostorWindow))
		mode := kafkaImpostorMode(max(0, k.rng.IntN(4)-1)) // half of them right after the handshake
		k.after(time.Duration(d), func() { s.kafkaImpostorTry(mode) })
	}
}

// kafkaImpostorTry is one attempt on a fresh Kafka connection to a
// random node.
func (s *simSASL) kafkaImpostorTry(mode kafkaImpostorMode) {
	k := s.kafkaImpostor
	target := k.randomNode()
	id := s.dial(k, target, false, true)
	fetch := func() { s.kafkaImpostorFetch(target, id) }
	switch mode {
	case impostorNoHandshake:
		fetch()
		return
	case impostorAfterHandshake, impostorWrongPassword: // both begin with the handshake below
	}
	sess := s.session(s.impostor) // User:app with a wrong password
	first, err := sess.First()
	if err != nil {
		panic("simnet: sasl first step: " + err.Error())
	}
	final := func(resp *strandpb.Response, err error) { s.kafkaImpostorFinal(target, resp, err) }
	s.kafkaStep(k, target, id, func(corr int32) ([]byte, func([]byte) (*strandpb.Response, error)) {
		return kafkaproto.EncodeSASLHandshake(first.GetSaslAuthenticate().GetMechanism(), corr)
	}, func(resp *strandpb.Response, err error) {
		if err != nil || resp.GetError() != nil {
			s.closed(id)
			return
		}
		if mode == impostorAfterHandshake {
			fetch()
			return
		}
		s.kafkaStep(k, target, id, func(corr int32) ([]byte, func([]byte) (*strandpb.Response, error)) {
			return kafkaproto.EncodeSASLAuthenticate(first.GetSaslAuthenticate().GetAuthBytes(), corr)
		}, func(resp *strandpb.Response, err error) {
			if err != nil || resp.GetError() != nil {
				final(resp, err)
				s.closed(id)
				return
			}
			next, _, err := sess.Next(resp)
			if err != nil {
				s.closed(id)
				return
			}
			s.kafkaStep(k, target, id, func(corr int32) ([]byte, func([]byte) (*strandpb.Response, error)) {
				return kafkaproto.EncodeSASLAuthenticate(next.GetSaslAuthenticate().GetAuthBytes(), corr)
			}, final)
			fetch() // pipelined behind the last step, as a client that does not wait would
		})
	})
}

// kafkaImpostorFetch sends the impostor's fetch on connection id to
// node target: it must never be answered.
func (s *simSASL) kafkaImpostorFetch(target int, id uint64) {
	w, k := s.ww.w, s.kafkaImpostor
	req := &strandpb.Request{Body: &strandpb.Request_Fetch{Fetch: &strandpb.FetchRequest{MaxBytes: 1 << 10,
		Partitions: []*strandpb.FetchRequest_Partition{{Topic: impostorTopic, Partition: 0, MaxBytes: 1 << 10}}}}}
	s.kafkaStep(k, target, id, func(corr int32) ([]byte, func([]byte) (*strandpb.Response, error)) {
		frame, decode, _ := kafkaproto.EncodeRequest(req, corr)
		return frame, decode
	}, func(resp *strandpb.Response, err error) {
		var ce *clientlib.ConnError
		switch {
		case errors.As(err, &ce) && errors.Is(ce.Err, errConnClosed):
			w.coverage.Inc("kafka-sasl/impostor-refused")
		case err != nil:
		default:
			w.fail("kafka-sasl: the Kafka impostor's fetch on an unauthenticated connection to node %d was answered %v", target, resp)
		}
		s.closed(id)
	})
}

// kafkaImpostorFinal checks the answer to the impostor's last SASL step
// at node target: SASL_AUTHENTICATION_FAILED, or no answer.
func (s *simSASL) kafkaImpostorFinal(target int, resp *strandpb.Response, err error) {
	w := s.ww.w
	switch {
	case err != nil:
	case resp.GetError().GetCode() == strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED:
		w.coverage.Inc("kafka-sasl/impostor-refused")
	default:
		w.fail("kafka-sasl: the Kafka impostor (User:app with a wrong password) was answered %v by node %d, want SASL_AUTHENTICATION_FAILED", resp, target)
	}
}

// kafkaAuthedAt records that client c's Kafka connection to node n
// authenticated now, and returns the incarnation of n at c's previous
// Kafka authentication there (ok: there was one).
func (s *simSASL) kafkaAuthedAt(c *wireClient, n *simNode) (prev uint32, ok bool) {
	at := s.kafkaAuthed[c]
	if at == nil {
		at = map[int]uint32{}
		s.kafkaAuthed[c] = at
	}
	prev, ok = at[n.index]
	at[n.index] = n.incarnation
	return prev, ok
}
