package simnet

import (
	"fmt"

	"github.com/strandlog/strand/kafkaproto"
	"github.com/strandlog/strand/proto/strandpb"
)

// kafkaCall is a produce or fetch that travels in Kafka's protocol: the
// client encodes it as a Kafka client would, the node side decodes and
// translates it with kafkaproto (the listener's own code) before
// Core.HandleAs, and the answer goes back as Kafka's response. So the
// simulator's retries, leader changes and checks cover the Kafka path too.
type kafkaCall struct {
	decode func([]byte) (*strandpb.Response, error)
	tr     *kafkaproto.Translation // set once the request reached its node
	// encode, when set, frames the request itself (a SASL step, or the
	// Kafka impostor's request: kafka_sasl.go), given its correlation id.
	encode func(corr int32) ([]byte, func([]byte) (*strandpb.Response, error))
	// gated: the request travels on a Kafka connection whose SASL gate
	// (kafkaproto.SASLGate) the node runs before serving it; gateAnswer
	// is the gate's answer frame (kafka_sasl.go).
	gated      bool
	gateAnswer []byte
}

// speaksKafka reports whether client c sends req in Kafka's protocol:
// when the run asks for it and c is one of the clients that speak it
// (every other one, by index, so no random draw shifts), and always for
// a classic member's group step (wire_classic.go).
func (ww *wireWorkload) speaksKafka(c *wireClient, req *strandpb.Request) bool {
	classic := req.GetGroupHeartbeat().GetClassic() != nil // a classic member speaks only Kafka
	if !classic && (!ww.w.opts.KafkaCodec || c.index%2 == 0 || ww.txn.owns(c)) {
		return false
	}
	switch {
	case req.GetProduce() != nil:
		return req.GetProduce().GetAcks() != 0 // Kafka never answers acks=0; the simulator's client waits for an answer
	case req.GetFetch() != nil:
		return true
	case classic:
		return req.GetGroupHeartbeat().GetClassic().GetStep() != strandpb.ClassicStep_CLASSIC_STEP_NONE // the steps Kafka has a request for
	}
	return false
}

// kafkaEncode encodes req in Kafka's protocol when c speaks it for req
// (speaksKafka); ok is false otherwise.
func (ww *wireWorkload) kafkaEncode(c *wireClient, req *strandpb.Request) (*kafkaCall, []byte, bool) {
	if !ww.speaksKafka(c, req) {
		return nil, nil, false
	}
	frame, decode, ok := kafkaproto.EncodeRequest(req, int32(req.GetCorrelationId()))
	if !ok {
		panic(fmt.Sprintf("simnet: a %s request the client speaks Kafka for has no Kafka encoding", requestType(req)))
	}
	ww.w.coverage.Inc("event/kafka-request")
	if req.GetGroupHeartbeat().GetClassic() != nil {
		ww.w.coverage.Inc("event/kafka-classic-request")
	}
	if ww.namesTopicSecond(req) {
		// Produce and Fetch v13 name the topic by id (the client's
		// requests for the re-created topic always carry one), so the
		// node refuses a request meant for its deleted incarnation.
		ww.w.coverage.Inc("event/kafka-request-recreatable")
	}
	return &kafkaCall{decode: decode}, frame, true
}

// kafkaTranslate decodes a Kafka request that reached its node into the
// Strand request Handle takes. Classic heartbeats are numbered by the
// run's counter, not the wall clock, so a seed replays.
func (ww *wireWorkload) kafkaTranslate(call *wireCall, frame []byte) *strandpb.Request {
	ww.kafkaSeq++
	tr, err := kafkaproto.TranslateSeq(frame[4:], ww.kafkaSeq)
	if err != nil || tr.Request == nil {
		panic(fmt.Sprintf("simnet: Kafka request not translated: %v", err))
	}
	call.kafka.tr = tr
	return tr.Request
}

// answer encodes the node's answer as the Kafka response.
func (k *kafkaCall) answer(resp *strandpb.Response) []byte {
	if k.gateAnswer != nil {
		return k.gateAnswer
	}
	frame := k.tr.Answer(resp)
	if frame == nil {
		panic("simnet: a Kafka request the simulator sends got no answer frame")
	}
	return frame
}

// decodeAnswer decodes the Kafka response back into the Strand answer the
// client's logic expects; an undecodable one fails the run.
func (k *kafkaCall) decodeAnswer(w *world, frame []byte) *strandpb.Response {
	out, err := k.decode(frame)
	if err != nil {
		w.fail("Kafka response not decoded: %v", err)
		return &strandpb.Response{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INTERNAL, Message: err.Error()}}
	}
	return out
}

// namesTopicSecond reports whether req names the topic the workload
// deletes and re-creates.
func (ww *wireWorkload) namesTopicSecond(req *strandpb.Request) bool {
	for _, p := range req.GetProduce().GetPartitions() {
		if p.GetTopic() == topicSecond {
			return true
		}
	}
	for _, p := range req.GetFetch().GetPartitions() {
		if p.GetTopic() == topicSecond {
			return true
		}
	}
	return false
}
