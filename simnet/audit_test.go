package simnet

import (
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// TestScanMessageReadsWhatRaftMarshals shows the audit's frame scanner
// reads a raft message's type, recipient, term, index and rejection as
// raftpb marshals them, skipping entries without decoding them.
func TestScanMessageReadsWhatRaftMarshals(t *testing.T) {
	m := &raftpb.Message{
		Type: raftpb.MsgAppResp.Enum(), To: new(uint64(3)), From: new(uint64(1)), Term: new(uint64(7)),
		LogTerm: new(uint64(6)), Index: new(uint64(42)), Reject: new(true),
		Entries: []*raftpb.Entry{{Index: new(uint64(41)), Term: new(uint64(6)), Data: []byte("x")}},
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := scanMessage(b)
	want := rawMessage{kind: raftpb.MsgAppResp, to: 3, term: 7, index: 42, logTerm: 6, reject: true}
	if !ok || got != want {
		t.Fatalf("scanMessage = %+v, %v; want %+v", got, ok, want)
	}
	if _, ok := scanMessage([]byte{0x08}); ok {
		t.Fatal("a truncated message scanned")
	}
}

// TestLogDirAndCheckpointLayout shows the simulator's view of node's disk
// layout: raft logs of the metadata group and of a placed partition, and
// the checkpoint file format, round-tripped through a file built as
// node/checkpoint.go builds it.
func TestLogDirAndCheckpointLayout(t *testing.T) {
	d := &durability{logDirs: map[string]map[int32]string{}}
	if got := d.logDir([]byte("@metadata"), 0); got != "meta/log" {
		t.Fatalf("metadata log dir %q", got)
	}
	if got := d.logDir([]byte("sim@1"), 5); got != "p/sim@1/5/log" {
		t.Fatalf("partition log dir %q", got)
	}
	conf, _ := proto.Marshal(&strandpb.RaftFrame{FromNode: 9}) // any bytes of some length
	state := []byte("engine state")
	b := []byte{0x53, 0x43, 0x4b, 0x31, 0, 0, 0, 0} // "SCK1", crc unchecked
	b = append(b, 7, 0, 0, 0, 0, 0, 0, 0)
	b = append(b, byte(len(conf)), 0, 0, 0)
	b = append(b, conf...)
	b = append(b, byte(len(state)), 0, 0, 0, 0, 0, 0, 0)
	b = append(b, state...)
	index, got, indexed, ok := parseCheckpoint(b)
	if !ok || indexed || index != 7 || string(got) != "engine state" {
		t.Fatalf("parseCheckpoint = %d %q %v %v", index, got, indexed, ok)
	}
	if _, _, _, ok := parseCheckpoint(b[:len(b)-1]); ok {
		t.Fatal("a truncated checkpoint parsed")
	}
}
