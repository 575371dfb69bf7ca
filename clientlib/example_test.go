package clientlib_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/proto/strandpb"
)

// A simulator drives the client's pure pieces with virtual time and its
// own seeded random source: Window decides what to send, ClassifyErr and
// LeaderCache what an answer means, Backoff when to retry.
func ExampleWindow() {
	rng := rand.New(rand.NewPCG(42, 42)) // the simulator's seed
	backoff := clientlib.Backoff{Base: 10 * time.Millisecond, Max: 100 * time.Millisecond}
	w := clientlib.NewWindow(clientlib.WindowConfig{Idempotent: true, InFlightMax: 5, AttemptsMax: 10})
	now := time.Duration(0) // virtual time

	w.Push(3, now) // a sealed batch of 3 records
	w.Push(2, now)
	first, _ := w.Next(now)
	second, _ := w.Next(now)
	fmt.Println("send", first.BaseSequence, second.BaseSequence)

	// The first batch's leader moved: retriable, resend after a backoff.
	notLeader := &clientlib.Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_LEADER, LeaderID: 2}
	w.Report(first.ID, -1, notLeader, now, now+backoff.Delay(first.Number, rng))
	// The second overtook it and was refused as out of order.
	w.Report(second.ID, -1, &clientlib.Error{Code: strandpb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE}, now, now)

	now = w.ReadyAt()
	for {
		a, ok := w.Next(now)
		if !ok {
			break
		}
		fmt.Println("resend", a.BaseSequence, "attempt", a.Number)
		w.Report(a.ID, int64(100+a.BaseSequence), nil, now, now)
	}
	for {
		c, ok := w.Pop()
		if !ok {
			break
		}
		fmt.Println("done", c.ID, "at offset", c.BaseOffset)
	}
	// Output:
	// send 0 3
	// resend 0 attempt 2
	// resend 3 attempt 2
	// done 1 at offset 100
	// done 2 at offset 103
}

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
