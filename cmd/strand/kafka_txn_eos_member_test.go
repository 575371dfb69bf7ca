package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// faults SIGKILLs and restarts nodes and a member while the pipeline
// runs, each step after the members committed more transactions, and at
// a random delay after that point so kills land at different phases of a
// commit. A step the pipeline finished before is skipped (and logged).
func (r *eosRun) faults(rng *rand.Rand) {
	jitter := func() { time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond) }
	killNode := func(what string, victim int, downFor int) bool {
		if r.mustProgress(2, "before killing "+what) == eosFinished {
			return false
		}
		jitter()
		r.t.Logf("kill -9 node %d (%s)", victim+1, what)
		r.c.procs[victim].kill()
		defer r.c.start(victim)
		return downFor == 0 || r.mustProgress(downFor, fmt.Sprintf("with node %d down", victim+1)) != eosFinished
	}
	steps := []func() bool{
		func() bool { return killNode("coordinator of eos-m1", r.txnCoordinator("eos-m1"), 3) },
		func() bool {
			return killNode("leader of an eos-out partition", r.leaderOf(eosOut, rng.Int32N(eosPartitions)), 3)
		},
		func() bool {
			if r.mustProgress(2, "before killing member m2") == eosFinished {
				return false
			}
			jitter()
			r.t.Logf("kill -9 member m2")
			r.killMember("m2")
			r.startMember("m2", nil)
			return true
		},
		func() bool {
			return killNode("coordinator of eos-m2, restarted at once", r.txnCoordinator("eos-m2"), 0)
		},
		func() bool { return killNode("a random node", rng.IntN(len(r.c.procs)), 2) },
	}
	for i, step := range steps {
		if !step() {
			r.t.Logf("the pipeline finished before fault step %d of %d", i+1, len(steps))
			return
		}
	}
}

// eosProgress is what a wait for progress saw.
type eosProgress int

const (
	eosProgressed eosProgress = iota
	eosFinished               // the group consumed all of eos-in first
	eosStalled                // neither within the wait
)

// progress waits up to within until the members committed n more
// transactions.
func (r *eosRun) progress(n int, within time.Duration) eosProgress {
	base := len(r.transcripts().committed)
	deadline := time.Now().Add(within)
	for {
		if len(r.transcripts().committed) >= base+n {
			return eosProgressed
		}
		if r.consumedAll() == nil {
			return eosFinished
		}
		if time.Now().After(deadline) {
			return eosStalled
		}
		time.Sleep(50 * time.Millisecond) // polling the members' transcripts
	}
}

// mustProgress is progress within 40 s, failing the test when stalled.
func (r *eosRun) mustProgress(n int, what string) eosProgress {
	p := r.progress(n, 40*time.Second)
	if p == eosStalled {
		r.memberLogs()
		r.t.Fatalf("no progress %s: fewer than %d transactions committed in 40 s", what, n)
	}
	return p
}

// txnCoordinator is the index of the node coordinating transactional
// id (the leader of its __strand_transactions partition), asked until a
// node answers.
func (r *eosRun) txnCoordinator(id string) int {
	var node int32
	waitFor(r.t, "coordinator of "+id, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, ok := r.adm.FindTxnCoordinators(ctx, id)[id]
		if !ok {
			return errors.New("no answer")
		}
		node = resp.NodeID
		return resp.Err
	})
	return r.nodeIndex(node)
}

// leaderOf is the index of the node leading topic's partition.
func (r *eosRun) leaderOf(topic string, partition int32) int {
	var node int32
	waitFor(r.t, fmt.Sprintf("leader of %s/%d", topic, partition), 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		md, err := r.adm.Metadata(ctx, topic)
		if err != nil {
			return err
		}
		p, ok := md.Topics[topic].Partitions[partition]
		if !ok || p.Err != nil || p.Leader < 1 {
			return fmt.Errorf("no leader yet (%v)", p.Err)
		}
		node = p.Leader
		return nil
	})
	return r.nodeIndex(node)
}

func (r *eosRun) nodeIndex(node int32) int {
	if node < 1 || int(node) > len(r.c.procs) {
		r.t.Fatalf("node id %d is not one of the cluster's", node)
	}
	return int(node) - 1
}

// TestKafkaEOSMemberHelper is not a test: it is a member process of the
// exactly-once pipeline tests, run only with eosHelperEnv set (to its
// member id). It runs franz-go's GroupTransactSession from eos-in to
// eos-out until its stdin closes, printing each transaction's outcome:
// "committed TAG N", "aborted TAG", "failed TAG N ERR" (outcome unknown)
// or "abandoned TAG", N being the transaction's records; a session that
// failed or was abandoned is replaced by a new one with the same
// transactional and instance ids.
func TestKafkaEOSMemberHelper(t *testing.T) {
	id := os.Getenv(eosHelperEnv)
	if id == "" {
		t.Skip("helper process of the exactly-once pipeline tests")
	}
	abandonAt, _ := strconv.Atoi(os.Getenv(eosAbandonEnv))
	stop := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := &eosPipeline{id: id, brokers: strings.Split(os.Getenv("STRAND_KAFKA_BROKERS"), ","), abandonAt: abandonAt, stop: stop}
	for session := 1; ctx.Err() == nil; session++ {
		sess, err := m.session(ctx)
		if err != nil {
			fmt.Printf("session %d failed to start: %v\n", session, err)
			time.Sleep(100 * time.Millisecond) // the cluster is electing
			continue
		}
		fmt.Printf("session %d\n", session)
		done := m.transact(ctx, sess)
		sess.Close()
		if done {
			return
		}
	}
}

// eosPipeline is one member's consume-transform-produce loop.
type eosPipeline struct {
	id        string
	brokers   []string
	abandonAt int // abandon the Nth transaction (0: none)
	txns      int
	stop      <-chan struct{}
}

// session makes a GroupTransactSession and takes the transactional id's
// producer id (Kafka's initTransactions), which aborts what an earlier
// process or session with the id left open.
func (m *eosPipeline) session(ctx context.Context) (*kgo.GroupTransactSession, error) {
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(m.brokers...), kgo.TransactionalID("eos-"+m.id),
		kgo.TransactionTimeout(eosTxnTimeout), kgo.ConsumerGroup(eosGroup), kgo.ConsumeTopics(eosIn),
		kgo.InstanceID(m.id), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.DefaultProduceTopic(eosOut), kgo.DialTimeout(time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelError, func() string { return time.Now().Format("15:04:05.000 ") })))
	if err != nil {
		return nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, _, err := sess.Client().ProducerID(ictx); err != nil {
		sess.Close()
		return nil, fmt.Errorf("init producer id: %w", err)
	}
	return sess, nil
}

// transact runs transactions until stop closes (true) or the session
// failed or was abandoned (false).
func (m *eosPipeline) transact(ctx context.Context, sess *kgo.GroupTransactSession) bool {
	for ctx.Err() == nil {
		select {
		case <-m.stop:
			return true
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		recs := sess.PollRecords(pctx, eosPollMax).Records()
		cancel()
		if len(recs) == 0 {
			continue
		}
		m.txns++
		tag := fmt.Sprintf("%s.%d.%d", m.id, os.Getpid(), m.txns)
		if err := sess.Begin(); err != nil {
			fmt.Printf("failed %s 0 begin: %v\n", tag, err)
			return false
		}
		for _, rec := range recs {
			out := &kgo.Record{Key: rec.Value, Value: fmt.Appendf(nil, "%s/%s", rec.Value, tag)}
			sess.Produce(ctx, out, nil)
		}
		if m.txns == m.abandonAt {
			err := sess.Client().Flush(ctx)
			fmt.Printf("abandoned %s (flushed: %v)\n", tag, err)
			return false
		}
		committed, err := sess.End(ctx, kgo.TryCommit)
		switch {
		case err != nil:
			fmt.Printf("failed %s %d %v\n", tag, len(recs), err)
			return false
		case committed:
			fmt.Printf("committed %s %d\n", tag, len(recs))
		default:
			fmt.Printf("aborted %s\n", tag)
		}
	}
	return true
}
