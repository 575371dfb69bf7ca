package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/strandlog/strand/engine/recordbatch"
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
	// Verify-only (KIP-890): a read naming the partitions of the open
	// transaction; an older epoch is fenced partition by partition.
	for _, tc := range []struct {
		p    txn.Producer
		want strandpb.ErrorCode
	}{{second, strandpb.ErrorCode_ERROR_CODE_NONE}, {first, strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED}} {
		req := addPartitionsReq("app", tc.p, "t", 1)
		req.GetAddPartitionsToTxn().VerifyOnly = true
		r := c.txnCall("app", req)
		if rs := r.GetAddPartitionsToTxn().GetResults(); r.GetError() != nil || len(rs) != 1 || rs[0].GetError().GetCode() != tc.want {
			t.Fatalf("verify at %+v: %v, want %v", tc.p, r, tc.want)
		}
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

func addOffsetsReq(id string, p txn.Producer, group string) *strandpb.Request {
	return &strandpb.Request{CorrelationId: 5, Body: &strandpb.Request_AddOffsetsToTxn{AddOffsetsToTxn: &strandpb.AddOffsetsToTxnRequest{
		TransactionalId: id, Producer: wireProducer(p), Group: group}}}
}

// TestTxnEndResumesAfterCoordinatorCrash shows the two-phase end survives
// its coordinator: EndTxn is answered once PrepareCommit is durable, the
// markers asked of the writer are not reported before the coordinator
// crashes, the new coordinator (another replica of the id's partition)
// asks for the same markers again from Pending and completes the commit,
// and the producer's next transaction runs at the epoch EndTxn answered.
func TestTxnEndResumesAfterCoordinatorCrash(t *testing.T) {
	w := newTestMarkers()
	c := newCluster(t, 23, 3, replicated(3, "t", 2), txnTestConfig(w))
	p := c.initTxn("app")
	if r := c.txnCall("app", addPartitionsReq("app", p, "t", 0, 1)); r.GetError() != nil {
		t.Fatalf("add partitions: %v", r.GetError())
	}
	if r := c.txnCall("app", addOffsetsReq("app", p, "g")); r.GetError() != nil {
		t.Fatalf("add offsets: %v", r.GetError())
	}
	w.hold = true
	r := c.txnCall("app", endTxnReq("app", p, true))
	next := txn.Producer{ID: r.GetEndTxn().GetProducerId(), Epoch: int16(r.GetEndTxn().GetProducerEpoch())}
	if r.GetError() != nil || next != (txn.Producer{ID: p.ID, Epoch: p.Epoch + 1}) {
		t.Fatalf("end: %v", r)
	}
	old := c.findTxnCoordinator("app")
	if len(w.asked[old]) != 3 {
		t.Fatalf("coordinator %d asked for markers %v, want two partitions and a group", old, w.asked[old])
	}
	if d := c.describeTxn("app"); d.GetState() != "PrepareCommit" {
		t.Fatalf("before the markers: %v", d)
	}
	wantCode(t, "next transaction while completing", c.txnCall("app", addPartitionsReq("app", next, "t", 0)),
		strandpb.ErrorCode_ERROR_CODE_CONCURRENT_TRANSACTIONS)

	c.crash(old)
	w.hold = false
	var d *strandpb.DescribeTransactionsResponse_Transaction
	for range 40 {
		if d = c.describeTxn("app"); d.GetState() == "CompleteCommit" {
			break
		}
		c.tick(10)
	}
	if d.GetState() != "CompleteCommit" || d.GetProducerEpoch() != int32(next.Epoch) {
		t.Fatalf("after the fail-over: %v", d)
	}
	now := c.findTxnCoordinator("app")
	if now == old || len(w.asked[now]) != 3 {
		t.Fatalf("new coordinator %d (old %d) asked for markers %v", now, old, w.asked[now])
	}
	for _, m := range w.asked[now] {
		if !m.Commit || m.Producer != next {
			t.Fatalf("resumed marker %+v, want a commit at %+v", m, next)
		}
	}
	if r := c.txnCall("app", addPartitionsReq("app", next, "t", 1)); r.GetError() != nil {
		t.Fatalf("next transaction: %v", r.GetError())
	}
}

// TestTxnTimeoutAborts shows the coordinator's sweep aborts a transaction
// past its transaction.timeout.ms on the leader's clock: its abort markers
// are written, the id completes the abort at the next epoch, the
// producer that let it time out is fenced, and the coordinator counts
// the abort as timed out (strand_txn_timed_out_total).
func TestTxnTimeoutAborts(t *testing.T) {
	ms := int64(1_700_000_000_000)
	clock := stepClock{ms: &ms}
	w := newTestMarkers()
	c := newCluster(t, 24, 3, replicated(3, "t", 2), func(cfg *Config) {
		txnTestConfig(w)(cfg)
		cfg.Clock = clock
	})
	r := c.txnCall("app", initTxnReq("app", 1000))
	p := txn.Producer{ID: r.GetTxnInitProducerId().GetProducerId(), Epoch: int16(r.GetTxnInitProducerId().GetProducerEpoch())}
	if r := c.txnCall("app", addPartitionsReq("app", p, "t", 1)); r.GetError() != nil {
		t.Fatalf("add partitions: %v", r.GetError())
	}
	c.tick(150)
	if d := c.describeTxn("app"); d.GetState() != "Ongoing" {
		t.Fatalf("within the timeout: %v", d)
	}
	clock.advance(2 * time.Second)
	var d *strandpb.DescribeTransactionsResponse_Transaction
	for range 40 {
		if d = c.describeTxn("app"); d.GetState() == "CompleteAbort" {
			break
		}
		c.tick(10)
	}
	if d.GetState() != "CompleteAbort" || d.GetProducerEpoch() != int32(p.Epoch+1) {
		t.Fatalf("after the timeout: %v", d)
	}
	lead := c.findTxnCoordinator("app")
	if got := w.asked[lead]; len(got) != 1 || got[0].Commit || got[0].Partition != (TopicPartition{"t", 1}) {
		t.Fatalf("markers asked: %v", got)
	}
	wantCode(t, "the timed-out producer", c.txnCall("app", addPartitionsReq("app", p, "t", 0)), strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED)
	if s := c.cores[lead].Stats(); s.TxnTimedOut != 1 || s.TxnAborted != 1 || s.TxnBegun != 1 {
		t.Fatalf("coordinator's counters: timed out %d, aborted %d, begun %d", s.TxnTimedOut, s.TxnAborted, s.TxnBegun)
	}
}

// TestTxnRestoreFromSnapshotEqualsReplay shows a new coordinator that
// starts from a snapshot record of its log builds the state a replay of
// the whole log builds (equal digests), after transactions of several ids,
// committed and aborted, and producer id refills.
func TestTxnRestoreFromSnapshotEqualsReplay(t *testing.T) {
	w := newTestMarkers()
	c := newCluster(t, 25, 3, replicated(3, "t", 2), func(cfg *Config) {
		txnTestConfig(w)(cfg)
		cfg.Txn.Partitions = 1
	})
	ids := []string{"a", "b", "c", "d", "e"}
	for round := range 3 {
		for i, id := range ids {
			p := c.initTxn(id)
			if r := c.txnCall(id, addPartitionsReq(id, p, "t", int32(i%2))); r.GetError() != nil {
				t.Fatalf("add %q: %v", id, r.GetError())
			}
			if r := c.txnCall(id, endTxnReq(id, p, (round+i)%2 == 0)); r.GetError() != nil {
				t.Fatalf("end %q: %v", id, r.GetError())
			}
		}
		c.tick(120) // sweeps: snapshots get written
	}
	// A tail after the last snapshot: the restored coordinator replays it.
	for _, id := range ids[:2] {
		p := c.initTxn(id)
		if r := c.txnCall(id, addPartitionsReq(id, p, "t", 0, 1)); r.GetError() != nil {
			t.Fatalf("add %q: %v", id, r.GetError())
		}
	}
	old := c.findTxnCoordinator("a")
	c.crash(old)
	for i, id := range ids {
		d := c.describeTxn(id)
		if done := d.GetState() == "CompleteCommit" || d.GetState() == "CompleteAbort"; (i < 2) != (d.GetState() == "Ongoing") || (i >= 2 && !done) {
			t.Fatalf("%q after the fail-over: %v", id, d)
		}
	}
	now := c.findTxnCoordinator("a")
	tp := TopicPartition{TransactionsTopic, 0}
	co := c.cores[now].txn.coords[tp]
	if co == nil || co.RestoredFrom < 0 {
		t.Fatalf("the new coordinator (node %d) did not start from a snapshot", now)
	}
	if err := c.cores[now].txnCatchUp(c.cores[now].byTP[tp], co); err != nil {
		t.Fatal(err)
	}
	batches, _ := c.fetchAll(now, tp)
	replay := txn.New()
	for _, b := range batches {
		for i, v := range recordValues(t, b.Batch) {
			if b.BaseOffset+int64(i) >= co.Next {
				break
			}
			if v == nil {
				continue // a tombstone of a command below a snapshot: no command
			}
			cmd, err := txn.DecodeCommand(v)
			if err != nil {
				t.Fatalf("record %d: %v", b.BaseOffset+int64(i), err)
			}
			replay.Apply(cmd)
		}
	}
	if len(replay.IDs()) != len(ids) || replay.Digest() != co.State.Digest() {
		t.Fatalf("restored state differs from the replay of %d records (restored from %d): %v vs %v",
			co.Next, co.RestoredFrom, co.State.Snapshot(0), replay.Snapshot(0))
	}
}

// recordValues returns the values of a batch's records.
func recordValues(t *testing.T, batch []byte) [][]byte {
	t.Helper()
	var out [][]byte
	it := recordbatch.NewIterator(batch)
	for it.Next() {
		out = append(out, it.Record().Value)
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	return out
}

// txnRetry is txnCall that also backs off and resends on
// CONCURRENT_TRANSACTIONS (the previous transaction still completing).
func (c *cluster) txnRetry(id string, req *strandpb.Request) *strandpb.Response {
	c.t.Helper()
	for range 20 {
		r := c.txnCall(id, req)
		if r.GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_CONCURRENT_TRANSACTIONS {
			return r
		}
		c.tick(20)
	}
	c.t.Fatalf("transaction request %v kept meeting a transaction completing", req)
	return nil
}

// TestTxnDecisionsSurviveRepeatedFailovers runs transactions of several
// ids while the coordinator's node crashes after every round (the previous
// victim restarting; in odd rounds the crashed coordinator had decided a
// transaction whose markers it never reported): every decision EndTxn
// acknowledged is the one the id
// completes with, at the epoch EndTxn answered (ten seeds).
func TestTxnDecisionsSurviveRepeatedFailovers(t *testing.T) {
	for seed := uint64(26); seed < 36; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { txnFailovers(t, seed) })
	}
}

// txnFailovers is one seed of TestTxnDecisionsSurviveRepeatedFailovers.
func txnFailovers(t *testing.T, seed uint64) {
	w := newTestMarkers()
	c := newCluster(t, seed, 3, replicated(3, "t", 2), txnTestConfig(w))
	ids := []string{"a", "b", "c"}
	type decided struct {
		commit bool
		next   txn.Producer
	}
	last := map[string]decided{}
	var down NodeID
	for round := range 6 {
		for i, id := range ids {
			r := c.txnRetry(id, initTxnReq(id, 60_000))
			if r.GetError() != nil {
				t.Fatalf("round %d: init %q: %v", round, id, r.GetError())
			}
			p := txn.Producer{ID: r.GetTxnInitProducerId().GetProducerId(), Epoch: int16(r.GetTxnInitProducerId().GetProducerEpoch())}
			if r := c.txnRetry(id, addPartitionsReq(id, p, "t", int32(i%2))); r.GetError() != nil {
				t.Fatalf("round %d: add %q: %v", round, id, r.GetError())
			}
			commit := (round+i)%3 != 0
			// Odd rounds: the last EndTxn's markers are never reported by
			// its coordinator, which crashes next.
			w.hold = round%2 == 1 && i == len(ids)-1
			r = c.txnRetry(id, endTxnReq(id, p, commit))
			if r.GetError() != nil {
				t.Fatalf("round %d: end %q: %v", round, id, r.GetError())
			}
			last[id] = decided{commit: commit, next: txn.Producer{ID: r.GetEndTxn().GetProducerId(), Epoch: int16(r.GetEndTxn().GetProducerEpoch())}}
		}
		if down != 0 {
			c.start(down)
		}
		victim := ids[round%len(ids)]
		if w.hold {
			victim = ids[len(ids)-1]
		}
		down = c.findTxnCoordinator(victim)
		c.crash(down)
		w.hold = false
	}
	for _, id := range ids {
		want := "CompleteAbort"
		if last[id].commit {
			want = "CompleteCommit"
		}
		var d *strandpb.DescribeTransactionsResponse_Transaction
		for range 40 {
			if d = c.describeTxn(id); d.GetState() == want {
				break
			}
			c.tick(10)
		}
		if d.GetState() != want || d.GetProducerId() != last[id].next.ID || d.GetProducerEpoch() != int32(last[id].next.Epoch) {
			t.Fatalf("%q ended %v, want %s at %+v", id, d, want, last[id].next)
		}
	}
}
