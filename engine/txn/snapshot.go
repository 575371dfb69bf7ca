package txn

import (
	"crypto/sha256"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// SnapshotVersion is the layout Snapshot writes and Restore reads.
const SnapshotVersion = 1

// Snapshot returns the whole state, every list sorted, so equal states give
// equal snapshots. asOf is recorded for the caller (the log offset below
// which every command is reflected).
func (s *State) Snapshot(asOf int64) *strandpb.TxnSnapshot {
	out := &strandpb.TxnSnapshot{Version: SnapshotVersion, AsOf: asOf, GrantedEnd: s.grantedEnd}
	for _, r := range s.pool {
		out.ProducerIds = append(out.ProducerIds, &strandpb.TxnProducerIdBlock{First: r.first, Count: r.end - r.first})
	}
	for _, id := range s.names {
		t := s.ids[id]
		out.Ids = append(out.Ids, &strandpb.TxnIdSnapshot{
			TransactionalId: t.id, State: int32(t.state), Producer: producerToWire(t.producer),
			BeforeInit: producerToWire(t.beforeInit), NextProducerId: t.nextProducerID, TimeoutMs: t.timeoutMs,
			TxnStartMs: t.txnStartMs, LastUpdateMs: t.lastUpdateMs, Partitions: partitionsToWire(t.partitions),
			Groups: slices.Clone(t.groups), PendingPartitions: partitionsToWire(t.pendingParts),
			PendingGroups: slices.Clone(t.pendingGroups), EndedBy: producerToWire(t.endedBy),
		})
	}
	return out
}

// Restore rebuilds the state a Snapshot describes. A snapshot that is not
// one (another version, unsorted, inconsistent) is an ErrInvalid error: the
// caller replays the log instead.
func Restore(snap *strandpb.TxnSnapshot) (*State, error) {
	if v := snap.GetVersion(); v != SnapshotVersion {
		return nil, fmt.Errorf("%w: snapshot version %d, want %d", ErrInvalid, v, SnapshotVersion)
	}
	s := New()
	s.grantedEnd = snap.GetGrantedEnd()
	for _, b := range snap.GetProducerIds() {
		if b.GetCount() < 1 || b.GetFirst() > 1<<62 || b.GetCount() > ProducerIDBlockMax {
			return nil, fmt.Errorf("%w: snapshot producer id block %d+%d", ErrInvalid, b.GetFirst(), b.GetCount())
		}
		s.pool = append(s.pool, idRange{first: b.GetFirst(), end: b.GetFirst() + b.GetCount()})
	}
	for _, ts := range snap.GetIds() {
		if n := len(s.names); n > 0 && s.names[n-1] >= ts.GetTransactionalId() {
			return nil, fmt.Errorf("%w: snapshot id %q out of order", ErrInvalid, ts.GetTransactionalId())
		}
		t, err := idFromSnapshot(ts)
		if err != nil {
			return nil, err
		}
		s.ids[t.id] = t
		s.names = append(s.names, t.id)
	}
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("%w: snapshot: %v", ErrInvalid, err)
	}
	return s, nil
}

// idFromSnapshot reads one id's record; Check judges its consistency.
func idFromSnapshot(ts *strandpb.TxnIdSnapshot) (*txnID, error) {
	t := &txnID{id: ts.GetTransactionalId(), state: TxnState(ts.GetState()), nextProducerID: ts.GetNextProducerId(),
		timeoutMs: ts.GetTimeoutMs(), txnStartMs: ts.GetTxnStartMs(), lastUpdateMs: ts.GetLastUpdateMs(),
		groups: slices.Clone(ts.GetGroups()), pendingGroups: slices.Clone(ts.GetPendingGroups())}
	var err error
	for _, f := range []struct {
		in  *strandpb.TxnProducer
		out *Producer
	}{{ts.GetProducer(), &t.producer}, {ts.GetBeforeInit(), &t.beforeInit}, {ts.GetEndedBy(), &t.endedBy}} {
		if *f.out, err = producerFromWire(f.in); err != nil {
			return nil, err
		}
	}
	if t.partitions, err = partitionsFromWire(ts.GetPartitions()); err != nil {
		return nil, err
	}
	if t.pendingParts, err = partitionsFromWire(ts.GetPendingPartitions()); err != nil {
		return nil, err
	}
	return t, nil
}

// Digest is a hash of the whole state: replicas that applied the same
// commands have the same digest.
func (s *State) Digest() [32]byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(s.Snapshot(0))
	if err != nil {
		panic(fmt.Sprintf("txn: marshal snapshot: %v", err))
	}
	return sha256.Sum256(b)
}
