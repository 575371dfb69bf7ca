package simnet

import (
	"errors"
	"time"

	"github.com/strandlog/strand/node"
)

// clientKind is a client's role in the workload.
type clientKind uint8

const (
	kindProducer clientKind = iota + 1 // idempotent, acks=all, retries
	kindConsumer                       // sequential reads from its positions
	kindReader                         // reads at random offsets
	kindDrain                          // reads everything at the end
)

// Workload sizes.
const (
	keySpace      = 16      // keyed producers draw keys k0..k15
	keyDrawsMax   = 8       // draws to find a key of the batch's partition
	fetchBytesMax = 2 << 10 // MaxBytes of most fetches
	largeOneIn    = 64      // one record in this many is large
	largeMin      = 1 << 10 // a large record's value is [largeMin, 2*largeMin) bytes longer
	attemptsMax   = 1000    // bound on attempts of one operation
)

// fetchedRecord is one record a fetch returned, decoded at once so no
// bytes of the node are retained.
type fetchedRecord struct {
	offset int64
	key    string
	value  string
}

// reply is a fetch's outcome as the history records it: the records
// decoded from the served batches, the high-water mark and log start.
type reply struct {
	node     int
	err      error
	records  []fetchedRecord
	hwm      int64
	logStart int64
}

// errBadBatch: a node served bytes that are not a record batch.
var errBadBatch = errors.New("simnet: fetched batch does not decode")

// workload owns the shared operation budget and what every client has
// seen.
type workload struct {
	w       *world
	issued  int // logical operations started
	healed  bool
	healAt  time.Duration
	drained bool // the final drain read every partition to its end
	// overtime: a safety run reached Options.TimeLimit; no operation is
	// issued any more and the run has its drain grace (overtime.go).
	overtime bool
	maxHwm   []int64 // highest high-water mark any fetch returned, per partition
	// maxHwmInc is the topic incarnation maxHwm[p] counts in (wire_recreate.go).
	maxHwmInc []int
}

// newWorkload sizes the budget's per-partition state.
func newWorkload(w *world) *workload {
	return &workload{w: w, maxHwm: make([]int64, w.opts.Partitions), maxHwmInc: make([]int, w.opts.Partitions)}
}

// budget is how many operations the clients issue: Options.Ops, and a
// quarter more while an incident waits for its turn (incidents.go), so a
// short run still has clients at work when its incidents come.
func (wl *workload) budget() int {
	if wl.w.planner.incidentsQueued() {
		return wl.w.opts.Ops + wl.w.opts.Ops/4
	}
	return wl.w.opts.Ops
}

// take claims one operation of the budget (none in overtime).
func (wl *workload) take() bool {
	if wl.overtime || wl.issued >= wl.budget() {
		return false
	}
	wl.issued++
	if wl.w.opts.Profile == Liveness && !wl.healed && float64(wl.issued) >= wl.w.opts.HealAfter*float64(wl.w.opts.Ops) {
		wl.w.sched.schedule(0, &event{kind: evLivenessHeal, node: -1})
	}
	return true
}

// spent reports whether the clients issued every operation of
// Options.Ops, or the run is in overtime and issues none any more: the
// actors that wait for a share of the budget (faults, incidents, admin
// changes) give up then.
func (wl *workload) spent() bool {
	return wl.overtime || wl.issued >= wl.w.opts.Ops
}

// The scenario's topics: Options.Partitions groups split into a main
// topic and a smaller second one (a quarter of the groups, when there are
// at least two), so clients work on several topics and the group indexes
// 0..Partitions-1 of the checks and faults stay as they were.
const (
	topicMain   = "sim"
	topicSecond = "sim2"
)

// topicSpec is one topic of the scenario and its groups' indexes.
type topicSpec struct {
	name       string
	partitions int
	first      int // group index of partition 0
}

// scenarioTopics splits partitions groups into the scenario's topics.
func scenarioTopics(partitions int) []topicSpec {
	second := partitions / 4
	if partitions >= 2 {
		second = max(second, 1)
	}
	ts := []topicSpec{{name: topicMain, partitions: partitions - second}}
	if second > 0 {
		ts = append(ts, topicSpec{name: topicSecond, partitions: second, first: partitions - second})
	}
	return ts
}

// groupTopics maps each group index 0..partitions-1 to its topic and
// partition.
func groupTopics(partitions int) []node.TopicPartition {
	var out []node.TopicPartition
	for _, t := range scenarioTopics(partitions) {
		for q := 0; q < t.partitions; q++ {
			out = append(out, node.TopicPartition{Topic: t.name, Partition: int32(q)})
		}
	}
	return out
}
