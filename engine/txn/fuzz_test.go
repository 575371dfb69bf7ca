package txn

import (
	"encoding/binary"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// fuzzSeedCommands are valid commands, encoded, for the corpora.
func fuzzSeedCommands() [][]byte {
	p := &strandpb.TxnProducer{ProducerId: 1}
	cmds := []*strandpb.TxnCommand{
		{Body: &strandpb.TxnCommand_GrantProducerIds{GrantProducerIds: &strandpb.TxnProducerIdBlock{First: 1, Count: 3}}},
		{Body: &strandpb.TxnCommand_InitProducerId{InitProducerId: &strandpb.TxnInitProducerId{TransactionalId: "a", TimeoutMs: 5, MaxTimeoutMs: 9}}},
		{Body: &strandpb.TxnCommand_AddPartitions{AddPartitions: &strandpb.TxnAddPartitions{TransactionalId: "a", Producer: p,
			Topics: []*strandpb.TxnPartitions{{Topic: "t", Partitions: []int32{0, 1}}}}}},
		{Body: &strandpb.TxnCommand_AddOffsets{AddOffsets: &strandpb.TxnAddOffsets{TransactionalId: "a", Producer: p, Group: "g"}}},
		{Body: &strandpb.TxnCommand_EndTxn{EndTxn: &strandpb.TxnEnd{TransactionalId: "a", Producer: p, Commit: true}}},
		{Body: &strandpb.TxnCommand_MarkerWritten{MarkerWritten: &strandpb.TxnMarkerWritten{TransactionalId: "a",
			Marker: &strandpb.TxnProducer{ProducerId: 1, Epoch: 1}, Topic: "t", Partition: 1}}},
		{NowMs: 100, Body: &strandpb.TxnCommand_TimeoutAbort{TimeoutAbort: &strandpb.TxnTimeoutAbort{TransactionalId: "a", Producer: p}}},
		{NowMs: 100, Body: &strandpb.TxnCommand_AdminAbort{AdminAbort: &strandpb.TxnAdminAbort{TransactionalId: "a"}}},
		{NowMs: 100, Body: &strandpb.TxnCommand_ExpireIdsRetentionMs{ExpireIdsRetentionMs: 10}},
	}
	var out [][]byte
	for _, c := range cmds {
		b, err := EncodeCommand(c)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	return out
}

// FuzzApply decodes arbitrary records as the coordinator's log (each
// prefixed by a 2-byte length) and applies them: nothing panics, Check
// holds after every command, and a snapshot restored at the end equals the
// state (as a new coordinator would read whatever its log holds).
func FuzzApply(f *testing.F) {
	var all []byte
	for _, b := range fuzzSeedCommands() {
		all = binary.BigEndian.AppendUint16(all, uint16(len(b)))
		all = append(all, b...)
		f.Add(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b)
	}
	f.Add(all, []byte(nil))
	f.Fuzz(func(t *testing.T, log, extra []byte) {
		s := New()
		data := append(log, extra...)
		for step := 0; len(data) >= 2 && step < 200; step++ {
			n := int(binary.BigEndian.Uint16(data))
			data = data[2:]
			n = min(n, len(data))
			rec := data[:n]
			data = data[n:]
			cmd, err := DecodeCommand(rec)
			if err != nil {
				continue
			}
			s.Apply(cmd)
			if err := s.Check(); err != nil {
				t.Fatalf("step %d (%v): %v", step, cmd, err)
			}
		}
		r, err := Restore(s.Snapshot(0))
		if err != nil {
			t.Fatalf("restore own snapshot: %v", err)
		}
		if r.Digest() != s.Digest() {
			t.Fatal("restored state differs")
		}
	})
}

// FuzzRestore restores arbitrary snapshot bytes: an error or a state that
// passes Check and snapshots back to an equal state, never a panic.
func FuzzRestore(f *testing.F) {
	s := New()
	for _, b := range fuzzSeedCommands() {
		cmd, _ := DecodeCommand(b)
		s.Apply(cmd)
	}
	good, _ := proto.Marshal(s.Snapshot(7))
	f.Add(good)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var snap strandpb.TxnSnapshot
		if proto.Unmarshal(b, &snap) != nil {
			return
		}
		r, err := Restore(&snap)
		if err != nil {
			return
		}
		if err := r.Check(); err != nil {
			t.Fatalf("restored state fails Check: %v", err)
		}
		again, err := Restore(r.Snapshot(snap.GetAsOf()))
		if err != nil || again.Digest() != r.Digest() {
			t.Fatalf("snapshot of a restored state: %v", err)
		}
	})
}
