package simnet

import (
	"fmt"

	"github.com/strandlog/strand/node"
)

// refCluster is a reference "cluster" for testing the simulator itself:
// one authoritative log per partition shared by every reference core, led
// by the first live replica. It has no raft and no disk; it lets the
// world, the workload and the checks be tested apart from node.Core, and
// its planted bug proves the checks can fail.
type refCluster struct {
	specs     []node.PartitionSpec
	up        map[node.NodeID]bool
	observers map[node.NodeID]node.ApplyObserver
	logs      [][]refBatch
	producers []map[int64]refProducer
	terms     []uint64
	leaders   []node.NodeID
	// loseOnFailover drops the last record of a partition whenever its
	// leader changes: a lost acknowledged write.
	loseOnFailover bool
	// stallAfter, when positive, makes produces hang (never answered)
	// once this many were accepted: a liveness bug.
	stallAfter int
	accepted   int
	// quiet skips the apply observers, leaving the history checks alone
	// to catch a bug.
	quiet bool
}

type refBatch struct {
	batch []byte
	data  []byte
}

type refProducer struct {
	seq  int32
	base int64
}

func newRefCluster() *refCluster {
	return &refCluster{up: map[node.NodeID]bool{}, observers: map[node.NodeID]node.ApplyObserver{}}
}

// open is the openFunc of reference cores.
func (rc *refCluster) open(cfg node.Config) (core, error) {
	if rc.specs == nil {
		rc.specs = cfg.Partitions
		n := len(cfg.Partitions)
		rc.logs = make([][]refBatch, n)
		rc.producers = make([]map[int64]refProducer, n)
		for i := range rc.producers {
			rc.producers[i] = map[int64]refProducer{}
		}
		rc.terms = make([]uint64, n)
		rc.leaders = make([]node.NodeID, n)
	}
	rc.up[cfg.ID] = true
	rc.observers[cfg.ID] = cfg.Observer
	return &refCore{rc: rc, id: cfg.ID}, nil
}

// refresh elects the first live replica of partition p.
func (rc *refCluster) refresh(p int) {
	var lead node.NodeID
	for _, r := range rc.specs[p].Replicas {
		if rc.up[r] {
			lead = r
			break
		}
	}
	if lead != rc.leaders[p] {
		rc.leaders[p] = lead
		rc.terms[p]++
		if rc.loseOnFailover && len(rc.logs[p]) > 0 && lead != 0 {
			rc.logs[p] = rc.logs[p][:len(rc.logs[p])-1]
		}
	}
}

type refCore struct {
	rc *refCluster
	id node.NodeID
}

func (c *refCore) Tick()                {}
func (c *refCore) Receive(frame []byte) {}
func (c *refCore) Process() error       { return nil }
func (c *refCore) Close() error         { c.rc.up[c.id] = false; return nil }

func (c *refCore) Produce(req node.ProduceRequest, done func(node.ProduceResult)) {
	rc := c.rc
	p := int(req.Partition)
	rc.refresh(p)
	if rc.leaders[p] != c.id {
		done(node.ProduceResult{Err: node.ErrNotLeader, Leader: rc.leaders[p], BaseOffset: -1})
		return
	}
	if rc.stallAfter > 0 && rc.accepted >= rc.stallAfter {
		return // never answered
	}
	rc.accepted++
	prev, known := rc.producers[p][req.ProducerID]
	switch {
	case req.ProducerID < 0: // not idempotent: no deduplication
	case known && req.BaseSequence == prev.seq:
		done(node.ProduceResult{BaseOffset: prev.base})
		return
	case (known && req.BaseSequence != prev.seq+1) || (!known && req.BaseSequence != 0):
		done(node.ProduceResult{Err: node.ErrOutOfOrderSequence, BaseOffset: -1})
		return
	}
	base := int64(len(rc.logs[p]))
	data := fmt.Appendf(nil, "%d/%d/%x", req.ProducerID, req.BaseSequence, req.Batch)
	rc.logs[p] = append(rc.logs[p], refBatch{batch: req.Batch, data: data})
	rc.producers[p][req.ProducerID] = refProducer{seq: req.BaseSequence, base: base}
	for _, r := range rc.specs[p].Replicas {
		if rc.up[r] && rc.observers[r] != nil && !rc.quiet {
			rc.observers[r](req.TopicPartition, uint64(base+1), rc.terms[p], data)
		}
	}
	done(node.ProduceResult{BaseOffset: base})
}

func (c *refCore) Fetch(req node.FetchRequest, done func(node.FetchResult)) {
	rc := c.rc
	p := int(req.Partition)
	rc.refresh(p)
	if rc.leaders[p] != c.id {
		done(node.FetchResult{Err: node.ErrNotLeader, Leader: rc.leaders[p]})
		return
	}
	hwm := int64(len(rc.logs[p]))
	if req.Offset < 0 || req.Offset > hwm {
		done(node.FetchResult{Err: node.ErrOffsetOutOfRange, HighWatermark: hwm})
		return
	}
	res := node.FetchResult{HighWatermark: hwm, Leader: c.id}
	size := 0
	for o := req.Offset; o < hwm && (size == 0 || size+len(rc.logs[p][o].batch) <= int(req.MaxBytes)); o++ {
		b := rc.logs[p][o]
		size += len(b.batch)
		res.Batches = append(res.Batches, node.FetchedBatch{BaseOffset: o, Batch: b.batch})
	}
	done(res)
}

func (c *refCore) Status() []node.GroupStatus {
	rc := c.rc
	var out []node.GroupStatus
	for p, s := range rc.specs {
		rc.refresh(p)
		out = append(out, node.GroupStatus{
			TopicPartition: s.TopicPartition, Term: rc.terms[p], Leader: rc.leaders[p],
			IsLeader: rc.leaders[p] == c.id, HighWatermark: int64(len(rc.logs[p])),
			AppliedIndex: uint64(len(rc.logs[p])),
		})
	}
	return out
}
