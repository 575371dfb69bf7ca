package node

import (
	"testing"

	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/proto/strandpb"
)

const codeTxnID = strandpb.ErrorCode_ERROR_CODE_TRANSACTIONAL_ID_AUTHORIZATION_FAILED

// txnCallAs sends req as caller to id's coordinator, retrying retriable
// answers other than CONCURRENT_TRANSACTIONS (bounded).
func (c *cluster) txnCallAs(caller Caller, id string, req *strandpb.Request) *strandpb.Response {
	c.t.Helper()
	for range 20 {
		resp := c.handleAs(c.findTxnCoordinator(id), caller, req)
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

// produceTxnAs is one transactional batch of p to tp's leader, as caller.
func (c *cluster) produceTxnAs(caller Caller, id string, p txn.Producer, tp TopicPartition, tag string) *strandpb.Response {
	c.t.Helper()
	req := &strandpb.Request{CorrelationId: 7, Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{
		Acks: -1, TransactionalId: id, Partitions: []*strandpb.ProduceRequest_Partition{{
			Topic: tp.Topic, Partition: tp.Partition, ProducerId: p.ID, ProducerEpoch: int32(p.Epoch),
			Batch: testBatch(c.t, tag, 1), Transactional: true}}}}}
	for range 20 {
		resp := c.handleAs(c.leader(tp), caller, req)
		if e := resp.GetProduce().GetPartitions(); resp.GetError() == nil && len(e) == 1 && e[0].GetError().GetCode().Info().Retriable {
			c.tick(5)
			continue
		}
		return resp
	}
	c.t.Fatalf("produce to %v kept failing", tp)
	return nil
}

// TestAuthorizationTransactionalID shows the TRANSACTIONAL_ID resource: a
// principal with WRITE on its transactional id (and on the topic) runs a
// transaction end to end, describes it, finds its coordinator, lists only
// the ids it may describe and aborts its own; with a prefixed ACL it uses
// any id of the prefix; on an id no ACL names, InitProducerId,
// FindCoordinator, a transactional produce, DescribeTransactions and
// AbortTransaction are each refused TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// (before this resource they needed ALTER on the cluster, so an ordinary
// principal could run no transaction).
func TestAuthorizationTransactionalID(t *testing.T) {
	c := newCluster(t, 64, 3, replicated(3, "t", 1), func(cfg *Config) {
		txnTestConfig(PartitionMarkers{})(cfg)
		cfg.Authorization = true
		cfg.SuperUsers = []Principal{Anonymous} // the harness's own calls
	})
	c.waitRegistered(3)
	bob := Caller{Principal: "User:bob", Host: "127.0.0.1"}
	prefixed := aclAllow("User:bob", "transactional-id", "pre-", "write", "allow")
	prefixed.PatternType = "prefixed"
	if r, _ := c.handle(c.metaLeaderOf(), wrap(&strandpb.AlterAclsRequest{Add: []*strandpb.AclBinding{
		aclAllow("User:bob", "topic", "t", "write", "allow"), aclAllow("User:bob", "transactional-id", "app", "write", "allow"), prefixed,
	}})(t)); r.GetAlterAcls().GetAdded() != 3 {
		t.Fatalf("add ACLs: %v", r)
	}
	c.initTxn("zed") // an id bob may not describe
	t0 := TopicPartition{"t", 0}
	for _, id := range []string{"app", "pre-1"} {
		r := c.txnCallAs(bob, id, initTxnReq(id, 60_000))
		if r.GetError() != nil {
			t.Fatalf("%s: init: %v", id, r.GetError())
		}
		p := txn.Producer{ID: r.GetTxnInitProducerId().GetProducerId(), Epoch: int16(r.GetTxnInitProducerId().GetProducerEpoch())}
		if r := c.txnCallAs(bob, id, addPartitionsReq(id, p, "t", 0)); r.GetError() != nil {
			t.Fatalf("%s: add partitions: %v", id, r.GetError())
		}
		if r := c.produceTxnAs(bob, id, p, t0, id); r.GetError() != nil || r.GetProduce().GetPartitions()[0].GetError() != nil {
			t.Fatalf("%s: produce: %v", id, r)
		}
		if r := c.txnCallAs(bob, id, endTxnReq(id, p, true)); r.GetError() != nil {
			t.Fatalf("%s: commit: %v", id, r.GetError())
		}
		if r := c.txnCallAs(bob, id, describeTxnReq(id)); r.GetError() != nil {
			t.Fatalf("%s: describe: %v", id, r.GetError())
		}
	}
	list := c.handleAs(c.findTxnCoordinator("app"), bob, &strandpb.Request{CorrelationId: 9, Body: &strandpb.Request_ListTransactions{
		ListTransactions: &strandpb.ListTransactionsRequest{}}})
	for _, tx := range list.GetListTransactions().GetTransactions() {
		if tx.GetTransactionalId() == "zed" {
			t.Fatalf("bob's listing names zed: %v", list)
		}
	}

	// An id no ACL of bob's names.
	p := c.initTxn("zed")
	wantCode(t, "init of zed", c.txnCallAs(bob, "zed", initTxnReq("zed", 60_000)), codeTxnID)
	wantCode(t, "find zed's coordinator", c.handleAs(1, bob, wrap(&strandpb.FindCoordinatorRequest{TransactionalId: "zed"})(t)), codeTxnID)
	wantCode(t, "describe zed", c.txnCallAs(bob, "zed", describeTxnReq("zed")), codeTxnID)
	// Described per id, as Kafka answers: zed refused, app described.
	both := c.txnCallAs(bob, "app", describeTxnReq("zed", "app")).GetDescribeTransactions().GetTransactions()
	if len(both) != 2 || both[0].GetTransactionalId() != "zed" || both[0].GetError().GetCode() != codeTxnID ||
		both[1].GetTransactionalId() != "app" || both[1].GetError() != nil || both[1].GetState() != "CompleteCommit" {
		t.Fatalf("describe zed and app as bob: %v", both)
	}
	wantCode(t, "produce as zed", c.produceTxnAs(bob, "zed", p, t0, "zed"), codeTxnID)
	wantCode(t, "abort zed", c.txnCallAs(bob, "zed", abortTxnReq("zed")), codeTxnID)
	// Bob's own: he may abort its open transaction.
	r := c.txnCallAs(bob, "app", initTxnReq("app", 60_000))
	mine := txn.Producer{ID: r.GetTxnInitProducerId().GetProducerId(), Epoch: int16(r.GetTxnInitProducerId().GetProducerEpoch())}
	if r := c.txnCallAs(bob, "app", addPartitionsReq("app", mine, "t", 0)); r.GetError() != nil {
		t.Fatalf("add partitions: %v", r.GetError())
	}
	if r := c.txnCallAs(bob, "app", abortTxnReq("app")); r.GetError() != nil {
		t.Fatalf("bob's abort of his own: %v", r.GetError())
	}
}
