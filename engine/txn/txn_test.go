package txn

import (
	"errors"
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

// fixture is a state with a block of producer ids granted, checked after
// every command.
type fixture struct {
	t *testing.T
	s *State
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, s: New()}
	f.ok(f.s.GrantProducerIDs(100, 10))
	return f
}

func (f *fixture) check(r Result) Result {
	f.t.Helper()
	if err := f.s.Check(); err != nil {
		f.t.Fatalf("Check: %v", err)
	}
	return r
}

func (f *fixture) ok(r Result) Result {
	f.t.Helper()
	if r.Err != nil {
		f.t.Fatalf("unexpected refusal: %v", r.Err)
	}
	return f.check(r)
}

func (f *fixture) refused(r Result, want error) Result {
	f.t.Helper()
	if !errors.Is(r.Err, want) {
		f.t.Fatalf("got %v, want %v", r.Err, want)
	}
	return f.check(r)
}

func (f *fixture) init(id string) Producer {
	f.t.Helper()
	return f.ok(f.s.InitProducerID(InitProducerID{ID: id, TimeoutMs: 1000, MaxTimeoutMs: DefaultMaxTimeoutMs})).Producer
}

func (f *fixture) add(id string, p Producer, parts ...int32) Result {
	var tps []TopicPartition
	for _, n := range parts {
		tps = append(tps, TopicPartition{Topic: "t", Partition: n})
	}
	return f.s.AddPartitions(AddPartitions{ID: id, Producer: p, Partitions: tps, NowMs: 10})
}

func (f *fixture) state(id string) TxnState {
	f.t.Helper()
	d, err := f.s.Describe(id)
	if err != nil {
		f.t.Fatal(err)
	}
	return d.State
}

// markAll reports every pending marker of id written.
func (f *fixture) markAll(id string) Result {
	var last Result
	for _, p := range f.s.Pending() {
		if p.ID != id {
			continue
		}
		for _, tp := range p.Partitions {
			last = f.ok(f.s.MarkerWritten(MarkerWritten{ID: id, Marker: p.Marker, Partition: tp}))
		}
		for _, g := range p.Groups {
			last = f.ok(f.s.MarkerWritten(MarkerWritten{ID: id, Marker: p.Marker, Group: g}))
		}
	}
	return last
}

// A new transactional id gets a pool id at epoch 0; InitProducerId again
// bumps the epoch and fences the old one.
func TestInitProducerIDBumpsAndFences(t *testing.T) {
	f := newFixture(t)
	p0 := f.init("a")
	if p0 != (Producer{ID: 100, Epoch: 0}) || f.state("a") != Empty {
		t.Fatalf("first init %+v %v", p0, f.state("a"))
	}
	p1 := f.init("a")
	if p1 != (Producer{ID: 100, Epoch: 1}) {
		t.Fatalf("second init %+v", p1)
	}
	f.refused(f.add("a", p0, 0), ErrProducerFenced)
	f.ok(f.add("a", p1, 0))
	if f.state("a") != Ongoing {
		t.Fatalf("state %v", f.state("a"))
	}
	if b := f.init("b"); b.ID != 101 {
		t.Fatalf("second id got %+v", b)
	}
}

// A timeout above the maximum, or below 1 ms, is INVALID_TRANSACTION_TIMEOUT.
func TestInitProducerIDTimeout(t *testing.T) {
	f := newFixture(t)
	r := f.refused(f.s.InitProducerID(InitProducerID{ID: "a", TimeoutMs: DefaultMaxTimeoutMs + 1, MaxTimeoutMs: DefaultMaxTimeoutMs}), ErrInvalidTimeout)
	if strandpb.CodeOf(r.Err) != strandpb.ErrorCode_ERROR_CODE_INVALID_TRANSACTION_TIMEOUT {
		t.Fatalf("code %v", strandpb.CodeOf(r.Err))
	}
	f.refused(f.s.InitProducerID(InitProducerID{ID: "a", TimeoutMs: 0, MaxTimeoutMs: DefaultMaxTimeoutMs}), ErrInvalidTimeout)
	if len(f.s.IDs()) != 0 {
		t.Fatal("a refused init created the id")
	}
}

// With no producer ids left, InitProducerId is refused (retriable) and a
// grant lets it through; grants never overlap earlier ones.
func TestProducerIDPool(t *testing.T) {
	f := &fixture{t: t, s: New()}
	f.refused(f.s.InitProducerID(InitProducerID{ID: "a", TimeoutMs: 1, MaxTimeoutMs: 1}), ErrProducerIDsNeeded)
	if !strandpb.CodeOf(ErrProducerIDsNeeded).Info().Retriable {
		t.Fatal("ErrProducerIDsNeeded is not retriable")
	}
	f.ok(f.s.GrantProducerIDs(5, 1))
	f.refused(f.s.GrantProducerIDs(5, 3), ErrInvalid)
	f.refused(f.s.GrantProducerIDs(1, 3), ErrInvalid)
	if p := f.init("a"); p.ID != 5 {
		t.Fatalf("got %+v", p)
	}
	if f.s.ProducerIDsLeft() != 0 {
		t.Fatalf("left %d", f.s.ProducerIDsLeft())
	}
}

// InitProducerId on an open transaction fences it: the abort is prepared
// at a bumped epoch, the answer is CONCURRENT_TRANSACTIONS until the
// markers are written, and the old producer can never commit.
func TestInitProducerIDFencesOngoing(t *testing.T) {
	f := newFixture(t)
	p := f.init("a")
	f.ok(f.add("a", p, 0, 1))
	r := f.refused(f.s.InitProducerID(InitProducerID{ID: "a", TimeoutMs: 1000, MaxTimeoutMs: DefaultMaxTimeoutMs}), ErrConcurrentTransactions)
	if !r.Fenced || !r.Prepared || f.state("a") != PrepareAbort {
		t.Fatalf("fence: %+v, state %v", r, f.state("a"))
	}
	f.refused(f.s.EndTxn(EndTxn{ID: "a", Producer: p, Commit: true}), ErrProducerFenced)
	f.refused(f.s.InitProducerID(InitProducerID{ID: "a", TimeoutMs: 1000, MaxTimeoutMs: DefaultMaxTimeoutMs}), ErrConcurrentTransactions)
	pend := f.s.Pending()
	if len(pend) != 1 || pend[0].Commit || pend[0].Marker != (Producer{ID: p.ID, Epoch: p.Epoch + 1}) || len(pend[0].Partitions) != 2 {
		t.Fatalf("pending %+v", pend)
	}
	if r := f.markAll("a"); !r.Completed || f.state("a") != CompleteAbort {
		t.Fatalf("markers: %+v, %v", r, f.state("a"))
	}
	if p2 := f.init("a"); p2.Epoch != p.Epoch+2 {
		t.Fatalf("after fence got %+v", p2)
	}
	f.refused(f.s.EndTxn(EndTxn{ID: "a", Producer: p, Commit: true}), ErrProducerFenced)
}

// EndTxn(commit) prepares at epoch+1 (KIP-890), answers the new epoch, and
// completes only when every partition's and group's marker is written.
func TestEndTxnCommitLifecycle(t *testing.T) {
	f := newFixture(t)
	p := f.init("a")
	f.ok(f.add("a", p, 2, 0))
	f.ok(f.s.AddOffsets(AddOffsets{ID: "a", Producer: p, Group: "g"}))
	r := f.ok(f.s.EndTxn(EndTxn{ID: "a", Producer: p, Commit: true}))
	next := Producer{ID: p.ID, Epoch: p.Epoch + 1}
	if r.Producer != next || !r.Prepared || f.state("a") != PrepareCommit {
		t.Fatalf("end: %+v %v", r, f.state("a"))
	}
	// The next transaction waits for the markers.
	f.refused(f.add("a", next, 0), ErrConcurrentTransactions)
	f.refused(f.s.MarkerWritten(MarkerWritten{ID: "a", Marker: p, Partition: TopicPartition{"t", 0}}), ErrStale)
	f.ok(f.s.MarkerWritten(MarkerWritten{ID: "a", Marker: next, Partition: TopicPartition{"t", 0}}))
	f.ok(f.s.MarkerWritten(MarkerWritten{ID: "a", Marker: next, Partition: TopicPartition{"t", 0}})) // duplicate report
	f.ok(f.s.MarkerWritten(MarkerWritten{ID: "a", Marker: next, Group: "g"}))
	if f.state("a") != PrepareCommit {
		t.Fatalf("completed with a marker missing")
	}
	if r := f.ok(f.s.MarkerWritten(MarkerWritten{ID: "a", Marker: next, Partition: TopicPartition{"t", 2}})); !r.Completed {
		t.Fatal("last marker did not complete")
	}
	if f.state("a") != CompleteCommit || len(f.s.Pending()) != 0 {
		t.Fatalf("state %v pending %v", f.state("a"), f.s.Pending())
	}
	f.ok(f.add("a", next, 1))
	f.refused(f.add("a", p, 1), ErrProducerFenced)
}

// A transactions v1 client (KeepEpoch: Kafka's EndTxn below v5 cannot
// carry a new epoch) runs its next transaction at the same epoch; its
// markers carry that epoch, a resend still gets its answer, and a new
// InitProducerId fences it as ever.
func TestEndTxnKeepEpoch(t *testing.T) {
	f := newFixture(t)
	p := f.init("a")
	for round := 0; round < 2; round++ {
		f.ok(f.add("a", p, 0))
		r := f.ok(f.s.EndTxn(EndTxn{ID: "a", Producer: p, Commit: round == 0, KeepEpoch: true}))
		if r.Producer != p || !r.Prepared {
			t.Fatalf("round %d: end answered %+v, want %+v", round, r, p)
		}
		f.ok(f.s.MarkerWritten(MarkerWritten{ID: "a", Marker: p, Partition: TopicPartition{"t", 0}}))
		if want := []TxnState{CompleteCommit, CompleteAbort}[round]; f.state("a") != want {
			t.Fatalf("round %d: state %v, want %v", round, f.state("a"), want)
		}
		if r := f.ok(f.s.EndTxn(EndTxn{ID: "a", Producer: p, Commit: round == 0, KeepEpoch: true})); r.Producer != p {
			t.Fatalf("round %d: resend answered %+v", round, r)
		}
	}
	next := f.init("a")
	if next.Epoch != p.Epoch+1 {
		t.Fatalf("InitProducerId after v1 transactions: %+v", next)
	}
	f.refused(f.add("a", p, 0), ErrProducerFenced)
}

// A resent EndTxn gets the same answer; the opposite decision is
// INVALID_TXN_STATE; an EndTxn without a transaction is INVALID_TXN_STATE.
func TestEndTxnResendAndNoTransaction(t *testing.T) {
	f := newFixture(t)
	p := f.init("a")
	f.refused(f.s.EndTxn(EndTxn{ID: "a", Producer: p, Commit: true}), ErrInvalidTxnState)
	f.ok(f.add("a", p, 0))
	f.ok(f.s.EndTxn(EndTxn{ID: "a", Producer: p, Commit: false}))
	f.refused(f.s.EndTxn(EndTxn{ID: "a", Producer: p, Commit: false}), ErrConcurrentTransactions)
	f.refused(f.s.EndTxn(EndTxn{ID: "a", Producer: p, Commit: true}), ErrInvalidTxnState)
	f.markAll("a")
	if r := f.ok(f.s.EndTxn(EndTxn{ID: "a", Producer: p, Commit: false})); r.Producer.Epoch != p.Epoch+1 {
		t.Fatalf("resend answer %+v", r)
	}
	f.refused(f.s.EndTxn(EndTxn{ID: "a", Producer: Producer{ID: p.ID, Epoch: p.Epoch + 1}}), ErrInvalidTxnState)
	f.refused(f.s.EndTxn(EndTxn{ID: "nope", Producer: p}), ErrInvalidProducerIDMapping)
	f.refused(f.s.EndTxn(EndTxn{ID: "a", Producer: Producer{ID: 999, Epoch: 1}}), ErrInvalidProducerIDMapping)
}

// A transaction past transaction.timeout.ms is listed by Expired (pure),
// and its TimeoutAbort fences the producer; a stale abort is refused.
func TestTimeoutAborts(t *testing.T) {
	f := newFixture(t)
	p := f.init("a")
	f.ok(f.s.AddPartitions(AddPartitions{ID: "a", Producer: p, Partitions: []TopicPartition{{"t", 0}}, NowMs: 1000}))
	if len(f.s.Expired(2000)) != 0 {
		t.Fatal("expired at exactly the timeout")
	}
	exp := f.s.Expired(2001)
	if len(exp) != 1 || exp[0] != (TimedOut{ID: "a", Producer: p}) || f.state("a") != Ongoing {
		t.Fatalf("expired %+v, state %v", exp, f.state("a"))
	}
	f.refused(f.s.TimeoutAbort(TimeoutAbort{ID: "a", Producer: p, NowMs: 1500}), ErrStale)
	f.ok(f.s.TimeoutAbort(TimeoutAbort{ID: "a", Producer: p, NowMs: 2001}))
	f.refused(f.s.TimeoutAbort(TimeoutAbort{ID: "a", Producer: p, NowMs: 2001}), ErrStale)
	if f.state("a") != PrepareAbort {
		t.Fatalf("state %v", f.state("a"))
	}
	f.markAll("a")
	f.refused(f.s.EndTxn(EndTxn{ID: "a", Producer: p, Commit: true}), ErrProducerFenced)
	f.refused(f.s.EndTxn(EndTxn{ID: "a", Producer: p, Commit: false}), ErrProducerFenced)
}

// A transaction stamped more than its timeout in the future of the
// coordinator's clock (the stamping node's clock jumped ahead, or this
// one's runs behind) is listed by Expired at once, and its TimeoutAbort
// applies; one stamped less than a timeout ahead (ordinary skew) waits
// for the timeout as usual.
func TestTimeoutAbortsAStartFromAClockAhead(t *testing.T) {
	f := newFixture(t)
	p := f.init("a")
	f.ok(f.s.AddPartitions(AddPartitions{ID: "a", Producer: p, Partitions: []TopicPartition{{"t", 0}}, NowMs: 3_601_000}))
	exp := f.s.Expired(1000)
	if len(exp) != 1 || exp[0] != (TimedOut{ID: "a", Producer: p}) {
		t.Fatalf("expired %+v at 1000 with the start an hour ahead; want the transaction", exp)
	}
	f.ok(f.s.TimeoutAbort(TimeoutAbort{ID: "a", Producer: p, NowMs: 1000}))

	g := newFixture(t)
	q := g.init("b")
	g.ok(g.s.AddPartitions(AddPartitions{ID: "b", Producer: q, Partitions: []TopicPartition{{"t", 0}}, NowMs: 1500}))
	if exp := g.s.Expired(1000); len(exp) != 0 {
		t.Fatalf("expired %+v with the start 500 ms ahead (under the 1000 ms timeout); want none yet", exp)
	}
	if exp := g.s.Expired(2501); len(exp) != 1 {
		t.Fatalf("expired %+v past the timeout; want the transaction", exp)
	}
}

// At an exhausted epoch the id moves to a fresh producer id at epoch 0:
// through InitProducerId, and through EndTxn (reserved at prepare,
// answered at once, taken on completion).
func TestEpochExhaustionRotates(t *testing.T) {
	f := newFixture(t)
	p := f.init("a")
	f.s.ids["a"].producer.Epoch = EpochExhausted
	if p2 := f.init("a"); p2 != (Producer{ID: 101, Epoch: 0}) {
		t.Fatalf("init rotation %+v", p2)
	}
	f.s.ids["a"].producer.Epoch = EpochExhausted - 1
	cur := Producer{ID: 101, Epoch: EpochExhausted - 1}
	f.ok(f.add("a", cur, 0))
	r := f.ok(f.s.EndTxn(EndTxn{ID: "a", Producer: cur, Commit: true}))
	if r.Producer != (Producer{ID: 102, Epoch: 0}) {
		t.Fatalf("end rotation answer %+v", r)
	}
	f.refused(f.add("a", r.Producer, 0), ErrConcurrentTransactions)
	f.markAll("a")
	if d, _ := f.s.Describe("a"); d.Producer != r.Producer {
		t.Fatalf("after completion %+v", d.Producer)
	}
	f.ok(f.add("a", r.Producer, 0))
	_ = p
}

// A resent InitProducerId carrying the ids the client held before the last
// bump gets the same answer (KIP-360); other expected ids are fenced.
func TestInitProducerIDResend(t *testing.T) {
	f := newFixture(t)
	p0 := f.init("a")
	p1 := f.ok(f.s.InitProducerID(InitProducerID{ID: "a", TimeoutMs: 5, MaxTimeoutMs: 5, Expected: &p0})).Producer
	again := f.ok(f.s.InitProducerID(InitProducerID{ID: "a", TimeoutMs: 5, MaxTimeoutMs: 5, Expected: &p0})).Producer
	if p1 != again || p1.Epoch != 1 {
		t.Fatalf("resend %+v vs %+v", again, p1)
	}
	bogus := Producer{ID: p0.ID, Epoch: 7}
	f.refused(f.s.InitProducerID(InitProducerID{ID: "a", TimeoutMs: 5, MaxTimeoutMs: 5, Expected: &bogus}), ErrProducerFenced)
}

// Verify (AddPartitionsToTxn verify-only) accepts only partitions of the
// producer's open transaction and changes nothing.
func TestVerify(t *testing.T) {
	f := newFixture(t)
	p := f.init("a")
	before := f.s.Digest()
	errs := f.s.Verify("a", p, []TopicPartition{{"t", 0}})
	if !errors.Is(errs[0], ErrInvalidTxnState) {
		t.Fatalf("verify before add: %v", errs)
	}
	if f.s.Digest() != before {
		t.Fatal("Verify changed the state")
	}
	f.ok(f.add("a", p, 0))
	errs = f.s.Verify("a", p, []TopicPartition{{"t", 0}, {"t", 1}})
	if errs[0] != nil || !errors.Is(errs[1], ErrInvalidTxnState) {
		t.Fatalf("verify: %v", errs)
	}
	if errs := f.s.Verify("a", Producer{ID: p.ID, Epoch: p.Epoch - 1}, []TopicPartition{{"t", 0}}); !errors.Is(errs[0], ErrProducerFenced) {
		t.Fatalf("zombie verify: %v", errs)
	}
}

// VerifyGroup accepts only a group added to the producer's open
// transaction, at its epoch.
func TestVerifyGroup(t *testing.T) {
	f := newFixture(t)
	p := f.init("a")
	if err := f.s.VerifyGroup("a", p, "g"); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("verify before AddOffsets: %v", err)
	}
	f.ok(f.s.AddOffsets(AddOffsets{ID: "a", Producer: p, Group: "g"}))
	if err := f.s.VerifyGroup("a", p, "g"); err != nil {
		t.Fatalf("verify after AddOffsets: %v", err)
	}
	if err := f.s.VerifyGroup("a", p, "h"); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("another group: %v", err)
	}
	if err := f.s.VerifyGroup("a", Producer{ID: p.ID, Epoch: p.Epoch - 1}, "g"); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("zombie: %v", err)
	}
}

// Idle ids expire after the retention; open ones never do.
func TestExpireIDs(t *testing.T) {
	f := newFixture(t)
	f.init("a")
	p := f.init("b")
	f.ok(f.add("b", p, 0))
	if r := f.ok(f.s.ExpireIDs(DefaultIDRetentionMs, DefaultIDRetentionMs)); r.Expired != 1 {
		t.Fatalf("expired %d", r.Expired)
	}
	if _, err := f.s.Describe("a"); !errors.Is(err, ErrTransactionalIDNotFound) {
		t.Fatalf("describe expired: %v", err)
	}
	if ids := f.s.IDs(); len(ids) != 1 || ids[0] != "b" {
		t.Fatalf("ids %v", ids)
	}
}

// Malformed commands are ErrInvalid and change nothing.
func TestInvalidCommands(t *testing.T) {
	f := newFixture(t)
	p := f.init("a")
	before := f.s.Digest()
	f.refused(f.s.AddPartitions(AddPartitions{ID: "a", Producer: p}), ErrInvalid)
	f.refused(f.add("a", p, -1), ErrInvalid)
	f.refused(f.s.AddOffsets(AddOffsets{ID: "a", Producer: p}), ErrInvalid)
	f.refused(f.s.InitProducerID(InitProducerID{ID: "", TimeoutMs: 1, MaxTimeoutMs: 1}), ErrInvalid)
	if f.s.Digest() != before {
		t.Fatal("a refused command changed the state")
	}
}

// Every refusal carries its Kafka meaning as a wire code.
func TestRefusalCodes(t *testing.T) {
	for err, want := range map[error]strandpb.ErrorCode{
		ErrProducerFenced:           strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED,
		ErrInvalidTxnState:          strandpb.ErrorCode_ERROR_CODE_INVALID_TXN_STATE,
		ErrInvalidProducerIDMapping: strandpb.ErrorCode_ERROR_CODE_INVALID_PRODUCER_ID_MAPPING,
		ErrInvalidTimeout:           strandpb.ErrorCode_ERROR_CODE_INVALID_TRANSACTION_TIMEOUT,
		ErrConcurrentTransactions:   strandpb.ErrorCode_ERROR_CODE_CONCURRENT_TRANSACTIONS,
		ErrTransactionalIDNotFound:  strandpb.ErrorCode_ERROR_CODE_TRANSACTIONAL_ID_NOT_FOUND,
	} {
		if got := strandpb.CodeOf(err); got != want {
			t.Errorf("%v: code %v, want %v", err, got, want)
		}
	}
}

// Snapshot then Restore gives an equal state; a wrong version or a
// broken snapshot is refused.
func TestSnapshotRoundTrip(t *testing.T) {
	f := newFixture(t)
	p := f.init("a")
	f.ok(f.add("a", p, 0, 1))
	f.ok(f.s.AddOffsets(AddOffsets{ID: "a", Producer: p, Group: "g"}))
	f.ok(f.s.EndTxn(EndTxn{ID: "a", Producer: p, Commit: true}))
	f.init("b")
	snap := f.s.Snapshot(42)
	r, err := Restore(snap)
	if err != nil {
		t.Fatal(err)
	}
	if r.Digest() != f.s.Digest() {
		t.Fatal("restored digest differs")
	}
	snap.Version = 2
	if _, err := Restore(snap); !errors.Is(err, ErrInvalid) {
		t.Fatalf("version 2: %v", err)
	}
	snap.Version = 1
	snap.Ids[0].State = int32(Ongoing) // pending markers in an Ongoing id
	if _, err := Restore(snap); !errors.Is(err, ErrInvalid) {
		t.Fatalf("inconsistent: %v", err)
	}
}

// A coordinator restored from a snapshot answers a resent EndTxn as the
// one that decided it would (the snapshot keeps who ended it).
func TestRestoreKeepsResendAnswer(t *testing.T) {
	f := newFixture(t)
	p := f.init("a")
	f.ok(f.add("a", p, 0))
	f.ok(f.s.EndTxn(EndTxn{ID: "a", Producer: p, Commit: true}))
	for _, complete := range []bool{false, true} {
		if complete {
			f.markAll("a")
		}
		r, err := Restore(f.s.Snapshot(0))
		if err != nil {
			t.Fatal(err)
		}
		want := f.s.EndTxn(EndTxn{ID: "a", Producer: p, Commit: true})
		got := r.EndTxn(EndTxn{ID: "a", Producer: p, Commit: true})
		if strandpb.CodeOf(got.Err) != strandpb.CodeOf(want.Err) || got.Producer != want.Producer {
			t.Fatalf("complete=%v: restored answers %+v, original %+v", complete, got, want)
		}
	}
}

// An operator's AdminAbort aborts the open transaction whatever its age,
// fencing the producer; a resend while aborting answers the same
// producer; without an open transaction it is refused, with a typed error.
func TestAdminAbort(t *testing.T) {
	f := newFixture(t)
	f.refused(f.s.AdminAbort(AdminAbort{ID: "a"}), ErrTransactionalIDNotFound)
	p := f.init("a")
	f.refused(f.s.AdminAbort(AdminAbort{ID: "a"}), ErrInvalidTxnState)
	f.ok(f.add("a", p, 0, 1))
	r := f.ok(f.s.AdminAbort(AdminAbort{ID: "a", NowMs: 20}))
	want := Producer{ID: p.ID, Epoch: p.Epoch + 1}
	if !r.Prepared || r.Producer != want || f.state("a") != PrepareAbort {
		t.Fatalf("abort %+v, state %v; want prepared at %+v", r, f.state("a"), want)
	}
	pend := f.s.Pending()
	if len(pend) != 1 || pend[0].Commit || pend[0].Marker != want || len(pend[0].Partitions) != 2 {
		t.Fatalf("pending %+v", pend)
	}
	if r := f.ok(f.s.AdminAbort(AdminAbort{ID: "a", NowMs: 21})); r.Prepared || r.Producer != want {
		t.Fatalf("resend %+v", r)
	}
	f.refused(f.s.EndTxn(EndTxn{ID: "a", Producer: p, Commit: true}), ErrProducerFenced)
	f.markAll("a")
	if f.state("a") != CompleteAbort {
		t.Fatalf("state %v", f.state("a"))
	}
	f.refused(f.s.AdminAbort(AdminAbort{ID: "a"}), ErrInvalidTxnState)
	f.refused(f.add("a", p, 0), ErrProducerFenced)
	// A transaction being committed is not the operator's to abort.
	p2 := f.init("b")
	f.ok(f.add("b", p2, 0))
	f.ok(f.s.EndTxn(EndTxn{ID: "b", Producer: p2, Commit: true}))
	f.refused(f.s.AdminAbort(AdminAbort{ID: "b"}), ErrInvalidTxnState)
}
