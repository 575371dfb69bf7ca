package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// The group test's sizes.
const (
	groupTopic      = "grouped"
	groupPartitions = 12
	groupRecords    = 2400
	groupMembers    = 3
)

// groupRun is the shared state of TestGroupMembersUnderKills.
type groupRun struct {
	mu   sync.Mutex
	seen map[string]int // value -> times delivered to some member
	// acked are the values the producer had acknowledged.
	acked    map[string]bool
	produced atomic.Bool
}

// TestGroupMembersUnderKills runs three `strand serve` processes, a
// 12-partition topic written at a steady rate, and three group members in
// separate clients that process and commit after every poll, while each
// node in turn is SIGKILLed and restarted and one member is killed (no
// leave) and restarted with its instance id. Every acknowledged record is
// delivered to some member (none skipped); duplicates (re-deliveries after
// the killed member's last commit, or after a hand-over) are counted.
func TestGroupMembersUnderKills(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 3)
	runCLI(t, []string{"STRAND_BROKERS=" + strings.Join(c.addrs, ",")}, "",
		"topic", "create", groupTopic, "--partitions", strconv.Itoa(groupPartitions), "--replication-factor", "3")
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(c.addrs, groupTopic, groupPartitions) })
	run := &groupRun{seen: map[string]int{}, acked: map[string]bool{}}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); run.produce(t, c.addrs) }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stops := make([]context.CancelFunc, groupMembers)
	start := func(i int) {
		mctx, stop := context.WithCancel(ctx)
		stops[i] = stop
		wg.Add(1)
		go func() { defer wg.Done(); run.member(t, mctx, c.addrs, i) }()
	}
	for i := range groupMembers {
		start(i)
	}
	for cycle := range 3 {
		time.Sleep(2 * time.Second) // let traffic flow between faults
		c.procs[cycle].kill()
		if cycle == 1 {
			stops[0]() // member 0 dies without leaving ...
			time.Sleep(500 * time.Millisecond)
			start(0) // ... and comes back with its instance id
		}
		time.Sleep(2 * time.Second)
		c.start(cycle)
	}
	waitFor(t, "every record delivered", 90*time.Second, func() error { return run.complete() })
	// The restarted member took its own place: three members, no ghost of
	// the killed process waiting for its session to expire.
	admin, err := clientlib.NewClient(clientlib.SeedAddresses(c.addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	d, err := admin.DescribeGroup(ctx, "killers")
	if err != nil || len(d.Members) != groupMembers {
		t.Fatalf("describe: %d members (%+v), %v", len(d.Members), d.Members, err)
	}
	for _, stop := range stops {
		stop()
	}
	wg.Wait()
	run.mu.Lock()
	defer run.mu.Unlock()
	dups := 0
	for _, n := range run.seen {
		dups += n - 1
	}
	t.Logf("%d records acknowledged, %d delivered, %d re-deliveries (after the killed member's last commit or a hand-over)",
		len(run.acked), len(run.seen), dups)
}

// produce writes groupRecords values at a steady rate, round robin over
// the partitions, and notes which were acknowledged.
func (r *groupRun) produce(t *testing.T, addrs []string) {
	defer r.produced.Store(true)
	c, err := clientlib.NewClient(clientlib.SeedAddresses(addrs...), clientlib.ManualPartitioner(),
		clientlib.DialTimeout(time.Second), clientlib.RequestTimeout(5*time.Second), clientlib.DeliveryTimeout(30*time.Second),
		clientlib.RetryBackoff(20*time.Millisecond, 500*time.Millisecond))
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for i := range groupRecords {
		<-tick.C
		v := fmt.Sprintf("v%d", i)
		c.Produce(context.Background(), &clientlib.Record{Topic: groupTopic, Partition: int32(i % groupPartitions), Value: []byte(v)},
			func(_ *clientlib.Record, err error) {
				if err == nil {
					r.mu.Lock()
					r.acked[v] = true
					r.mu.Unlock()
				}
			})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.Flush(ctx)
}

// member is one group member process: poll, record, commit, until ctx
// ends; it never leaves (the test kills members by cancelling ctx).
func (r *groupRun) member(t *testing.T, ctx context.Context, addrs []string, i int) {
	c, err := clientlib.NewClient(clientlib.SeedAddresses(addrs...), clientlib.DialTimeout(time.Second),
		clientlib.RequestTimeout(3*time.Second), clientlib.RetryBackoff(20*time.Millisecond, 500*time.Millisecond))
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	g, err := clientlib.NewGroupConsumer(c, "killers", []string{groupTopic}, clientlib.InstanceID(fmt.Sprintf("member-%d", i)),
		clientlib.AutoCommitInterval(0), clientlib.GroupConsumerOpts(clientlib.FetchMaxWait(100*time.Millisecond)))
	if err != nil {
		t.Error(err)
		return
	}
	for ctx.Err() == nil {
		fs := g.Poll(ctx)
		recs := fs.Records()
		r.mu.Lock()
		for _, rec := range recs {
			r.seen[string(rec.Value)]++
		}
		r.mu.Unlock()
		if len(recs) > 0 {
			_ = g.Commit(ctx) // a refused commit re-delivers: at least once
		}
	}
}

// complete is nil once the producer finished and every acknowledged value
// was delivered.
func (r *groupRun) complete() error {
	if !r.produced.Load() {
		return fmt.Errorf("still producing")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	missing := 0
	for v := range r.acked {
		if r.seen[v] == 0 {
			missing++
		}
	}
	if missing > 0 {
		return fmt.Errorf("%d of %d acknowledged records not delivered yet", missing, len(r.acked))
	}
	return nil
}
