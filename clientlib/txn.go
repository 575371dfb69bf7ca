package clientlib

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// TransactionalID makes the Client a transactional producer (Kafka's
// transactional.id): every record is produced inside a transaction opened
// by BeginTransaction and ended by CommitTransaction or AbortTransaction,
// and read_committed consumers see a transaction's records, across every
// partition, all at once when it commits and never when it aborts. The
// first BeginTransaction (or InitTransactions) takes the id's producer id
// at a new epoch from its coordinator, fencing any older Client with the
// same id. It implies idempotence and AcksAll.
func TransactionalID(id string) Opt { return func(c *config) { c.transactionalID = id } }

// TransactionTimeout is transaction.timeout.ms (default 1 minute): a
// transaction open longer is aborted by its coordinator. It must not
// exceed the cluster's transaction.max.timeout.ms (15 minutes by default).
func TransactionTimeout(d time.Duration) Opt { return func(c *config) { c.transactionTimeout = d } }

// TransactionTimeoutDefault is the TransactionTimeout of a Client that
// sets none.
const TransactionTimeoutDefault = time.Minute

// Transaction misuse and outcome errors. Each says what to do next.
var (
	// ErrNotTransactional: a transaction method on a Client made without
	// TransactionalID.
	ErrNotTransactional = errors.New("clientlib: the client has no TransactionalID option: make it with TransactionalID(id) to use transactions")
	// ErrNoTransaction: Produce, CommitTransaction, AbortTransaction or
	// SendOffsetsToTransaction on a transactional Client with no open
	// transaction.
	ErrNoTransaction = errors.New("clientlib: no transaction is open: call BeginTransaction first")
	// ErrTransactionOpen: BeginTransaction while one is open.
	ErrTransactionOpen = errors.New("clientlib: a transaction is already open: end it with CommitTransaction or AbortTransaction first")
	// ErrTransactionEnding: a transaction method while CommitTransaction
	// or AbortTransaction runs.
	ErrTransactionEnding = errors.New("clientlib: the transaction is being committed or aborted: wait for that call to return")
	// ErrTransactionAborted fails the records AbortTransaction dropped
	// before they were sent.
	ErrTransactionAborted = errors.New("clientlib: the record's transaction was aborted before it was sent")
)

// ProducerFencedError: another Client with the same transactional id
// took it over (its InitProducerId bumped the epoch), or the coordinator
// expired this producer. Fatal: this Client can run no more transactions
// (its records of the open one are never visible); close it. It matches
// ErrProducerFenced with errors.Is.
type ProducerFencedError struct {
	TransactionalID string
	Err             error // the refusal that revealed it
}

func (e *ProducerFencedError) Error() string {
	return fmt.Sprintf("clientlib: producer fenced: another producer with transactional id %q took over (or the coordinator expired this one); close this client: %v",
		e.TransactionalID, e.Err)
}

func (e *ProducerFencedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrProducerFenced) hold.
func (e *ProducerFencedError) Is(target error) bool { return target == ErrProducerFenced }

// TransactionAbortableError: part of the open transaction failed (a
// record's produce, AddPartitionsToTxn, or an offset commit), so it can
// no longer commit: call AbortTransaction, then begin a new one.
type TransactionAbortableError struct {
	Err error // the first failure
}

func (e *TransactionAbortableError) Error() string {
	return "clientlib: the transaction cannot commit, call AbortTransaction: " + e.Err.Error()
}

func (e *TransactionAbortableError) Unwrap() error { return e.Err }

// GroupMetadata is a group member's identity for SendOffsetsToTransaction
// (Kafka's ConsumerGroupMetadata, KIP-447): the coordinator takes the
// offsets only from the member of this epoch (generation), so a member
// that lost its partitions in a rebalance cannot commit them.
type GroupMetadata struct {
	Group      string
	MemberID   string // "": not checked (a producer outside the group)
	Epoch      int32
	InstanceID string
}

// txnState is a transactional Client's transaction state, shared by the
// caller's goroutine (Begin, Commit, Abort, SendOffsets, Produce) and the
// producer loop (AddPartitionsToTxn, produce outcomes), under mu.
type txnState struct {
	mu         sync.Mutex
	id         string
	timeout    time.Duration
	producerID int64 // -1 until InitTransactions
	epoch      int32
	open       bool // between BeginTransaction and the end of Commit/Abort
	ending     bool // CommitTransaction or AbortTransaction runs
	aborting   bool // the loop fails what it has not sent
	started    bool // the coordinator may hold an open transaction
	// held: the coordinator answered that it holds the open transaction
	// (a partition or a group added). Without it, a refusal of EndTxn for
	// INVALID_TXN_STATE means the coordinator never opened it (every add
	// was refused, or the one whose answer was lost was not applied), so
	// the transaction ends locally, as Kafka's producer skips EndTxn when
	// nothing was added.
	held bool
	// endSent: an EndTxn of the open transaction was sent (its answer
	// lost or refused); a later refusal may then be of a decided one.
	endSent   bool
	added     map[topicPartition]bool
	abortable error
	fatal     error
	coordAddr string
	// coordFrom is the node whose FindCoordinator answer named coordAddr;
	// coordStale a node that named a coordinator that refused, or could
	// name none: the next lookup asks it last (as the group coordinator's
	// lookup does), so a node with stale metadata (a removed node that
	// still runs) cannot hold the producer's lookups.
	coordFrom  string
	coordStale string
	// bumpNeeded: a record of the transaction failed for its sequence
	// (UNKNOWN_PRODUCER_ID, OUT_OF_ORDER_SEQUENCE), so once it is aborted
	// the producer re-initializes (KIP-360) before the next one.
	bumpNeeded bool
}

func newTxnState(id string, timeout time.Duration) *txnState {
	return &txnState{id: id, timeout: timeout, producerID: -1, added: make(map[topicPartition]bool)}
}

// producer is the id and epoch to write with; ok false before init.
func (t *txnState) producer() (id int64, epoch int32, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.producerID, t.epoch, t.producerID >= 0
}

// wire is the producer as the transaction requests name it.
func (t *txnState) wire() *strandpb.TxnProducer {
	t.mu.Lock()
	defer t.mu.Unlock()
	return &strandpb.TxnProducer{ProducerId: t.producerID, Epoch: t.epoch}
}

// note records a failure inside the open transaction: fatal when fenced,
// else it makes the transaction abortable. It returns the error to hand
// to the caller.
func (t *txnState) note(err error) error {
	if err == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fatal != nil {
		return t.fatal
	}
	if errors.Is(err, ErrProducerFenced) {
		var pf *ProducerFencedError
		if !errors.As(err, &pf) {
			err = &ProducerFencedError{TransactionalID: t.id, Err: err}
		}
		t.fatal = err
		return err
	}
	if t.open && !t.aborting && t.abortable == nil && !errors.Is(err, ErrTransactionAborted) {
		t.abortable = err
	}
	if t.open && sequenceLost(err) {
		t.bumpNeeded = true
	}
	return err
}

// isAdded: the partition is in the open transaction.
func (t *txnState) isAdded(tp topicPartition) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.added[tp]
}

// markAdded records partitions the coordinator added under epoch; an
// answer for an older epoch (a transaction since ended) is ignored.
func (t *txnState) markAdded(epoch int32, tps []topicPartition) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.epoch != epoch || !t.open {
		return
	}
	for _, tp := range tps {
		t.added[tp] = true
	}
	if len(tps) > 0 {
		t.held = true
	}
}

// markHeld records that the coordinator answered an add of the open
// transaction under epoch (AddOffsetsToTxn).
func (t *txnState) markHeld(epoch int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.epoch == epoch && t.open {
		t.held = true
	}
}

func (t *txnState) markStarted() {
	t.mu.Lock()
	t.started = true
	t.mu.Unlock()
}

func (t *txnState) isAborting() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.aborting
}

func (t *txnState) fatalErr() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fatal
}

// checkProduce says whether a record may be produced now.
func (t *txnState) checkProduce() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.fatal != nil:
		return t.fatal
	case t.ending:
		return ErrTransactionEnding
	case !t.open:
		return ErrNoTransaction
	}
	return nil
}

// checkInside says whether an operation inside the open transaction
// (SendOffsets) may run.
func (t *txnState) checkInside() error {
	if err := t.checkProduce(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.abortable != nil {
		return &TransactionAbortableError{Err: t.abortable}
	}
	return nil
}

// startEnd marks Commit or Abort running; it refuses a second end and an
// end without a transaction.
func (t *txnState) startEnd(abort bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.fatal != nil:
		return t.fatal
	case t.ending:
		return ErrTransactionEnding
	case !t.open:
		return ErrNoTransaction
	}
	t.ending, t.aborting = true, abort
	return nil
}

// stopEnd undoes startEnd when the end failed and the transaction stays
// open (the caller may retry, or abort).
func (t *txnState) stopEnd() {
	t.mu.Lock()
	t.ending, t.aborting = false, false
	t.mu.Unlock()
}

// finish closes the transaction, taking the next producer id and epoch
// (KIP-890: every end bumps the epoch).
func (t *txnState) finish(producerID int64, epoch int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.producerID, t.epoch = producerID, epoch
	t.open, t.ending, t.aborting, t.started, t.held, t.endSent = false, false, false, false, false, false
	t.abortable = nil
	t.added = make(map[topicPartition]bool)
}

// txn returns the Client's transaction state, or ErrNotTransactional.
func (c *Client) txnOrErr() (*txnState, error) {
	if c.txn == nil {
		return nil, ErrNotTransactional
	}
	return c.txn, nil
}

// InitTransactions takes the transactional id's producer id at a new
// epoch from its coordinator (Kafka's initTransactions): every older
// Client with the id is fenced, and the coordinator aborts the
// transaction such a Client left open. BeginTransaction calls it when it
// was not; calling it first bounds the wait by ctx.
func (c *Client) InitTransactions(ctx context.Context) error {
	t, err := c.txnOrErr()
	if err != nil {
		return err
	}
	if err := t.fatalErr(); err != nil {
		return err
	}
	if _, _, ok := t.producer(); ok {
		return c.maybeReinit(ctx, t)
	}
	return c.initProducer(ctx, t, nil)
}

// initProducer sends InitProducerId and takes the answered producer id
// and epoch. expected (KIP-360) is the producer id and epoch the Client
// holds, nil for a fresh start: the coordinator bumps the epoch of the
// same producer id only when it is still the id's current one, and
// refuses a fenced producer (PRODUCER_FENCED, fatal here).
func (c *Client) initProducer(ctx context.Context, t *txnState, expected *strandpb.TxnProducer) error {
	req := &strandpb.TxnInitProducerIdRequest{TransactionalId: t.id,
		TransactionTimeoutMs: int32(t.timeout / time.Millisecond), Expected: expected}
	resp, err := c.txnCall(ctx, &strandpb.Request{Body: &strandpb.Request_TxnInitProducerId{TxnInitProducerId: req}})
	if err != nil {
		return t.note(fmt.Errorf("clientlib: InitProducerId for transactional id %q: %w", t.id, err))
	}
	a := resp.GetTxnInitProducerId()
	t.mu.Lock()
	t.producerID, t.epoch = a.GetProducerId(), a.GetProducerEpoch()
	t.bumpNeeded = false
	t.mu.Unlock()
	return nil
}

// maybeReinit re-initializes the producer after an aborted transaction
// whose records failed for their sequence (KIP-360): InitProducerId with
// the ids the Client holds bumps their epoch, so every partition's
// sequences start afresh, and keeps the producer id, where a fresh
// InitProducerId would have fenced nothing but lost the id's continuity.
// It does nothing while a transaction is open or none needs it.
func (c *Client) maybeReinit(ctx context.Context, t *txnState) error {
	t.mu.Lock()
	need := t.bumpNeeded && !t.open && t.fatal == nil
	t.mu.Unlock()
	if !need {
		return nil
	}
	return c.initProducer(ctx, t, t.wire())
}

// BeginTransaction opens a transaction: records produced until
// CommitTransaction or AbortTransaction belong to it. It fails with
// ErrTransactionOpen when one is open, with a *ProducerFencedError once
// the Client was fenced, and with InitTransactions' error the first time.
func (c *Client) BeginTransaction() error {
	t, err := c.txnOrErr()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(c.cfg.deliveryTimeout, c.cfg.requestTimeout))
	err = c.InitTransactions(ctx) // the first time, or a KIP-360 re-init an abort could not finish
	cancel()
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.fatal != nil:
		return t.fatal
	case t.open:
		return ErrTransactionOpen
	}
	t.open = true
	return nil
}

// CommitTransaction sends every record produced in the transaction, waits
// for all of them, then commits: the records (and offsets sent with
// SendOffsetsToTransaction) become visible to read_committed readers
// together. If a record failed, it commits nothing and returns a
// *TransactionAbortableError: call AbortTransaction. A fenced Client gets
// a *ProducerFencedError. On ctx's end or another error the transaction
// stays open: call CommitTransaction again or AbortTransaction.
func (c *Client) CommitTransaction(ctx context.Context) error {
	t, err := c.txnOrErr()
	if err != nil {
		return err
	}
	if err := t.startEnd(false); err != nil {
		return err
	}
	if err := c.commitFlush(ctx); err != nil {
		t.stopEnd()
		return err
	}
	t.mu.Lock()
	abortable, fatal := t.abortable, t.fatal
	t.mu.Unlock()
	if fatal != nil {
		t.stopEnd()
		return fatal
	}
	if abortable != nil {
		t.stopEnd()
		return &TransactionAbortableError{Err: abortable}
	}
	return c.endTxn(ctx, t, true)
}

// commitFlush is CommitTransaction's wait for the transaction's records
// (Flush); the planted bugCommitSkipsFlush (simbugs builds only) skips it.
func (c *Client) commitFlush(ctx context.Context) error {
	if bugCommitSkipsFlush() {
		return nil
	}
	return c.Flush(ctx)
}

// AbortTransaction ends the transaction without effect: records not yet
// sent fail with ErrTransactionAborted, records sent are waited for, and
// the coordinator writes abort markers, so read_committed readers never
// see any of them. A fenced Client gets a *ProducerFencedError. When a
// record failed for its sequence (UNKNOWN_PRODUCER_ID,
// OUT_OF_ORDER_SEQUENCE), it then re-initializes the producer (KIP-360:
// InitProducerId with the producer id and epoch it holds), keeping the
// producer id; if that fails the transaction is still ended, and
// BeginTransaction retries it.
func (c *Client) AbortTransaction(ctx context.Context) error {
	t, err := c.txnOrErr()
	if err != nil {
		return err
	}
	if err := t.startEnd(true); err != nil {
		return err
	}
	if p := c.existingProducer(); p != nil {
		p.poke()
	}
	if err := c.Flush(ctx); err != nil {
		t.stopEnd()
		return err
	}
	if err := t.fatalErr(); err != nil {
		t.stopEnd()
		return err
	}
	if err := c.endTxn(ctx, t, false); err != nil {
		return err
	}
	return c.maybeReinit(ctx, t)
}

// endTxn asks the coordinator to commit or abort (when it may hold the
// transaction) and closes it at the answered epoch.
func (c *Client) endTxn(ctx context.Context, t *txnState, commit bool) error {
	t.mu.Lock()
	started, held, endSent, pid, epoch := t.started, t.held, t.endSent, t.producerID, t.epoch
	t.endSent = started
	t.mu.Unlock()
	if !started { // nothing reached the coordinator: end locally
		t.finish(pid, epoch)
		return nil
	}
	req := &strandpb.EndTxnRequest{TransactionalId: t.id, Producer: t.wire(), Commit: commit}
	resp, err := c.txnCall(ctx, &strandpb.Request{Body: &strandpb.Request_EndTxn{EndTxn: req}})
	if err != nil && !held && !endSent && errors.Is(err, errInvalidTxnState) {
		t.finish(pid, epoch) // the coordinator never opened it: nothing to end
		return nil
	}
	if err != nil {
		err = fmt.Errorf("clientlib: EndTxn(commit=%v) for transactional id %q: %w", commit, t.id, err)
		if errors.Is(err, ErrProducerFenced) {
			err = t.note(err)
		}
		// Else the transaction stays as it was, not abortable: the
		// EndTxn may have been decided, and only its resend (the same
		// decision) gets the answer.
		t.stopEnd()
		return err
	}
	a := resp.GetEndTxn()
	t.finish(a.GetProducerId(), a.GetProducerEpoch())
	return nil
}

// SendOffsetsToTransaction commits a group's offsets inside the open
// transaction (Kafka's sendOffsetsToTransaction): they take effect exactly
// when the transaction commits, and never if it aborts. meta is the
// consuming member's (GroupConsumer.GroupMetadata), so a member fenced by
// a rebalance cannot commit offsets of partitions it lost (KIP-447). A
// failure makes the transaction abortable.
func (c *Client) SendOffsetsToTransaction(ctx context.Context, offsets map[TopicPartition]int64, meta GroupMetadata) error {
	t, err := c.txnOrErr()
	if err != nil {
		return err
	}
	if err := t.checkInside(); err != nil {
		return err
	}
	if meta.Group == "" {
		return &OptionError{Option: "GroupMetadata.Group", Reason: "the group whose offsets these are"}
	}
	add := &strandpb.AddOffsetsToTxnRequest{TransactionalId: t.id, Producer: t.wire(), Group: meta.Group}
	t.markStarted()
	if _, err := c.txnCall(ctx, &strandpb.Request{Body: &strandpb.Request_AddOffsetsToTxn{AddOffsetsToTxn: add}}); err != nil {
		return t.note(fmt.Errorf("clientlib: AddOffsetsToTxn for group %q: %w", meta.Group, err))
	}
	t.markHeld(add.GetProducer().GetEpoch())
	commit := &strandpb.OffsetCommitRequest{Group: meta.Group, MemberId: meta.MemberID, MemberEpoch: meta.Epoch}
	for _, tp := range sortedOffsetPartitions(offsets) {
		commit.Offsets = append(commit.Offsets, &strandpb.OffsetCommitPartition{Topic: tp.Topic, Partition: tp.Partition, Offset: offsets[tp]})
	}
	req := &strandpb.TxnOffsetCommitRequest{TransactionalId: t.id, Producer: t.wire(), Commit: commit, GroupInstanceId: meta.InstanceID}
	if _, err := c.groupCall(ctx, meta.Group, &strandpb.Request{Body: &strandpb.Request_TxnOffsetCommit{TxnOffsetCommit: req}}); err != nil {
		return t.note(fmt.Errorf("clientlib: TxnOffsetCommit for group %q: %w", meta.Group, err))
	}
	return nil
}

func sortedOffsetPartitions(offsets map[TopicPartition]int64) []TopicPartition {
	tps := make([]TopicPartition, 0, len(offsets))
	for tp := range offsets {
		tps = append(tps, tp)
	}
	sortPartitions(tps)
	return tps
}

// GroupMetadata is the member's identity for SendOffsetsToTransaction:
// its group, member id and current epoch. Call it from the goroutine that
// polls, after the Poll whose records the offsets follow.
func (g *GroupConsumer) GroupMetadata() GroupMetadata {
	return GroupMetadata{Group: g.group, MemberID: g.member, Epoch: g.epoch}
}

// abortOnClose aborts the open transaction of a transactional Client
// being closed, bounded like BeginTransaction's InitTransactions. A
// transaction already ending (a Commit or Abort on another goroutine) is
// left to that call; a failed abort is left to the coordinator's timeout.
func (c *Client) abortOnClose() {
	t := c.txn
	if t == nil || c.cfg.simulated != nil {
		return
	}
	t.mu.Lock()
	open := t.open && !t.ending && t.fatal == nil
	t.mu.Unlock()
	if !open {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(c.cfg.deliveryTimeout, c.cfg.requestTimeout))
	defer cancel()
	_ = c.AbortTransaction(ctx)
}
