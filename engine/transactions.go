package engine

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/strandlog/strand/proto/strandpb"
)

// The partition side of transactions (doc.go, "Transactions"): per producer
// id a transactional record (the epoch it is fenced below, the last
// marker's coordinator epoch, the open transaction), the open transactions
// that wrote here in first-offset order (the last stable offset's input),
// and the aborted-transaction index in marker order.

var (
	// ErrInvalidTxnState: a transactional write from a producer that has
	// not begun a transaction here at its epoch, a plain write while its
	// transaction is open, or a begin while a transaction of another epoch
	// is open (Kafka's INVALID_TXN_STATE).
	ErrInvalidTxnState = errors.New("engine: invalid transaction state")
	// ErrCoordinatorFenced: a marker from a coordinator epoch older than
	// the producer's last marker's (Kafka's TRANSACTION_COORDINATOR_FENCED).
	ErrCoordinatorFenced = errors.New("engine: transaction coordinator fenced")
)

// AbortedTxn is one entry of the aborted-transaction index: a transaction
// of ProducerID that wrote from FirstOffset and whose abort marker is at
// LastOffset. A Kafka fetch answers these as AbortedTransactions.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// OpenTxn is an open transaction that has written on this partition:
// its producer, epoch and first offset.
type OpenTxn struct {
	ProducerID  int64
	Epoch       int32
	FirstOffset int64
}

// Isolation is a reader's isolation level (Kafka's isolation.level).
type Isolation int8

const (
	// ReadUncommitted reads up to the high-water mark.
	ReadUncommitted Isolation = iota
	// ReadCommitted reads up to the last stable offset.
	ReadCommitted
)

// txnProducer is one producer's transactional record on this partition.
type txnProducer struct {
	// epoch is the highest epoch a begin, transactional write or marker
	// carried: any entry of an older epoch is fenced.
	epoch            int32
	coordinatorEpoch int32
	// open: a transaction is begun and its marker not yet applied.
	open bool
	// firstOffset is the open transaction's first offset here, -1 while it
	// has written nothing (and whenever it is not open).
	firstOffset  int64
	lastAppendMs int64
}

// screenTxnEpoch refuses an entry of producer id at an epoch older than
// its transactional record's or its idempotence record's.
func (p *Partition) screenTxnEpoch(id int64, epoch int32) error {
	current := int32(-1)
	if rec := p.txns[id]; rec != nil {
		current = rec.epoch
	}
	if st := p.producers[id]; st != nil {
		current = max(current, st.epoch)
	}
	if epoch < current {
		return fmt.Errorf("%w: producer %d epoch %d, current epoch %d", ErrProducerFenced, id, epoch, current)
	}
	return nil
}

// screenTxnWrite applies the transactional rules to a produce entry of an
// idempotent producer: a transactional batch needs a transaction begun at
// its epoch, a plain batch no transaction open, neither an older epoch.
func (p *Partition) screenTxnWrite(e *EntryFields) error {
	rec := p.txns[e.ProducerID]
	if rec == nil && !e.Transactional {
		return nil
	}
	if err := p.screenTxnEpoch(e.ProducerID, e.ProducerEpoch); err != nil {
		return err
	}
	switch {
	case e.Transactional && (rec == nil || !rec.open):
		return fmt.Errorf("%w: producer %d epoch %d wrote transactionally without a transaction begun here",
			ErrInvalidTxnState, e.ProducerID, e.ProducerEpoch)
	case e.Transactional && rec.epoch != e.ProducerEpoch:
		return fmt.Errorf("%w: producer %d wrote at epoch %d in a transaction begun at epoch %d",
			ErrInvalidTxnState, e.ProducerID, e.ProducerEpoch, rec.epoch)
	case !e.Transactional && rec.open:
		return fmt.Errorf("%w: producer %d wrote a plain batch while its transaction is open",
			ErrInvalidTxnState, e.ProducerID)
	}
	return nil
}

// noteTxnWrite records a transactional batch accepted at baseOffset: the
// transaction's first batch here opens it for the last stable offset.
func (p *Partition) noteTxnWrite(id int64, baseOffset, appendTimeMs int64) {
	rec := *p.txns[id]
	rec.lastAppendMs = appendTimeMs
	if rec.firstOffset < 0 {
		rec.firstOffset = baseOffset
		p.openTxns = append(p.openTxns, OpenTxn{ProducerID: id, Epoch: rec.epoch, FirstOffset: baseOffset})
	}
	p.setTxn(id, &rec)
}

// applyTxnBegin applies a TXN_BEGIN entry: the producer joined a
// transaction here. A resend at the open transaction's epoch is a no-op.
func (p *Partition) applyTxnBegin(e *EntryFields) Result {
	if e.ProducerID < 0 || e.ProducerEpoch < 0 {
		return Result{Err: fmt.Errorf("%w: begin of producer %d epoch %d", ErrInvalidEntry, e.ProducerID, e.ProducerEpoch)}
	}
	if err := p.screenTxnEpoch(e.ProducerID, e.ProducerEpoch); err != nil {
		return Result{Err: err}
	}
	rec := p.txns[e.ProducerID]
	next := txnProducer{epoch: e.ProducerEpoch, open: true, firstOffset: -1, lastAppendMs: e.AppendTimeMs}
	if rec != nil {
		if rec.open && rec.epoch == e.ProducerEpoch {
			return Result{}
		}
		if rec.open {
			return Result{Err: fmt.Errorf("%w: producer %d begins at epoch %d while its transaction of epoch %d is open",
				ErrInvalidTxnState, e.ProducerID, e.ProducerEpoch, rec.epoch)}
		}
		next.coordinatorEpoch = rec.coordinatorEpoch
	}
	p.setTxn(e.ProducerID, &next)
	return Result{}
}

// applyTxnMarker applies a TXN_MARKER entry at raft index index: it ends
// the producer's open transaction. A transaction that wrote here gets its
// marker at one offset (a control record), and an abort enters the aborted
// index; otherwise the marker takes no offset and only moves the epochs.
func (p *Partition) applyTxnMarker(index uint64, e *EntryFields) Result {
	if e.ProducerID < 0 || e.ProducerEpoch < 0 {
		return Result{Err: fmt.Errorf("%w: marker of producer %d epoch %d", ErrInvalidEntry, e.ProducerID, e.ProducerEpoch)}
	}
	if err := p.screenTxnEpoch(e.ProducerID, e.ProducerEpoch); err != nil {
		return Result{Err: err}
	}
	rec := p.txns[e.ProducerID]
	if rec != nil && e.CoordinatorEpoch < rec.coordinatorEpoch {
		return Result{Err: fmt.Errorf("%w: marker of producer %d from coordinator epoch %d, last %d",
			ErrCoordinatorFenced, e.ProducerID, e.CoordinatorEpoch, rec.coordinatorEpoch)}
	}
	var result Result
	if rec != nil && rec.open && rec.firstOffset >= 0 {
		loc := p.appendLocation(index, 1, e.AppendTimeMs, e.AppendTimeMs)
		p.openTxns = slices.DeleteFunc(p.openTxns, func(o OpenTxn) bool { return o.ProducerID == e.ProducerID })
		if !e.Commit {
			p.appendAborted(AbortedTxn{ProducerID: e.ProducerID, FirstOffset: rec.firstOffset, LastOffset: loc.BaseOffset})
		}
		result = Result{BaseOffset: loc.BaseOffset, RecordCount: 1}
	}
	p.setTxn(e.ProducerID, &txnProducer{epoch: e.ProducerEpoch, coordinatorEpoch: e.CoordinatorEpoch,
		firstOffset: -1, lastAppendMs: e.AppendTimeMs})
	return result
}

// setTxn replaces producer id's transactional record, keeping the digest sum.
func (p *Partition) setTxn(id int64, rec *txnProducer) {
	if old := p.txns[id]; old != nil {
		p.txnSum -= txnDigest(id, old)
	}
	p.txns[id] = rec
	p.txnSum += txnDigest(id, rec)
}

// appendAborted adds an aborted transaction to the index.
func (p *Partition) appendAborted(a AbortedTxn) {
	p.aborted = append(p.aborted, a)
	p.txnSum += abortedDigest(&a)
	p.abortedSpanMax = max(p.abortedSpanMax, a.LastOffset-a.FirstOffset)
}

// trimTxns applies a trim to offset stamped nowMs to the transactional
// state: aborted transactions whose marker lies below offset leave the
// index, and idle records (no open transaction, no idempotence record,
// untouched for ProducerExpirationMs) are forgotten. Like evictProducers it
// depends on the trim entry alone, never on the replica-local log start.
func (p *Partition) trimTxns(offset, nowMs int64) {
	for id, rec := range p.txns {
		if !rec.open && rec.lastAppendMs <= nowMs-ProducerExpirationMs && p.producers[id] == nil {
			p.txnSum -= txnDigest(id, rec)
			delete(p.txns, id)
		}
	}
	if p.compaction.Decision.Generation != 0 {
		// A compacted topic: a pass that has not run yet on this replica
		// (its own prefix may lag the record) must still know the
		// transactions aborted (engine/compact's rule 4 on every replica
		// alike), so none goes here (as trim keeps the index). Bounding
		// the aborted index of a compacted log is engine/compact's "Still
		// to do" (AbortedForgotten).
		offset = 0
	}
	live := p.aborted[p.abortedHead:]
	n := sort.Search(len(live), func(i int) bool { return live[i].LastOffset >= offset })
	for i := range n {
		p.txnSum -= abortedDigest(&live[i])
	}
	clear(live[:n])
	p.abortedHead += n
	if p.abortedHead >= indexCompactMin && p.abortedHead*2 >= len(p.aborted) {
		p.aborted = append([]AbortedTxn(nil), p.aborted[p.abortedHead:]...)
		p.abortedHead = 0
	}
}

// txnOpen reports whether producer id has a transaction open here.
func (p *Partition) txnOpen(id int64) bool {
	rec := p.txns[id]
	return rec != nil && rec.open
}

// LastStableOffset is the offset below which every transaction is decided
// (Kafka's LSO): the first offset of the oldest open transaction that has
// written here, else the high-water mark; never below the log start.
// read_committed readers stop at it.
func (p *Partition) LastStableOffset() int64 {
	if len(p.openTxns) == 0 {
		return p.nextOffset
	}
	first := p.openTxns[0].FirstOffset
	if bugLSOPassesOpenTxn { // planted-bug hook (-tags simbugs): the newest open transaction, not the oldest
		first = p.openTxns[len(p.openTxns)-1].FirstOffset
	}
	return max(first, p.logStartOffset)
}

// ReadLimit is the offset a reader at iso reads below: the last stable
// offset for ReadCommitted, the high-water mark otherwise.
func (p *Partition) ReadLimit(iso Isolation) int64 {
	if iso == ReadCommitted {
		return p.LastStableOffset()
	}
	return p.nextOffset
}

// AppendReadable is AppendLocations for a reader at iso: the same range
// check (an offset in [log start, high-water mark] is valid), but only
// batches below ReadLimit(iso); a ReadCommitted read at or past the last
// stable offset gets no batches and no error, as in Kafka. The limit is
// always a batch boundary, so no returned batch crosses it.
func (p *Partition) AppendReadable(dst []BatchLocation, offset int64, maxBatches int, iso Isolation) ([]BatchLocation, error) {
	limit := p.ReadLimit(iso)
	if offset >= limit && offset >= p.logStartOffset && offset <= p.nextOffset {
		return dst, nil
	}
	start := len(dst)
	dst, err := p.AppendLocations(dst, offset, maxBatches)
	if err != nil {
		return dst, err
	}
	n := start
	for n < len(dst) && dst[n].BaseOffset < limit {
		n++
	}
	return dst[:n], nil
}

// AppendAbortedTxns appends to dst the aborted transactions that overlap
// the offsets [from, to): first offset below to and abort marker at or
// after from, in marker order. It is the AbortedTransactions list of a
// Kafka fetch that returned the batches of [from, to). The scan stops once
// no later entry can start below to (abortedSpanMax bounds the spans).
func (p *Partition) AppendAbortedTxns(dst []AbortedTxn, from, to int64) []AbortedTxn {
	live := p.aborted[p.abortedHead:]
	i := sort.Search(len(live), func(i int) bool { return live[i].LastOffset >= from })
	for ; i < len(live) && live[i].LastOffset-p.abortedSpanMax < to; i++ {
		if live[i].FirstOffset < to {
			dst = append(dst, live[i])
		}
	}
	return dst
}

// AppendOpenTxns appends the open transactions that have written here, in
// first-offset order (the first one holds the last stable offset back):
// for DescribeProducers, transaction metrics and LSO lag.
func (p *Partition) AppendOpenTxns(dst []OpenTxn) []OpenTxn {
	return append(dst, p.openTxns...)
}

// TxnOpen reports whether producerID has a transaction open here and its
// epoch: a leader that finds one open at the epoch of a transactional
// write need not propose another TXN_BEGIN.
func (p *Partition) TxnOpen(producerID int64) (epoch int32, open bool) {
	rec := p.txns[producerID]
	if rec == nil || !rec.open {
		return 0, false
	}
	return rec.epoch, true
}

// txnsToProto encodes the transactional records sorted by id, and the
// aborted index.
func (p *Partition) txnsToProto(snap *strandpb.PartitionSnapshot) {
	ids := make([]int64, 0, len(p.txns))
	for id := range p.txns {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		rec := p.txns[id]
		snap.TxnProducers = append(snap.TxnProducers, &strandpb.TxnPartitionProducer{
			ProducerId: id, ProducerEpoch: rec.epoch, CoordinatorEpoch: rec.coordinatorEpoch,
			Open: rec.open, FirstOffset: rec.firstOffset, LastAppendTimeMs: rec.lastAppendMs,
		})
	}
	for _, a := range p.aborted[p.abortedHead:] {
		snap.AbortedTxns = append(snap.AbortedTxns, &strandpb.AbortedTxn{
			ProducerId: a.ProducerID, FirstOffset: a.FirstOffset, LastOffset: a.LastOffset,
		})
	}
}

// txnsFromProto restores the transactional state of snap into p, which
// has its producers already; check verifies it afterwards.
func (p *Partition) txnsFromProto(snap *strandpb.PartitionSnapshot) error {
	lastID := int64(-1)
	for _, t := range snap.GetTxnProducers() {
		id := t.GetProducerId()
		if id <= lastID {
			return fmt.Errorf("transactional producer %d after %d: not sorted or repeated", id, lastID)
		}
		lastID = id
		rec := &txnProducer{epoch: t.GetProducerEpoch(), coordinatorEpoch: t.GetCoordinatorEpoch(),
			open: t.GetOpen(), firstOffset: t.GetFirstOffset(), lastAppendMs: t.GetLastAppendTimeMs()}
		p.txns[id] = rec
		if rec.open && rec.firstOffset >= 0 {
			p.openTxns = append(p.openTxns, OpenTxn{ProducerID: id, Epoch: rec.epoch, FirstOffset: rec.firstOffset})
		}
	}
	slices.SortFunc(p.openTxns, func(a, b OpenTxn) int { return cmpInt64(a.FirstOffset, b.FirstOffset) })
	aborted := snap.GetAbortedTxns()
	if bugDropAbortOnRestore && len(aborted) > 0 { // planted-bug hook (-tags simbugs): the newest abort is lost
		aborted = aborted[:len(aborted)-1]
	}
	for _, a := range aborted {
		entry := AbortedTxn{ProducerID: a.GetProducerId(), FirstOffset: a.GetFirstOffset(), LastOffset: a.GetLastOffset()}
		p.aborted = append(p.aborted, entry)
		p.abortedSpanMax = max(p.abortedSpanMax, entry.LastOffset-entry.FirstOffset)
	}
	return nil
}

// cmpInt64 orders two int64s.
func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkTxns verifies the transactional state: sane records, the open list
// exactly the open records that wrote, in first-offset order, and the
// aborted index in strictly increasing marker order below the high-water
// mark.
func (p *Partition) checkTxns() error {
	wrote := 0
	for id, rec := range p.txns {
		if id < 0 || rec == nil || rec.epoch < 0 {
			return fmt.Errorf("transactional producer %d: bad record %+v", id, rec)
		}
		if rec.firstOffset < -1 || rec.firstOffset >= p.nextOffset || (!rec.open && rec.firstOffset != -1) {
			return fmt.Errorf("transactional producer %d: open %v at first offset %d (high-water mark %d)",
				id, rec.open, rec.firstOffset, p.nextOffset)
		}
		if rec.open && rec.firstOffset >= 0 {
			wrote++
		}
	}
	if wrote != len(p.openTxns) {
		return fmt.Errorf("%d open transactions wrote, %d listed", wrote, len(p.openTxns))
	}
	for i, o := range p.openTxns {
		rec := p.txns[o.ProducerID]
		if rec == nil || !rec.open || rec.firstOffset != o.FirstOffset || rec.epoch != o.Epoch ||
			(i > 0 && o.FirstOffset <= p.openTxns[i-1].FirstOffset) {
			return fmt.Errorf("open transaction %d %+v does not match its record or order", i, o)
		}
	}
	return p.checkAborted()
}

// checkAborted verifies the aborted index.
func (p *Partition) checkAborted() error {
	if p.abortedHead < 0 || p.abortedHead > len(p.aborted) {
		return fmt.Errorf("aborted index head %d of %d", p.abortedHead, len(p.aborted))
	}
	live := p.aborted[p.abortedHead:]
	for i, a := range live {
		if a.ProducerID < 0 || a.FirstOffset < 0 || a.FirstOffset >= a.LastOffset || a.LastOffset >= p.nextOffset ||
			(i > 0 && a.LastOffset <= live[i-1].LastOffset) || a.LastOffset-a.FirstOffset > p.abortedSpanMax {
			return fmt.Errorf("aborted transaction %d %+v out of order or range (high-water mark %d)", i, a, p.nextOffset)
		}
	}
	return nil
}
