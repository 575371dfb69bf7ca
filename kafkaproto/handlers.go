package kafkaproto

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/node/server/listener"
	"github.com/strandlog/strand/proto/strandpb"
)

// internalTopicPrefix starts the names of Strand's own topics.
const internalTopicPrefix = "__strand_"

// tp names one topic partition (map key).
type tp struct {
	topic     string
	partition int32
}

// metadata answers Metadata from the node's applied metadata: every
// node's Kafka listener as a broker, leaders as the node knows them, the
// raft term as the leader epoch, the replicas as the ISR (every replica
// is a raft voter).
func (c *conn) metadata(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.MetadataRequest)
	sreq := &strandpb.MetadataRequest{}
	byID := false
	for _, t := range r.Topics {
		if t.Topic != nil {
			sreq.Topics = append(sreq.Topics, *t.Topic)
		} else {
			byID = true
		}
	}
	none := r.Topics != nil && len(r.Topics) == 0 // an empty list asks for brokers only
	if byID {
		sreq.Topics = nil // topics named by id: read all, keep the asked ones
	}
	k := c.submit(&strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: sreq}})
	return func() kmsg.Response {
		resp := c.wait(k)
		if resp == nil {
			return nil
		}
		out := kmsg.NewPtrMetadataResponse()
		out.SetVersion(r.Version)
		out.ControllerID = -1
		m := resp.GetMetadata()
		if m == nil {
			// No answer (node stopping): no brokers and a retriable error
			// per asked topic, so the client retries elsewhere.
			for _, t := range r.Topics {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic, mt.TopicID, mt.ErrorCode = t.Topic, t.TopicID, kafkaCode(resp.GetError())
				out.Topics = append(out.Topics, mt)
			}
			return out
		}
		metadataBrokers(out, m, c.s.brokerDown)
		if m.GetControllerId() != 0 {
			out.ControllerID = int32(m.GetControllerId())
		}
		if none {
			return out
		}
		out.Topics = metadataTopics(r, m, byID)
		return out
	}
}

// metadataBrokers lists every node with a Kafka listener as a broker,
// except those down says are down, and the cluster id.
func metadataBrokers(out *kmsg.MetadataResponse, m *strandpb.MetadataResponse, down func(node uint64) bool) {
	for _, n := range m.GetNodes() {
		host, port, ok := splitHostPort(n.GetKafkaAddress())
		if !ok || down(n.GetId()) {
			continue // no Kafka listener on that node, or not reachable
		}
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = int32(n.GetId()), host, port
		if n.GetRack() != "" {
			rack := n.GetRack()
			b.Rack = &rack
		}
		out.Brokers = append(out.Brokers, b)
	}
	if id := m.GetClusterId(); len(id) > 0 {
		s := base64.RawURLEncoding.EncodeToString(id)
		out.ClusterID = &s
	}
}

// metadataTopics converts the asked topics of a Strand metadata answer;
// topics asked by id (byID) are picked out of all topics.
func metadataTopics(r *kmsg.MetadataRequest, m *strandpb.MetadataResponse, byID bool) []kmsg.MetadataResponseTopic {
	var topics []kmsg.MetadataResponseTopic
	wantID := map[[16]byte]bool{}
	for _, t := range r.Topics {
		if t.Topic == nil {
			wantID[t.TopicID] = true
		}
	}
	for _, t := range m.GetTopics() {
		mt := metadataTopic(t)
		if byID && !wantID[mt.TopicID] && !containsName(r.Topics, t.GetName()) {
			continue
		}
		delete(wantID, mt.TopicID)
		topics = append(topics, mt)
	}
	for _, t := range r.Topics {
		if t.Topic == nil && wantID[t.TopicID] {
			mt := kmsg.NewMetadataResponseTopic()
			mt.TopicID, mt.ErrorCode = t.TopicID, kerr.UnknownTopicID.Code
			topics = append(topics, mt)
		}
	}
	return topics
}

func containsName(ts []kmsg.MetadataRequestTopic, name string) bool {
	for _, t := range ts {
		if t.Topic != nil && *t.Topic == name {
			return true
		}
	}
	return false
}

// metadataTopic converts one topic of a Strand metadata answer.
func metadataTopic(t *strandpb.MetadataResponse_Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.GetName()
	mt.Topic = &name
	copy(mt.TopicID[:], t.GetTopicId())
	mt.ErrorCode = kafkaCode(t.GetError())
	// Strand's own topics (the offsets topic __strand_offsets) are internal,
	// as Kafka's __consumer_offsets is: clients' regex subscriptions skip
	// them. The offsets topic keeps Strand's name: its records are not
	// Kafka's offset-commit format, so tools that read __consumer_offsets
	// (Burrow) would misread it (README, Kafka clients).
	mt.IsInternal = strings.HasPrefix(name, internalTopicPrefix)
	if mt.ErrorCode == kerr.UnknownTopicOrPartition.Code && metadata.ValidateTopicName(name) != nil {
		mt.ErrorCode = kerr.InvalidTopicException.Code // as Kafka: no such topic can exist
	}
	for _, p := range t.GetPartitions() {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.GetPartition()
		mp.ErrorCode = kafkaCode(p.GetError())
		mp.Leader, mp.LeaderEpoch = -1, -1
		if p.GetLeaderId() != 0 {
			mp.Leader, mp.LeaderEpoch = int32(p.GetLeaderId()), int32(p.GetLeaderTerm())
		} else if mp.ErrorCode == 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		for _, id := range p.GetReplicas() {
			mp.Replicas = append(mp.Replicas, int32(id))
		}
		mp.ISR = mp.Replicas
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// splitHostPort splits a Kafka listener address.
func splitHostPort(addr string) (string, int32, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", 0, false
	}
	return host, int32(p), true
}

// produce stores each partition's RecordBatch v2 as sent (ToStore: the
// node validates its records; producer id, epoch and base sequence travel
// beside it, as in Strand's own produce) and sends them all in one Strand
// produce at the same acks. A batch that does not convert is answered for
// its partition alone. v13 names topics by id alone: the node resolves it
// (UNKNOWN_TOPIC_ID when no topic has it).
func (c *conn) produce(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.ProduceRequest)
	local := map[tp]refusal{}
	transactional := map[tp]bool{} // partitions whose batch is transactional (abortableRefusals)
	var sent []tp                  // the request partitions sreq carries, in its order
	sreq := &strandpb.ProduceRequest{Acks: kafkaAcks(r.Acks), TimeoutMs: r.TimeoutMillis}
	if r.TransactionID != nil {
		sreq.TransactionalId = *r.TransactionID
	}
	if e, refused := refuseTransactional(r); refused {
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				local[tp{produceTopicKey(r, t), p.Partition}] = e
			}
		}
	}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			key := tp{produceTopicKey(r, t), p.Partition}
			if _, refused := local[key]; refused {
				continue
			}
			batch, pf, err := ToStore(p.Records)
			if err != nil {
				local[key] = batchError(err)
				continue
			}
			sp := &strandpb.ProduceRequest_Partition{
				Topic: t.Topic, Partition: p.Partition, Batch: batch,
				ProducerId: pf.ID, ProducerEpoch: int32(pf.Epoch), BaseSequence: pf.Sequence,
				Transactional: pf.Transactional,
			}
			if r.Version >= 13 {
				sp.Topic, sp.TopicId = "", t.TopicID[:]
			}
			sreq.Partitions = append(sreq.Partitions, sp)
			sent = append(sent, key)
			if pf.Transactional {
				transactional[key] = true
			}
		}
	}
	var k *call
	if len(sreq.Partitions) > 0 {
		k = c.submit(&strandpb.Request{Body: &strandpb.Request_Produce{Produce: sreq}})
	}
	return func() kmsg.Response {
		answers := map[tp]*strandpb.ProduceResponse_Partition{}
		var whole *strandpb.Response
		if k != nil {
			if whole = c.wait(k); whole == nil {
				return nil
			}
			// The node answers each partition at its request index.
			for i, p := range whole.GetProduce().GetPartitions() {
				if i < len(sent) && p.GetPartition() == sent[i].partition {
					answers[sent[i]] = p
				}
			}
		}
		out := produceAnswer(r, local, answers, whole)
		abortableRefusals(r, out, transactional) // txn.go
		out.ThrottleMillis = whole.GetProduce().GetThrottleMs()
		return out
	}
}

// refuseTransactional is Kafka's answer to a produce holding a
// transactional batch without a transactional id: the whole request is
// refused TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka's broker does
// (KafkaApis.handleProduceRequest). A batch whose header does not parse
// is left to ToStore's refusal.
func refuseTransactional(r *kmsg.ProduceRequest) (refusal, bool) {
	if r.TransactionID != nil {
		return refusal{}, false
	}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			if h, err := recordbatch.ParseKafkaHeader(p.Records); err == nil && h.Transactional {
				return refusal{kerr.TransactionalIDAuthorizationFailed.Code,
					"kafka: a transactional batch needs the produce request's transactional id"}, true
			}
		}
	}
	return refusal{}, false
}

// refusal is the Kafka error code and message of a partition the listener
// refuses itself, without asking the node.
type refusal struct {
	code    int16
	message string
}

// produceTopicKey is how a produce request names a topic: its name, or
// from v13 its id.
func produceTopicKey(r *kmsg.ProduceRequest, t kmsg.ProduceRequestTopic) string {
	if r.Version >= 13 {
		return string(t.TopicID[:])
	}
	return t.Topic
}

// produceAnswer builds the Kafka produce response: per partition the local
// refusal, else the node's answer, else the node's whole-request error.
func produceAnswer(r *kmsg.ProduceRequest, local map[tp]refusal, answers map[tp]*strandpb.ProduceResponse_Partition,
	whole *strandpb.Response) *kmsg.ProduceResponse {
	out := kmsg.NewPtrProduceResponse()
	out.SetVersion(r.Version)
	for _, t := range r.Topics {
		ot := kmsg.NewProduceResponseTopic()
		ot.Topic, ot.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			op := kmsg.NewProduceResponseTopicPartition()
			op.Partition, op.BaseOffset, op.LogAppendTime, op.LogStartOffset = p.Partition, -1, -1, -1
			key := tp{produceTopicKey(r, t), p.Partition}
			var e *strandpb.Error
			if le, refused := local[key]; refused {
				op.ErrorCode, op.ErrorMessage = le.code, &le.message
				ot.Partitions = append(ot.Partitions, op)
				continue
			}
			if a := answers[key]; a != nil {
				e = partErr(whole, a.GetError())
				op.BaseOffset = a.GetBaseOffset()
			} else {
				e = whole.GetError()
				if e == nil {
					e = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INTERNAL, Message: "kafka: partition missing from the node's answer"}
				}
			}
			op.ErrorCode, op.ErrorMessage = kafkaCode(e), message(e)
			if op.ErrorCode != 0 {
				op.BaseOffset = -1
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		out.Topics = append(out.Topics, ot)
	}
	return out
}

// batchError is the Kafka refusal of a batch that did not convert; a
// producer's control batch is Kafka's INVALID_RECORD (LogValidator:
// clients may not write control records).
func batchError(err error) refusal {
	code := strandpb.ErrorCode_ERROR_CODE_CORRUPT_BATCH
	switch {
	case errors.Is(err, ErrControlBatch):
		return refusal{kerr.InvalidRecord.Code, err.Error()}
	case errors.Is(err, ErrTooLarge):
		code = strandpb.ErrorCode_ERROR_CODE_RECORD_TOO_LARGE
	case errors.Is(err, ErrUnsupportedBatch):
		code = strandpb.ErrorCode_ERROR_CODE_UNSUPPORTED_VERSION
	}
	return refusal{kafkaCode(&strandpb.Error{Code: code}), err.Error()}
}

// fetch reads through Strand's fetch (long poll with max wait and min
// bytes, linearizable on the leader) and serves each stored batch as a
// RecordBatch v2, and each transaction marker as Kafka's control batch
// (include_markers), with the isolation level and the partitions' last
// stable offsets and aborted transactions passed through, so a Kafka
// consumer skips the markers and drops aborted batches itself. A batch of
// a compacted prefix (engine/compact's form) is served in Kafka's v2 form
// by AppendCompacted, as Kafka's cleaner leaves one. No fetch sessions: session id 0 tells the client to send
// full fetches. v13+ names topics by id alone: the node resolves it
// (UNKNOWN_TOPIC_ID when no topic has it), so a client fetching a deleted
// topic's id is refused rather than served a re-created topic's records.
func (c *conn) fetch(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.FetchRequest)
	sreq := &strandpb.FetchRequest{MaxWaitMs: r.MaxWaitMillis, MinBytes: r.MinBytes, MaxBytes: r.MaxBytes,
		IncludeMarkers: true}
	if r.Version >= 4 {
		sreq.IsolationLevel = int32(r.IsolationLevel)
	}
	if r.Version < 3 {
		sreq.MaxBytes = RequestBytesMax
	}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			sp := &strandpb.FetchRequest_Partition{
				Topic: t.Topic, Partition: p.Partition, Offset: p.FetchOffset, MaxBytes: p.PartitionMaxBytes}
			if r.Version >= 13 {
				sp.Topic, sp.TopicId = "", t.TopicID[:]
			}
			sreq.Partitions = append(sreq.Partitions, sp)
		}
	}
	if !c.reserveAnswer(sreq.MaxBytes) {
		return func() kmsg.Response { return nil } // the connection closed
	}
	k := c.submit(&strandpb.Request{Body: &strandpb.Request_Fetch{Fetch: sreq}})
	return func() kmsg.Response {
		// The writer runs this just before it writes the answer; the room
		// reserved covers it until written (listener.Conn's writer).
		whole := c.wait(k)
		if whole == nil {
			return nil
		}
		got := whole.GetFetch().GetPartitions()
		out := &fetchAnswer{FetchResponse: kmsg.NewPtrFetchResponse()}
		out.SetVersion(r.Version)
		out.ThrottleMillis = whole.GetFetch().GetThrottleMs()
		i := 0 // the node answers each partition at its request index
		for _, t := range r.Topics {
			ot := kmsg.NewFetchResponseTopic()
			ot.Topic, ot.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				var a *strandpb.FetchResponse_Partition
				if i < len(got) && got[i].GetPartition() == p.Partition {
					a = got[i]
				}
				i++
				op, batches := fetchPartitionHead(whole, a, p.Partition)
				ot.Partitions = append(ot.Partitions, op)
				out.batches = append(out.batches, batches)
			}
			out.Topics = append(out.Topics, ot)
		}
		return out
	}
}

// reserveAnswer adds room for the answer of a fetch with max_bytes m to the
// slot of the request being served, from the connection's bound and the
// node's Config.Answers budget (listener.Conn.Reserve), as a native fetch
// does; the writer gives it back once the answer is written. False when
// the connection closed first. Translate's conn (no connection) reserves
// nothing.
func (c *conn) reserveAnswer(m int32) bool {
	if c.lc == nil {
		return true
	}
	return c.lc.Reserve(&c.slot, listener.FetchAnswerBytes(m))
}

// fetchPartition converts one partition's fetch answer, its record
// bytes copied into RecordBatches.
func fetchPartition(whole *strandpb.Response, a *strandpb.FetchResponse_Partition, partition int32) kmsg.FetchResponseTopicPartition {
	op, batches := fetchPartitionHead(whole, a, partition)
	op.RecordBatches = appendFetchRecords(op.RecordBatches, batches)
	return op
}

// fetchPartitionHead converts one partition's fetch answer but its record
// bytes (RecordBatches empty, never null: librdkafka refuses a -1 size),
// and returns the stored batches they are made from (appendFetchBatch;
// none for a partition answered with an error).
func fetchPartitionHead(whole *strandpb.Response, a *strandpb.FetchResponse_Partition, partition int32) (kmsg.FetchResponseTopicPartition, []*strandpb.FetchResponse_Batch) {
	op := kmsg.NewFetchResponseTopicPartition()
	op.Partition = partition
	op.HighWatermark, op.LastStableOffset, op.LogStartOffset = -1, -1, -1
	op.RecordBatches = []byte{}
	if a == nil {
		e := whole.GetError()
		if e == nil {
			e = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INTERNAL}
		}
		op.ErrorCode = kafkaCode(e)
		return op, nil
	}
	op.ErrorCode = kafkaCode(partErr(whole, a.GetError()))
	if op.ErrorCode != 0 {
		// An offset out of range says where the log is, as Kafka does.
		if e := partErr(whole, a.GetError()); e.GetCode() == strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE {
			op.HighWatermark, op.LastStableOffset, op.LogStartOffset = e.GetHighWatermark(), e.GetHighWatermark(), e.GetLogStartOffset()
		}
		return op, nil
	}
	op.HighWatermark, op.LastStableOffset, op.LogStartOffset = a.GetHighWatermark(), a.GetLastStableOffset(), a.GetLogStartOffset()
	for _, t := range a.GetAbortedTransactions() {
		at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		at.ProducerID, at.FirstOffset = t.GetProducerId(), t.GetFirstOffset()
		op.AbortedTransactions = append(op.AbortedTransactions, at)
	}
	return op, a.GetBatches()
}

// listOffsets maps earliest (-2), latest (-1) and by-timestamp lookups
// onto Strand's ListOffsets (a ReadIndex on the leader).
func (c *conn) listOffsets(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.ListOffsetsRequest)
	sreq := &strandpb.ListOffsetsRequest{}
	if r.Version >= 2 {
		sreq.IsolationLevel = int32(r.IsolationLevel)
	}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			sreq.Partitions = append(sreq.Partitions, &strandpb.ListOffsetsRequest_Partition{
				Topic: t.Topic, Partition: p.Partition, TimestampMs: p.Timestamp})
		}
	}
	k := c.submit(&strandpb.Request{Body: &strandpb.Request_ListOffsets{ListOffsets: sreq}})
	return func() kmsg.Response {
		whole := c.wait(k)
		if whole == nil {
			return nil
		}
		answers := map[tp]*strandpb.ListOffsetsResponse_Partition{}
		for _, p := range whole.GetListOffsets().GetPartitions() {
			answers[tp{p.GetTopic(), p.GetPartition()}] = p
		}
		out := kmsg.NewPtrListOffsetsResponse()
		out.SetVersion(r.Version)
		for _, t := range r.Topics {
			ot := kmsg.NewListOffsetsResponseTopic()
			ot.Topic = t.Topic
			for _, p := range t.Partitions {
				op := kmsg.NewListOffsetsResponseTopicPartition()
				op.Partition, op.Offset, op.Timestamp, op.LeaderEpoch = p.Partition, -1, -1, -1
				a := answers[tp{t.Topic, p.Partition}]
				e := whole.GetError()
				if a != nil {
					e = partErr(whole, a.GetError())
				} else if e == nil {
					e = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INTERNAL}
				}
				op.ErrorCode = kafkaCode(e)
				switch {
				case op.ErrorCode != 0:
				case p.Timestamp >= 0 && a.GetTimestampMs() < 0:
					// No record at or after the timestamp: Kafka answers
					// offset -1 (and timestamp -1), which clients read as
					// "no such record", not the end offset.
				default:
					op.Offset = a.GetOffset()
					if p.Timestamp >= 0 && r.Version >= 1 {
						op.Timestamp = a.GetTimestampMs() // the found record's, as Kafka's
					}
				}
				ot.Partitions = append(ot.Partitions, op)
			}
			out.Topics = append(out.Topics, ot)
		}
		return out
	}
}

// initProducerID allocates a producer id through the metadata group (epoch
// 0, as Strand's own producers); with a transactional id it is the
// transaction coordinator's (initTxnProducerID, txn.go).
func (c *conn) initProducerID(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.InitProducerIDRequest)
	out := kmsg.NewPtrInitProducerIDResponse()
	out.SetVersion(r.Version)
	out.ProducerID, out.ProducerEpoch = -1, -1
	if r.TransactionalID != nil {
		return c.initTxnProducerID(r, out)
	}
	k := c.submit(&strandpb.Request{Body: &strandpb.Request_InitProducerId{InitProducerId: &strandpb.InitProducerIdRequest{}}})
	return func() kmsg.Response {
		whole := c.wait(k)
		if whole == nil {
			return nil
		}
		if out.ErrorCode = kafkaCode(whole.GetError()); out.ErrorCode == 0 {
			a := whole.GetInitProducerId()
			out.ProducerID, out.ProducerEpoch = a.GetProducerId(), int16(a.GetProducerEpoch())
		}
		return out
	}
}

// translateCreateTopic is one topic of a Kafka create as Strand's, or the
// error that refuses it here (badName: Kafka has its own code for a bad
// name).
func translateCreateTopic(t kmsg.CreateTopicsRequestTopic, validateOnly bool) (st *strandpb.CreateTopicsRequest_Topic, refused *strandpb.Error, badName bool) {
	switch {
	case validateOnly:
		return nil, &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST,
			Message: "Strand cannot validate a create without doing it: send it without validate_only"}, false
	case metadata.ValidateTopicName(t.Topic) != nil:
		return nil, &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST,
			Message: metadata.ValidateTopicName(t.Topic).Error() + ": use 1 to 249 of a-z A-Z 0-9 . _ -, not . or .."}, true
	case t.NumPartitions == 0 || t.NumPartitions < -1:
		return nil, &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_PARTITIONS,
			Message: fmt.Sprintf("%d partitions: want at least 1, or -1 for the default", t.NumPartitions)}, false
	case len(t.ReplicaAssignment) > 0:
		return nil, &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST,
			Message: "Strand places replicas itself: send the create without a replica assignment"}, false
	}
	st = &strandpb.CreateTopicsRequest_Topic{Name: t.Topic, Partitions: t.NumPartitions, ReplicationFactor: int32(t.ReplicationFactor)}
	for _, cfg := range t.Configs {
		if cfg.Value == nil {
			continue
		}
		if held, err := raftHeldConfig(cfg.Name, *cfg.Value, t.ReplicationFactor); held || err != nil {
			if err != nil && refused == nil {
				refused = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_CONFIG, Message: err.Error()}
			}
			continue
		}
		st.Configs = append(st.Configs, &strandpb.ConfigEntry{Name: cfg.Name, Value: *cfg.Value})
	}
	if refused != nil {
		return nil, refused, false
	}
	return st, nil, false
}

// createTopics creates topics through the metadata group; the answer's
// partition count, replication factor and topic id (v5+, v7+) come from the
// node's metadata once the creates applied.
func (c *conn) createTopics(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.CreateTopicsRequest)
	local := map[string]*strandpb.Error{}
	invalidName := map[string]bool{}
	sreq := &strandpb.CreateTopicsRequest{TimeoutMs: r.TimeoutMillis}
	for _, t := range r.Topics {
		st, refused, badName := translateCreateTopic(t, r.ValidateOnly)
		if refused != nil {
			local[t.Topic] = refused
			if badName {
				invalidName[t.Topic] = true
			}
			continue
		}
		sreq.Topics = append(sreq.Topics, st)
	}
	var k *call
	if len(sreq.Topics) > 0 {
		k = c.submit(&strandpb.Request{Body: &strandpb.Request_CreateTopics{CreateTopics: sreq}})
	}
	return func() kmsg.Response {
		answers := map[string]*strandpb.Error{}
		var whole *strandpb.Response
		if k != nil {
			if whole = c.wait(k); whole == nil {
				return nil
			}
			for _, t := range whole.GetCreateTopics().GetTopics() {
				answers[t.GetName()] = t.GetError()
			}
		}
		var meta map[string]*strandpb.MetadataResponse_Topic
		if r.Version >= 5 && whole != nil {
			meta = c.topicMetadata(sreq.Topics)
		}
		out := kmsg.NewPtrCreateTopicsResponse()
		out.SetVersion(r.Version)
		for _, t := range r.Topics {
			ot := kmsg.NewCreateTopicsResponseTopic()
			ot.Topic, ot.NumPartitions, ot.ReplicationFactor = t.Topic, -1, -1
			e, ok := local[t.Topic]
			if !ok {
				e, ok = answers[t.Topic]
				if !ok {
					e = whole.GetError()
				} else {
					e = partErr(whole, e)
				}
			}
			ot.ErrorCode, ot.ErrorMessage = createTopicCode(e), message(e)
			if invalidName[t.Topic] {
				ot.ErrorCode = kerr.InvalidTopicException.Code
			}
			if m := meta[t.Topic]; m != nil && ot.ErrorCode == 0 {
				copy(ot.TopicID[:], m.GetTopicId())
				ot.NumPartitions = int32(len(m.GetPartitions()))
				if len(m.GetPartitions()) > 0 {
					ot.ReplicationFactor = int16(len(m.GetPartitions()[0].GetReplicas()))
				}
			}
			out.Topics = append(out.Topics, ot)
		}
		return out
	}
}

// topicMetadata reads the node's metadata of the created topics (best
// effort: nil when the node does not answer).
func (c *conn) topicMetadata(topics []*strandpb.CreateTopicsRequest_Topic) map[string]*strandpb.MetadataResponse_Topic {
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.GetName()
	}
	resp := c.wait(c.submit(&strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{Topics: names}}}))
	out := map[string]*strandpb.MetadataResponse_Topic{}
	for _, t := range resp.GetMetadata().GetTopics() {
		if t.GetError() == nil {
			out[t.GetName()] = t
		}
	}
	return out
}

// deleteTopics deletes topics through the metadata group, by name or
// (v6, KIP-516) by topic id. A topic named by id is resolved to its name
// from the node's metadata (UNKNOWN_TOPIC_ID when no topic has it) and the
// id goes to the native delete with the name, so the metadata group
// refuses it (UNKNOWN_TOPIC_ID) when the topic of that name now has
// another id: a stale id, or a late retry, cannot delete a re-created
// topic. A topic named by both name and id is deleted by the name only
// while it has the id (Kafka refuses naming both; Strand checks).
func (c *conn) deleteTopics(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.DeleteTopicsRequest)
	byID := false
	for _, t := range r.Topics {
		if t.Topic == nil && t.TopicID != ([16]byte{}) {
			byID = true
		}
	}
	// Without ids the delete is submitted now; with ids, after the
	// metadata that resolves them answered.
	var meta, k *call
	var entries []deleteEntry
	if byID {
		meta = c.submit(&strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}})
	} else {
		entries = resolveDeletes(r, nil, nil)
		if dr := nativeDelete(r, entries); dr != nil {
			k = c.submit(dr)
		}
	}
	return func() kmsg.Response {
		if meta != nil {
			m := c.wait(meta)
			if m == nil {
				return nil
			}
			ids, _ := topicIDs(m.GetMetadata())
			entries = resolveDeletes(r, ids, m.GetError())
			if dr := nativeDelete(r, entries); dr != nil {
				k = c.send(dr)
			}
		}
		var whole *strandpb.Response
		if k != nil {
			if whole = c.wait(k); whole == nil {
				return nil
			}
		}
		return deleteTopicsAnswer(r, entries, whole)
	}
}

// deleteEntry is one topic of a DeleteTopics request: its name (nil when
// not resolved), id (zero: any), and the error found before the delete.
type deleteEntry struct {
	name *string
	id   [16]byte
	err  *strandpb.Error
}

// resolveDeletes lists r's topics, resolving those named by id through
// ids (metaErr for a topic named by id when the metadata read failed).
func resolveDeletes(r *kmsg.DeleteTopicsRequest, ids map[[16]byte]string, metaErr *strandpb.Error) []deleteEntry {
	var out []deleteEntry
	for _, name := range r.TopicNames {
		out = append(out, deleteEntry{name: &name})
	}
	for _, t := range r.Topics {
		e := deleteEntry{name: t.Topic, id: t.TopicID}
		switch {
		case t.Topic != nil:
		case t.TopicID == [16]byte{}:
			e.err = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST,
				Message: "name the topic or its topic id"}
		default:
			if name, ok := ids[t.TopicID]; ok {
				e.name = &name
			} else if metaErr != nil {
				e.err = metaErr
			} else {
				e.err = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID,
					Message: "no topic has this topic id"}
			}
		}
		out = append(out, e)
	}
	return out
}

// nativeDelete is the native delete of the entries resolved without an
// error (with their ids when any was named); nil when there are none.
func nativeDelete(r *kmsg.DeleteTopicsRequest, entries []deleteEntry) *strandpb.Request {
	d := &strandpb.DeleteTopicsRequest{TimeoutMs: r.TimeoutMillis}
	anyID := false
	for _, e := range entries {
		if e.err != nil {
			continue
		}
		d.Names = append(d.Names, *e.name)
		var id []byte
		if e.id != ([16]byte{}) {
			id, anyID = e.id[:], true
		}
		d.TopicIds = append(d.TopicIds, id)
	}
	if !anyID {
		d.TopicIds = nil
	}
	if len(d.Names) == 0 {
		return nil
	}
	return &strandpb.Request{Body: &strandpb.Request_DeleteTopics{DeleteTopics: d}}
}

// deleteTopicsAnswer is the Kafka answer to r: each entry's own error, or
// the native delete's answer for its name (whole, nil when none was sent).
func deleteTopicsAnswer(r *kmsg.DeleteTopicsRequest, entries []deleteEntry, whole *strandpb.Response) kmsg.Response {
	answers := map[string]*strandpb.Error{}
	for _, t := range whole.GetDeleteTopics().GetTopics() {
		answers[t.GetName()] = t.GetError()
	}
	out := kmsg.NewPtrDeleteTopicsResponse()
	out.SetVersion(r.Version)
	for _, e := range entries {
		ot := kmsg.NewDeleteTopicsResponseTopic()
		ot.Topic, ot.TopicID = e.name, e.id
		err := e.err
		if err == nil {
			if a, ok := answers[*e.name]; ok {
				err = partErr(whole, a)
			} else {
				err = whole.GetError()
			}
		}
		ot.ErrorCode, ot.ErrorMessage = kafkaCode(err), message(err)
		out.Topics = append(out.Topics, ot)
	}
	return out
}

// describeConfigs answers topic configs from Strand's DescribeTopics (a
// ReadIndex on the metadata group): the values applied, each marked as the
// default or a topic override (describedConfig); a broker resource has no
// configs Strand exposes, so it answers an empty list.
func (c *conn) describeConfigs(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.DescribeConfigsRequest)
	var names []string
	for _, res := range r.Resources {
		if res.ResourceType == kmsg.ConfigResourceTypeTopic {
			names = append(names, res.ResourceName)
		}
	}
	var k *call
	if len(names) > 0 {
		k = c.submit(&strandpb.Request{Body: &strandpb.Request_DescribeTopics{DescribeTopics: &strandpb.DescribeTopicsRequest{Names: names}}})
	}
	return func() kmsg.Response {
		answers := map[string]*strandpb.DescribeTopicsResponse_Topic{}
		var whole *strandpb.Response
		if k != nil {
			if whole = c.wait(k); whole == nil {
				return nil
			}
			for _, t := range whole.GetDescribeTopics().GetTopics() {
				answers[t.GetName()] = t
			}
		}
		out := kmsg.NewPtrDescribeConfigsResponse()
		out.SetVersion(r.Version)
		for _, res := range r.Resources {
			or := kmsg.NewDescribeConfigsResponseResource()
			or.ResourceType, or.ResourceName = res.ResourceType, res.ResourceName
			switch res.ResourceType {
			case kmsg.ConfigResourceTypeTopic:
				describeTopicConfigs(&or, whole, answers[res.ResourceName], res.ConfigNames, r.Version, r.IncludeSynonyms)
			case kmsg.ConfigResourceTypeBroker:
				c.describeBrokerConfigs(&or, res.ConfigNames)
			case kmsg.ConfigResourceTypeBrokerLogger:
			default:
				or.ErrorCode = kerr.InvalidRequest.Code
				msg := fmt.Sprintf("Strand describes topic and broker configs, not resource type %d", res.ResourceType)
				or.ErrorMessage = &msg
			}
			out.Resources = append(out.Resources, or)
		}
		return out
	}
}

// describeTopicConfigs fills one topic resource.
func describeTopicConfigs(or *kmsg.DescribeConfigsResponseResource, whole *strandpb.Response,
	t *strandpb.DescribeTopicsResponse_Topic, only []string, version int16, synonyms bool) {
	if t == nil {
		e := whole.GetError()
		if e == nil {
			e = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, Message: "topic not in the answer"}
		}
		or.ErrorCode, or.ErrorMessage = kafkaCode(e), message(e)
		return
	}
	if e := partErr(whole, t.GetError()); e != nil {
		or.ErrorCode, or.ErrorMessage = kafkaCode(e), message(e)
		return
	}
	want := map[string]bool{}
	for _, n := range only {
		want[n] = true
	}
	for _, e := range t.GetConfigs() {
		if len(only) > 0 && !want[e.GetName()] {
			continue
		}
		or.Configs = append(or.Configs, describedConfig(e.GetName(), e.GetValue(), version, synonyms))
	}
}

// raftHeldConfig reports whether a topic config Kafka accepts at create
// is one every Strand topic already has, so it is accepted and not
// stored (describe does not list it):
//
//   - compression.type=producer: batches are stored as the producer sent
//     them (Kafka's default). Another codec would need recompression,
//     which is not offered: refused.
//   - min.insync.replicas up to a majority of the replication factor: a
//     raft log commits (acks=all) only on a majority and refuses writes
//     while fewer replicas are up, so any value up to that holds. A larger
//     value is refused (with replication factor -1, the default, only 1).
//
// err says what to send instead.
func raftHeldConfig(name, value string, rf int16) (bool, error) {
	switch name {
	case "compression.type":
		if value != "producer" {
			return false, fmt.Errorf("compression.type=%s: Strand stores batches as the producer sent them; "+
				"leave it unset (producer) and compress in the producer", value)
		}
		return true, nil
	case "min.insync.replicas":
		majority := int64(1)
		if rf > 0 {
			majority = int64(rf)/2 + 1
		}
		n, err := strconv.ParseInt(value, 10, 32)
		if err != nil || n < 1 || n > majority {
			return false, fmt.Errorf("min.insync.replicas=%s: a raft log commits on a majority of its replicas, "+
				"so at most %d holds for replication factor %d; leave it unset", value, majority, rf)
		}
		return true, nil
	}
	return false, nil
}

// brokerConfigs are the settings a node applies, under Kafka's broker
// names, as DescribeConfigs of a broker resource lists them: the defaults
// every new topic gets (DEFAULT_CONFIG: Strand's, where they differ from
// Kafka's) and the node's id (STATIC_BROKER_CONFIG). All are read-only:
// topic settings change per topic (AlterConfigs on the topic).
func brokerConfigs(id int32) []kmsg.DescribeConfigsResponseResourceConfig {
	d := metadata.DefaultTopicConfig()
	entries := []struct {
		name, value string
		source      kmsg.ConfigSource
	}{
		{"broker.id", strconv.Itoa(int(id)), kmsg.ConfigSourceStaticBrokerConfig},
		{"log.cleanup.policy", d.CleanupPolicy.String(), kmsg.ConfigSourceDefaultConfig},
		{"log.cleaner.delete.retention.ms", strconv.FormatInt(d.DeleteRetentionMs, 10), kmsg.ConfigSourceDefaultConfig},
		{"log.cleaner.max.compaction.lag.ms", strconv.FormatInt(d.MaxCompactionLagMs, 10), kmsg.ConfigSourceDefaultConfig},
		{"log.cleaner.min.cleanable.ratio", strconv.FormatFloat(d.MinCleanableDirtyRatio, 'g', -1, 64), kmsg.ConfigSourceDefaultConfig},
		{"log.cleaner.min.compaction.lag.ms", strconv.FormatInt(d.MinCompactionLagMs, 10), kmsg.ConfigSourceDefaultConfig},
		{"log.retention.bytes", strconv.FormatInt(d.RetentionBytes, 10), kmsg.ConfigSourceDefaultConfig},
		{"log.retention.ms", strconv.FormatInt(d.RetentionMs, 10), kmsg.ConfigSourceDefaultConfig},
		{"message.max.bytes", strconv.Itoa(int(d.MaxMessageBytes)), kmsg.ConfigSourceDefaultConfig},
	}
	out := make([]kmsg.DescribeConfigsResponseResourceConfig, 0, len(entries))
	for _, e := range entries {
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name, rc.Value, rc.ReadOnly, rc.Source = e.name, kmsg.StringPtr(e.value), true, e.source
		if e.source == kmsg.ConfigSourceDefaultConfig {
			rc.IsDefault = true
		}
		out = append(out, rc)
	}
	return out
}

// describeBrokerConfigs fills a broker resource: this node's configs
// (only the names asked for, when some are), or INVALID_REQUEST for
// another broker's id (ask that broker).
func (c *conn) describeBrokerConfigs(or *kmsg.DescribeConfigsResponseResource, only []string) {
	id := int(c.s.cfg.NodeID)
	if or.ResourceName != "" && or.ResourceName != strconv.Itoa(id) {
		msg := fmt.Sprintf("this is broker %d: send DescribeConfigs for broker %s to that broker", id, or.ResourceName)
		or.ErrorCode, or.ErrorMessage = kerr.InvalidRequest.Code, &msg
		return
	}
	for _, rc := range brokerConfigs(c.s.cfg.NodeID) {
		if only == nil || slices.Contains(only, rc.Name) {
			or.Configs = append(or.Configs, rc)
		}
	}
}

// kafkaAcks is the Strand acks level a Kafka produce's acks runs at.
// acks=1 waits for the entry to commit and apply, as acks=all does:
// offsets are assigned at apply, and Kafka's clients need the base offset
// the leader assigned (franz-go, KafkaJS and kafka-python reported -1,
// Sarama and librdkafka made offsets up). A leader cannot know that
// offset when the entry is only in its own log (entries ahead of it may
// be idempotent duplicates or refused), so acks=1 costs a commit's
// latency and, unlike Kafka's, loses nothing on a leader change.
func kafkaAcks(acks int16) int32 {
	if acks == 1 {
		return -1
	}
	return int32(acks)
}
