package kafkaproto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/proto/strandpb"
)

// This file serves callers that carry requests to a node themselves — the
// simulator's wire mode, which drives produce and fetch through the Kafka
// codec and the very handlers the listener runs, in virtual time and one
// goroutine. Translate is the node side; EncodeRequest is a Kafka client's
// side for the two requests the simulator sends.

// Translation is one Kafka request decoded and translated without a
// connection.
type Translation struct {
	// Request is the Strand request to hand the node; nil when the
	// answer needs none (every partition refused locally, ApiVersions).
	Request *strandpb.Request
	p       *pending
	backend *captureBackend
}

// captureBackend takes the one request a translation submits.
type captureBackend struct {
	req   *strandpb.Request
	reply func(*strandpb.Response)
}

var errSecondRequest = errors.New("kafkaproto: a translated request needs a second node round trip")

func (b *captureBackend) Submit(_ <-chan struct{}, req *strandpb.Request, reply func(*strandpb.Response)) error {
	if b.req != nil {
		return errSecondRequest // CreateTopics' follow-up metadata read: answered without it
	}
	b.req, b.reply = req, reply
	return nil
}

// translateLogger discards: a translation has no connection to log about.
var translateLogger = slog.New(slog.DiscardHandler)

// Translate decodes one Kafka request (the bytes after its size prefix).
// An error means the request is malformed: a listener would close the
// connection.
func Translate(frame []byte) (*Translation, error) {
	return translate(frame, newClassicState())
}

// TranslateSeq is Translate for a caller in virtual time (the simulator):
// a classic group step carries seq as its heartbeat sequence number
// instead of the wall clock's nanoseconds. seq must grow with every call.
func TranslateSeq(frame []byte, seq uint64) (*Translation, error) {
	s := newClassicState()
	s.clock = func() uint64 { return seq }
	return translate(frame, s)
}

func translate(frame []byte, classic *classicState) (*Translation, error) {
	b := &captureBackend{}
	c := &conn{s: &Server{cfg: Config{Backend: b}, logger: translateLogger, classic: classic}, done: make(chan struct{})}
	p, err := c.serve(frame)
	if err != nil {
		return nil, err
	}
	return &Translation{Request: b.req, p: p, backend: b}, nil
}

// Answer returns the Kafka response (size prefix included) to the node's
// answer resp to Request (resp is ignored when Request is nil); nil for a
// request Kafka never answers (acks=0 produce).
func (t *Translation) Answer(resp *strandpb.Response) []byte {
	if t.backend.reply != nil {
		t.backend.reply(resp)
	}
	if t.p.noReply {
		return nil
	}
	r := t.p.resp()
	if r == nil {
		panic("kafkaproto: translated answer awaited before the node's reply")
	}
	return appendResponse(nil, t.p, r)
}

// Versions EncodeRequest speaks: the newest each handler serves when every
// partition of the Strand request names its topic id (topics by id, as a
// Kafka client that read ids from Metadata does), else the newest naming
// topics by name.
const (
	clientProduceVersion  = 13
	clientFetchVersion    = 13
	clientProduceByName   = 11
	clientFetchByName     = 12
	topicIDVersionProduce = 13
	topicIDVersionFetch   = 13
	topicIDBytes          = 16
)

// withIDs is a Strand request partition naming a topic and maybe its id.
type withIDs interface{ GetTopicId() []byte }

// allTopicIDs reports whether every partition names a whole topic id.
func allTopicIDs[P withIDs](ps []P) bool {
	for _, p := range ps {
		if len(p.GetTopicId()) != topicIDBytes {
			return false
		}
	}
	return len(ps) > 0
}

// topicNames maps the topic ids of a Strand request to its topic names,
// for decoding answers that name topics by id.
type topicNames map[[16]byte]string

func (n topicNames) add(id []byte, name string) [16]byte {
	var k [16]byte
	copy(k[:], id)
	n[k] = name
	return k
}

// EncodeRequest frames a Strand produce or fetch request as the Kafka
// request a Kafka client would send for it (size prefix included; batches
// as RecordBatch v2 with the producer fields), and returns how to decode
// the Kafka response back into the Strand response the caller expects.
// A group heartbeat with a classic step is sent as the JoinGroup,
// SyncGroup or Heartbeat it stands for (classicRequest). ok is false for
// any other request.
func EncodeRequest(req *strandpb.Request, corr int32) (frame []byte, decode func([]byte) (*strandpb.Response, error), ok bool) {
	var kreq kmsg.Request
	switch b := req.GetBody().(type) {
	case *strandpb.Request_Produce:
		r, names := produceRequest(b.Produce)
		kreq = r
		decode = func(f []byte) (*strandpb.Response, error) { return decodeProduce(f, corr, r.Version, names) }
	case *strandpb.Request_Fetch:
		r, names := fetchRequest(b.Fetch)
		kreq = r
		from := fetchOffsets(b.Fetch)
		decode = func(f []byte) (*strandpb.Response, error) { return decodeFetch(f, corr, r.Version, names, from) }
	case *strandpb.Request_GroupHeartbeat:
		if kreq, decode = classicRequest(b.GroupHeartbeat, corr); kreq == nil {
			return nil, nil, false
		}
	default:
		return nil, nil, false
	}
	return clientFrame(kreq, corr), decode, true // every version sent is flexible
}

func produceRequest(p *strandpb.ProduceRequest) (*kmsg.ProduceRequest, topicNames) {
	r := kmsg.NewPtrProduceRequest()
	r.SetVersion(clientProduceByName)
	if allTopicIDs(p.GetPartitions()) {
		r.SetVersion(clientProduceVersion)
	}
	names := topicNames{}
	r.Acks, r.TimeoutMillis = int16(p.GetAcks()), p.GetTimeoutMs()
	if id := p.GetTransactionalId(); id != "" {
		r.TransactionID = &id
	}
	for _, sp := range p.GetPartitions() {
		id := names.add(sp.GetTopicId(), sp.GetTopic())
		i := len(r.Topics) - 1
		if i < 0 || r.Topics[i].Topic != sp.GetTopic() || r.Topics[i].TopicID != id {
			t := kmsg.NewProduceRequestTopic()
			t.Topic, t.TopicID = sp.GetTopic(), id
			r.Topics = append(r.Topics, t)
			i++
		}
		kp := kmsg.NewProduceRequestTopicPartition()
		kp.Partition = sp.GetPartition()
		kp.Records, _ = AppendKafka(nil, sp.GetBatch(), 0, -1, ProducerFields{
			ID: sp.GetProducerId(), Epoch: int16(sp.GetProducerEpoch()), Sequence: sp.GetBaseSequence(), Transactional: sp.GetTransactional()})
		r.Topics[i].Partitions = append(r.Topics[i].Partitions, kp)
	}
	return r, names
}

func fetchRequest(f *strandpb.FetchRequest) (*kmsg.FetchRequest, topicNames) {
	r := kmsg.NewPtrFetchRequest()
	r.SetVersion(clientFetchByName)
	if allTopicIDs(f.GetPartitions()) {
		r.SetVersion(clientFetchVersion)
	}
	names := topicNames{}
	r.ReplicaID, r.SessionEpoch = -1, -1
	r.MaxWaitMillis, r.MinBytes, r.MaxBytes = f.GetMaxWaitMs(), f.GetMinBytes(), f.GetMaxBytes()
	r.IsolationLevel = int8(f.GetIsolationLevel())
	for _, sp := range f.GetPartitions() {
		id := names.add(sp.GetTopicId(), sp.GetTopic())
		i := len(r.Topics) - 1
		if i < 0 || r.Topics[i].Topic != sp.GetTopic() || r.Topics[i].TopicID != id {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = sp.GetTopic(), id
			r.Topics = append(r.Topics, t)
			i++
		}
		kp := kmsg.NewFetchRequestTopicPartition()
		kp.Partition, kp.FetchOffset, kp.PartitionMaxBytes = sp.GetPartition(), sp.GetOffset(), sp.GetMaxBytes()
		kp.CurrentLeaderEpoch, kp.LastFetchedEpoch, kp.LogStartOffset = -1, -1, -1
		r.Topics[i].Partitions = append(r.Topics[i].Partitions, kp)
	}
	return r, names
}

// responseBody checks a response frame's size and correlation id and
// returns the body after the (flexible) header.
func responseBody(f []byte, corr int32) ([]byte, error) { return responseBodyHeader(f, corr, true) }

// responseBodyHeader is responseBody for a header with a tag section
// (flexible) or without.
func responseBodyHeader(f []byte, corr int32, flexible bool) ([]byte, error) {
	if len(f) < 9 || int(binary.BigEndian.Uint32(f)) != len(f)-4 {
		return nil, fmt.Errorf("kafkaproto: response frame of %d bytes", len(f))
	}
	if got := int32(binary.BigEndian.Uint32(f[4:])); got != corr {
		return nil, fmt.Errorf("kafkaproto: response to correlation id %d, want %d", got, corr)
	}
	if !flexible {
		return f[8:], nil
	}
	return skipTags(f[8:])
}

func decodeProduce(f []byte, corr int32, version int16, names topicNames) (*strandpb.Response, error) {
	body, err := responseBody(f, corr)
	if err != nil {
		return nil, err
	}
	r := kmsg.NewPtrProduceResponse()
	r.SetVersion(version)
	if err := r.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("kafkaproto: produce response: %v", err)
	}
	out := &strandpb.ProduceResponse{ThrottleMs: r.ThrottleMillis}
	for _, t := range r.Topics {
		if version >= topicIDVersionProduce {
			t.Topic = names[t.TopicID]
		}
		for _, p := range t.Partitions {
			out.Partitions = append(out.Partitions, &strandpb.ProduceResponse_Partition{Topic: t.Topic, Partition: p.Partition,
				Error: strandError(p.ErrorCode, p.ErrorMessage), BaseOffset: p.BaseOffset})
		}
	}
	return &strandpb.Response{CorrelationId: uint64(corr), Body: &strandpb.Response_Produce{Produce: out}}, nil
}

// fetchedPartition names a partition of a fetch by topic name.
type fetchedPartition struct {
	topic     string
	partition int32
}

// fetchOffsets is the offset a fetch asks of each partition.
func fetchOffsets(f *strandpb.FetchRequest) map[fetchedPartition]int64 {
	from := make(map[fetchedPartition]int64, len(f.GetPartitions()))
	for _, sp := range f.GetPartitions() {
		from[fetchedPartition{sp.GetTopic(), sp.GetPartition()}] = sp.GetOffset()
	}
	return from
}

// decodeFetch decodes a Kafka fetch response into the Strand response for
// a fetch of the partitions at the offsets from. A batch of a compacted
// prefix becomes engine/compact's form (CompactedToStrand) when it holds
// fewer records than its range, or, uncompressed, when it starts past the
// offset its partition's answer had reached (the fetch offset, then the
// end of the batch before): every record of its range kept, but the
// batches, or records, before it removed. A Strand plain batch claims the
// offsets right after the reader's position, so a native reader would
// refuse that gap.
func decodeFetch(f []byte, corr int32, version int16, names topicNames, from map[fetchedPartition]int64) (*strandpb.Response, error) {
	body, err := responseBody(f, corr)
	if err != nil {
		return nil, err
	}
	r := kmsg.NewPtrFetchResponse()
	r.SetVersion(version)
	if err := r.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("kafkaproto: fetch response: %v", err)
	}
	out := &strandpb.FetchResponse{ThrottleMs: r.ThrottleMillis}
	for _, t := range r.Topics {
		if version >= topicIDVersionFetch {
			t.Topic = names[t.TopicID]
		}
		for _, p := range t.Partitions {
			sp := &strandpb.FetchResponse_Partition{Topic: t.Topic, Partition: p.Partition,
				Error: strandError(p.ErrorCode, nil), HighWatermark: p.HighWatermark, LogStartOffset: p.LogStartOffset,
				LastStableOffset: p.LastStableOffset}
			if e := sp.Error; e != nil {
				e.HighWatermark, e.LogStartOffset = p.HighWatermark, p.LogStartOffset
			}
			next, known := from[fetchedPartition{t.Topic, p.Partition}]
			for rest := p.RecordBatches; len(rest) > 0; {
				if len(rest) < v2HeaderBytes {
					return nil, fmt.Errorf("kafkaproto: fetched %d trailing bytes", len(rest))
				}
				n := 12 + int(int32(binary.BigEndian.Uint32(rest[v2LengthOffset:])))
				if n < v2HeaderBytes || n > len(rest) {
					return nil, fmt.Errorf("kafkaproto: fetched batch of %d bytes, %d left", n, len(rest))
				}
				base := int64(binary.BigEndian.Uint64(rest))
				attrs := binary.BigEndian.Uint16(rest[v2AttrOffset:])
				gap := known && base > next && attrs&attrCompression == 0
				next = max(next, base+int64(int32(binary.BigEndian.Uint32(rest[v2LastDeltaOffset:])))+1)
				if attrs&attrControl != 0 {
					rest = rest[n:] // a transaction marker: a native reader skips it
					continue
				}
				var batch []byte
				if gap || compacted(rest[:n]) {
					batch, err = CompactedToStrand(nil, rest[:n]) // a batch of a compacted prefix
				} else {
					batch, _, err = ToStrand(nil, rest[:n])
				}
				if err != nil {
					return nil, fmt.Errorf("kafkaproto: fetched batch: %w", err)
				}
				sp.Batches = append(sp.Batches, &strandpb.FetchResponse_Batch{BaseOffset: base, Records: batch})
				rest = rest[n:]
			}
			out.Partitions = append(out.Partitions, sp)
		}
	}
	return &strandpb.Response{CorrelationId: uint64(corr), Body: &strandpb.Response_Fetch{Fetch: out}}, nil
}

// compacted reports whether a v2 batch holds fewer records than its offset
// range: a compacted batch (CompactedToStrand).
func compacted(b []byte) bool {
	be := binary.BigEndian
	return int64(be.Uint32(b[v2CountOffset:])) != int64(int32(be.Uint32(b[v2LastDeltaOffset:])))+1
}

// strandError is the Strand error for a Kafka code (nil for none), by
// kafkaCodeRows read backward; a code the listener never answers is
// INTERNAL.
func strandError(code int16, msg *string) *strandpb.Error {
	if code == 0 {
		return nil
	}
	c, ok := strandCodes[code]
	if !ok {
		c = strandpb.ErrorCode_ERROR_CODE_INTERNAL
	}
	e := &strandpb.Error{Code: c}
	if msg != nil {
		e.Message = *msg
	}
	return e
}
