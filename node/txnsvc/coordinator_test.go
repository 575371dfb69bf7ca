package txnsvc

import (
	"errors"
	"fmt"
	"testing"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/node/groupsvc"
	"github.com/strandlog/strand/proto/strandpb"
)

// memLog is a groupsvc.Log of one record per batch, from offset start.
type memLog struct {
	start  int64
	values [][]byte
	warned []string
}

var errDamaged = errors.New("damaged")

func (l *memLog) LogStartOffset() int64 { return l.start }
func (l *memLog) HighWatermark() int64  { return l.start + int64(len(l.values)) }
func (l *memLog) Read(offset int64, _ int32) ([]groupsvc.Batch, error) {
	var out []groupsvc.Batch
	for off := max(offset, l.start); off < l.HighWatermark(); off++ {
		data, err := recordbatch.Encode(nil, []recordbatch.Record{{Value: l.values[off-l.start]}})
		if err != nil {
			return nil, err
		}
		out = append(out, groupsvc.Batch{BaseOffset: off, Data: data})
	}
	return out, nil
}
func (l *memLog) Damaged(format string, args ...any) error {
	return fmt.Errorf("%w: p/0"+format, append([]any{errDamaged}, args...)...)
}
func (l *memLog) Warn(msg string, _ error) { l.warned = append(l.warned, msg) }

func (l *memLog) append(t *testing.T, cmd *strandpb.TxnCommand) {
	t.Helper()
	v, err := txn.EncodeCommand(cmd)
	if err != nil {
		t.Fatal(err)
	}
	l.values = append(l.values, v)
}

func grantCmd(id uint64, first, count int64) *strandpb.TxnCommand {
	return &strandpb.TxnCommand{RequestId: id, NowMs: 1000, Body: &strandpb.TxnCommand_GrantProducerIds{
		GrantProducerIds: &strandpb.TxnProducerIdBlock{First: first, Count: count}}}
}

func initCmd(id uint64) *strandpb.TxnCommand {
	return &strandpb.TxnCommand{RequestId: id, NowMs: 1000, Body: &strandpb.TxnCommand_InitProducerId{
		InitProducerId: &strandpb.TxnInitProducerId{TransactionalId: "app", TimeoutMs: 60_000, MaxTimeoutMs: 900_000}}}
}

func addOffsetsCmd(id uint64, p txn.Producer) *strandpb.TxnCommand {
	return &strandpb.TxnCommand{RequestId: id, NowMs: 1000, Body: &strandpb.TxnCommand_AddOffsets{AddOffsets: &strandpb.TxnAddOffsets{
		TransactionalId: "app", Producer: &strandpb.TxnProducer{ProducerId: p.ID, Epoch: int32(p.Epoch)}, Group: "g"}}}
}

// TestCatchUpAppliesAndAnswers shows a coordinator built from a Log alone:
// commands apply in log order, a record that is no command is skipped,
// and the wait of a command met is answered with its outcome, WasOpen
// telling whether its id had a transaction open before.
func TestCatchUpAppliesAndAnswers(t *testing.T) {
	log := &memLog{start: 10}
	log.append(t, grantCmd(0, 1000, 10))
	log.values = append(log.values, []byte{0xff, 0xff}) // no command
	log.append(t, initCmd(0))
	co := New(3, 1, log.LogStartOffset(), 0)
	if err := co.CatchUp(log, 1000); err != nil {
		t.Fatal(err)
	}
	d, err := co.State.Describe("app")
	if err != nil {
		t.Fatal(err)
	}
	if co.Next != 13 || co.RestoredFrom != -1 || co.Fresh || co.SinceSnapshot != 2 || len(log.warned) != 1 {
		t.Fatalf("next %d restoredFrom %d fresh %v sinceSnapshot %d warned %v, want 13, -1, false, 2, one warning",
			co.Next, co.RestoredFrom, co.Fresh, co.SinceSnapshot, log.warned)
	}
	log.append(t, addOffsetsCmd(41, d.Producer))
	log.append(t, addOffsetsCmd(42, d.Producer))
	answered := map[uint64]Applied{}
	for _, id := range []uint64{41, 42} {
		co.Wait(id, func(a Applied) { answered[id] = a })
	}
	if err := co.CatchUp(log, 1000); err != nil {
		t.Fatal(err)
	}
	a41, a42 := answered[41], answered[42]
	if len(answered) != 2 || a41.Err != nil || a41.Res.Err != nil || a41.WasOpen || a42.Res.Err != nil || !a42.WasOpen || co.Waiting(41) {
		t.Fatalf("answered %+v, want 41 beginning the transaction and 42 in it, none waiting", answered)
	}
}

// TestCatchUpStartsFromSnapshot shows a fresh coordinator restores the
// newest snapshot whose as_of is in the log and replays from as_of.
func TestCatchUpStartsFromSnapshot(t *testing.T) {
	log := &memLog{}
	log.append(t, grantCmd(0, 1000, 10)) // 0
	s := txn.New()
	s.Apply(grantCmd(0, 5000, 100))                                                                   // a state the replay alone would never reach
	log.append(t, grantCmd(0, 9000, 10))                                                              // 1
	log.append(t, &strandpb.TxnCommand{Body: &strandpb.TxnCommand_Snapshot{Snapshot: s.Snapshot(1)}}) // 2, as of 1
	co := New(1, 1, 0, 0)
	if err := co.CatchUp(log, 1000); err != nil {
		t.Fatal(err)
	}
	if co.RestoredFrom != 2 || co.State.ProducerIDsLeft() != 110 || co.Next != 3 || co.SinceSnapshot != 0 {
		t.Fatalf("restoredFrom %d ids left %d next %d sinceSnapshot %d, want 2, 110, 3, 0",
			co.RestoredFrom, co.State.ProducerIDsLeft(), co.Next, co.SinceSnapshot)
	}
	// A snapshot whose as_of is gone from the log is not used.
	log.start, log.values = 2, log.values[2:]
	co = New(1, 1, 2, 0)
	if err := co.CatchUp(log, 1000); err != nil {
		t.Fatal(err)
	}
	if co.RestoredFrom != -1 || co.State.ProducerIDsLeft() != 0 || co.Next != 3 {
		t.Fatalf("restoredFrom %d ids left %d next %d, want -1, 0, 3", co.RestoredFrom, co.State.ProducerIDsLeft(), co.Next)
	}
}

// TestFailWaitsInIDOrder shows a replaced coordinator answers every wait,
// in request-id order, with the error handed in.
func TestFailWaitsInIDOrder(t *testing.T) {
	co := New(1, 1, 0, 0)
	var order []uint64
	for _, id := range []uint64{9, 3, 5} {
		co.Wait(id, func(a Applied) {
			if !errors.Is(a.Err, errDamaged) {
				t.Errorf("wait %d answered %v", id, a.Err)
			}
			order = append(order, id)
		})
	}
	co.FailWaits(errDamaged)
	if fmt.Sprint(order) != "[3 5 9]" || co.Waiting(3) {
		t.Fatalf("answered %v, want [3 5 9] and none left", order)
	}
}
