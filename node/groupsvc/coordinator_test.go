package groupsvc

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine/groups"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// memLog is a Log of one record per batch, from offset start.
type memLog struct {
	start  int64
	values [][]byte
	warned []string
}

var errDamaged = errors.New("damaged")

func (l *memLog) LogStartOffset() int64 { return l.start }
func (l *memLog) HighWatermark() int64  { return l.start + int64(len(l.values)) }
func (l *memLog) Read(offset int64, _ int32) ([]Batch, error) {
	var out []Batch
	for off := max(offset, l.start); off < l.HighWatermark(); off++ {
		data, err := recordbatch.Encode(nil, []recordbatch.Record{{Value: l.values[off-l.start]}})
		if err != nil {
			return nil, err
		}
		out = append(out, Batch{BaseOffset: off, Data: data})
	}
	return out, nil
}
func (l *memLog) Damaged(format string, args ...any) error {
	return fmt.Errorf("%w: p/0"+format, append([]any{errDamaged}, args...)...)
}
func (l *memLog) Warn(msg string, _ error) { l.warned = append(l.warned, msg) }

func (l *memLog) append(t *testing.T, cmd *strandpb.GroupCommand) {
	t.Helper()
	v, err := proto.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	l.values = append(l.values, v)
}

func commitCmd(id uint64, offset int64) *strandpb.GroupCommand {
	return &strandpb.GroupCommand{RequestId: id, NowMs: 1000, Body: &strandpb.GroupCommand_Commit{Commit: &strandpb.OffsetCommitRequest{
		Group: "g", MemberEpoch: -1, Offsets: []*strandpb.OffsetCommitPartition{{Topic: "t", Partition: 0, Offset: offset}}}}}
}

func committed(co *Coordinator) int64 {
	got := co.State.Fetch("g", []groups.TopicPartition{{Topic: "t", Partition: 0}})
	if len(got) != 1 {
		return -1
	}
	return got[0].Offset
}

// TestCatchUpAppliesAndAnswers shows a coordinator built from a Log alone:
// commands apply in log order, a record that is no command is skipped,
// and the wait of a command met is answered with its outcome.
func TestCatchUpAppliesAndAnswers(t *testing.T) {
	log := &memLog{start: 10}
	log.append(t, commitCmd(0, 5))
	log.values = append(log.values, []byte{0xff, 0xff}) // no command
	log.append(t, commitCmd(42, 7))
	co := New(3, 1, log.LogStartOffset())
	var answered *Applied
	co.Wait(42, func(a Applied) { answered = &a })
	if err := co.CatchUp(log, 1000); err != nil {
		t.Fatal(err)
	}
	if co.Next != 13 || committed(co) != 7 || co.RestoredFrom != -1 || co.Fresh {
		t.Fatalf("next %d committed %d restoredFrom %d fresh %v, want 13, 7, -1, false", co.Next, committed(co), co.RestoredFrom, co.Fresh)
	}
	if answered == nil || answered.Err != nil || co.Waiting(42) {
		t.Fatalf("wait of 42: answered %v, still waiting %v", answered, co.Waiting(42))
	}
	if len(log.warned) != 1 {
		t.Fatalf("warned %v, want the record that is no command", log.warned)
	}
}

// TestCatchUpStartsFromSnapshot shows a fresh coordinator restores the
// newest snapshot whose as_of is in the log and replays from as_of.
func TestCatchUpStartsFromSnapshot(t *testing.T) {
	log := &memLog{}
	log.append(t, commitCmd(0, 1)) // 0
	s := groups.New()
	Apply(s, commitCmd(0, 99))                                                                            // a state the replay alone would never reach
	log.append(t, commitCmd(0, 2))                                                                        // 1
	log.append(t, &strandpb.GroupCommand{Body: &strandpb.GroupCommand_Snapshot{Snapshot: s.Snapshot(2)}}) // 2, as of 2
	co := New(1, 1, 0)
	if err := co.CatchUp(log, 1000); err != nil {
		t.Fatal(err)
	}
	if co.RestoredFrom != 2 || committed(co) != 99 || co.Next != 3 {
		t.Fatalf("restoredFrom %d committed %d next %d, want 2, 99, 3", co.RestoredFrom, committed(co), co.Next)
	}
}

// TestFailWaitsInIDOrder shows a replaced coordinator answers every wait,
// in request-id order, with the error handed in.
func TestFailWaitsInIDOrder(t *testing.T) {
	co := New(1, 1, 0)
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
