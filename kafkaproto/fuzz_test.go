package kafkaproto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/engine/recordbatch"
)

// Each Fuzz target below feeds bytes from the network — a whole request
// after its size prefix, with the API key forced to the target's — to the
// connection's decoder and handler (over fakeBackend), then encodes the
// answer. It must never panic: a request either closes its connection
// with an error or is answered.

// frameRequest is req's bytes after the size prefix, header included.
func frameRequest(req kmsg.Request, corr int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 1)
	b = append(b, 'c')
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

// fuzzAPI adds seeds (each at every version the codec knows) and fuzzes
// requests of key (anyKey: the key the bytes name).
func fuzzAPI(f *testing.F, key int16, seeds ...kmsg.Request) {
	for _, req := range seeds {
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			f.Add(frameRequest(req, int32(v)))
		}
	}
	s := &Server{cfg: Config{Backend: fakeBackend{}}, logger: slog.New(slog.DiscardHandler), classic: newClassicState()}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 2 {
			return
		}
		if key != anyKey {
			b = bytes.Clone(b)
			binary.BigEndian.PutUint16(b, uint16(key))
		}
		c := &conn{s: s, done: make(chan struct{})}
		p, err := c.serve(b)
		if err != nil {
			return
		}
		if p.noReply {
			return
		}
		if resp := p.resp(); resp != nil {
			appendResponse(nil, p, resp)
		}
	})
}

// anyKey makes fuzzAPI keep the key the fuzzed bytes name.
const anyKey = -1

// FuzzAnyRequest fuzzes every API key, the unsupported ones' generic
// answer included (seeded with a request of every key kmsg knows).
func FuzzAnyRequest(f *testing.F) {
	var seeds []kmsg.Request
	for k := int16(0); k < 100; k++ {
		if r := kmsg.RequestForKey(k); r != nil {
			seeds = append(seeds, r)
		}
	}
	fuzzAPI(f, anyKey, seeds...)
}

func seedBatch() []byte {
	var raw, tmp []byte
	recs := testRecords()
	for i, r := range recs {
		tmp = appendRecord(tmp[:0], int64(i), r.TimestampMs-recs[0].TimestampMs, r)
		raw = binary.AppendVarint(raw, int64(len(tmp)))
		raw = append(raw, tmp...)
	}
	strand, _ := recordbatch.Encode(nil, recs)
	out, _ := AppendKafka(nil, strand, 0, -1, ProducerFields{ID: 1, Epoch: 0, Sequence: 0})
	return out
}

func FuzzApiVersions(f *testing.F) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kcat", "1.7"
	fuzzAPI(f, 18, req)
}

func FuzzMetadata(f *testing.F) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr("t")
	req.Topics = append(req.Topics, t, kmsg.MetadataRequestTopic{TopicID: [16]byte{1}})
	fuzzAPI(f, 3, req, kmsg.NewPtrMetadataRequest())
}

func FuzzProduce(f *testing.F) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "t"
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = seedBatch()
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	fuzzAPI(f, 0, req)
}

func FuzzFetch(f *testing.F) {
	req := kmsg.NewPtrFetchRequest()
	t := kmsg.NewFetchRequestTopic()
	t.Topic = "t"
	p := kmsg.NewFetchRequestTopicPartition()
	p.PartitionMaxBytes = 1 << 20
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	fuzzAPI(f, 1, req)
}

func FuzzListOffsets(f *testing.F) {
	req := kmsg.NewPtrListOffsetsRequest()
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = "t"
	p := kmsg.NewListOffsetsRequestTopicPartition()
	p.Timestamp = -2
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	fuzzAPI(f, 2, req)
}

func FuzzCreateTopics(f *testing.F) {
	req := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = "t", 3, -1
	c := kmsg.NewCreateTopicsRequestTopicConfig()
	c.Name, c.Value = "retention.ms", kmsg.StringPtr("1000")
	t.Configs = append(t.Configs, c)
	req.Topics = append(req.Topics, t)
	fuzzAPI(f, 19, req)
}

func FuzzDeleteTopics(f *testing.F) {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TopicNames = []string{"t"}
	t := kmsg.NewDeleteTopicsRequestTopic()
	t.Topic = kmsg.StringPtr("t")
	req.Topics = append(req.Topics, t, kmsg.DeleteTopicsRequestTopic{TopicID: [16]byte{2}})
	fuzzAPI(f, 20, req)
}

func FuzzInitProducerID(f *testing.F) {
	req := kmsg.NewPtrInitProducerIDRequest()
	txn := kmsg.NewPtrInitProducerIDRequest()
	txn.TransactionalID = kmsg.StringPtr("tx")
	fuzzAPI(f, 22, req, txn)
}

func FuzzDescribeConfigs(f *testing.F) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	req.Resources = append(req.Resources, r)
	fuzzAPI(f, 32, req)
}

// FuzzFindCoordinator fuzzes FindCoordinator (v4 asks for many keys;
// key type 1 names a transaction coordinator).
func FuzzFindCoordinator(f *testing.F) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorKeys = "g", []string{"g", "h"}
	txn := kmsg.NewPtrFindCoordinatorRequest()
	txn.CoordinatorType, txn.CoordinatorKey = 1, "x"
	fuzzAPI(f, 10, req, txn)
}

// consumerMetadata is a consumer protocol subscription to "t" owning
// partitions 0 and 1, for the group seeds.
func consumerMetadata() []byte {
	md := kmsg.NewConsumerMemberMetadata()
	md.Version, md.Topics = 3, []string{"t"}
	op := kmsg.NewConsumerMemberMetadataOwnedPartition()
	op.Topic, op.Partitions = "t", []int32{0, 1}
	md.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{op}
	return md.AppendTo(nil)
}

// FuzzOffsetCommit fuzzes OffsetCommit.
func FuzzOffsetCommit(f *testing.F) {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = "g", "m", 3
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = "t"
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Offset = 7
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	fuzzAPI(f, 8, req)
}

// FuzzTxnOffsetCommit fuzzes TxnOffsetCommit (v3: member fencing).
func FuzzTxnOffsetCommit(f *testing.F) {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = "tx", "g", 7, 1
	req.MemberID, req.Generation, req.InstanceID = "m", 3, kmsg.StringPtr("i")
	req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: -1}}}}
	fuzzAPI(f, 28, req)
}

// FuzzOffsetFetch fuzzes OffsetFetch (v8+: many groups).
func FuzzOffsetFetch(f *testing.F) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = "g"
	t := kmsg.NewOffsetFetchRequestTopic()
	t.Topic, t.Partitions = "t", []int32{0, 1}
	req.Topics = append(req.Topics, t)
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = "h"
	req.Groups = append(req.Groups, g)
	fuzzAPI(f, 9, req)
}

// FuzzJoinGroup fuzzes JoinGroup (the consumer protocol's metadata
// included).
func FuzzJoinGroup(f *testing.F) {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.ProtocolType = "g", "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "cooperative-sticky", consumerMetadata()
	req.Protocols = append(req.Protocols, p)
	fuzzAPI(f, 11, req)
}

// FuzzSyncGroup fuzzes SyncGroup.
func FuzzSyncGroup(f *testing.F) {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = "g", "m", 3
	fuzzAPI(f, 14, req)
}

// FuzzHeartbeat fuzzes the classic Heartbeat.
func FuzzHeartbeat(f *testing.F) {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = "g", "m", 3
	fuzzAPI(f, 12, req)
}

// FuzzLeaveGroup fuzzes LeaveGroup (v3+: members, by instance id too).
func FuzzLeaveGroup(f *testing.F) {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group, req.MemberID = "g", "m"
	m := kmsg.NewLeaveGroupRequestMember()
	id := "i"
	m.InstanceID = &id
	req.Members = append(req.Members, m)
	fuzzAPI(f, 13, req)
}

// FuzzListGroups fuzzes ListGroups (v4+ state filters).
func FuzzListGroups(f *testing.F) {
	req := kmsg.NewPtrListGroupsRequest()
	req.StatesFilter = []string{"Stable"}
	fuzzAPI(f, 16, req)
}

// FuzzDescribeGroups fuzzes DescribeGroups.
func FuzzDescribeGroups(f *testing.F) {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{"g", "h"}
	fuzzAPI(f, 15, req)
}

// FuzzDeleteGroups fuzzes DeleteGroups.
func FuzzDeleteGroups(f *testing.F) {
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{"g"}
	fuzzAPI(f, 42, req)
}

// FuzzOffsetDelete fuzzes OffsetDelete.
func FuzzOffsetDelete(f *testing.F) {
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "g"
	t := kmsg.NewOffsetDeleteRequestTopic()
	t.Topic = "t"
	t.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}, {Partition: 3}}
	req.Topics = append(req.Topics, t)
	fuzzAPI(f, 47, req)
}

// FuzzToStrand feeds arbitrary bytes as a produced RecordBatch v2: no
// panic; a batch that converts is a valid Strand batch, and serving it
// back gives a batch that converts to the same Strand batch.
func FuzzToStrand(f *testing.F) {
	f.Add(seedBatch())
	for _, codec := range []int{codecGzip, codecSnappy, codecLZ4, codecZstd} {
		f.Add(kafkaBatch(f, testRecords(), codec, ProducerFields{ID: -1, Epoch: -1, Sequence: -1}, 0))
	}
	f.Add(kafkaBatch(f, testRecords(), codecNone, ProducerFields{ID: 3, Epoch: 1, Sequence: 0}, attrTransactional))
	f.Add(AppendControl(nil, 0, -1, Marker{ProducerID: 3, ProducerEpoch: 1, Commit: true}))
	f.Fuzz(func(t *testing.T, b []byte) {
		strand, pf, err := ToStrand(nil, b)
		if err != nil {
			if !errors.Is(err, ErrCorruptBatch) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnsupportedBatch) &&
				!errors.Is(err, ErrControlBatch) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if _, err := recordbatch.Validate(strand); err != nil {
			t.Fatalf("converted batch invalid: %v", err)
		}
		served, err := AppendKafka(nil, strand, 0, -1, pf)
		if err != nil {
			t.Fatal(err)
		}
		again, _, err := ToStrand(nil, served)
		if err != nil || !bytes.Equal(again, strand) {
			t.Fatalf("served batch does not convert back: %v", err)
		}
	})
}

// FuzzConsumerGroupHeartbeat fuzzes KIP-848's heartbeat (owned partitions
// by topic id, a regex subscription refused).
func FuzzConsumerGroupHeartbeat(f *testing.F) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = "g", "m", 3, []string{"t"}
	t := kmsg.NewConsumerGroupHeartbeatRequestTopic()
	t.Partitions = []int32{0}
	req.Topics = append(req.Topics, t)
	regex := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	re := "t.*"
	regex.Group, regex.SubscribedTopicRegex = "g", &re
	fuzzAPI(f, 68, req, regex)
}

// FuzzConsumerGroupDescribe fuzzes ConsumerGroupDescribe.
func FuzzConsumerGroupDescribe(f *testing.F) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{"g", "h"}
	fuzzAPI(f, 69, req)
}

// FuzzAlterConfigs fuzzes the legacy AlterConfigs (validate_only refused).
func FuzzAlterConfigs(f *testing.F) {
	req := kmsg.NewPtrAlterConfigsRequest()
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	c := kmsg.NewAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "retention.ms", kmsg.StringPtr("1000")
	r.Configs = append(r.Configs, c)
	req.Resources = append(req.Resources, r)
	validate := kmsg.NewPtrAlterConfigsRequest()
	validate.Resources, validate.ValidateOnly = req.Resources, true
	fuzzAPI(f, 33, req, validate)
}

// FuzzIncrementalAlterConfigs fuzzes IncrementalAlterConfigs (every op,
// APPEND and SUBTRACT refused).
func FuzzIncrementalAlterConfigs(f *testing.F) {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	for op := kmsg.IncrementalAlterConfigOpSet; op <= kmsg.IncrementalAlterConfigOpSubtract; op++ {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = "retention.ms", op, kmsg.StringPtr("1000")
		r.Configs = append(r.Configs, c)
	}
	req.Resources = append(req.Resources, r)
	fuzzAPI(f, 44, req)
}

// FuzzDeleteRecords fuzzes DeleteRecords.
func FuzzDeleteRecords(f *testing.F) {
	req := kmsg.NewPtrDeleteRecordsRequest()
	t := kmsg.NewDeleteRecordsRequestTopic()
	t.Topic = "t"
	p := kmsg.NewDeleteRecordsRequestTopicPartition()
	p.Offset = -1
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	fuzzAPI(f, 21, req)
}

// FuzzAddPartitionsToTxn fuzzes both forms: the client's (v0-v3) and the
// broker's batched one (v4), verify-only included.
func FuzzAddPartitionsToTxn(f *testing.F) {
	client := kmsg.NewPtrAddPartitionsToTxnRequest()
	client.TransactionalID, client.ProducerID = "tx", 9
	client.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
	batched := kmsg.NewPtrAddPartitionsToTxnRequest()
	for _, verify := range []bool{false, true} {
		tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tr.TransactionalID, tr.ProducerID, tr.VerifyOnly = "tx", 9, verify
		tr.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "t", Partitions: []int32{0}}}
		batched.Transactions = append(batched.Transactions, tr)
	}
	fuzzAPI(f, 24, client, batched)
}

func FuzzAddOffsetsToTxn(f *testing.F) {
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.Group = "tx", 9, "g"
	fuzzAPI(f, 25, req)
}

func FuzzEndTxn(f *testing.F) {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.Commit = "tx", 9, true
	fuzzAPI(f, 26, req)
}

func FuzzDescribeTransactions(f *testing.F) {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{"tx", "ty"}
	fuzzAPI(f, 65, req)
}

func FuzzListTransactions(f *testing.F) {
	req := kmsg.NewPtrListTransactionsRequest()
	req.StateFilters, req.ProducerIDFilters = []string{"Ongoing", "x"}, []int64{9}
	fuzzAPI(f, 66, req)
}
