package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Bounds of the Kafka consumer-group test.
const (
	kgTopic      = "kgroup"
	kgGroup      = "kg"
	kgPartitions = 6
	kgRecords    = 900
)

// kgOwners records which member owns each partition, from kgo's
// OnPartitionsAssigned/Revoked/Lost callbacks, and every delivered record.
type kgOwners struct {
	mu         sync.Mutex
	owner      map[int32]string
	seen       map[string]bool
	violations []string
	keys       map[int16]int // Kafka API keys the members sent
	events     []string      // "member +p" / "member -p", in order
}

// ownedBy is the sorted partitions member owns.
func (o *kgOwners) ownedBy(member string) []int32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ps []int32
	for p, m := range o.owner {
		if m == member {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps
}

// OnBrokerWrite counts the API keys the members send (kgo.HookBrokerWrite).
func (o *kgOwners) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err == nil {
		o.keys[key]++
	}
}

func (o *kgOwners) assigned(member string, ps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps[kgTopic] {
		if cur, ok := o.owner[p]; ok && cur != member {
			o.violations = append(o.violations, fmt.Sprintf("partition %d assigned to %s while %s owns it", p, member, cur))
		}
		o.owner[p] = member
		o.events = append(o.events, fmt.Sprintf("%s +%d", member, p))
	}
}

func (o *kgOwners) released(member string, ps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps[kgTopic] {
		if o.owner[p] == member {
			delete(o.owner, p)
		}
		o.events = append(o.events, fmt.Sprintf("%s -%d", member, p))
	}
}

func (o *kgOwners) consumed(member string, r *kgo.Record) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.owner[r.Partition] != member {
		o.violations = append(o.violations, fmt.Sprintf("%s consumed partition %d owned by %q", member, r.Partition, o.owner[r.Partition]))
	}
	o.seen[string(r.Value)] = true
}

func (o *kgOwners) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.seen)
}

// kgMember is one kgo consumer-group member polling until stopped.
type kgMember struct {
	t    *testing.T
	name string
	cl   *kgo.Client
	stop chan struct{}
	done chan struct{}
}

func startKgMember(t *testing.T, seeds []string, name string, o *kgOwners, extra ...kgo.Opt) *kgMember {
	t.Helper()
	m := &kgMember{t: t, name: name, stop: make(chan struct{}), done: make(chan struct{})}
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(kgGroup), kgo.ConsumeTopics(kgTopic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID(name), kgo.WithHooks(o),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { o.assigned(name, ps) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				t.Logf("member %s: commit on revoke: %v", name, err) // lost work: the next owner reads it again
			}
			o.released(name, ps)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { o.released(name, ps) })}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			fs := cl.PollFetches(ctx)
			cancel()
			fs.EachRecord(func(r *kgo.Record) { o.consumed(name, r) })
			cl.AllowRebalance()
		}
	}()
	return m
}

// leave stops polling, commits what was consumed and leaves the group. A
// commit refused while the group rebalances (another member just left:
// the generation moved on) is retried, as an application would, for up to
// 20 s; the error of a commit that never lands is logged, since the test's
// final check then fails on it (before, the error was dropped and a
// failure under load said only that an offset stayed behind).
func (m *kgMember) leave() {
	close(m.stop)
	<-m.done
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var err error
	for attempt := 0; attempt < 40 && ctx.Err() == nil; attempt++ {
		if err = m.cl.CommitUncommittedOffsets(ctx); err == nil {
			break
		}
		m.cl.PollFetches(ctx) // let the member rejoin at the new generation
		m.cl.AllowRebalance()
	}
	if err != nil {
		m.t.Logf("member %s: final commit: %v", m.name, err)
	}
	m.cl.Close()
}

// A franz-go consumer group (cooperative-sticky, the classic protocol)
// of three members against three real `strand serve` processes, while
// members join and leave and records keep arriving: every record is
// delivered, no partition is ever assigned to a member while another
// owns it nor consumed by a member that does not own it (kgo's
// OnPartitionsAssigned/Revoked), the final commits are visible through
// kadm's FetchOffsets and equal the end offsets; kadm lists and describes
// the group, resets an empty group's offsets and deletes it.
func TestKafkaConsumerGroupCooperative(t *testing.T) {
	skipShort(t)
	keys := runKgScenario(t)
	if keys[11] == 0 || keys[14] == 0 || keys[68] != 0 {
		t.Fatalf("members sent %d JoinGroup, %d SyncGroup, %d ConsumerGroupHeartbeat: the classic protocol was not the one used", keys[11], keys[14], keys[68])
	}
}

// The same with KIP-848's protocol (kgo.ServerSideBalancer: franz-go
// heartbeats with ConsumerGroupHeartbeat, the coordinator assigns).
func TestKafkaConsumerGroupKIP848(t *testing.T) {
	skipShort(t)
	keys := runKgScenario(t, kgo.ServerSideBalancer())
	if keys[68] == 0 || keys[11] != 0 {
		t.Fatalf("members sent %d ConsumerGroupHeartbeat, %d JoinGroup: KIP-848 was not the protocol used", keys[68], keys[11])
	}
}

// The same with an eager balancer (range: every member revokes everything
// before it rejoins, as librdkafka's default does).
func TestKafkaConsumerGroupEager(t *testing.T) {
	skipShort(t)
	keys := runKgScenario(t, kgo.Balancers(kgo.RangeBalancer()))
	if keys[11] == 0 || keys[68] != 0 {
		t.Fatalf("members sent %d JoinGroup, %d ConsumerGroupHeartbeat: the classic protocol was not the one used", keys[11], keys[68])
	}
}

// runKgScenario runs the consumer-group scenario with the members' extra
// options; it returns how many requests of each API key they sent.
func runKgScenario(t *testing.T, extra ...kgo.Opt) map[int16]int {
	c := startKafkaCluster(t, 3)
	adm := kafkaAdmin(t, c.kafka)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, kgPartitions, 3, nil, kgTopic); err != nil {
		t.Fatal(err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.kafka...), kgo.DefaultProduceTopic(kgTopic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			prod.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, nil)
		}
		if err := prod.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	o := &kgOwners{owner: map[int32]string{}, seen: map[string]bool{}, keys: map[int16]int{}}
	waitSeen := func(n int) {
		t.Helper()
		waitFor(t, fmt.Sprintf("%d records consumed", n), 90*time.Second, func() error {
			if got := o.count(); got < n {
				return fmt.Errorf("%d of %d consumed", got, n)
			}
			return nil
		})
	}
	produce(0, kgRecords/3)
	a := startKgMember(t, c.kafka, "a", o, extra...)
	b := startKgMember(t, c.kafka, "b", o, extra...)
	waitSeen(kgRecords / 3)
	cm := startKgMember(t, c.kafka, "c", o, extra...)
	produce(kgRecords/3, 2*kgRecords/3)
	waitSeen(2 * kgRecords / 3)
	describeKg(ctx, t, adm)
	b.leave()
	d := startKgMember(t, c.kafka, "d", o, extra...)
	produce(2*kgRecords/3, kgRecords)
	waitSeen(kgRecords)
	for _, m := range []*kgMember{a, cm, d} {
		m.leave()
	}
	o.mu.Lock()
	if len(o.violations) > 0 {
		t.Errorf("ownership violations:\n%v", o.violations)
	}
	o.mu.Unlock()
	checkKgCommitted(ctx, t, adm)
	resetAndDeleteKg(ctx, t, adm)
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.keys)
}

// describeKg checks kadm lists and describes the running group.
func describeKg(ctx context.Context, t *testing.T, adm *kadm.Client) {
	t.Helper()
	listed, err := adm.ListGroups(ctx)
	if err != nil || !contains(listed.Groups(), kgGroup) {
		t.Fatalf("kadm ListGroups: %v %v", listed.Groups(), err)
	}
	waitFor(t, "kadm DescribeGroups naming 3 members", 30*time.Second, func() error {
		described, err := adm.DescribeGroups(ctx, kgGroup)
		if err != nil {
			return err
		}
		g := described[kgGroup]
		if g.Err != nil || len(g.Members) != 3 || g.ProtocolType != "consumer" {
			return fmt.Errorf("%+v", g)
		}
		cg, err := adm.DescribeConsumerGroups(ctx, kgGroup)
		if err != nil {
			return err
		}
		if g := cg[kgGroup]; g.Err != nil || len(g.Members) != 3 {
			return fmt.Errorf("kadm DescribeConsumerGroups: %+v", g)
		}
		return nil
	})
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// checkKgCommitted requires the group's commits to reach the end offsets.
// The last member's final commit may still be in flight when its client
// returns, so the comparison is polled (bounded); a lost commit still fails.
func checkKgCommitted(ctx context.Context, t *testing.T, adm *kadm.Client) {
	t.Helper()
	waitFor(t, "committed offsets at the end offsets", 30*time.Second, func() error { // a restarted node may still be starting
		ends, err := adm.ListEndOffsets(ctx, kgTopic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return err
		}
		committed, err := adm.FetchOffsets(ctx, kgGroup)
		if err != nil {
			return err
		}
		var behind error
		ends.Each(func(e kadm.ListedOffset) {
			// A partition the producer left empty has nothing to commit
			// (Kafka clients commit only what they consumed).
			got, ok := committed.Lookup(kgTopic, e.Partition)
			if (!ok && e.Offset != 0 || ok && got.At != e.Offset) && behind == nil {
				behind = fmt.Errorf("partition %d: committed %+v, end offset %d", e.Partition, got, e.Offset)
			}
		})
		return behind
	})
}

// resetAndDeleteKg resets the empty group's offsets to 0, reads them
// back, deletes the group and checks it is gone.
func resetAndDeleteKg(ctx context.Context, t *testing.T, adm *kadm.Client) {
	t.Helper()
	reset := kadm.Offsets{}
	for p := range int32(kgPartitions) {
		reset.Add(kadm.Offset{Topic: kgTopic, Partition: p, At: 0, LeaderEpoch: -1})
	}
	waitFor(t, "reset of the empty group", 30*time.Second, func() error {
		resp, err := adm.CommitOffsets(ctx, kgGroup, reset)
		if err == nil {
			err = resp.Error()
		}
		return err
	})
	committed, err := adm.FetchOffsets(ctx, kgGroup)
	if err != nil {
		t.Fatal(err)
	}
	committed.Each(func(o kadm.OffsetResponse) {
		if o.At != 0 {
			t.Errorf("after the reset, partition %d committed %d", o.Partition, o.At)
		}
	})
	deleted, err := adm.DeleteGroup(ctx, kgGroup)
	if err != nil || deleted.Err != nil {
		t.Fatalf("kadm DeleteGroup: %v %v", err, deleted.Err)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil || contains(listed.Groups(), kgGroup) {
		t.Fatalf("after delete, kadm ListGroups: %v %v", listed.Groups(), err)
	}
}

// Static membership (group.instance.id): a static member that stops
// without leaving (kgo does not leave for a static member) and restarts
// under the same instance id within the session timeout gets exactly its
// partitions back, and the other member's assignment never moves.
func TestKafkaConsumerGroupStatic(t *testing.T) {
	skipShort(t)
	c := startKafkaCluster(t, 1)
	adm := kafkaAdmin(t, c.kafka)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, kgTopic); err != nil {
		t.Fatal(err)
	}
	o := &kgOwners{owner: map[int32]string{}, seen: map[string]bool{}, keys: map[int16]int{}}
	a := startKgMember(t, c.kafka, "a", o, kgo.InstanceID("ia"))
	b := startKgMember(t, c.kafka, "b", o, kgo.InstanceID("ib"))
	defer b.leave()
	waitFor(t, "two partitions each", 60*time.Second, func() error {
		if pa, pb := o.ownedBy("a"), o.ownedBy("b"); len(pa) != 2 || len(pb) != 2 {
			return fmt.Errorf("a owns %v, b owns %v", pa, pb)
		}
		return nil
	})
	before := o.ownedBy("a")
	o.mu.Lock()
	bEvents := countPrefix(o.events, "b ")
	o.mu.Unlock()
	close(a.stop)
	<-a.done
	a.cl.Close()
	a2 := startKgMember(t, c.kafka, "a", o, kgo.InstanceID("ia"))
	defer a2.leave()
	waitFor(t, "the restarted static member's partitions", 60*time.Second, func() error {
		if got := o.ownedBy("a"); !slices.Equal(got, before) {
			return fmt.Errorf("a owns %v, before its restart %v", got, before)
		}
		return nil
	})
	o.mu.Lock()
	defer o.mu.Unlock()
	if n := countPrefix(o.events, "b "); n != bEvents {
		t.Fatalf("b's assignment moved while a restarted: %v", o.events)
	}
}

func countPrefix(xs []string, prefix string) int {
	n := 0
	for _, x := range xs {
		if len(x) >= len(prefix) && x[:len(prefix)] == prefix {
			n++
		}
	}
	return n
}

// The group's coordinator (the leader of its __strand_offsets partition,
// as kadm's FindGroupCoordinators names it) is SIGKILLed while two
// cooperative members consume: they find the new coordinator, which knows
// nothing of what the old node's Kafka layer told them, rejoin, and every
// record is still delivered with no partition owned or consumed by two
// members at once; the final commits equal the end offsets.
func TestKafkaConsumerGroupCoordinatorKilled(t *testing.T) {
	skipShort(t)
	c := startKafkaCluster(t, 3)
	adm := kafkaAdmin(t, c.kafka)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, kgPartitions, 3, nil, kgTopic); err != nil {
		t.Fatal(err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.kafka...), kgo.DefaultProduceTopic(kgTopic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			prod.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, nil)
		}
		if err := prod.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	o := &kgOwners{owner: map[int32]string{}, seen: map[string]bool{}, keys: map[int16]int{}}
	waitSeen := func(n int) {
		t.Helper()
		waitFor(t, fmt.Sprintf("%d records consumed", n), 90*time.Second, func() error {
			if got := o.count(); got < n {
				return fmt.Errorf("%d of %d consumed", got, n)
			}
			return nil
		})
	}
	produce(0, kgRecords/2)
	a := startKgMember(t, c.kafka, "a", o)
	b := startKgMember(t, c.kafka, "b", o)
	waitSeen(kgRecords / 2)
	var coord int32
	waitFor(t, "the group's coordinator", 30*time.Second, func() error {
		r := adm.FindGroupCoordinators(ctx, kgGroup)
		if err := r.Error(); err != nil {
			return err
		}
		coord = r[kgGroup].NodeID
		return nil
	})
	o.mu.Lock()
	joins := o.keys[11]
	o.mu.Unlock()
	c.procs[coord-1].kill()
	produce(kgRecords/2, kgRecords)
	waitSeen(kgRecords)
	waitFor(t, "a rejoin at the new coordinator", 60*time.Second, func() error {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.keys[11] == joins {
			return fmt.Errorf("no JoinGroup since the kill (%d before)", joins)
		}
		return nil
	})
	c.start(int(coord - 1))
	a.leave()
	b.leave()
	o.mu.Lock()
	if len(o.violations) > 0 {
		t.Errorf("ownership violations:\n%v", o.violations)
	}
	o.mu.Unlock()
	checkKgCommitted(ctx, t, adm)
}
