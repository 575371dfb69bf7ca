package simnet

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/clientlib"
)

// cellWrite is one change a request asks for: a cell of the state the
// operator owns ("user/ops-u1", "acl/User:ops-p0", "quota/User:ops-q1",
// "config/sim/max.message.bytes", "offset/ops-g0/3") and its value after
// ("" for absent or default).
type cellWrite struct{ key, value string }

// opCell is what a cell may hold at the end: the value its last
// acknowledged change set ("" before any), or the value of any change
// whose outcome stayed ambiguous (it may apply late, after a later
// acknowledged one: a forwarded proposal).
type opCell struct {
	acked string
	maybe []string
}

// opLedger is every cell the operator changed.
type opLedger struct {
	cells map[string]*opCell
	keys  []string // sorted: the checks never range over the map
}

func newOpLedger() *opLedger { return &opLedger{cells: map[string]*opCell{}} }

// cell returns key's cell, created empty.
func (l *opLedger) cell(key string) *opCell {
	c, ok := l.cells[key]
	if !ok {
		c = &opCell{}
		l.cells[key] = c
		i, _ := slices.BinarySearch(l.keys, key)
		l.keys = slices.Insert(l.keys, i, key)
	}
	return c
}

// acked records acknowledged changes.
func (l *opLedger) acked(writes []cellWrite) {
	for _, wr := range writes {
		l.cell(wr.key).acked = wr.value
	}
}

// ambiguous records changes that may or may not have happened.
func (l *opLedger) ambiguous(writes []cellWrite) {
	for _, wr := range writes {
		c := l.cell(wr.key)
		if !slices.Contains(c.maybe, wr.value) {
			c.maybe = append(c.maybe, wr.value)
		}
	}
}

// mismatch compares the cells named with prefix to the state read back
// (actual: key to value, absent keys ""): the first cell holding a value
// no acknowledged or ambiguous change set, described.
func (l *opLedger) mismatch(prefix string, actual map[string]string) string {
	for _, key := range l.keys {
		if len(key) < len(prefix) || key[:len(prefix)] != prefix {
			continue
		}
		c, got := l.cells[key], actual[key]
		if got != c.acked && !slices.Contains(c.maybe, got) {
			return fmt.Sprintf("%s is %q, acknowledged %q (ambiguous: %q)", key, got, c.acked, c.maybe)
		}
	}
	return ""
}

// opVerify is the final read-back in progress.
type opVerify struct {
	w        *world
	steps    []verifyStep
	deadline time.Duration // the current step's
	then     func()
}

// next moves to the next step, with a fresh deadline.
func (v *opVerify) next() {
	v.steps = v.steps[1:]
	v.deadline = v.w.now() + v.w.opts.LivenessBound
}

// verifyStep reads one part of the state back; run calls done with ""
// when it matches, else what differs.
type verifyStep struct {
	name string
	run  func(done func(why string))
}

// awaitOperator holds the end of the run (the drain's last step) until
// the operator's actions ended and its read-back passed or failed; it
// reports whether it will call cont.
func (ww *wireWorkload) awaitOperator(cont func()) bool {
	op := ww.ops
	switch {
	case op == nil || op.verified:
		return false
	case !op.done:
		op.ops.after(operatorVerifyRetry, cont)
	case op.verify == nil:
		op.verify = &opVerify{w: ww.w, steps: op.verifySteps(), deadline: ww.w.now() + ww.w.opts.LivenessBound, then: cont}
		op.verifyNext()
	}
	return true
}

// verifyNext runs the read-back's next step, retrying it until it
// matches or the deadline passed.
func (op *operator) verifyNext() {
	v := op.verify
	if len(v.steps) == 0 {
		op.verified = true
		op.ww.w.coverage.Inc("check/operator-verified")
		v.then()
		return
	}
	s := v.steps[0]
	s.run(func(why string) {
		switch {
		case why == "":
			v.next()
		case op.ww.w.now() > v.deadline:
			op.ww.w.fail("operator: the state read back after the run: %s: %s", s.name, why)
			v.next()
		default:
			op.ops.after(operatorVerifyRetry, op.verifyNext)
			return
		}
		op.verifyNext()
	})
}

// ask runs read, a clientlib call, as the operator (a SimRun task) and
// passes what differs to done; read says "no answer: ..." on an error.
func (op *operator) ask(read func(ctx context.Context, cl *clientlib.Client) string, done func(string)) {
	var why string
	op.ww.w.simRun(op.opsLib, func(ctx context.Context) { why = read(ctx, op.opsLib) }, func() { done(why) })
}

// noAnswer is the mismatch of a read that failed.
func noAnswer(err error) string { return fmt.Sprintf("no answer: %v", err) }

// verifySteps lists the read-backs.
func (op *operator) verifySteps() []verifyStep {
	steps := []verifyStep{
		{"users", op.verifyUsers},
		{"ACLs and quotas", op.verifyACLs},
		{"configs", op.verifyConfigs},
		{"topics", op.verifyTopics},
		{"committed offsets", op.verifyOffsets},
	}
	if !op.ww.w.opts.Joins { // the joins workload decommissions nodes itself
		steps = append(steps, verifyStep{"members", op.verifyMembers})
	}
	for _, p := range sortedKeys(op.trims) {
		steps = append(steps, verifyStep{fmt.Sprintf("log start of %v", op.ww.tps[p]), func(done func(string)) { op.verifyTrim(p, done) }})
	}
	return steps
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[int]int64) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// verifyUsers: every operator user as acknowledged, no intruder's.
func (op *operator) verifyUsers(done func(string)) {
	op.ask(func(ctx context.Context, cl *clientlib.Client) string {
		users, err := cl.ListUsers(ctx)
		if err != nil {
			return noAnswer(err)
		}
		actual := map[string]string{}
		for _, u := range users {
			if namesIntruder(u.Name) {
				return fmt.Sprintf("user %q exists, asked for by an intruder", u.Name)
			}
			if slices.Contains(u.Mechanisms, saslMechanism) {
				actual["user/"+u.Name] = opUserPresent
			}
		}
		return op.ledger.mismatch("user/", actual)
	}, done)
}

// verifyACLs: every operator binding and quota as acknowledged, the
// bootstrap's bindings present, no intruder's.
func (op *operator) verifyACLs(done func(string)) {
	op.ask(func(ctx context.Context, cl *clientlib.Client) string {
		d, err := cl.DescribeACLs(ctx, "", "")
		if err != nil {
			return noAnswer(err)
		}
		actual := map[string]string{}
		for _, b := range d.GetBindings() {
			if namesIntruder(b.GetPrincipal()) {
				return fmt.Sprintf("binding %v exists, asked for by an intruder", b)
			}
			if proto.Equal(b, opACL(b.GetPrincipal())) {
				actual["acl/"+b.GetPrincipal()] = "present"
			}
		}
		for _, q := range d.GetQuotas() {
			if namesIntruder(q.GetPrincipal()) {
				return fmt.Sprintf("quota %v exists, asked for by an intruder", q)
			}
			actual["quota/"+q.GetPrincipal()] = fmt.Sprintf("%d,%d", q.GetProduceBytesPerSec(), q.GetFetchBytesPerSec())
		}
		if want := len(bootstrapACLs()); op.auth && len(d.GetBindings()) < want {
			return fmt.Sprintf("%d bindings, fewer than the %d the bootstrap added", len(d.GetBindings()), want)
		}
		return op.ledger.mismatch("acl/", actual) + op.ledger.mismatch("quota/", actual)
	}, done)
}

// verifyConfigs: the main topic's max.message.bytes as acknowledged.
func (op *operator) verifyConfigs(done func(string)) {
	op.ask(func(ctx context.Context, cl *clientlib.Client) string {
		ts, err := cl.DescribeTopics(ctx, topicMain)
		if err != nil {
			return noAnswer(err)
		}
		actual := map[string]string{}
		for _, t := range ts {
			if t.Err != nil {
				return noAnswer(t.Err)
			}
			actual["config/"+t.Name+"/"+opConfigKey] = configMapValue(t.Configs)
		}
		return op.ledger.mismatch("config/", actual)
	}, done)
}

// verifyTopics: the main topic keeps the id it was created with, and the
// intruder's topic does not exist.
func (op *operator) verifyTopics(done func(string)) {
	op.ask(func(ctx context.Context, cl *clientlib.Client) string {
		info, err := cl.Metadata(ctx)
		if err != nil {
			return noAnswer(err)
		}
		for _, t := range info.Topics {
			switch {
			case t.Name == intruderTopicName && t.Err == nil:
				return "topic " + intruderTopicName + " exists, asked for by an intruder"
			case t.Name == topicMain && len(op.ww.topicIDs[topicMain]) > 0 && !bytes.Equal(t.ID, op.ww.topicIDs[topicMain][0]):
				return fmt.Sprintf("topic %s has id %x, created as %x", topicMain, t.ID, op.ww.topicIDs[topicMain][0])
			}
		}
		return ""
	}, done)
}

// verifyMembers: every node still active (an intruder asked to
// decommission one).
func (op *operator) verifyMembers(done func(string)) {
	op.ask(func(ctx context.Context, cl *clientlib.Client) string {
		ms, err := cl.ClusterMembers(ctx)
		if err != nil {
			return noAnswer(err)
		}
		for _, m := range ms.Members {
			if m.State != "active" {
				return fmt.Sprintf("node %d is %s", m.ID, m.State)
			}
		}
		return ""
	}, done)
}

// verifyTrim: partition p's log start is at least what DeleteRecords
// acknowledged (retention may have moved it further).
func (op *operator) verifyTrim(p int, done func(string)) {
	tp := op.ww.tps[p]
	op.ask(func(ctx context.Context, cl *clientlib.Client) string {
		ls, err := cl.ListOffsets(ctx, tp.Topic, []int32{tp.Partition}, clientlib.OffsetEarliest())
		if err = firstLibErr(len(ls), err, func() error { return ls[0].Err }); err != nil {
			return noAnswer(err)
		}
		if got := ls[0].LogStartOffset; got < op.trims[p] {
			return fmt.Sprintf("log start %d, DeleteRecords acknowledged %d", got, op.trims[p])
		}
		return ""
	}, done)
}

// verifyOffsets: the operator group's committed offsets as acknowledged,
// read (linearizably) from the group's coordinator.
func (op *operator) verifyOffsets(done func(string)) {
	op.ask(func(ctx context.Context, cl *clientlib.Client) string {
		os, err := cl.FetchOffsets(ctx, opGroup)
		if err != nil {
			return noAnswer(err)
		}
		actual := map[string]string{}
		for _, o := range os {
			if o.Topic == topicMain {
				actual[offsetCell(int(o.Partition))] = strconv.FormatInt(o.Offset, 10)
			}
		}
		return op.ledger.mismatch("offset/", actual)
	}, done)
}
