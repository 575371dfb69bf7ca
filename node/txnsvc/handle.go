package txnsvc

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/node/groupsvc"
	"github.com/strandlog/strand/proto/strandpb"
)

// Host is what the coordinator's request handlers need of the node.
type Host interface {
	// CoordinatorOf is the transactional id's coordinator on this node and
	// the replica it writes and reads through, or the error to answer (the
	// id invalid, __strand_transactions not created yet, the partition
	// led elsewhere). It may ask the metadata group to create
	// __strand_transactions.
	CoordinatorOf(id string) (*Coordinator, Replica, error)
	// Error is err on the wire as the coordinator's requests answer it (a
	// partition led elsewhere is NOT_COORDINATOR).
	Error(err error) *strandpb.Error
	// WireError is err on the wire by its sentinel's code; nil for nil.
	WireError(err error) *strandpb.Error
	// Metadata is the node's applied metadata; nil before its metadata
	// group opens.
	Metadata() *metadata.State
	// LedCoordinators are the replicas of every __strand_transactions
	// partition this node leads, in the node's group order, each with its
	// coordinator.
	LedCoordinators() []Replica
}

// Replica is the node's replica of one coordinator's partition, which it
// leads.
type Replica interface {
	// Propose appends cmd to the partition at acks=all and calls done once
	// with its outcome, once the coordinator read it back (or with the
	// error that kept it from applying: a timeout or a lost leadership
	// may still apply).
	Propose(cmd *strandpb.TxnCommand, done func(Applied))
	// Read calls serve with the coordinator's state once a read index of
	// the partition is applied and read back, or fail; both run as the
	// node's completions, so they may propose or answer.
	Read(serve func(*txn.State), fail func(error))
	// DriveMarkers starts the marker writes of every decided transaction
	// not in flight yet (node/txn_markers.go).
	DriveMarkers()
	// RefillProducerIDs takes a block of producer ids from the metadata
	// group, grants it through the log and calls done (nil: granted).
	RefillProducerIDs(done func(error))
	// HookBeforeDecision is a planted bug's hook (simbugs builds only):
	// called by EndTxn before it proposes the decision.
	HookBeforeDecision(co *Coordinator, req *strandpb.EndTxnRequest)
}

// Service serves the transaction coordinator's requests on a node, over
// its Host. The node builds one per request from its configuration.
type Service struct {
	Host Host
	// MaxTimeoutMs is transaction.max.timeout.ms.
	MaxTimeoutMs int32
	// PartitionsMax bounds the partitions one request names.
	PartitionsMax int
	// MarkersEnabled: the node has a marker writer; without one it opens
	// and decides no transaction (ErrTransactionsNotEnabled).
	MarkersEnabled bool
	// ErrInvalidRequest and ErrTransactionsNotEnabled are the node's
	// sentinels: its error table is the node's (issue 22: one error
	// table).
	ErrInvalidRequest, ErrTransactionsNotEnabled error
}

// fail is an answer failing the whole request with err (a moved
// coordinator is NOT_COORDINATOR, as for groups).
func (s Service) fail(answer func(*strandpb.Response)) func(error) {
	return func(err error) { answer(&strandpb.Response{Error: s.Host.Error(err)}) }
}

// InitProducerID gives the transactional id its producer id at a new
// epoch (engine/txn's InitProducerID), taking a block of producer ids from
// the metadata group first when the coordinator has none left.
func (s Service) InitProducerID(req *strandpb.TxnInitProducerIdRequest, answer func(*strandpb.Response)) {
	fail := s.fail(answer)
	maxMs := s.MaxTimeoutMs
	if ms := req.GetTransactionTimeoutMs(); ms < 1 || ms > maxMs {
		fail(fmt.Errorf("%w: transaction.timeout.ms %d, want 1..%d (transaction.max.timeout.ms)", txn.ErrInvalidTimeout, ms, maxMs))
		return
	}
	_, r, err := s.Host.CoordinatorOf(req.GetTransactionalId())
	if err != nil {
		fail(err)
		return
	}
	cmd := &strandpb.TxnCommand{Body: &strandpb.TxnCommand_InitProducerId{InitProducerId: &strandpb.TxnInitProducerId{
		TransactionalId: req.GetTransactionalId(), TimeoutMs: req.GetTransactionTimeoutMs(), MaxTimeoutMs: maxMs, Expected: req.GetExpected(),
	}}}
	s.proposeInit(r, cmd, true, answer)
}

// proposeInit proposes an InitProducerId; refused for want of producer
// ids, it refills the pool and proposes once more when refill is set.
func (s Service) proposeInit(r Replica, cmd *strandpb.TxnCommand, refill bool, answer func(*strandpb.Response)) {
	fail := s.fail(answer)
	r.Propose(cmd, func(a Applied) {
		switch {
		case a.Err != nil:
			fail(a.Err)
		case errors.Is(a.Res.Err, txn.ErrProducerIDsNeeded) && refill:
			r.RefillProducerIDs(func(err error) {
				if err != nil {
					fail(fmt.Errorf("%w: %v", txn.ErrProducerIDsNeeded, err))
					return
				}
				s.proposeInit(r, cmd, false, answer)
			})
		case a.Res.Err != nil:
			if a.Res.Fenced {
				r.DriveMarkers() // the fenced transaction's abort markers
			}
			fail(a.Res.Err)
		default:
			answer(&strandpb.Response{Body: &strandpb.Response_TxnInitProducerId{TxnInitProducerId: &strandpb.TxnInitProducerIdResponse{
				ProducerId: a.Res.Producer.ID, ProducerEpoch: int32(a.Res.Producer.Epoch)}}})
		}
	})
}

// AddPartitions adds partitions to the producer's transaction. Every
// partition must exist and be no coordinator's internal one; when one is
// not, nothing is added (the others are answered "not attempted").
func (s Service) AddPartitions(req *strandpb.AddPartitionsToTxnRequest, answer func(*strandpb.Response)) {
	fail := s.fail(answer)
	if !s.MarkersEnabled {
		fail(s.ErrTransactionsNotEnabled)
		return
	}
	tps := PartitionsFromWire(req.GetTopics())
	if len(tps) == 0 || len(tps) > s.PartitionsMax {
		fail(fmt.Errorf("%w: %d partitions, want 1..%d", s.ErrInvalidRequest, len(tps), s.PartitionsMax))
		return
	}
	_, r, err := s.Host.CoordinatorOf(req.GetTransactionalId())
	if err != nil {
		fail(err)
		return
	}
	if results, ok := s.checkPartitions(tps); !ok {
		answer(&strandpb.Response{Body: &strandpb.Response_AddPartitionsToTxn{AddPartitionsToTxn: &strandpb.AddPartitionsToTxnResponse{Results: results}}})
		return
	}
	cmd := &strandpb.TxnCommand{Body: &strandpb.TxnCommand_AddPartitions{AddPartitions: &strandpb.TxnAddPartitions{
		TransactionalId: req.GetTransactionalId(), Producer: req.GetProducer(), Topics: req.GetTopics(),
	}}}
	r.Propose(cmd, func(a Applied) {
		if err := Outcome(a); err != nil {
			fail(err)
			return
		}
		results := make([]*strandpb.AddPartitionsToTxnResponse_Result, len(tps))
		for i, tp := range tps {
			results[i] = &strandpb.AddPartitionsToTxnResponse_Result{Topic: tp.Topic, Partition: tp.Partition}
		}
		answer(&strandpb.Response{Body: &strandpb.Response_AddPartitionsToTxn{AddPartitionsToTxn: &strandpb.AddPartitionsToTxnResponse{Results: results}}})
	})
}

// checkPartitions answers, per partition, UNKNOWN_TOPIC_OR_PARTITION for
// one the node's applied metadata does not hold (or an internal one) and
// "not attempted" for the others; ok when every partition exists.
func (s Service) checkPartitions(tps []txn.TopicPartition) ([]*strandpb.AddPartitionsToTxnResponse_Result, bool) {
	meta := s.Host.Metadata()
	results := make([]*strandpb.AddPartitionsToTxnResponse_Result, len(tps))
	ok := true
	for i, tp := range tps {
		results[i] = &strandpb.AddPartitionsToTxnResponse_Result{Topic: tp.Topic, Partition: tp.Partition}
		var t metadata.Topic
		exists := false
		if meta != nil {
			t, exists = meta.Topic(tp.Topic)
		}
		if !exists || IsCoordinatorTopic(tp.Topic) || tp.Partition < 0 || tp.Partition >= t.Partitions() {
			ok = false
			results[i].Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION,
				Message: fmt.Sprintf("node: no partition %s/%d to add to a transaction", tp.Topic, tp.Partition)}
		}
	}
	for _, r := range results {
		if r.Error == nil && !ok {
			r.Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST,
				Message: "node: not attempted: another partition of the request does not exist"}
		}
	}
	return results, ok
}

// IsCoordinatorTopic reports whether name is an internal topic whose log
// is a coordinator's state: only its coordinator writes it, retention
// never trims it and its partition count never changes.
func IsCoordinatorTopic(name string) bool {
	return name == groupsvc.OffsetsTopic || name == TransactionsTopic
}

// VerifyPartitions is AddPartitionsToTxn's verify-only form: a read
// answering, per partition, nil only when it is in the producer's open
// transaction.
func (s Service) VerifyPartitions(req *strandpb.AddPartitionsToTxnRequest, answer func(*strandpb.Response)) {
	fail := s.fail(answer)
	tps := PartitionsFromWire(req.GetTopics())
	epoch := req.GetProducer().GetEpoch()
	if len(tps) == 0 || len(tps) > s.PartitionsMax || req.GetProducer() == nil || epoch < -1 || epoch > math.MaxInt16 {
		fail(fmt.Errorf("%w: %d partitions and a producer, want 1..%d and an epoch", s.ErrInvalidRequest, len(tps), s.PartitionsMax))
		return
	}
	p := txn.Producer{ID: req.GetProducer().GetProducerId(), Epoch: int16(epoch)}
	s.read(req.GetTransactionalId(), func(st *txn.State) {
		errs := st.Verify(req.GetTransactionalId(), p, tps)
		results := make([]*strandpb.AddPartitionsToTxnResponse_Result, len(tps))
		for i, tp := range tps {
			results[i] = &strandpb.AddPartitionsToTxnResponse_Result{Topic: tp.Topic, Partition: tp.Partition, Error: s.Host.WireError(errs[i])}
		}
		answer(&strandpb.Response{Body: &strandpb.Response_AddPartitionsToTxn{AddPartitionsToTxn: &strandpb.AddPartitionsToTxnResponse{Results: results}}})
	}, fail)
}

// read runs serve with the coordinator's state of the transactional id
// once a read index of its partition is applied and read back, or fail.
func (s Service) read(id string, serve func(*txn.State), fail func(error)) {
	_, r, err := s.Host.CoordinatorOf(id)
	if err != nil {
		fail(err)
		return
	}
	r.Read(serve, fail)
}

// AddOffsets adds a group's offsets to the transaction.
func (s Service) AddOffsets(req *strandpb.AddOffsetsToTxnRequest, answer func(*strandpb.Response)) {
	fail := s.fail(answer)
	if !s.MarkersEnabled {
		fail(s.ErrTransactionsNotEnabled)
		return
	}
	_, r, err := s.Host.CoordinatorOf(req.GetTransactionalId())
	if err != nil {
		fail(err)
		return
	}
	cmd := &strandpb.TxnCommand{Body: &strandpb.TxnCommand_AddOffsets{AddOffsets: &strandpb.TxnAddOffsets{
		TransactionalId: req.GetTransactionalId(), Producer: req.GetProducer(), Group: req.GetGroup(),
	}}}
	r.Propose(cmd, func(a Applied) {
		if err := Outcome(a); err != nil {
			fail(err)
			return
		}
		answer(&strandpb.Response{Body: &strandpb.Response_AddOffsetsToTxn{AddOffsetsToTxn: &strandpb.AddOffsetsToTxnResponse{}}})
	})
}

// EndTxn decides the open transaction (PrepareCommit or PrepareAbort,
// durable in the coordinator's log), answers the epoch of the next
// transaction and starts writing the markers; the transaction completes
// once the marker writer reported every one.
func (s Service) EndTxn(req *strandpb.EndTxnRequest, answer func(*strandpb.Response)) {
	fail := s.fail(answer)
	if !s.MarkersEnabled {
		fail(s.ErrTransactionsNotEnabled)
		return
	}
	co, r, err := s.Host.CoordinatorOf(req.GetTransactionalId())
	if err != nil {
		fail(err)
		return
	}
	cmd := &strandpb.TxnCommand{Body: &strandpb.TxnCommand_EndTxn{EndTxn: &strandpb.TxnEnd{
		TransactionalId: req.GetTransactionalId(), Producer: req.GetProducer(), Commit: req.GetCommit(),
		KeepEpoch: req.GetKeepEpoch(),
	}}}
	r.HookBeforeDecision(co, req) // planted-bug hook (-tags simbugs)
	r.Propose(cmd, func(a Applied) {
		if err := Outcome(a); err != nil {
			fail(err)
			return
		}
		if a.Res.Prepared {
			r.DriveMarkers()
		}
		answer(&strandpb.Response{Body: &strandpb.Response_EndTxn{EndTxn: &strandpb.EndTxnResponse{
			ProducerId: a.Res.Producer.ID, ProducerEpoch: int32(a.Res.Producer.Epoch)}}})
	})
}

// AbortTransaction aborts the transactional id's open transaction for an
// operator (strand txn abort): the coordinator proposes an AdminAbort,
// which prepares the abort at the next epoch (fencing the producer, as a
// timeout does), answers once that decision is applied (durable in its
// log) and writes the abort markers to every partition and group of the
// transaction.
func (s Service) AbortTransaction(req *strandpb.AbortTransactionRequest, answer func(*strandpb.Response)) {
	fail := s.fail(answer)
	if !s.MarkersEnabled {
		fail(s.ErrTransactionsNotEnabled)
		return
	}
	id := req.GetTransactionalId()
	co, r, err := s.Host.CoordinatorOf(id)
	if err != nil {
		fail(err)
		return
	}
	cmd := &strandpb.TxnCommand{Body: &strandpb.TxnCommand_AdminAbort{AdminAbort: &strandpb.TxnAdminAbort{TransactionalId: id}}}
	r.Propose(cmd, func(a Applied) {
		if err := Outcome(a); err != nil {
			fail(err)
			return
		}
		out := &strandpb.AbortTransactionResponse{ProducerId: a.Res.Producer.ID, ProducerEpoch: int32(a.Res.Producer.Epoch),
			Already: !a.Res.Prepared}
		if d, err := co.State.Describe(id); err == nil {
			w := ToWire(d)
			out.Topics, out.Groups = w.Topics, w.Groups
		}
		if a.Res.Prepared {
			r.DriveMarkers()
		}
		answer(&strandpb.Response{Body: &strandpb.Response_AbortTransaction{AbortTransaction: out}})
	})
}

// Outcome is an applied command's error: the proposal's, else the state
// machine's refusal.
func Outcome(a Applied) error {
	if a.Err != nil {
		return a.Err
	}
	return a.Res.Err
}

// ListTransactions lists the transactional ids of every
// __strand_transactions partition this node leads (a client asks every
// node and merges), filtered by state.
func (s Service) ListTransactions(req *strandpb.ListTransactionsRequest, answer func(*strandpb.Response)) {
	resp := &strandpb.ListTransactionsResponse{}
	reps := s.Host.LedCoordinators()
	pending := len(reps) + 1
	finish := func() {
		if pending--; pending == 0 {
			slices.SortFunc(resp.Transactions, func(a, b *strandpb.ListTransactionsResponse_Transaction) int {
				return strings.Compare(a.GetTransactionalId(), b.GetTransactionalId())
			})
			answer(&strandpb.Response{Body: &strandpb.Response_ListTransactions{ListTransactions: resp}})
		}
	}
	for _, r := range reps {
		r.Read(func(st *txn.State) {
			for _, id := range st.IDs() {
				d, _ := st.Describe(id)
				if len(req.GetStates()) == 0 || slices.Contains(req.GetStates(), d.State.String()) {
					resp.Transactions = append(resp.Transactions, &strandpb.ListTransactionsResponse_Transaction{
						TransactionalId: id, ProducerId: d.Producer.ID, State: d.State.String()})
				}
			}
			finish()
		}, func(error) { finish() })
	}
	finish()
}

// DescribeTransactions describes each id on its coordinator (this node);
// an id coordinated elsewhere is answered NOT_COORDINATOR.
func (s Service) DescribeTransactions(req *strandpb.DescribeTransactionsRequest, answer func(*strandpb.Response)) {
	ids := req.GetTransactionalIds()
	out := make([]*strandpb.DescribeTransactionsResponse_Transaction, len(ids))
	pending := len(ids) + 1
	finish := func() {
		if pending--; pending == 0 {
			answer(&strandpb.Response{Body: &strandpb.Response_DescribeTransactions{DescribeTransactions: &strandpb.DescribeTransactionsResponse{Transactions: out}}})
		}
	}
	for i, id := range ids {
		s.read(id, func(st *txn.State) {
			d, err := st.Describe(id)
			if err != nil {
				out[i] = &strandpb.DescribeTransactionsResponse_Transaction{TransactionalId: id, Error: s.Host.Error(err)}
			} else {
				out[i] = ToWire(d)
			}
			finish()
		}, func(err error) {
			out[i] = &strandpb.DescribeTransactionsResponse_Transaction{TransactionalId: id, Error: s.Host.Error(err)}
			finish()
		})
	}
	finish()
}

// ToWire converts a described transactional id.
func ToWire(d txn.Description) *strandpb.DescribeTransactionsResponse_Transaction {
	out := &strandpb.DescribeTransactionsResponse_Transaction{
		TransactionalId: d.ID, State: d.State.String(), ProducerId: d.Producer.ID, ProducerEpoch: int32(d.Producer.Epoch),
		TimeoutMs: d.TimeoutMs, StartMs: d.TxnStartMs, Groups: d.Groups,
	}
	for _, p := range d.Partitions {
		if n := len(out.Topics); n == 0 || out.Topics[n-1].Topic != p.Topic {
			out.Topics = append(out.Topics, &strandpb.TxnPartitions{Topic: p.Topic})
		}
		last := out.Topics[len(out.Topics)-1]
		last.Partitions = append(last.Partitions, p.Partition)
	}
	return out
}

// PartitionsFromWire flattens per-topic lists.
func PartitionsFromWire(in []*strandpb.TxnPartitions) []txn.TopicPartition {
	var out []txn.TopicPartition
	for _, tp := range in {
		for _, p := range tp.GetPartitions() {
			out = append(out, txn.TopicPartition{Topic: tp.GetTopic(), Partition: p})
		}
	}
	return out
}
