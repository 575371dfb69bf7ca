package server

import (
	"bytes"
	"testing"
	"time"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
)

// TestServerConnBoundsQueuedAnswerBytes pipelines 200 fetches of a 512 KiB
// batch on one connection without reading the answers: the bytes queued
// for its writer stay within twice connAnswerBytesMax (the reader
// stops taking requests past it; the requests taken before answer later)
// where before all 200 answers, 100 MiB, were queued; and once read, every
// answer arrives.
func TestServerConnBoundsQueuedAnswerBytes(t *testing.T) {
	rt := startTestServer(t)
	c := dialTest(t, rt)
	c.hello(1, 1)
	for id := uint64(1); ; id++ { // until the node registered and the topic exists
		c.send(&strandpb.Request{CorrelationId: id, Body: &strandpb.Request_CreateTopics{CreateTopics: &strandpb.CreateTopicsRequest{
			Topics: []*strandpb.CreateTopicsRequest_Topic{{Name: "big", Partitions: 1, ReplicationFactor: 1}}}}})
		resp, err := c.receive()
		if err != nil {
			t.Fatal(err)
		}
		res := resp.GetCreateTopics().GetTopics()
		if resp.GetError() == nil && len(res) == 1 && (res[0].GetError() == nil ||
			res[0].GetError().GetCode() == strandpb.ErrorCode_ERROR_CODE_TOPIC_EXISTS) {
			break
		}
		if id > 500 {
			t.Fatalf("create: %v", resp)
		}
		time.Sleep(10 * time.Millisecond) // waiting for registration, bounded by the count
	}
	batch, err := recordbatch.Encode(nil, []recordbatch.Record{{Value: bytes.Repeat([]byte("x"), 512<<10-200)}})
	if err != nil {
		t.Fatal(err)
	}
	for id := uint64(600); ; id++ { // until the new partition has a leader (bounded by the conn deadline)
		c.send(&strandpb.Request{CorrelationId: id, Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{Acks: -1,
			Partitions: []*strandpb.ProduceRequest_Partition{{Topic: "big", ProducerId: -1, Batch: batch}}}}})
		resp, err := c.receive()
		if err != nil {
			t.Fatal(err)
		}
		perr := resp.GetProduce().GetPartitions()[0].GetError()
		if perr == nil {
			break
		}
		if id > 1100 {
			t.Fatalf("produce: %v", perr)
		}
		time.Sleep(10 * time.Millisecond) // waiting for an election, bounded by the count
	}
	const n = 200
	go func() {
		var buf []byte
		for id := uint64(1000); id < 1000+n; id++ {
			buf, _ = frame.Append(buf, &strandpb.Request{CorrelationId: id, Body: &strandpb.Request_Fetch{Fetch: &strandpb.FetchRequest{
				MaxBytes: 2 << 20, Partitions: []*strandpb.FetchRequest_Partition{{Topic: "big", Offset: 0, MaxBytes: 2 << 20}}}}})
		}
		c.nc.Write(buf)
	}()
	limit := int64(2 * connAnswerBytesMax)
	var most int64
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		most = max(most, rt.connQueuedMax())
		if most > limit {
			break
		}
		time.Sleep(10 * time.Millisecond) // sampling, not synchronisation
	}
	if most > limit {
		t.Fatalf("%d bytes of answers queued for a connection that reads none; want at most %d", most, limit)
	}
	for i := range n {
		resp, err := c.receive()
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if bs := resp.GetFetch().GetPartitions()[0].GetBatches(); len(bs) != 1 || !bytes.Equal(bs[0].GetRecords(), batch) {
			t.Fatalf("answer %d: %v", i, resp.GetFetch().GetPartitions()[0].GetError())
		}
	}
}

// connQueuedMax is the most answer bytes queued for one connection now.
func (r *Server) connQueuedMax() int64 {
	var most int64
	for _, c := range r.native.Conns() {
		most = max(most, c.AnswerBytes())
	}
	return most
}
