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

// A consume-transform-produce loop with exactly-once effects: each
// round's output records and the input offsets they follow commit
// together in one transaction, and a read_committed reader of "upper"
// sees each input's output once. A round that aborts (asked to, failed,
// or cut by a rebalance that took partitions mid-round) leaves no output
// visible and moves no offset, and the session goes back to the committed
// offsets, so its input comes again.
func Example_transactions() {
	ctx := context.Background()
	client, err := clientlib.NewClient(clientlib.TransactionalID("upper-1"))
	if err != nil {
		panic(err)
	}
	defer client.Close()
	session, err := clientlib.NewTransactSession(client, "upper", []string{"words"})
	if err != nil {
		panic(err)
	}
	defer session.Close(ctx) // aborts an open round
	for round := 0; round < 10; round++ {
		fs := session.Poll(ctx) // opens the round's transaction
		if err := fs.FirstErr(); err != nil && !clientlib.IsRetriable(err) {
			panic(err) // a *ProducerFencedError: another instance took over
		}
		for _, r := range fs.Records() {
			out := &clientlib.Record{Topic: "upper", Key: r.Key, Value: bytes.ToUpper(r.Value)}
			session.Produce(ctx, out, nil) // a failure makes End abort
		}
		// Not committed: aborted (its input comes again), or, with a
		// retriable error, not finished yet (the next Poll finishes it).
		if committed, err := session.End(ctx, true); !committed {
			fmt.Println("round not committed:", err)
		}
	}
}
