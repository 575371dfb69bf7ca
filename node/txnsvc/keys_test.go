package txnsvc

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/node/groupsvc"
	"github.com/strandlog/strand/proto/strandpb"
)

// keyedLog is a groupsvc.Log of keyed records, one a batch, with the gaps
// a compaction leaves.
type keyedLog struct {
	recs []keyedRec
	hw   int64
}

type keyedRec struct {
	off int64
	rec recordbatch.Record
}

func (l *keyedLog) LogStartOffset() int64 { return 0 }
func (l *keyedLog) HighWatermark() int64  { return l.hw }
func (l *keyedLog) Read(offset int64, _ int32) ([]groupsvc.Batch, error) {
	var out []groupsvc.Batch
	for _, r := range l.recs {
		if r.off < offset {
			continue
		}
		data, err := recordbatch.Encode(nil, []recordbatch.Record{r.rec})
		if err != nil {
			return nil, err
		}
		out = append(out, groupsvc.Batch{BaseOffset: r.off, Data: data})
	}
	return out, nil
}
func (l *keyedLog) Damaged(format string, args ...any) error {
	return fmt.Errorf("%w: p/0"+format, append([]any{errDamaged}, args...)...)
}
func (l *keyedLog) Warn(string, error) {}

// compact keeps each key's latest record, drops tombstones, and keeps the
// last record (the active segment).
func (l *keyedLog) compact() {
	latest := map[string]int64{}
	for _, r := range l.recs {
		latest[string(r.rec.Key)] = r.off
	}
	var kept []keyedRec
	for _, r := range l.recs {
		if r.off == l.hw-1 || (r.rec.Value != nil && latest[string(r.rec.Key)] == r.off) {
			kept = append(kept, r)
		}
	}
	l.recs = kept
}

// TestCompactedTransactionLogRestores shows the transaction coordinator's
// log compacts as the group coordinator's: after the latest record per
// key survives, a fresh coordinator has the writer's state, producer
// epochs (the fencing) included, and the log holds about one snapshot
// interval of commands.
func TestCompactedTransactionLogRestores(t *testing.T) {
	log := &keyedLog{}
	co := New(4, 1, 0, 0)
	var id uint64
	propose := func(cmd *strandpb.TxnCommand) {
		id++
		cmd.RequestId, cmd.NowMs = id, 1000
		v, err := txn.EncodeCommand(cmd)
		if err != nil {
			t.Fatal(err)
		}
		co.Wait(id, func(Applied) {})
		for _, r := range co.Records(cmd, v, 1000) {
			log.recs = append(log.recs, keyedRec{off: log.hw, rec: r})
			log.hw++
		}
		if err := co.CatchUp(log, 10); err != nil {
			t.Fatal(err)
		}
	}
	propose(grantCmd(0, 1, 1_000_000))
	for i := range 500 {
		propose(&strandpb.TxnCommand{Body: &strandpb.TxnCommand_InitProducerId{InitProducerId: &strandpb.TxnInitProducerId{
			TransactionalId: fmt.Sprintf("app%d", i%7), TimeoutMs: 60_000, MaxTimeoutMs: 900_000}}})
		if co.SnapshotDue(10) {
			propose(&strandpb.TxnCommand{Body: &strandpb.TxnCommand_Snapshot{Snapshot: co.State.Snapshot(co.Next)}})
		}
	}
	before := len(log.recs)
	log.compact()
	if len(log.recs) > 25 {
		t.Fatalf("%d records before compaction, %d after: want at most two intervals and a snapshot", before, len(log.recs))
	}
	restored := New(5, 1, 0, 0)
	if err := restored.CatchUp(log, 10); err != nil {
		t.Fatal(err)
	}
	if got, want := restored.State.Snapshot(0), co.State.Snapshot(0); !proto.Equal(got, want) {
		t.Fatalf("restored from the compacted log:\n got %v\nwant %v", got, want)
	}
}
