package server

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/node"
)

// instantMarkers reports every transaction marker written at once: it
// stands in for the partition side (not wired yet), so the coordinator's
// Kafka path (AddPartitionsToTxn, EndTxn, fencing aborts) can complete.
type instantMarkers struct{}

func (instantMarkers) WriteTxnMarker(_ *node.Core, _ node.TxnMarker, done func(error)) { done(nil) }

// startKafkaTxnServer is startKafkaServer with markers as the node's
// transaction marker writer (nil: transactions not enabled).
func startKafkaTxnServer(t *testing.T, markers node.TxnMarkerWriter) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := Start(Config{
		Core: node.Config{ID: 1, Nodes: []node.Peer{{ID: 1, Address: ln.Addr().String()}},
			Txn: node.TxnConfig{Partitions: 2, Markers: markers}},
		DataDir:     t.TempDir(),
		Listener:    ln,
		KafkaListen: "127.0.0.1:0",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return rt
}

// txnClient is a franz-go client with transactional id tid.
func txnClient(t *testing.T, addr, tid string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID(tid), kgo.TransactionTimeout(30*time.Second),
		kgo.DefaultProduceTopic("tx"), kgo.RecordRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// addPartition sends AddPartitionsToTxn (the client's form: franz-go
// routes it to the coordinator at v3) for tx/0 and returns its code.
func addPartition(ctx context.Context, t *testing.T, cl *kgo.Client, tid string, id int64, epoch int16, verifyOnly bool) int16 {
	t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly = tid, id, epoch, verifyOnly
	tr.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "tx", Partitions: []int32{0}}}
	req.Transactions = append(req.Transactions, tr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("AddPartitionsToTxn: %v", err)
	}
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	if len(resp.Transactions) != 1 || len(resp.Transactions[0].Topics) != 1 || len(resp.Transactions[0].Topics[0].Partitions) != 1 {
		t.Fatalf("AddPartitionsToTxn answer %+v", resp)
	}
	return resp.Transactions[0].Topics[0].Partitions[0].ErrorCode
}

// endTxn sends EndTxn (commit) and returns the answer.
func endTxn(ctx context.Context, t *testing.T, cl *kgo.Client, tid string, id int64, epoch int16) *kmsg.EndTxnResponse {
	t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = tid, id, epoch, true
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("EndTxn: %v", err)
	}
	return resp
}

// Over a real node and franz-go: InitProducerId with a transactional id
// gives a producer id; a second client with the same id gets the same
// producer id at a higher epoch (fencing, and aborting, the first one's
// open transaction); the first one is then PRODUCER_FENCED on its next
// AddPartitionsToTxn (franz-go's own, from a produce, and a raw one), its
// verify-only check and its EndTxn, while the second one commits and is
// answered its next epoch (EndTxn v5, KIP-890); kadm's
// DescribeTransactions and ListTransactions (by state and producer id)
// show the id.
func TestKafkaTxnFencingOverFranzGo(t *testing.T) {
	rt := startKafkaTxnServer(t, instantMarkers{})
	addr := rt.KafkaAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kafkaTopic(ctx, t, addr, "tx", 2, nil)
	raw, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()

	first := txnClient(t, addr, "tid")
	idA, epA, err := first.ProducerID(ctx)
	if err != nil {
		t.Fatalf("first InitProducerId: %v", err)
	}
	if code := addPartition(ctx, t, raw, "tid", idA, epA, false); code != 0 {
		t.Fatalf("first AddPartitionsToTxn: %v", kerr.ErrorForCode(code))
	}
	if code := addPartition(ctx, t, raw, "tid", idA, epA, true); code != 0 {
		t.Fatalf("first verify-only: %v", kerr.ErrorForCode(code))
	}
	described, err := adm.DescribeTransactions(ctx, "tid")
	if err != nil {
		t.Fatal(err)
	}
	d, ok := described["tid"]
	if !ok || d.Err != nil || d.State != "Ongoing" || d.ProducerID != idA || d.ProducerEpoch != epA || d.TimeoutMillis != 30000 ||
		len(d.Topics["tx"]) != 1 {
		t.Fatalf("described %+v", d)
	}
	if _, ok := d.Topics["tx"][0]; !ok {
		t.Fatalf("described partitions %v, want tx/0", d.Topics)
	}
	listed, err := adm.ListTransactions(ctx, []int64{idA}, []string{"Ongoing"})
	if err != nil || !slices.Equal(listed.TransactionalIDs(), []string{"tid"}) {
		t.Fatalf("listed by producer id and state: %v %+v", err, listed)
	}
	if listed, err = adm.ListTransactions(ctx, []int64{idA + 1}, nil); err != nil || len(listed.TransactionalIDs()) != 0 {
		t.Fatalf("listed by another producer id: %v %+v", err, listed)
	}

	second := txnClient(t, addr, "tid")
	idB, epB, err := second.ProducerID(ctx)
	if err != nil {
		t.Fatalf("second InitProducerId: %v", err)
	}
	if idB != idA || epB <= epA {
		t.Fatalf("second client: producer %d epoch %d, first %d epoch %d: want the same id at a higher epoch", idB, epB, idA, epA)
	}
	t.Logf("first producer %d epoch %d; second %d epoch %d", idA, epA, idB, epB)

	for _, verify := range []bool{false, true} {
		if code := addPartition(ctx, t, raw, "tid", idA, epA, verify); code != kerr.ProducerFenced.Code {
			t.Errorf("first (verify-only %v) after the second's init: %v, want PRODUCER_FENCED", verify, kerr.ErrorForCode(code))
		}
	}
	if resp := endTxn(ctx, t, raw, "tid", idA, epA); resp.ErrorCode != kerr.ProducerFenced.Code {
		t.Errorf("first EndTxn: %v, want PRODUCER_FENCED", kerr.ErrorForCode(resp.ErrorCode))
	}
	if err := first.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
	defer pcancel()
	if err := first.ProduceSync(pctx, &kgo.Record{Value: []byte("zombie")}).FirstErr(); !errors.Is(err, kerr.ProducerFenced) {
		t.Errorf("first client's produce: %v, want PRODUCER_FENCED", err)
	}

	if code := addPartition(ctx, t, raw, "tid", idB, epB, false); code != 0 {
		t.Fatalf("second AddPartitionsToTxn: %v", kerr.ErrorForCode(code))
	}
	resp := endTxn(ctx, t, raw, "tid", idB, epB)
	if resp.ErrorCode != 0 || resp.ProducerID != idB || resp.ProducerEpoch != epB+1 {
		t.Fatalf("second EndTxn: %v, producer %d epoch %d; want epoch %d", kerr.ErrorForCode(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch, epB+1)
	}
}

// Without a marker writer the node decides no transaction: InitProducerId
// still answers, AddPartitionsToTxn and EndTxn come back as the definite
// UNSUPPORTED_VERSION (franz-go fails the produce at once rather than
// retrying), and the id is described as Empty.
func TestKafkaTxnNotEnabledIsDefinite(t *testing.T) {
	rt := startKafkaTxnServer(t, nil)
	addr := rt.KafkaAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kafkaTopic(ctx, t, addr, "tx", 1, nil)
	raw, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()

	cl := txnClient(t, addr, "tid")
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatalf("InitProducerId: %v", err)
	}
	if code := addPartition(ctx, t, raw, "tid", id, epoch, false); code != kerr.UnsupportedVersion.Code {
		t.Errorf("AddPartitionsToTxn: %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(code))
	}
	if resp := endTxn(ctx, t, raw, "tid", id, epoch); resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Errorf("EndTxn: %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(resp.ErrorCode))
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
	defer pcancel()
	if err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte("v")}).FirstErr(); !errors.Is(err, kerr.UnsupportedVersion) {
		t.Errorf("franz-go transactional produce: %v, want UNSUPPORTED_VERSION", err)
	}
	described, err := adm.DescribeTransactions(ctx, "tid")
	if d, ok := described["tid"]; err != nil || !ok || d.Err != nil || d.State != "Empty" || d.ProducerID != id {
		t.Fatalf("described: %v %+v", err, described)
	}
}

// startKafkaTxnCluster starts n nodes in one process, each with a Kafka
// listener and three __strand_transactions partitions (so coordinators
// spread over the nodes), transactions not enabled.
func startKafkaTxnCluster(t *testing.T, n int) []*Server {
	t.Helper()
	lns := make([]net.Listener, n)
	peers := make([]node.Peer, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		peers[i] = node.Peer{ID: node.NodeID(i + 1), Address: ln.Addr().String()}
	}
	var rts []*Server
	for i := range n {
		rt, err := Start(Config{Core: node.Config{ID: peers[i].ID, Nodes: peers, Txn: node.TxnConfig{Partitions: 3}},
			DataDir: t.TempDir(), Listener: lns[i], KafkaListen: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		rts = append(rts, rt)
		t.Cleanup(func() {
			if err := rt.Close(); err != nil {
				t.Errorf("close node %d: %v", rt.id(), err)
			}
		})
	}
	return rts
}

// On three nodes, franz-go finds each transactional id's coordinator
// (FindCoordinator key type 1, batched) and initializes its producer id
// there; kadm's ListTransactions, asking every node and merging, lists
// every id once, and its DescribeTransactions describes each on its
// coordinator; a node that does not coordinate an id answers a
// DescribeTransactions of it NOT_COORDINATOR.
func TestKafkaTxnCoordinatorsAcrossNodes(t *testing.T) {
	rts := startKafkaTxnCluster(t, 3)
	waitMetadataLeader(t, rts)
	var seeds []string
	for _, rt := range rts {
		seeds = append(seeds, rt.KafkaAddr().String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kafkaTopic(ctx, t, seeds[0], "tx", 1, nil)
	ids := []string{"t0", "t1", "t2", "t3", "t4", "t5"}
	producers := map[string]int64{}
	for _, id := range ids {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID(id), kgo.TransactionTimeout(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		pid, _, err := cl.ProducerID(ctx)
		if err != nil {
			t.Fatalf("%s: InitProducerId: %v", id, err)
		}
		producers[id] = pid
	}
	listed, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil || !slices.Equal(listed.TransactionalIDs(), ids) {
		t.Fatalf("listed: %v %v, want %v", err, listed.TransactionalIDs(), ids)
	}
	described, err := adm.DescribeTransactions(ctx, ids...)
	if err != nil {
		t.Fatal(err)
	}
	coordinators := map[int32]bool{}
	for _, id := range ids {
		d := described[id]
		if d.Err != nil || d.State != "Empty" || d.ProducerID != producers[id] {
			t.Errorf("%s described %+v, want Empty with producer %d", id, d, producers[id])
		}
		coordinators[d.Coordinator] = true
	}
	t.Logf("coordinators of %v: %v", ids, coordinators)

	raw, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	co := described["t0"].Coordinator
	other := int32(1)
	if co == other {
		other = 2
	}
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{"t0"}
	resp, err := req.RequestWith(ctx, raw.Broker(int(other)))
	if err != nil || len(resp.TransactionStates) != 1 || resp.TransactionStates[0].ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("t0 described by node %d (coordinator %d): %v %+v, want NOT_COORDINATOR", other, co, err, resp)
	}
	describeProducersOnLeaderOnly(ctx, t, adm, raw)
}

// describeProducersOnLeaderOnly checks DescribeProducers of tx/0 across
// nodes: kadm asks the partition's leader, which answers; a node that
// does not lead it answers NOT_LEADER_OR_FOLLOWER.
func describeProducersOnLeaderOnly(ctx context.Context, t *testing.T, adm *kadm.Client, raw *kgo.Client) {
	t.Helper()
	described, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"tx": {0: {}}})
	p := described["tx"].Partitions[0]
	if err != nil || p.Err != nil || p.Leader < 1 {
		t.Fatalf("describe producers of tx/0: %v %+v", err, p)
	}
	other := p.Leader%3 + 1
	req := kmsg.NewPtrDescribeProducersRequest()
	req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "tx", Partitions: []int32{0}}}
	resp, err := req.RequestWith(ctx, raw.Broker(int(other)))
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("tx/0 described by node %d (leader %d): %v %+v, want NOT_LEADER_OR_FOLLOWER", other, p.Leader, err, resp)
	}
}
