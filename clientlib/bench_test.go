package clientlib_test

import (
	"context"
	"sync"
	"testing"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
)

// BenchmarkProduce1KiB produces 1 KiB keyless records with acks=all to a
// 3-partition topic of the in-process fake: three real servers on memdisk
// behind the fake's proxies, all in this process, so it measures the
// client with the real server path but no disk syncs or separate machines.
func BenchmarkProduce1KiB(b *testing.B) {
	cluster, err := fake.New(fake.Topic("t", 3))
	if err != nil {
		b.Fatal(err)
	}
	defer cluster.Close()
	client, err := clientlib.NewClient(clientlib.SeedAddresses(cluster.Addrs()...), clientlib.RandSeed(1))
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	value := make([]byte, 1024)
	ctx := context.Background()
	var wg sync.WaitGroup
	var failures sync.Map
	b.SetBytes(1024)
	b.ResetTimer()
	wg.Add(b.N)
	for i := 0; i < b.N; i++ {
		client.Produce(ctx, &clientlib.Record{Topic: "t", Value: value}, func(_ *clientlib.Record, err error) {
			if err != nil {
				failures.Store(err.Error(), true)
			}
			wg.Done()
		})
	}
	wg.Wait()
	b.StopTimer()
	failures.Range(func(k, _ any) bool { b.Fatal(k); return false })
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
