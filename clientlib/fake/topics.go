package fake

import (
	"errors"
	"fmt"
	"slices"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// CreateTopic creates a topic (replication factor min(3, nodes)) through
// the metadata leader and waits until every node knows it and each
// partition has a leader.
func (c *Cluster) CreateTopic(name string, partitions int32) error {
	rf := int32(min(3, len(c.servers)))
	req := &strandpb.CreateTopicsRequest{Topics: []*strandpb.CreateTopicsRequest_Topic{
		{Name: name, Partitions: partitions, ReplicationFactor: rf}}, TimeoutMs: 5000}
	ambiguous := false // an attempt timed out: it may have created the topic
	err := poll("create topic "+name, func() (bool, error) {
		var last error
		for id := range c.servers {
			resp, err := call(c.serverAddr(uint64(id+1)), &strandpb.Request{Body: &strandpb.Request_CreateTopics{CreateTopics: req}})
			if err != nil {
				last = err
				continue
			}
			if len(resp.GetCreateTopics().GetTopics()) != 1 {
				return true, fmt.Errorf("fake: create topic %s answered for %d topics", name, len(resp.GetCreateTopics().GetTopics()))
			}
			e := resp.GetCreateTopics().GetTopics()[0].GetError()
			switch e.GetCode() {
			case strandpb.ErrorCode_ERROR_CODE_NONE:
				return true, nil
			case strandpb.ErrorCode_ERROR_CODE_TOPIC_EXISTS:
				if ambiguous {
					return true, nil
				}
				return true, fmt.Errorf("fake: create topic %s: %s", name, e.GetMessage())
			case strandpb.ErrorCode_ERROR_CODE_TIMEOUT, strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE:
				ambiguous = true
				last = errors.New(e.GetMessage())
			case strandpb.ErrorCode_ERROR_CODE_NOT_CONTROLLER, strandpb.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS, strandpb.ErrorCode_ERROR_CODE_BUSY:
				last = errors.New(e.GetMessage()) // not elected, nodes not registered yet, or busy: nothing proposed
			default:
				return true, fmt.Errorf("fake: create topic %s: %v: %s", name, e.GetCode(), e.GetMessage())
			}
		}
		return false, last
	})
	if err != nil {
		return err
	}
	for p := int32(0); p < partitions; p++ {
		var lead uint64
		if err := poll(fmt.Sprintf("leader of %s/%d", name, p), c.agreed(name, p, &lead)); err != nil {
			return err
		}
	}
	return nil
}

// DeleteTopic deletes a topic through the metadata group and waits until
// no node knows it.
func (c *Cluster) DeleteTopic(name string) error {
	req := &strandpb.Request{Body: &strandpb.Request_DeleteTopics{DeleteTopics: &strandpb.DeleteTopicsRequest{Names: []string{name}, TimeoutMs: 5000}}}
	ambiguous := false // an attempt timed out: it may have deleted the topic
	err := poll("delete topic "+name, func() (bool, error) {
		var last error
		for id := range c.servers {
			resp, err := call(c.serverAddr(uint64(id+1)), req)
			if err != nil {
				last = err
				continue
			}
			if len(resp.GetDeleteTopics().GetTopics()) != 1 {
				return true, fmt.Errorf("fake: delete topic %s answered for %d topics", name, len(resp.GetDeleteTopics().GetTopics()))
			}
			e := resp.GetDeleteTopics().GetTopics()[0].GetError()
			switch {
			case e.GetCode() == strandpb.ErrorCode_ERROR_CODE_NONE:
				return true, nil
			case e.GetCode() == strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION && ambiguous:
				return true, nil
			case e.GetCode() == strandpb.ErrorCode_ERROR_CODE_TIMEOUT, e.GetCode() == strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE:
				ambiguous = true
				last = errors.New(e.GetMessage())
			case e.GetCode() == strandpb.ErrorCode_ERROR_CODE_NOT_CONTROLLER, e.GetCode() == strandpb.ErrorCode_ERROR_CODE_BUSY:
				last = errors.New(e.GetMessage())
			default:
				return true, fmt.Errorf("fake: delete topic %s: %v: %s", name, e.GetCode(), e.GetMessage())
			}
		}
		return false, last
	})
	if err != nil {
		return err
	}
	return poll("every node forgets "+name, func() (bool, error) {
		for id := range c.servers {
			md, err := metadata(c.serverAddr(uint64(id+1)), name)
			if err != nil {
				return false, err
			}
			if t := md.GetTopics(); len(t) == 1 && t[0].GetError() == nil {
				return false, fmt.Errorf("node %d still knows %s", id+1, name)
			}
		}
		return true, nil
	})
}

// RecreateTopic deletes a topic and creates it again, empty, with a new
// id and the same partition count.
func (c *Cluster) RecreateTopic(name string) error {
	md, err := metadata(c.serverAddr(1), name)
	if err != nil {
		return err
	}
	if len(md.GetTopics()) != 1 || md.GetTopics()[0].GetError() != nil {
		return fmt.Errorf("fake: no topic %q", name)
	}
	partitions := int32(len(md.GetTopics()[0].GetPartitions()))
	if err := c.DeleteTopic(name); err != nil {
		return err
	}
	return c.CreateTopic(name, partitions)
}

// errNoPartition is agreedLeader's answer for a partition the topic does
// not have: waiting will not help.
var errNoPartition = errors.New("fake: no such partition")

// agreedLeader is a partition's leader when every node knows the topic
// and every replica names the same leader, which claims it; else 0.
func (c *Cluster) agreedLeader(topic string, p int32) (uint64, error) {
	var lead uint64
	exists := false
	for i := range c.servers {
		self := uint64(i + 1)
		md, err := metadata(c.serverAddr(self), topic)
		if err != nil {
			return 0, err
		}
		if len(md.GetTopics()) != 1 || md.GetTopics()[0].GetError() != nil {
			return 0, fmt.Errorf("node %d does not know topic %s yet", self, topic)
		}
		for _, mp := range md.GetTopics()[0].GetPartitions() {
			if mp.GetPartition() != p {
				continue
			}
			exists = true
			if !slices.Contains(mp.GetReplicas(), self) {
				continue
			}
			if mp.GetLeaderId() == 0 || (lead != 0 && mp.GetLeaderId() != lead) {
				return 0, fmt.Errorf("replicas of %s/%d disagree on the leader", topic, p)
			}
			lead = mp.GetLeaderId()
		}
	}
	if !exists {
		return 0, fmt.Errorf("%w: %s/%d", errNoPartition, topic, p)
	}
	if lead == 0 {
		return 0, fmt.Errorf("no leader of %s/%d", topic, p)
	}
	return lead, nil
}

// agreed adapts agreedLeader to poll: a missing partition ends the wait.
func (c *Cluster) agreed(topic string, p int32, lead *uint64) func() (bool, error) {
	return func() (bool, error) {
		var err error
		*lead, err = c.agreedLeader(topic, p)
		return *lead != 0 || errors.Is(err, errNoPartition), err
	}
}

// leader finds the node that leads a partition by its own account (with
// the highest term, should an isolated old leader still claim it).
func (c *Cluster) leader(topic string, p int32) (id, term uint64, err error) {
	for i := range c.servers {
		self := uint64(i + 1)
		md, err := metadata(c.serverAddr(self), topic)
		if err != nil {
			return 0, 0, err
		}
		if len(md.GetTopics()) != 1 {
			return 0, 0, fmt.Errorf("node %d answered metadata for %d topics", self, len(md.GetTopics()))
		}
		for _, mp := range md.GetTopics()[0].GetPartitions() {
			if mp.GetPartition() == p && mp.GetLeaderId() == self && mp.GetLeaderTerm() > term {
				id, term = self, mp.GetLeaderTerm()
			}
		}
	}
	if id == 0 {
		return 0, 0, fmt.Errorf("no leader of %s/%d", topic, p)
	}
	return id, term, nil
}

// Leader is a partition's leader, waiting (bounded) until every replica
// names the same one; 0 at once when the topic has no such partition, and
// 0 when the replicas did not agree in time.
func (c *Cluster) Leader(topic string, p int32) uint64 {
	var lead uint64
	poll("a leader", c.agreed(topic, p, &lead))
	return lead
}

// MoveLeader moves a partition's leadership off its current leader, the
// way a failure would: the leader's raft traffic (to and from every peer)
// is dropped until another node leads the partition in a later term, then
// restored; it returns once every replica names the new leader, and
// returns it. Every group the old leader led
// (other partitions, the metadata group) may move too. Which node wins is
// raft's choice: the real core offers no leadership transfer.
func (c *Cluster) MoveLeader(topic string, p int32) (uint64, error) {
	if len(c.servers) < 3 {
		return 0, fmt.Errorf("fake: move leader of %s/%d: %d nodes cannot elect without one of them; need 3",
			topic, p, len(c.servers))
	}
	c.moveMu.Lock()
	defer c.moveMu.Unlock()
	old, oldTerm, err := c.leader(topic, p)
	if err != nil {
		return 0, fmt.Errorf("fake: move leader of %s/%d: %w", topic, p, err)
	}
	c.mu.Lock()
	c.isolatedNodes[old] = true
	c.mu.Unlock()
	err = poll(fmt.Sprintf("a new leader of %s/%d", topic, p), func() (bool, error) {
		id, term, err := c.leader(topic, p)
		return id != 0 && id != old && term > oldTerm, err
	})
	c.mu.Lock()
	delete(c.isolatedNodes, old)
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	var lead uint64
	err = poll(fmt.Sprintf("agreement on the new leader of %s/%d", topic, p), c.agreed(topic, p, &lead))
	return lead, err
}

// DropConnections closes every client connection to node (0: every node);
// raft traffic between nodes is untouched.
func (c *Cluster) DropConnections(nodeID uint64) {
	for _, p := range c.proxies {
		if nodeID == 0 || p.id == nodeID {
			p.dropSessions()
		}
	}
}

// Record is one record of a partition's log, for test assertions.
type Record struct {
	Offset int64
	Key    []byte
	Value  []byte
}

// Log reads the partition's records from its leader, from the log start to
// the high-water mark, straight from the server (no control sees it). It
// panics when the log cannot be read: a test's assertion cannot proceed.
func (c *Cluster) Log(topic string, p int32) []Record {
	var out []Record
	err := poll(fmt.Sprintf("log of %s/%d", topic, p), func() (bool, error) {
		out = out[:0]
		lead, _, err := c.leader(topic, p)
		if err != nil {
			return false, err
		}
		return c.readLog(c.serverAddr(lead), topic, p, &out)
	})
	if err != nil {
		panic(err)
	}
	return out
}

// readLog fetches a partition from its log start to its high-water mark;
// false (retry) when the node answers with an error.
func (c *Cluster) readLog(addr, topic string, p int32, out *[]Record) (bool, error) {
	offset := int64(0)
	for range 1 << 16 { // a bound far above any test's log
		resp, err := call(addr, &strandpb.Request{Body: &strandpb.Request_Fetch{Fetch: &strandpb.FetchRequest{
			MaxBytes: 4 << 20, Partitions: []*strandpb.FetchRequest_Partition{{Topic: topic, Partition: p, Offset: offset, MaxBytes: 4 << 20}}}}})
		if err != nil {
			return false, err
		}
		if len(resp.GetFetch().GetPartitions()) != 1 {
			return false, fmt.Errorf("fetch of one partition answered with %d", len(resp.GetFetch().GetPartitions()))
		}
		fp := resp.GetFetch().GetPartitions()[0]
		if e := fp.GetError(); e != nil {
			return false, fmt.Errorf("fetch %s/%d at %d: %v: %s", topic, p, offset, e.GetCode(), e.GetMessage())
		}
		if offset == 0 {
			offset = fp.GetLogStartOffset()
		}
		for _, b := range fp.GetBatches() {
			err := recordbatch.Decode(b.GetRecords(), func(i int, r recordbatch.Record) error {
				if off := b.GetBaseOffset() + int64(i); off >= offset {
					*out = append(*out, Record{Offset: off, Key: clone(r.Key), Value: clone(r.Value)})
				}
				return nil
			})
			if err != nil {
				panic(fmt.Sprintf("fake: a stored batch does not decode: %v", err))
			}
		}
		if n := len(*out); n > 0 {
			offset = (*out)[n-1].Offset + 1
		}
		if offset >= fp.GetHighWatermark() {
			return true, nil
		}
		if len(fp.GetBatches()) == 0 {
			return false, fmt.Errorf("fetch %s/%d at %d below the high-water mark %d gave nothing", topic, p, offset, fp.GetHighWatermark())
		}
	}
	return false, errors.New("log too long")
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// TrimLogStart makes every node answer a fetch of the partition below
// offset with OFFSET_OUT_OF_RANGE carrying offset as the log start and the
// leader's real high-water mark, as after retention moved the log start.
// The real servers cannot trim yet (the engine has TRIM entries, no node
// proposes them), so this is a control at the proxies: ListOffsets still
// answers the real log start. It returns the function that removes it.
func (c *Cluster) TrimLogStart(topic string, p int32, offset int64) (remove func()) {
	return c.Control(func(_ uint64, req *strandpb.Request) (Action, bool) {
		below := false
		for _, fp := range req.GetFetch().GetPartitions() {
			if fp.GetTopic() == topic && fp.GetPartition() == p && fp.GetOffset() < offset {
				below = true
			}
		}
		if !below {
			return Action{}, false
		}
		hwm := int64(-1)
		if lead, _, err := c.leader(topic, p); err == nil {
			hwm = c.highWatermark(lead, topic, p)
		}
		if hwm < 0 {
			return Action{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE, Message: "fake: no leader"}}, true
		}
		return Action{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE,
			Message: fmt.Sprintf("fake: offset below the log start %d", offset), LogStartOffset: offset, HighWatermark: hwm}}, true
	})
}

// highWatermark asks node id for a partition's high-water mark; -1 on error.
func (c *Cluster) highWatermark(id uint64, topic string, p int32) int64 {
	resp, err := call(c.serverAddr(id), &strandpb.Request{Body: &strandpb.Request_ListOffsets{ListOffsets: &strandpb.ListOffsetsRequest{
		Partitions: []*strandpb.ListOffsetsRequest_Partition{{Topic: topic, Partition: p, TimestampMs: -1}}}}})
	if err != nil || len(resp.GetListOffsets().GetPartitions()) != 1 || resp.GetListOffsets().GetPartitions()[0].GetError() != nil {
		return -1
	}
	return resp.GetListOffsets().GetPartitions()[0].GetHighWatermark()
}
