package fake

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
)

// ProtocolVersion is the one version the fake speaks.
const ProtocolVersion = 1

func (c *Cluster) accept(n *node) {
	defer c.wg.Done()
	for {
		nc, err := n.ln.Accept()
		if err != nil {
			return
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			nc.Close()
			return
		}
		n.conns[nc] = struct{}{}
		c.mu.Unlock()
		c.wg.Add(1)
		go c.serve(n, nc)
	}
}

// session is one client connection. A reader goroutine reads frames and
// runs the controls on each as it arrives (so a control sees a request
// while earlier ones are still held); a handler goroutine handles them in
// order, except fetches, which long-poll on their own goroutine.
type session struct {
	c       *Cluster
	n       *node
	nc      net.Conn
	writeMu sync.Mutex
	out     []byte
	wg      sync.WaitGroup
}

// queued is a request read and controlled, waiting for the handler.
type queued struct {
	req    *strandpb.Request
	action Action
}

func (c *Cluster) serve(n *node, nc net.Conn) {
	defer c.wg.Done()
	s := &session{c: c, n: n, nc: nc}
	queue := make(chan queued, 64)
	s.wg.Add(1)
	go s.handleLoop(queue)
	defer func() {
		close(queue)
		nc.Close()
		s.wg.Wait()
		c.mu.Lock()
		delete(n.conns, nc)
		c.mu.Unlock()
	}()
	r := bufio.NewReader(nc)
	var buf []byte
	var err error
	helloDone := false
	for {
		req := &strandpb.Request{}
		if buf, err = frame.Decode(r, buf, frame.BytesMaxDefault, req); err != nil {
			return
		}
		if !helloDone {
			if !s.hello(req) {
				return
			}
			helloDone = true
			continue
		}
		queue <- queued{req: req, action: c.control(n.id, req)}
	}
}

// handleLoop handles queued requests in order until the queue closes or
// a request closes the connection; later requests are then dropped.
func (s *session) handleLoop(queue <-chan queued) {
	defer s.wg.Done()
	alive := true
	for q := range queue {
		if alive && !s.handle(q.req, q.action) {
			alive = false
			s.nc.Close()
		}
	}
}

// hello answers the handshake; false closes the connection.
func (s *session) hello(req *strandpb.Request) bool {
	h := req.GetHello()
	resp := &strandpb.Response{CorrelationId: req.GetCorrelationId()}
	ok := h != nil && h.GetVersionMin() <= ProtocolVersion && ProtocolVersion <= h.GetVersionMax()
	if ok {
		s.c.mu.Lock()
		cluster := s.c.clusterID
		s.c.mu.Unlock()
		resp.Body = &strandpb.Response_Hello{Hello: &strandpb.HelloResponse{Version: ProtocolVersion, NodeId: s.n.id, ClusterId: cluster}}
	} else {
		resp.Error = werr(strandpb.ErrorCode_ERROR_CODE_UNSUPPORTED_VERSION, "speaks version %d only", ProtocolVersion)
	}
	return s.write(resp) && ok
}

// handle runs one request with its action; false closes.
func (s *session) handle(req *strandpb.Request, a Action) bool {
	if a.Hold != nil {
		<-a.Hold
	}
	if a.DropBefore {
		return false
	}
	if a.Error != nil {
		return s.write(errorResponse(req, a.Error))
	}
	if req.GetFetch() != nil && !a.DropAfter {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if !s.write(s.c.fetch(s.n.id, req)) {
				s.nc.Close()
			}
		}()
		return true
	}
	resp := s.c.apply(s.n.id, req)
	if a.Duplicate {
		resp = s.c.apply(s.n.id, req)
	}
	if a.DropAfter {
		return false
	}
	return s.write(resp)
}

func (s *session) write(resp *strandpb.Response) bool {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	var err error
	if s.out, err = frame.Append(s.out[:0], resp); err != nil {
		panic("fake: cannot frame a response: " + err.Error())
	}
	_, err = s.nc.Write(s.out)
	return err == nil
}

// apply handles every request but hello and fetch.
func (c *Cluster) apply(nodeID uint64, req *strandpb.Request) *strandpb.Response {
	resp := &strandpb.Response{CorrelationId: req.GetCorrelationId()}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch b := req.GetBody().(type) {
	case *strandpb.Request_Metadata:
		resp.Body = &strandpb.Response_Metadata{Metadata: c.metadataLocked(b.Metadata)}
	case *strandpb.Request_Produce:
		resp.Body = &strandpb.Response_Produce{Produce: c.produceLocked(nodeID, b.Produce)}
	case *strandpb.Request_ListOffsets:
		resp.Body = &strandpb.Response_ListOffsets{ListOffsets: c.listOffsetsLocked(nodeID, b.ListOffsets)}
	case *strandpb.Request_CreateTopics:
		out := &strandpb.CreateTopicsResponse{}
		for _, t := range b.CreateTopics.GetTopics() {
			e := c.createTopicLocked(t.GetName(), t.GetPartitions(), t.GetReplicationFactor(), t.GetConfigs())
			out.Topics = append(out.Topics, &strandpb.TopicResult{Name: t.GetName(), Error: e})
		}
		resp.Body = &strandpb.Response_CreateTopics{CreateTopics: out}
	case *strandpb.Request_DeleteTopics:
		out := &strandpb.DeleteTopicsResponse{}
		for _, name := range b.DeleteTopics.GetNames() {
			var e *strandpb.Error
			if c.topics[name] == nil {
				e = werr(strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, "no topic %q", name)
			}
			delete(c.topics, name)
			out.Topics = append(out.Topics, &strandpb.TopicResult{Name: name, Error: e})
		}
		resp.Body = &strandpb.Response_DeleteTopics{DeleteTopics: out}
	case *strandpb.Request_DescribeTopics:
		resp.Body = &strandpb.Response_DescribeTopics{DescribeTopics: c.describeLocked(b.DescribeTopics)}
	case *strandpb.Request_InitProducerId:
		c.nextProducerID++
		resp.Body = &strandpb.Response_InitProducerId{InitProducerId: &strandpb.InitProducerIdResponse{ProducerId: c.nextProducerID}}
	default:
		resp.Error = werr(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "unexpected request %T", b)
	}
	return resp
}

// errorResponse answers req with e everywhere it can go.
func errorResponse(req *strandpb.Request, e *strandpb.Error) *strandpb.Response {
	resp := &strandpb.Response{CorrelationId: req.GetCorrelationId()}
	switch b := req.GetBody().(type) {
	case *strandpb.Request_Produce:
		out := &strandpb.ProduceResponse{}
		for _, p := range b.Produce.GetPartitions() {
			out.Partitions = append(out.Partitions, &strandpb.ProduceResponse_Partition{Topic: p.GetTopic(), Partition: p.GetPartition(), Error: e, BaseOffset: -1})
		}
		resp.Body = &strandpb.Response_Produce{Produce: out}
	case *strandpb.Request_Fetch:
		out := &strandpb.FetchResponse{}
		for _, p := range b.Fetch.GetPartitions() {
			out.Partitions = append(out.Partitions, &strandpb.FetchResponse_Partition{Topic: p.GetTopic(), Partition: p.GetPartition(), Error: e})
		}
		resp.Body = &strandpb.Response_Fetch{Fetch: out}
	case *strandpb.Request_ListOffsets:
		out := &strandpb.ListOffsetsResponse{}
		for _, p := range b.ListOffsets.GetPartitions() {
			out.Partitions = append(out.Partitions, &strandpb.ListOffsetsResponse_Partition{Topic: p.GetTopic(), Partition: p.GetPartition(), Error: e})
		}
		resp.Body = &strandpb.Response_ListOffsets{ListOffsets: out}
	default:
		resp.Error = e
	}
	return resp
}

func (c *Cluster) metadataLocked(req *strandpb.MetadataRequest) *strandpb.MetadataResponse {
	out := &strandpb.MetadataResponse{ControllerId: 1, MetadataVersion: 1, ClusterId: c.clusterID}
	for _, n := range c.nodes {
		out.Nodes = append(out.Nodes, &strandpb.MetadataResponse_Node{Id: n.id, Address: n.addr})
	}
	names := req.GetTopics()
	if len(names) == 0 {
		names = c.sortedTopicNames()
	}
	for _, name := range names {
		t := c.topics[name]
		if t == nil {
			out.Topics = append(out.Topics, &strandpb.MetadataResponse_Topic{Name: name,
				Error: werr(strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, "no topic %q", name)})
			continue
		}
		mt := &strandpb.MetadataResponse_Topic{Name: name, TopicId: t.id}
		for i, p := range t.partitions {
			mt.Partitions = append(mt.Partitions, &strandpb.MetadataResponse_Partition{
				Partition: int32(i), LeaderId: p.leader, LeaderTerm: p.term, Replicas: c.replicas(p.leader, t.replicationFactor)})
		}
		out.Topics = append(out.Topics, mt)
	}
	return out
}

// replicas lists rf nodes starting at the leader.
func (c *Cluster) replicas(leader uint64, rf int32) []uint64 {
	var out []uint64
	for i := 0; i < int(rf); i++ {
		out = append(out, uint64((int(leader)-1+i)%len(c.nodes))+1)
	}
	return out
}

func (c *Cluster) describeLocked(req *strandpb.DescribeTopicsRequest) *strandpb.DescribeTopicsResponse {
	out := &strandpb.DescribeTopicsResponse{}
	names := req.GetNames()
	if len(names) == 0 {
		names = c.sortedTopicNames()
	}
	for _, name := range names {
		t := c.topics[name]
		if t == nil {
			out.Topics = append(out.Topics, &strandpb.DescribeTopicsResponse_Topic{Name: name,
				Error: werr(strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, "no topic %q", name)})
			continue
		}
		out.Topics = append(out.Topics, &strandpb.DescribeTopicsResponse_Topic{Name: name,
			Partitions: int32(len(t.partitions)), ReplicationFactor: t.replicationFactor, Configs: t.configs})
	}
	return out
}

// leaderCheck finds a partition this node leads, or the error to answer;
// a request naming another topic id (non-empty) than the topic's gets
// UNKNOWN_TOPIC_ID.
func (c *Cluster) leaderCheck(nodeID uint64, topicName string, p int32, topicID []byte) (*partition, *strandpb.Error) {
	if t := c.topics[topicName]; t != nil && len(topicID) > 0 && !bytes.Equal(topicID, t.id) {
		return nil, werr(strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID, "topic %q has id %x, the request names %x", topicName, t.id, topicID)
	}
	part := c.partitionLocked(topicName, p)
	if part == nil {
		return nil, werr(strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, "no partition %s/%d", topicName, p)
	}
	if part.leader != nodeID {
		e := werr(strandpb.ErrorCode_ERROR_CODE_NOT_LEADER, "node %d does not lead %s/%d", nodeID, topicName, p)
		e.LeaderId, e.LeaderAddress = part.leader, c.nodeAddr(part.leader)
		return nil, e
	}
	return part, nil
}

func (c *Cluster) produceLocked(nodeID uint64, req *strandpb.ProduceRequest) *strandpb.ProduceResponse {
	out := &strandpb.ProduceResponse{}
	for _, rp := range req.GetPartitions() {
		r := &strandpb.ProduceResponse_Partition{Topic: rp.GetTopic(), Partition: rp.GetPartition(), BaseOffset: -1}
		out.Partitions = append(out.Partitions, r)
		part, e := c.leaderCheck(nodeID, rp.GetTopic(), rp.GetPartition(), rp.GetTopicId())
		if e != nil {
			r.Error = e
			continue
		}
		base, dup, e := part.append(rp)
		r.Error, r.Duplicate = e, dup
		if e == nil && req.GetAcks() == -1 {
			r.BaseOffset = base
		}
		if e == nil && !dup {
			close(c.appended)
			c.appended = make(chan struct{})
		}
	}
	return out
}

// append validates a batch, applies the idempotence rules and appends.
func (p *partition) append(rp *strandpb.ProduceRequest_Partition) (int64, bool, *strandpb.Error) {
	info, err := recordbatch.Validate(rp.GetBatch())
	if err != nil {
		code := strandpb.ErrorCode_ERROR_CODE_CORRUPT_BATCH
		if isTooLarge(err) {
			code = strandpb.ErrorCode_ERROR_CODE_RECORD_TOO_LARGE
		}
		return 0, false, werr(code, "%v", err)
	}
	count := info.RecordCount
	pid := rp.GetProducerId()
	var st *producerState
	if pid >= 0 {
		var dupBase int64
		var e *strandpb.Error
		st, dupBase, e = p.screen(pid, rp.GetProducerEpoch(), rp.GetBaseSequence(), count)
		if e != nil {
			return 0, false, e
		}
		if st == nil {
			return dupBase, true, nil
		}
	}
	base := p.hwm
	p.batches = append(p.batches, storedBatch{base: base, count: count, appendMs: nowMs(), bytes: append([]byte{}, rp.GetBatch()...)})
	p.hwm += int64(count)
	if st != nil {
		if rp.GetProducerEpoch() != st.epoch {
			st.epoch, st.batches = rp.GetProducerEpoch(), nil
		}
		st.batches = append(st.batches, acceptedBatch{seq: rp.GetBaseSequence(), count: count, base: base})
		if len(st.batches) > 5 {
			st.batches = st.batches[1:]
		}
		p.producers[pid] = st
	}
	return base, false, nil
}

// screen is engine.screenProducer: the state to update (nil for a
// duplicate, whose original base it returns) or the refusal.
func (p *partition) screen(pid int64, epoch, seq, count int32) (*producerState, int64, *strandpb.Error) {
	if epoch < 0 || seq < 0 {
		return nil, 0, werr(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "epoch %d sequence %d", epoch, seq)
	}
	st := p.producers[pid]
	if st == nil || epoch > st.epoch {
		if seq != 0 {
			return nil, 0, werr(strandpb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE, "producer %d epoch %d starts at %d", pid, epoch, seq)
		}
		if st == nil {
			st = &producerState{epoch: epoch}
		}
		return st, 0, nil
	}
	if epoch < st.epoch {
		return nil, 0, werr(strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED, "producer %d epoch %d < %d", pid, epoch, st.epoch)
	}
	for _, b := range st.batches {
		if b.seq == seq && b.count == count {
			return nil, b.base, nil
		}
	}
	last := st.batches[len(st.batches)-1]
	if want := int32((int64(last.seq) + int64(last.count)) & 0x7fffffff); seq != want {
		return nil, 0, werr(strandpb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE, "producer %d sequence %d, want %d", pid, seq, want)
	}
	return st, 0, nil
}

// errStop ends a Decode walk early.
var errStop = errors.New("stop")

func isTooLarge(err error) bool {
	return errors.Is(err, recordbatch.ErrRecordTooLarge) || errors.Is(err, recordbatch.ErrBatchTooLarge)
}

func (c *Cluster) listOffsetsLocked(nodeID uint64, req *strandpb.ListOffsetsRequest) *strandpb.ListOffsetsResponse {
	out := &strandpb.ListOffsetsResponse{}
	for _, rp := range req.GetPartitions() {
		r := &strandpb.ListOffsetsResponse_Partition{Topic: rp.GetTopic(), Partition: rp.GetPartition()}
		out.Partitions = append(out.Partitions, r)
		part, e := c.leaderCheck(nodeID, rp.GetTopic(), rp.GetPartition(), rp.GetTopicId())
		if e != nil {
			r.Error = e
			continue
		}
		r.HighWatermark, r.LogStartOffset = part.hwm, part.logStart
		switch ts := rp.GetTimestampMs(); ts {
		case -2:
			r.Offset = part.logStart
		case -1:
			r.Offset = part.hwm
		default:
			r.Offset = part.offsetForTimestamp(ts)
		}
	}
	return out
}

// offsetForTimestamp is the first offset at or after the log start whose
// record timestamp is >= ts, or the high-water mark if none is.
func (p *partition) offsetForTimestamp(ts int64) int64 {
	for _, b := range p.batches {
		found := int64(-1)
		_ = recordbatch.Decode(b.bytes, func(i int, r recordbatch.Record) error {
			if off := b.base + int64(i); off >= p.logStart && r.TimestampMs >= ts {
				found = off
				return errStop
			}
			return nil
		})
		if found >= 0 {
			return found
		}
	}
	return p.hwm
}

// fetch answers a fetch, long-polling up to max_wait_ms for min_bytes.
func (c *Cluster) fetch(nodeID uint64, req *strandpb.Request) *strandpb.Response {
	f := req.GetFetch()
	deadline := time.Now().Add(time.Duration(f.GetMaxWaitMs()) * time.Millisecond)
	for {
		c.mu.Lock()
		out, size := c.fetchLocked(nodeID, f)
		wait := c.appended
		closed := c.closed
		c.mu.Unlock()
		remaining := time.Until(deadline)
		if closed || size >= max(int64(f.GetMinBytes()), 1) || remaining <= 0 || hasError(out) {
			return &strandpb.Response{CorrelationId: req.GetCorrelationId(), Body: &strandpb.Response_Fetch{Fetch: out}}
		}
		t := time.NewTimer(remaining)
		select {
		case <-wait:
		case <-t.C:
		}
		t.Stop()
	}
}

func hasError(out *strandpb.FetchResponse) bool {
	for _, p := range out.GetPartitions() {
		if p.GetError() != nil {
			return true
		}
	}
	return false
}

func (c *Cluster) fetchLocked(nodeID uint64, f *strandpb.FetchRequest) (*strandpb.FetchResponse, int64) {
	out := &strandpb.FetchResponse{}
	var total int64
	maxBytes := int64(f.GetMaxBytes())
	if maxBytes <= 0 {
		maxBytes = 8 << 20
	}
	for _, rp := range f.GetPartitions() {
		r := &strandpb.FetchResponse_Partition{Topic: rp.GetTopic(), Partition: rp.GetPartition()}
		out.Partitions = append(out.Partitions, r)
		part, e := c.leaderCheck(nodeID, rp.GetTopic(), rp.GetPartition(), rp.GetTopicId())
		if e != nil {
			r.Error = e
			continue
		}
		r.HighWatermark, r.LogStartOffset = part.hwm, part.logStart
		if rp.GetOffset() < part.logStart || rp.GetOffset() > part.hwm {
			e := werr(strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE, "offset %d outside [%d, %d]", rp.GetOffset(), part.logStart, part.hwm)
			e.LogStartOffset, e.HighWatermark = part.logStart, part.hwm
			r.Error = e
			continue
		}
		var partBytes int64
		for _, b := range part.batches {
			if b.base+int64(b.count) <= rp.GetOffset() {
				continue
			}
			size := int64(len(b.bytes))
			if (partBytes > 0 || total > 0) && (partBytes+size > int64(max(rp.GetMaxBytes(), 1)) && rp.GetMaxBytes() > 0 || total+size > maxBytes) {
				break
			}
			r.Batches = append(r.Batches, &strandpb.FetchResponse_Batch{BaseOffset: b.base, AppendTimeMs: b.appendMs, Records: b.bytes})
			partBytes += size
			total += size
		}
	}
	return out, total
}
