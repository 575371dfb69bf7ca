package linearizability

import (
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"pgregory.net/rapid"
)

// genHistory runs a sequential partition log with concurrent clients and
// records what they observe: each operation is called, takes effect at one
// instant (its true linearization point) and returns later, so the history
// is correct by construction. Some operations time out (before or after
// taking effect, and may take effect after the client gave up), some
// produces fail definitely (no effect), some never return. With drain, a
// fresh client finally reads every partition from 0 to its end.
type genHistory struct {
	r       drawer
	h       *History
	now     int64
	tps     []TopicPartition
	logs    map[TopicPartition][]Record
	commits map[TopicPartition]int64 // group "g"
	clients []*genClient
	limbo   []*genOp // given up by their client, not yet in effect
	seq     int
}

type genClient struct {
	id  ClientID
	op  *genOp
	pos map[TopicPartition]int64 // consumer positions, after a first fetch
}

type genOp struct {
	id        OpID
	client    *genClient
	kind      Kind
	tp        TopicPartition
	values    []Record
	offset    int64 // fetch: offset; commit: offset
	max       int64
	spec      OffsetSpec
	poll      bool
	effective bool
	finish    func(t int64) // records the return computed when it took effect
}

// drawer is where the generator's choices come from: rapid (shrinkable) or a
// seeded math/rand (for the benchmark's large histories).
type drawer interface {
	intn(lo, hi int, label string) int
}

type rapidDrawer struct{ t *rapid.T }

func (d rapidDrawer) intn(lo, hi int, label string) int {
	return rapid.IntRange(lo, hi).Draw(d.t, label)
}

type randDrawer struct{ rng *rand.Rand }

func (d randDrawer) intn(lo, hi int, _ string) int { return lo + d.rng.Intn(hi-lo+1) }

// genShape sizes a generated history.
type genShape struct {
	partitionsMin, partitionsMax int
	clientsMin, clientsMax       int
	stepsMin, stepsMax           int
}

var smallShape = genShape{partitionsMin: 1, partitionsMax: 2, clientsMin: 1, clientsMax: 5, stepsMin: 5, stepsMax: 200}

func newGen(r drawer, shape genShape) *genHistory {
	g := &genHistory{r: r, h: NewHistory(), logs: map[TopicPartition][]Record{}, commits: map[TopicPartition]int64{}}
	nTPs := r.intn(shape.partitionsMin, shape.partitionsMax, "partitions")
	for p := 0; p < nTPs; p++ {
		tp := TopicPartition{Topic: "t", Partition: int32(p)}
		g.tps = append(g.tps, tp)
		g.commits[tp] = -1
	}
	nClients := r.intn(shape.clientsMin, shape.clientsMax, "clients")
	for c := 0; c < nClients; c++ {
		g.clients = append(g.clients, &genClient{id: ClientID(c), pos: map[TopicPartition]int64{}})
	}
	return g
}

func (g *genHistory) tick() { g.now += int64(g.r.intn(1, 3, "dt")) }

// start calls a new operation for an idle client.
func (g *genHistory) start(c *genClient) {
	tp := g.tps[g.r.intn(0, len(g.tps)-1, "tp")]
	op := &genOp{client: c, tp: tp}
	switch k := g.r.intn(0, 9, "kind"); {
	case k < 5:
		op.kind = KindProduce
		n := g.r.intn(1, 2, "batch")
		key := []string{"", "k1", "k2"}[g.r.intn(0, 2, "key")]
		for i := 0; i < n; i++ {
			g.seq++
			op.values = append(op.values, Record{Key: key, Value: fmt.Sprintf("c%d-%d", c.id, g.seq)})
		}
		op.id = g.h.CallProduceBatch(c.id, tp, op.values, g.now)
	case k < 8:
		op.kind, op.max = KindFetch, int64(g.r.intn(0, 3, "max"))
		pos, has := c.pos[tp]
		if has && g.r.intn(0, 1, "poll") == 1 {
			op.poll, op.offset = true, pos
			op.id = g.h.CallPoll(c.id, tp, pos, op.max, g.now)
		} else {
			op.offset = int64(g.r.intn(0, len(g.logs[tp])+1, "offset"))
			op.id = g.h.CallFetch(c.id, tp, op.offset, op.max, g.now)
			c.pos[tp] = op.offset // a seek moves the position, whatever the fetch returns
		}
	case k < 9:
		op.kind, op.spec = KindListOffsets, OffsetSpec(g.r.intn(0, 1, "spec"))
		op.id = g.h.CallListOffsets(c.id, tp, op.spec, g.now)
	default:
		if g.r.intn(0, 1, "commit") == 1 {
			op.kind, op.offset = KindCommitOffset, int64(g.r.intn(0, 9, "commitOffset"))
			op.id = g.h.CallCommitOffset(c.id, "g", tp, op.offset, g.now)
		} else {
			op.kind = KindFetchCommitted
			op.id = g.h.CallFetchCommitted(c.id, "g", tp, g.now)
		}
	}
	c.op = op
}

// effect applies op to the sequential state now and prepares its return.
func (g *genHistory) effect(op *genOp) {
	op.effective = true
	log := g.logs[op.tp]
	h, id, c, tp := g.h, op.id, op.client, op.tp
	switch op.kind {
	case KindProduce:
		base := int64(len(log))
		for i, r := range op.values {
			g.logs[tp] = append(g.logs[tp], Record{Offset: base + int64(i), Key: r.Key, Value: r.Value})
		}
		op.finish = func(t int64) { h.ReturnProduce(id, base, t) }
	case KindFetch:
		hwm := int64(len(log))
		if op.offset > hwm {
			op.finish = func(t int64) { h.ReturnOutOfRange(id, 0, hwm, t) }
			return
		}
		end := hwm
		if op.max > 0 {
			end = min(end, op.offset+op.max)
		}
		end = op.offset + int64(g.r.intn(0, int(end-op.offset), "short"))
		recs := append([]Record(nil), log[op.offset:end]...)
		op.finish = func(t int64) {
			h.ReturnFetch(id, recs, hwm, 0, t)
			c.pos[tp] = end
		}
	case KindListOffsets:
		v := int64(len(log))
		if op.spec == OffsetEarliest {
			v = 0
		}
		op.finish = func(t int64) { h.ReturnOffset(id, v, t) }
	case KindCommitOffset:
		g.commits[tp] = op.offset
		op.finish = func(t int64) { h.ReturnCommitted(id, t) }
	case KindFetchCommitted:
		v := g.commits[tp]
		op.finish = func(t int64) { h.ReturnOffset(id, v, t) }
	}
}

// step advances the world by one random action.
func (g *genHistory) step() {
	g.tick()
	c := g.clients[g.r.intn(0, len(g.clients)-1, "client")]
	op := c.op
	switch {
	case op == nil:
		g.start(c)
	case !op.effective && op.kind == KindProduce && g.r.intn(0, 9, "fail") == 0:
		g.h.Fail(op.id, g.now)
		c.op = nil
	case g.r.intn(0, 9, "timeout") == 0:
		g.h.Indefinite(op.id, g.now) // the client gives up; the op may still take effect
		if !op.effective {
			g.limbo = append(g.limbo, op)
		}
		c.op = nil
	case !op.effective:
		g.effect(op)
	default:
		op.finish(g.now)
		c.op = nil
	}
	if len(g.limbo) > 0 && g.r.intn(0, 4, "late") == 0 {
		i := g.r.intn(0, len(g.limbo)-1, "lateOp")
		if op := g.limbo[i]; op.kind == KindProduce || op.kind == KindCommitOffset {
			g.effect(op) // takes effect after its client gave up
		}
		g.limbo = append(g.limbo[:i], g.limbo[i+1:]...)
	}
}

// finishAll ends the run: ops in effect mostly return, the rest stay pending;
// then, with drain, a fresh client reads every partition whole.
func (g *genHistory) finishAll(drain bool) (drainOps []OpID) {
	for _, c := range g.clients {
		if c.op != nil && c.op.effective && g.r.intn(0, 3, "leavePending") > 0 {
			g.tick()
			c.op.finish(g.now)
		}
	}
	if !drain {
		return nil
	}
	for _, tp := range g.tps {
		g.tick()
		id := g.h.CallFetch(100, tp, 0, 0, g.now)
		g.tick()
		hwm := int64(len(g.logs[tp]))
		g.h.ReturnFetch(id, append([]Record(nil), g.logs[tp]...), hwm, 0, g.now)
		drainOps = append(drainOps, id)
	}
	return drainOps
}

func generate(r drawer, shape genShape, drain bool) (*genHistory, []OpID) {
	g := newGen(r, shape)
	steps := r.intn(shape.stepsMin, shape.stepsMax, "steps")
	for i := 0; i < steps; i++ {
		g.step()
	}
	return g, g.finishAll(drain)
}

// Histories of a correct log, however clients interleave, time out or give
// up, pass every check.
func TestRapidCorrectHistoriesPass(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		drain := rapid.Bool().Draw(t, "drain")
		g, _ := generate(rapidDrawer{t}, smallShape, drain)
		r := Check(g.h, Options{FinalDrain: drain})
		if err := r.Err(); err != nil {
			t.Fatalf("correct history refused: %v\nops: %+v", err, g.h.Ops())
		}
		if len(r.Anomalies) != 0 {
			t.Fatalf("warnings on a correct history: %v", r.Anomalies)
		}
	})
}

// Changing one acknowledged offset, one value read, or the final drain's
// high-water mark in a correct drained history makes the model refuse it.
func TestRapidMutatedHistoriesFail(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g, drains := generate(rapidDrawer{t}, smallShape, true)
		what := mutate(t, g.h, drains)
		err := CheckLinearizable(g.h, Options{FinalDrain: true})
		var nl *NotLinearizableError
		if !errors.As(err, &nl) {
			t.Fatalf("mutation %s not refused: %v\nops: %+v", what, err, g.h.Ops())
		}
		if Check(g.h, Options{FinalDrain: true}).Err() == nil {
			t.Fatalf("report passed mutation %s", what)
		}
	})
}

// mutate changes one observation in h (in place) and says which.
func mutate(t *rapid.T, h *History, drains []OpID) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var acked, reads []int
	for i := range h.ops {
		op := &h.ops[i]
		if op.Kind == KindProduce && op.Outcome == OutcomeOK {
			acked = append(acked, i)
		}
		if op.Kind == KindFetch && op.Outcome == OutcomeOK && len(op.Received) > 0 {
			reads = append(reads, i)
		}
	}
	choice := rapid.IntRange(0, 2).Draw(t, "mutation")
	switch {
	case choice == 0 && len(acked) > 0:
		op := &h.ops[acked[rapid.IntRange(0, len(acked)-1).Draw(t, "acked")]]
		delta := rapid.SampledFrom([]int64{-2, -1, 1, 2}).Draw(t, "delta")
		if op.Offset+delta < 0 {
			delta = -delta
		}
		op.Offset += delta
		return fmt.Sprintf("op %d offset %+d", op.ID, delta)
	case choice == 1 && len(reads) > 0:
		op := &h.ops[reads[rapid.IntRange(0, len(reads)-1).Draw(t, "read")]]
		i := rapid.IntRange(0, len(op.Received)-1).Draw(t, "record")
		old := op.Received[i].Value
		op.Received = append([]Record(nil), op.Received...)
		op.Received[i].Value = "foreign"
		// Or a value the final drain read at another offset of the partition.
		for _, d := range drains {
			for _, r := range h.ops[d].Received {
				if h.ops[d].TP == op.TP && r.Offset != op.Received[i].Offset && rapid.IntRange(0, 2).Draw(t, "pickExisting") == 0 {
					op.Received[i].Value = r.Value
				}
			}
		}
		return fmt.Sprintf("op %d record %d %q → %q", op.ID, op.Received[i].Offset, old, op.Received[i].Value)
	default:
		op := &h.ops[drains[rapid.IntRange(0, len(drains)-1).Draw(t, "drain")]]
		op.HighWatermark++
		return fmt.Sprintf("drain op %d hwm+1", op.ID)
	}
}

// standardShape is the simulator's standard scenario as the checker sees it:
// 8 partitions, a dozen clients, about 2,000 operations.
var standardShape = genShape{partitionsMin: 8, partitionsMax: 8, clientsMin: 12, clientsMax: 12, stepsMin: 5000, stepsMax: 5000}

// A standard-sized correct history (about 2,000 operations over 8
// partitions, a tenth of them timing out) passes, drained or not, and
// refuses once one acknowledged offset is changed.
func TestStandardSizedHistory(t *testing.T) {
	for seed := int64(1); seed <= 2; seed++ {
		for _, drain := range []bool{false, true} {
			g, _ := generate(randDrawer{rand.New(rand.NewSource(seed))}, standardShape, drain)
			if err := Check(g.h, Options{FinalDrain: drain}).Err(); err != nil {
				t.Fatalf("seed %d drain %v (%d ops): %v", seed, drain, g.h.Len(), err)
			}
			if !drain {
				continue
			}
			for i := range g.h.ops {
				if op := &g.h.ops[i]; op.Kind == KindProduce && op.Outcome == OutcomeOK && op.Offset > 0 {
					op.Offset--
					break
				}
			}
			var nl *NotLinearizableError
			if err := CheckLinearizable(g.h, Options{FinalDrain: true}); !errors.As(err, &nl) {
				t.Fatalf("seed %d: mutated standard history not refused: %v", seed, err)
			}
		}
	}
}

// BenchmarkCheckStandard measures Check on a standard-sized history, the
// checker's share of a simulator seed.
func BenchmarkCheckStandard(b *testing.B) {
	for _, drain := range []bool{false, true} {
		g, _ := generate(randDrawer{rand.New(rand.NewSource(1))}, standardShape, drain)
		b.Run(fmt.Sprintf("drain=%v/ops=%d", drain, g.h.Len()), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := Check(g.h, Options{FinalDrain: drain}).Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
