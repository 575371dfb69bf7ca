package clientlib_test

import (
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
