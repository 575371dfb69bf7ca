package clientlib_test

import (
	"bytes"
	"context"
	"fmt"

	"github.com/strandlog/strand/clientlib"
)

// The client in ten lines: produce a record to a running cluster (by
// default the one `strand dev` starts on 127.0.0.1:9192) and read it back.
func Example() {
	ctx := context.Background()
	client, err := clientlib.NewClient() // clientlib.SeedAddresses("host:9192") for another cluster
	if err != nil {
		panic(err)
	}
	defer client.Close()
	r := &clientlib.Record{Topic: "greetings", Key: []byte("k"), Value: []byte("hello")}
	if err := client.ProduceSync(ctx, r).FirstErr(); err != nil {
		panic(err)
	}
	consumer := clientlib.NewConsumer(client)
	consumer.Assign("greetings", r.Partition, clientlib.OffsetExact(r.Offset))
	for _, rec := range consumer.Poll(ctx).Records() {
		fmt.Printf("%s/%d@%d %s\n", rec.Topic, rec.Partition, rec.Offset, rec.Value)
	}
}

// A consume-transform-produce loop with exactly-once effects: each round's
// output records and the input offsets they follow commit together in one
// transaction, and a read_committed reader of "upper" sees each input's
// output once. A failed round aborts; its output is never visible and its
// offsets do not move, so the group reads those inputs again.
func Example_transactions() {
	ctx := context.Background()
	client, err := clientlib.NewClient(clientlib.TransactionalID("upper-1"))
	if err != nil {
		panic(err)
	}
	defer client.Close()
	group, err := clientlib.NewGroupConsumer(client, "upper", []string{"words"},
		clientlib.AutoCommitInterval(0), // offsets go through the transaction
		clientlib.GroupConsumerOpts(clientlib.FetchIsolation(clientlib.ReadCommitted)))
	if err != nil {
		panic(err)
	}
	defer group.Close(ctx)
	for round := 0; round < 10; round++ {
		records := group.Poll(ctx).Records()
		if len(records) == 0 {
			continue
		}
		if err := client.BeginTransaction(); err != nil {
			panic(err) // a *ProducerFencedError: another instance took over
		}
		next := map[clientlib.TopicPartition]int64{}
		for _, r := range records {
			out := &clientlib.Record{Topic: "upper", Key: r.Key, Value: bytes.ToUpper(r.Value)}
			client.Produce(ctx, out, nil) // a failure makes CommitTransaction fail
			next[clientlib.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = r.Offset + 1
		}
		err := client.SendOffsetsToTransaction(ctx, next, group.GroupMetadata())
		if err == nil {
			err = client.CommitTransaction(ctx)
		}
		if err != nil {
			fmt.Println("round aborted:", err)
			if err := client.AbortTransaction(ctx); err != nil {
				panic(err)
			}
			// The group's positions are past the aborted inputs: to process
			// them again, close the member and start a new one, which
			// resumes from the committed offsets.
		}
	}
}
