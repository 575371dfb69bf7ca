package node

import (
	"testing"
	"time"

	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/proto/strandpb"
)

// testMarkers is a TxnMarkerWriter for tests: it records every write asked,
// by node, and reports it done at once, or, while hold is set, keeps it
// (a coordinator that crashes before its markers are written).
type testMarkers struct {
	hold  bool
	asked map[NodeID][]TxnMarker
	held  int
}

func newTestMarkers() *testMarkers { return &testMarkers{asked: map[NodeID][]TxnMarker{}} }

func (w *testMarkers) WriteTxnMarker(c *Core, m TxnMarker, done func(error)) {
	w.asked[c.cfg.ID] = append(w.asked[c.cfg.ID], m)
	if w.hold {
		w.held++
		return
	}
	c.completions = append(c.completions, func() { done(nil) })
}

// txnTestConfig keeps the internal topics small, snapshots frequent and
// installs markers (nil: no writer).
func txnTestConfig(markers TxnMarkerWriter) func(*Config) {
	return func(cfg *Config) {
		cfg.Groups = GroupsConfig{OffsetsPartitions: 1}
		cfg.Txn = TxnConfig{Partitions: 2, SnapshotEvery: 8, ProducerIDBlock: 4, Markers: markers}
	}
}

// stepClock is a wall clock the test moves: transaction timeouts are
// judged on the proposer's Realtime.
type stepClock struct{ ms *int64 }

func (stepClock) Monotonic() time.Duration  { return 0 }
func (s stepClock) Realtime() time.Time     { return time.UnixMilli(*s.ms) }
func (s stepClock) advance(d time.Duration) { *s.ms += d.Milliseconds() }

// findTxnCoordinator asks live nodes until one names a leading coordinator
// of id.
func (c *cluster) findTxnCoordinator(id string) NodeID {
	c.t.Helper()
	for i := range 300 {
		n := c.ids[i%len(c.ids)]
		if c.cores[n] == nil {
			continue
		}
		resp, _ := c.handle(n, &strandpb.Request{CorrelationId: uint64(i + 1), Body: &strandpb.Request_FindCoordinator{
			FindCoordinator: &strandpb.FindCoordinatorRequest{TransactionalId: id}}})
		if resp.GetError() == nil {
			lead := NodeID(resp.GetFindCoordinator().GetNodeId())
			tp := TopicPartition{TransactionsTopic, resp.GetFindCoordinator().GetPartition()}
			if c.cores[lead] != nil && c.cores[lead].byTP[tp] != nil {
				if _, _, leading := c.cores[lead].byTP[tp].leadership(); leading {
					return lead
				}
			}
		}
		c.tick(1)
	}
	c.t.Fatalf("no transaction coordinator for %q", id)
	return 0
}

// txnCall sends req to id's coordinator, finding it again and retrying on
// retriable answers other than CONCURRENT_TRANSACTIONS (bounded).
func (c *cluster) txnCall(id string, req *strandpb.Request) *strandpb.Response {
	c.t.Helper()
	for range 20 {
		resp, _ := c.handle(c.findTxnCoordinator(id), req)
		code := resp.GetError().GetCode()
		if resp.GetError() != nil && code.Info().Retriable && code != strandpb.ErrorCode_ERROR_CODE_CONCURRENT_TRANSACTIONS {
			c.tick(5)
			continue
		}
		return resp
	}
	c.t.Fatalf("transaction request %v kept failing", req)
	return nil
}

func initTxnReq(id string, timeoutMs int32) *strandpb.Request {
	return &strandpb.Request{CorrelationId: 1, Body: &strandpb.Request_TxnInitProducerId{TxnInitProducerId: &strandpb.TxnInitProducerIdRequest{
		TransactionalId: id, TransactionTimeoutMs: timeoutMs}}}
}

func wireProducer(p txn.Producer) *strandpb.TxnProducer {
	return &strandpb.TxnProducer{ProducerId: p.ID, Epoch: int32(p.Epoch)}
}

func addPartitionsReq(id string, p txn.Producer, topic string, partitions ...int32) *strandpb.Request {
	return &strandpb.Request{CorrelationId: 2, Body: &strandpb.Request_AddPartitionsToTxn{AddPartitionsToTxn: &strandpb.AddPartitionsToTxnRequest{
		TransactionalId: id, Producer: wireProducer(p), Topics: []*strandpb.TxnPartitions{{Topic: topic, Partitions: partitions}}}}}
}

func endTxnReq(id string, p txn.Producer, commit bool) *strandpb.Request {
	return &strandpb.Request{CorrelationId: 3, Body: &strandpb.Request_EndTxn{EndTxn: &strandpb.EndTxnRequest{
		TransactionalId: id, Producer: wireProducer(p), Commit: commit}}}
}

func describeTxnReq(ids ...string) *strandpb.Request {
	return &strandpb.Request{CorrelationId: 4, Body: &strandpb.Request_DescribeTransactions{DescribeTransactions: &strandpb.DescribeTransactionsRequest{
		TransactionalIds: ids}}}
}

// initTxn runs InitProducerId and returns the producer id and epoch.
func (c *cluster) initTxn(id string) txn.Producer {
	c.t.Helper()
	r := c.txnCall(id, initTxnReq(id, 60_000))
	if r.GetError() != nil {
		c.t.Fatalf("init %q: %v", id, r.GetError())
	}
	return txn.Producer{ID: r.GetTxnInitProducerId().GetProducerId(), Epoch: int16(r.GetTxnInitProducerId().GetProducerEpoch())}
}

// describeTxn returns id's description on its coordinator.
func (c *cluster) describeTxn(id string) *strandpb.DescribeTransactionsResponse_Transaction {
	c.t.Helper()
	r := c.txnCall(id, describeTxnReq(id))
	if r.GetError() != nil || len(r.GetDescribeTransactions().GetTransactions()) != 1 {
		c.t.Fatalf("describe %q: %v", id, r)
	}
	return r.GetDescribeTransactions().GetTransactions()[0]
}

func wantCode(t *testing.T, what string, r *strandpb.Response, code strandpb.ErrorCode) {
	t.Helper()
	if r.GetError().GetCode() != code {
		t.Fatalf("%s: %v, want %v", what, r, code)
	}
}

// TestTxnInitFencesOlderEpochs shows InitProducerId with a transactional id
// over the wire: the same producer id at a new epoch each time, every
// request of an older epoch refused PRODUCER_FENCED, a timeout above the
// maximum, an unknown id and an EndTxn without a transaction each a typed
// refusal, and an InitProducerId on an open transaction fencing and
// aborting it (CONCURRENT_TRANSACTIONS, then the next epoch).
func TestTxnInitFencesOlderEpochs(t *testing.T) {
	c := newCluster(t, 21, 3, replicated(3, "t", 2), txnTestConfig(newTestMarkers()))
	first := c.initTxn("app")
	second := c.initTxn("app")
	if second.ID != first.ID || second.Epoch != first.Epoch+1 {
		t.Fatalf("second init %+v after %+v", second, first)
	}
	wantCode(t, "add at the old epoch", c.txnCall("app", addPartitionsReq("app", first, "t", 0)), strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED)
	wantCode(t, "end without a transaction", c.txnCall("app", endTxnReq("app", second, true)), strandpb.ErrorCode_ERROR_CODE_INVALID_TXN_STATE)
	wantCode(t, "timeout above the maximum", c.txnCall("app", initTxnReq("app", int32(16*time.Minute/time.Millisecond))),
		strandpb.ErrorCode_ERROR_CODE_INVALID_TRANSACTION_TIMEOUT)
	wantCode(t, "unknown id", c.txnCall("nobody", addPartitionsReq("nobody", second, "t", 0)), strandpb.ErrorCode_ERROR_CODE_INVALID_PRODUCER_ID_MAPPING)
	if r := c.txnCall("app", addPartitionsReq("app", second, "missing", 0)); r.GetAddPartitionsToTxn().GetResults()[0].GetError().GetCode() !=
		strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("add of an unknown topic: %v", r)
	}
	d := c.txnCall("nobody", describeTxnReq("nobody")).GetDescribeTransactions().GetTransactions()
	if len(d) != 1 || d[0].GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_TRANSACTIONAL_ID_NOT_FOUND {
		t.Fatalf("describe of an unknown id: %v", d)
	}

	if r := c.txnCall("app", addPartitionsReq("app", second, "t", 0, 1)); r.GetError() != nil || len(r.GetAddPartitionsToTxn().GetResults()) != 2 {
		t.Fatalf("add partitions: %v", r)
	}
	if got := c.describeTxn("app"); got.GetState() != "Ongoing" || len(got.GetTopics()) != 1 || len(got.GetTopics()[0].GetPartitions()) != 2 {
		t.Fatalf("after add: %v", got)
	}
	// A new producer takes the id: the open transaction is aborted and the
	// old epoch fenced; once its markers are written the new one gets its
	// epoch (the abort's bump, then its own).
	wantCode(t, "init on an open transaction", c.txnCall("app", initTxnReq("app", 60_000)), strandpb.ErrorCode_ERROR_CODE_CONCURRENT_TRANSACTIONS)
	c.tick(120) // a sweep drives the abort markers (already driven; completes either way)
	third := c.initTxn("app")
	if third.ID != first.ID || third.Epoch != second.Epoch+2 {
		t.Fatalf("init after the fence: %+v, want epoch %d", third, second.Epoch+2)
	}
	wantCode(t, "zombie end", c.txnCall("app", endTxnReq("app", second, true)), strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED)
	list := c.txnCall("app", &strandpb.Request{CorrelationId: 9, Body: &strandpb.Request_ListTransactions{ListTransactions: &strandpb.ListTransactionsRequest{}}})
	if tx := list.GetListTransactions().GetTransactions(); len(tx) != 1 || tx[0].GetTransactionalId() != "app" || tx[0].GetState() != "Empty" {
		t.Fatalf("list: %v", list)
	}
}

// TestTxnNotEnabledWithoutMarkerWriter shows the node with no marker writer
// opens and decides no transaction (so none waits forever for markers),
// with a typed refusal, while InitProducerId still fences.
func TestTxnNotEnabledWithoutMarkerWriter(t *testing.T) {
	c := newCluster(t, 22, 3, replicated(3, "t", 1), txnTestConfig(nil))
	p := c.initTxn("app")
	wantCode(t, "add", c.txnCall("app", addPartitionsReq("app", p, "t", 0)), strandpb.ErrorCode_ERROR_CODE_TRANSACTIONS_NOT_ENABLED)
	wantCode(t, "end", c.txnCall("app", endTxnReq("app", p, true)), strandpb.ErrorCode_ERROR_CODE_TRANSACTIONS_NOT_ENABLED)
	if got := c.describeTxn("app"); got.GetState() != "Empty" {
		t.Fatalf("after the refusals: %v", got)
	}
}
