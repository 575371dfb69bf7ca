package server

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/kafkaproto"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
)

// kafkaListener is the node's Kafka protocol listener: package kafka
// decodes Kafka requests and hands the strandpb requests they become to the
// loop, through the same queue (and Core.HandleAs) as native requests.
type kafkaListener struct {
	r   *Server
	ln  net.Listener
	srv *kafkaproto.Server
}

// errKafkaStopped answers a Kafka request submitted while the node stops.
var errKafkaStopped = errors.New("node shutting down")

// listenKafka opens the Kafka listener when configured and records its
// advertised address in this node's Config.Nodes entry, so the node
// registers it in the metadata group and every node's Metadata answer
// names it.
func (r *Server) listenKafka() error {
	ln := r.cfg.KafkaListener
	if ln == nil && r.cfg.KafkaListen == "" {
		return nil
	}
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", r.cfg.KafkaListen); err != nil {
			return fmt.Errorf("node: Kafka listen on %s: %w", r.cfg.KafkaListen, err)
		}
	}
	adv := r.cfg.KafkaAdvertise
	if adv == "" {
		adv = ln.Addr().String()
	}
	nodes := slices.Clone(r.cfg.Core.Nodes)
	for i := range nodes {
		if nodes[i].ID == r.cfg.Core.ID {
			nodes[i].KafkaAddress = adv
		}
	}
	r.cfg.Core.Nodes = nodes
	r.kafka = &kafkaListener{r: r, ln: ln}
	return nil
}

// start serves Kafka connections; a no-op without a Kafka listener.
func (k *kafkaListener) start() {
	if k == nil {
		return
	}
	cfg := kafkaproto.Config{Backend: k, NodeID: int32(k.r.cfg.Core.ID), Logger: k.r.logger, Answers: k.r.fetchAnswers,
		Down: k.peerDown}
	if k.r.tls != nil {
		cfg.TLS = k.r.tls.listenerConfig(k.r.cfg.TLS.ClientAuth, false)
	}
	if k.r.cfg.SASL {
		cfg.SASL = k.r.lookupCredential
		cfg.SASLConfirm = k.r.confirmCredentials
	}
	k.srv = kafkaproto.Serve(k.ln, cfg)
}

// kafkaBrokerDownAfter is how long this node must fail to reach a peer
// before its Kafka Metadata leaves the peer out (kafkaproto.Config.Down):
// longer than a reconnect after a dropped connection, shorter than
// Kafka's broker.session.timeout.ms (9 s), after which Kafka leaves out a
// broker that stopped.
const kafkaBrokerDownAfter = 3 * time.Second

// peerDown says whether this node has failed to reach peer id for
// kafkaBrokerDownAfter.
func (k *kafkaListener) peerDown(id uint64) bool {
	return k.r.net != nil && k.r.net.unreachableFor(node.NodeID(id)) > kafkaBrokerDownAfter
}

// closeListener closes a listener that was never served.
func (k *kafkaListener) closeListener() {
	if k != nil {
		k.ln.Close()
	}
}

// stopAccepting closes the Kafka listener; its connections carry on until
// shutdown.
func (k *kafkaListener) stopAccepting() {
	switch {
	case k == nil:
	case k.srv == nil:
		k.ln.Close()
	default:
		k.srv.StopAccepting()
	}
}

// shutdown lets each Kafka connection write the answers that are in until
// deadline, then closes them all.
func (k *kafkaListener) shutdown(deadline time.Time) {
	if k != nil && k.srv != nil {
		k.srv.Shutdown(deadline)
	}
}

// Submit queues req for the loop, blocking while the loop's queue or byte
// budget is full (backpressure); reply is called on the loop with the
// answer. It fails when done closes or the node stops first.
func (k *kafkaListener) Submit(done <-chan struct{}, req *strandpb.Request, reply func(*strandpb.Response)) error {
	return k.SubmitAs(done, "", "", req, reply)
}

// SubmitAs is Submit for a request from principal ("": anonymous) at host.
func (k *kafkaListener) SubmitAs(done <-chan struct{}, principal, host string, req *strandpb.Request, reply func(*strandpb.Response)) error {
	r := k.r
	// done closes when the connection does; the server closes every Kafka
	// connection as it stops, so nothing waits on a loop that has exited.
	tokens, ok := r.budget.Acquire(proto.Size(req), done)
	if !ok {
		return errKafkaStopped
	}
	select {
	case r.requests <- loopRequest{req: req, tokens: tokens, reply: reply, caller: node.Caller{Principal: node.Principal(principal), Host: host}}:
		return nil
	case <-done:
		r.budget.Release(tokens)
		return errKafkaStopped
	}
}

// KafkaAddr is the address of the Kafka listener, nil without one.
func (r *Server) KafkaAddr() net.Addr {
	if r.kafka == nil {
		return nil
	}
	return r.kafka.ln.Addr()
}

var (
	_ kafkaproto.Backend       = (*kafkaListener)(nil)
	_ kafkaproto.CallerBackend = (*kafkaListener)(nil)
)
