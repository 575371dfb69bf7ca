package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/node"
)

// stableOffset fetches group g's committed offset of tx/0 with
// require_stable and returns it with the partition's error code.
func stableOffset(ctx context.Context, t *testing.T, cl *kgo.Client) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.RequireStable = "g", true
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "tx", Partitions: []int32{0}}}
	req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "tx", Partitions: []int32{0}}}}}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("OffsetFetch: %v", err)
	}
	if len(resp.Groups) == 1 && len(resp.Groups[0].Topics) == 1 && len(resp.Groups[0].Topics[0].Partitions) == 1 {
		p := resp.Groups[0].Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode
	}
	if len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
		p := resp.Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode
	}
	t.Fatalf("OffsetFetch answer %+v", resp)
	return 0, 0
}

// Over a real node with the real marker writer and franz-go's own
// requests: AddOffsetsToTxn then TxnOffsetCommit (v4, routed by franz-go
// to the group coordinator) leave the offset pending (OffsetFetch with
// require_stable: UNSTABLE_OFFSET_COMMIT) until EndTxn commits it; a
// TxnOffsetCommit of a group not added to the transaction is
// TRANSACTION_ABORTABLE, Kafka's answer from v4 (INVALID_TXN_STATE below:
// kafkaproto TestTxnOffsetCommitTranslation).
func TestKafkaTxnOffsetCommitOverFranzGo(t *testing.T) {
	rt := startKafkaTxnServer(t, node.PartitionMarkers{})
	addr := rt.KafkaAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kafkaTopic(ctx, t, addr, "tx", 1, nil)
	cl := txnClient(t, addr, "tid")
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	commit := func(group string, offset int64) int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = "tid", group, id, epoch, -1
		req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "tx", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: offset}}}}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("TxnOffsetCommit: %+v, %v", resp, err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "tid", id, epoch, "g"
	if resp, err := add.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %+v, %v", resp, err)
	}
	if code := commit("other", 7); code != kerr.TransactionAbortable.Code {
		t.Fatalf("commit of a group not in the transaction: code %d, want TRANSACTION_ABORTABLE", code)
	}
	if code := commit("g", 42); code != 0 {
		t.Fatalf("TxnOffsetCommit: code %d", code)
	}
	if off, code := stableOffset(ctx, t, cl); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("before EndTxn: offset %d code %d, want UNSTABLE_OFFSET_COMMIT", off, code)
	}
	if resp := endTxn(ctx, t, cl, "tid", id, epoch); resp.ErrorCode != 0 {
		t.Fatalf("EndTxn: %+v", resp)
	}
	for range 200 { // the marker follows the durable decision
		off, code := stableOffset(ctx, t, cl)
		if code == 0 {
			if off != 42 {
				t.Fatalf("after the commit: offset %d, want 42", off)
			}
			return
		}
		if code != kerr.UnstableOffsetCommit.Code {
			t.Fatalf("after EndTxn: code %d", code)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the committed offset never became stable")
}
