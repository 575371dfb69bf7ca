package kafkaproto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// api is one served Kafka API: the versions answered and the handler.
type api struct {
	key      int16
	min, max int16
	// serve submits what the request needs to the backend and returns how
	// to wait for the answer.
	serve func(c *conn, req kmsg.Request) func() kmsg.Response
}

// apis lists the served APIs by key; ApiVersions advertises exactly these.
// Why each version range, and what is left out, is in the package notes
// (doc.go).
var apis = []api{
	{key: 0, min: 3, max: 13, serve: (*conn).produce},    // Produce: v3+ carries RecordBatch v2; v13 names topics by id
	{key: 1, min: 4, max: 13, serve: (*conn).fetch},      // Fetch: v4+ RecordBatch v2; v13 names topics by id
	{key: 2, min: 1, max: 6, serve: (*conn).listOffsets}, // ListOffsets: v0 is the old offsets array; v7 adds max-timestamp lookups
	{key: 3, min: 1, max: 12, serve: (*conn).metadata},
	{key: 8, min: 2, max: 9, serve: (*conn).offsetCommit},             // OffsetCommit: v10 names topics by id
	{key: 9, min: 1, max: 9, serve: (*conn).offsetFetch},              // OffsetFetch: v8+ many groups; v10 topic ids
	{key: 10, min: 0, max: 4, serve: (*conn).findCoordinator},         // FindCoordinator: v4+ batched keys
	{key: 11, min: 0, max: 9, serve: (*conn).joinGroup},               // JoinGroup (classic members, server-side assignment)
	{key: 12, min: 0, max: 4, serve: (*conn).heartbeatGroup},          // Heartbeat
	{key: 13, min: 0, max: 5, serve: (*conn).leaveGroup},              // LeaveGroup
	{key: 14, min: 0, max: 5, serve: (*conn).syncGroup},               // SyncGroup
	{key: 15, min: 0, max: 5, serve: (*conn).describeGroups},          // DescribeGroups
	{key: 16, min: 0, max: 5, serve: (*conn).listGroups},              // ListGroups
	{key: 18, min: 0, max: 4, serve: nil},                             // ApiVersions (answered in serve)
	{key: 19, min: 2, max: 7, serve: (*conn).createTopics},            // CreateTopics
	{key: 20, min: 1, max: 6, serve: (*conn).deleteTopics},            // DeleteTopics (v6: by name or topic id)
	{key: 21, min: 0, max: 2, serve: (*conn).deleteRecords},           // DeleteRecords (on each partition's leader)
	{key: 22, min: 0, max: 5, serve: (*conn).initProducerID},          // InitProducerId (idempotent or transactional)
	{key: 24, min: 0, max: 4, serve: (*conn).addPartitionsToTxn},      // AddPartitionsToTxn: v4 the broker's batched/verify-only form
	{key: 25, min: 0, max: 4, serve: (*conn).addOffsetsToTxn},         // AddOffsetsToTxn
	{key: 26, min: 0, max: 5, serve: (*conn).endTxn},                  // EndTxn: v5 bumps the epoch (KIP-890), v0-v4 keep it
	{key: 28, min: 0, max: 4, serve: (*conn).txnOffsetCommit},         // TxnOffsetCommit: v3 KIP-447 member fencing; v4 TRANSACTION_ABORTABLE; v5 transactions v2
	{key: 29, min: 1, max: 3, serve: (*conn).describeACLs},            // DescribeAcls (the metadata group's bindings)
	{key: 30, min: 1, max: 3, serve: (*conn).createACLs},              // CreateAcls
	{key: 31, min: 1, max: 3, serve: (*conn).deleteACLs},              // DeleteAcls
	{key: 32, min: 1, max: 4, serve: (*conn).describeConfigs},         // DescribeConfigs (topics)
	{key: 33, min: 0, max: 2, serve: (*conn).alterConfigs},            // AlterConfigs (topics; replaces the whole config)
	{key: 37, min: 0, max: 3, serve: (*conn).createPartitions},        // CreatePartitions (the new total; Strand places replicas)
	{key: 42, min: 0, max: 2, serve: (*conn).deleteGroups},            // DeleteGroups
	{key: 44, min: 0, max: 1, serve: (*conn).incrementalAlterConfigs}, // IncrementalAlterConfigs (SET, DELETE)
	{key: 47, min: 0, max: 0, serve: (*conn).offsetDelete},            // OffsetDelete (not of subscribed topics)
	{key: 61, min: 0, max: 0, serve: (*conn).describeProducers},       // DescribeProducers (each partition's leader, KIP-664)
	{key: 65, min: 0, max: 0, serve: (*conn).describeTransactions},    // DescribeTransactions
	{key: 66, min: 0, max: 0, serve: (*conn).listTransactions},        // ListTransactions: v1 adds a duration filter
	{key: 68, min: 0, max: 1, serve: (*conn).consumerGroupHeartbeat},  // ConsumerGroupHeartbeat (KIP-848)
	{key: 69, min: 0, max: 1, serve: (*conn).consumerGroupDescribe},   // ConsumerGroupDescribe
}

// unsupportedAPIs are answered, if a client sends them although
// ApiVersions does not list them, with UNSUPPORTED_VERSION (a definite
// error every client surfaces instead of retrying) and a message saying why.
var unsupportedAPIs = map[int16]string{
	23: "leader epochs (offsets are never truncated)",
}

// apiByKey finds a served API.
func apiByKey(key int16) (api, bool) {
	for _, a := range apis {
		if a.key == key {
			return a, true
		}
	}
	return api{}, false
}

// header is a Kafka request header (v1 or v2).
type header struct {
	key, version int16
	corr         int32
	clientID     string
}

// errMalformed marks a request that cannot be parsed: the connection is
// closed (Kafka does the same; nothing can be answered to it).
var errMalformed = errors.New("malformed request")

// parseHeader reads the request header; flexible says whether a tag
// section follows the client id (request header v2).
func parseHeader(b []byte) (header, []byte, error) {
	if len(b) < 10 {
		return header{}, nil, fmt.Errorf("%w: %d-byte header", errMalformed, len(b))
	}
	h := header{
		key:     int16(binary.BigEndian.Uint16(b[0:2])),
		version: int16(binary.BigEndian.Uint16(b[2:4])),
		corr:    int32(binary.BigEndian.Uint32(b[4:8])),
	}
	idLen := int16(binary.BigEndian.Uint16(b[8:10]))
	b = b[10:]
	if idLen > 0 {
		if int(idLen) > len(b) {
			return header{}, nil, fmt.Errorf("%w: client id of %d bytes, %d left", errMalformed, idLen, len(b))
		}
		h.clientID, b = string(b[:idLen]), b[idLen:]
	} else if idLen < -1 {
		return header{}, nil, fmt.Errorf("%w: client id length %d", errMalformed, idLen)
	}
	return h, b, nil
}

// skipTags skips a tag section.
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: tag count", errMalformed)
	}
	b = b[k:]
	for range n {
		if _, k = binary.Uvarint(b); k <= 0 {
			return nil, fmt.Errorf("%w: tag", errMalformed)
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: tag size", errMalformed)
		}
		b = b[k+int(size):]
	}
	return b, nil
}

// serve decodes one request and starts serving it. An error means the
// request cannot be answered at all (unknown key, undecodable bytes): the
// caller closes the connection with it as the logged reason.
func (c *conn) serve(buf []byte) (*pending, error) {
	h, body, err := parseHeader(buf)
	if err != nil {
		return nil, err
	}
	if h.key == 18 {
		return c.apiVersions(h, body)
	}
	if p, handled, err := c.serveSASL(h, body); handled {
		return p, err
	}
	req := kmsg.RequestForKey(h.key)
	if req == nil {
		return nil, fmt.Errorf("unknown API key %d", h.key)
	}
	if h.version < 0 || h.version > req.MaxVersion() {
		// Neither the body nor an answer can be encoded for a version the
		// codec does not know; ApiVersions never advertised it.
		return nil, fmt.Errorf("API %s (key %d) version %d unknown to this node; it serves what ApiVersions lists",
			kmsg.NameForKey(h.key), h.key, h.version)
	}
	req.SetVersion(h.version)
	if req.IsFlexible() {
		if body, err = skipTags(body); err != nil {
			return nil, err
		}
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: %s v%d: %v", errMalformed, kmsg.NameForKey(h.key), h.version, err)
	}
	p := &pending{corr: h.corr, flexibleHeader: req.IsFlexible()}
	c.clientID = h.clientID // requests are served in order: the handler below reads it
	a, ok := apiByKey(h.key)
	switch {
	case !ok:
		why, known := unsupportedAPIs[h.key]
		if !known {
			why = "this API"
		}
		p.resp = ready(unsupportedResponse(req, fmt.Sprintf("Strand does not support %s yet (%s is not listed by ApiVersions)",
			why, kmsg.NameForKey(h.key))))
	case h.version < a.min || h.version > a.max:
		p.resp = ready(unsupportedResponse(req, fmt.Sprintf("%s v%d is not served; versions %d-%d are",
			kmsg.NameForKey(h.key), h.version, a.min, a.max)))
	default:
		if pr, ok := req.(*kmsg.ProduceRequest); ok && pr.Acks == 0 {
			p.noReply = true
		}
		c.calls = c.calls[:0]
		p.resp = a.serve(c, req)
		p.calls = slices.Clone(c.calls)
		p.fetch = h.key == 1
	}
	return p, nil
}

// apiVersions answers ApiVersions. An unknown (newer) version is answered
// in v0 with UNSUPPORTED_VERSION and the list, as Kafka does, so the
// client retries with a version both know (KIP-511).
func (c *conn) apiVersions(h header, body []byte) (*pending, error) {
	resp := kmsg.NewPtrApiVersionsResponse()
	a, _ := apiByKey(18)
	p := &pending{corr: h.corr}
	if h.version < 0 || h.version > a.max {
		resp.SetVersion(0)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
	} else {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(h.version)
		var err error
		if req.IsFlexible() {
			if body, err = skipTags(body); err != nil {
				return nil, err
			}
		}
		if err := req.ReadFrom(body); err != nil {
			return nil, fmt.Errorf("%w: ApiVersions v%d: %v", errMalformed, h.version, err)
		}
		resp.SetVersion(h.version)
	}
	served := apis
	if c.s.cfg.SASL != nil {
		served = append(slices.Clone(apis), saslAPIs...)
	}
	for _, a := range served {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	p.resp = ready(resp)
	return p, nil
}

// unsupportedResponse is req's response at its version with every
// top-level error code set to UNSUPPORTED_VERSION and, where the version
// has one, the message; FindCoordinator v4+ answers each key.
func unsupportedResponse(req kmsg.Request, msg string) kmsg.Response {
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if fc, ok := req.(*kmsg.FindCoordinatorRequest); ok && fc.Version >= 4 {
		r := resp.(*kmsg.FindCoordinatorResponse)
		for _, key := range fc.CoordinatorKeys {
			co := kmsg.NewFindCoordinatorResponseCoordinator()
			co.Key, co.NodeID, co.ErrorCode, co.ErrorMessage = key, -1, kerr.UnsupportedVersion.Code, &msg
			r.Coordinators = append(r.Coordinators, co)
		}
		return r
	}
	v := reflect.ValueOf(resp).Elem()
	if f := v.FieldByName("ErrorCode"); f.IsValid() && f.Kind() == reflect.Int16 {
		f.SetInt(int64(kerr.UnsupportedVersion.Code))
	}
	if f := v.FieldByName("ErrorMessage"); f.IsValid() && f.Type() == reflect.TypeOf((*string)(nil)) {
		f.Set(reflect.ValueOf(&msg))
	}
	if f := v.FieldByName("NodeID"); f.IsValid() && f.Kind() == reflect.Int32 {
		f.SetInt(-1)
	}
	unsupportedPartitions(req, resp)
	return resp
}

// unsupportedPartitions answers UNSUPPORTED_VERSION for each partition of
// the transactions requests whose answers have no top-level error (a
// client reading an empty answer would think nothing failed).
func unsupportedPartitions(req kmsg.Request, resp kmsg.Response) {
	code := kerr.UnsupportedVersion.Code
	switch r := req.(type) {
	case *kmsg.AddPartitionsToTxnRequest:
		out := resp.(*kmsg.AddPartitionsToTxnResponse)
		for _, t := range r.Topics {
			ot := kmsg.NewAddPartitionsToTxnResponseTopic()
			ot.Topic = t.Topic
			for _, p := range t.Partitions {
				ot.Partitions = append(ot.Partitions, kmsg.AddPartitionsToTxnResponseTopicPartition{Partition: p, ErrorCode: code})
			}
			out.Topics = append(out.Topics, ot)
		}
	case *kmsg.TxnOffsetCommitRequest:
		out := resp.(*kmsg.TxnOffsetCommitResponse)
		for _, t := range r.Topics {
			ot := kmsg.NewTxnOffsetCommitResponseTopic()
			ot.Topic = t.Topic
			for _, p := range t.Partitions {
				ot.Partitions = append(ot.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
			}
			out.Topics = append(out.Topics, ot)
		}
	}
}
