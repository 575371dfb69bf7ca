package simnet

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
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

// ask sends req to target as the operator and passes the answer to judge;
// an error or refusal is the mismatch.
func (op *operator) ask(target int, req *strandpb.Request, judge func(*strandpb.Response) string, done func(string)) {
	op.ww.call(op.ops, target, req, func(resp *strandpb.Response, err error) {
		if err == nil {
			err = wireErr(resp.GetError())
		}
		if err != nil {
			op.ops.refresh()
			done(fmt.Sprintf("no answer: %v", err))
			return
		}
		done(judge(resp))
	})
}

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
	req := &strandpb.Request{Body: &strandpb.Request_ListUsers{ListUsers: &strandpb.ListUsersRequest{}}}
	op.ask(op.ops.randomNode(), req, func(resp *strandpb.Response) string {
		actual := map[string]string{}
		for _, u := range resp.GetListUsers().GetUsers() {
			if namesIntruder(u.GetName()) {
				return fmt.Sprintf("user %q exists, asked for by an intruder", u.GetName())
			}
			if slices.Contains(u.GetMechanisms(), saslMechanism) {
				actual["user/"+u.GetName()] = opUserPresent
			}
		}
		return op.ledger.mismatch("user/", actual)
	}, done)
}

// verifyACLs: every operator binding and quota as acknowledged, the
// bootstrap's bindings present, no intruder's.
func (op *operator) verifyACLs(done func(string)) {
	req := &strandpb.Request{Body: &strandpb.Request_DescribeAcls{DescribeAcls: &strandpb.DescribeAclsRequest{}}}
	op.ask(op.ops.randomNode(), req, func(resp *strandpb.Response) string {
		actual := map[string]string{}
		d := resp.GetDescribeAcls()
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
	req := &strandpb.Request{Body: &strandpb.Request_DescribeTopics{DescribeTopics: &strandpb.DescribeTopicsRequest{Names: []string{topicMain}}}}
	op.ask(op.ops.randomNode(), req, func(resp *strandpb.Response) string {
		actual := map[string]string{}
		for _, t := range resp.GetDescribeTopics().GetTopics() {
			actual["config/"+t.GetName()+"/"+opConfigKey] = configValue(t.GetConfigs())
		}
		return op.ledger.mismatch("config/", actual)
	}, done)
}

// verifyTopics: the main topic keeps the id it was created with, and the
// intruder's topic does not exist.
func (op *operator) verifyTopics(done func(string)) {
	intruderTopic := intruderTopicName
	req := &strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{Topics: []string{topicMain, intruderTopic}}}}
	op.ask(op.ops.randomNode(), req, func(resp *strandpb.Response) string {
		for _, t := range resp.GetMetadata().GetTopics() {
			switch {
			case t.GetName() == intruderTopic && t.GetError() == nil:
				return "topic " + intruderTopic + " exists, asked for by an intruder"
			case t.GetName() == topicMain && len(op.ww.topicIDs[topicMain]) > 0 && !bytes.Equal(t.GetTopicId(), op.ww.topicIDs[topicMain][0]):
				return fmt.Sprintf("topic %s has id %x, created as %x", topicMain, t.GetTopicId(), op.ww.topicIDs[topicMain][0])
			}
		}
		return ""
	}, done)
}

// verifyMembers: every node still active (an intruder asked to
// decommission one).
func (op *operator) verifyMembers(done func(string)) {
	req := &strandpb.Request{Body: &strandpb.Request_ClusterMembers{ClusterMembers: &strandpb.ClusterMembersRequest{}}}
	op.ask(op.ops.randomNode(), req, func(resp *strandpb.Response) string {
		for _, m := range resp.GetClusterMembers().GetMembers() {
			if m.GetState() != strandpb.MemberState_MEMBER_STATE_ACTIVE {
				return fmt.Sprintf("node %d is %v", m.GetId(), m.GetState())
			}
		}
		return ""
	}, done)
}

// verifyTrim: partition p's log start is at least what DeleteRecords
// acknowledged (retention may have moved it further).
func (op *operator) verifyTrim(p int, done func(string)) {
	tp := op.ww.tps[p]
	req := &strandpb.Request{Body: &strandpb.Request_ListOffsets{ListOffsets: &strandpb.ListOffsetsRequest{
		Partitions: []*strandpb.ListOffsetsRequest_Partition{{Topic: tp.Topic, Partition: tp.Partition, TimestampMs: -2}}}}}
	op.ask(op.ops.leaderOf(p), req, func(resp *strandpb.Response) string {
		ps := resp.GetListOffsets().GetPartitions()
		if err := firstItemErr(len(ps), func() *strandpb.Error { return ps[0].GetError() }); err != nil {
			op.ops.refresh()
			return err.Error()
		}
		if got := ps[0].GetLogStartOffset(); got < op.trims[p] {
			return fmt.Sprintf("log start %d, DeleteRecords acknowledged %d", got, op.trims[p])
		}
		return ""
	}, done)
}

// verifyOffsets: the operator group's committed offsets as acknowledged,
// read from the coordinator FindCoordinator names.
func (op *operator) verifyOffsets(done func(string)) {
	find := &strandpb.Request{Body: &strandpb.Request_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorRequest{Group: opGroup}}}
	op.ask(op.ops.randomNode(), find, func(resp *strandpb.Response) string {
		op.learnCoordinator(opGroup, resp)
		return ""
	}, func(why string) {
		if why != "" {
			done(why)
			return
		}
		fetch := &strandpb.Request{Body: &strandpb.Request_OffsetFetch{OffsetFetch: &strandpb.OffsetFetchRequest{Group: opGroup}}}
		op.ask(op.coordinatorOf(opGroup), fetch, func(resp *strandpb.Response) string {
			actual := map[string]string{}
			for _, o := range resp.GetOffsetFetch().GetOffsets() {
				if o.GetTopic() == topicMain {
					actual[offsetCell(int(o.GetPartition()))] = strconv.FormatInt(o.GetOffset(), 10)
				}
			}
			return op.ledger.mismatch("offset/", actual)
		}, done)
	})
}
