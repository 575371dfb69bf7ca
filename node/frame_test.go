package node

import (
	"bytes"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/strandlog/strand/proto/strandpb"
)

// raftMessageGen draws raft messages of the shapes the core sends.
func raftMessageGen() *rapid.Generator[*raftpb.Message] {
	return rapid.Custom(func(t *rapid.T) *raftpb.Message {
		m := &raftpb.Message{
			Type:   raftpb.MessageType(rapid.Int32Range(0, 20).Draw(t, "type")).Enum(),
			To:     new(rapid.Uint64Range(0, 5).Draw(t, "to")),
			From:   new(rapid.Uint64Range(0, 5).Draw(t, "from")),
			Term:   new(rapid.Uint64().Draw(t, "term")),
			Index:  new(rapid.Uint64().Draw(t, "index")),
			Commit: new(rapid.Uint64().Draw(t, "commit")),
		}
		for i := range rapid.IntRange(0, 3).Draw(t, "entries") {
			m.Entries = append(m.Entries, &raftpb.Entry{
				Term: new(uint64(i + 1)), Index: new(rapid.Uint64().Draw(t, "eindex")),
				Type: raftpb.EntryNormal.Enum(), Data: rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "data")})
		}
		if rapid.Bool().Draw(t, "empty") {
			return &raftpb.Message{}
		}
		return m
	})
}

// TestRaftFrameCodecMatchesProto shows the hand-built frame bytes equal
// proto.Marshal's of the same RaftFrame, and that parseRaftFrame accepts
// exactly what proto.Unmarshal accepts (valid frames and mutated ones),
// decoding the same sender and messages.
func TestRaftFrameCodecMatchesProto(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		from := NodeID(rapid.Uint64Range(1, 1<<40).Draw(t, "from"))
		want := &strandpb.RaftFrame{FromNode: uint64(from)}
		var fms []raftFrameMessage
		for range rapid.IntRange(1, 4).Draw(t, "messages") {
			topic := rapid.SampledFrom([]string{"", "orders", "t@7", metaTopic}).Draw(t, "topic")
			part := rapid.SampledFrom([]int32{0, 1, 300, -1, 1 << 30}).Draw(t, "partition")
			m := raftMessageGen().Draw(t, "message")
			data, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			want.Messages = append(want.Messages, &strandpb.RaftMessage{Topic: topic, Partition: part, Message: data})
			fms = append(fms, sizeRaftMessage(topic, part, m))
		}
		got := encodeRaftFrame(from, fms)
		wantBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, wantBytes) {
			t.Fatalf("frame bytes differ:\n got %x\nwant %x", got, wantBytes)
		}
		frame := got
		if rapid.Bool().Draw(t, "mutate") {
			frame = append([]byte(nil), got...)
			for range rapid.IntRange(1, 4).Draw(t, "mutations") {
				switch op := rapid.IntRange(0, 2).Draw(t, "op"); {
				case op == 0 && len(frame) > 0:
					frame[rapid.IntRange(0, len(frame)-1).Draw(t, "at")] = rapid.Byte().Draw(t, "b")
				case op == 1 && len(frame) > 0:
					frame = frame[:rapid.IntRange(0, len(frame)-1).Draw(t, "cut")]
				default:
					frame = append(frame, rapid.SliceOfN(rapid.Byte(), 1, 8).Draw(t, "tail")...)
				}
			}
		}
		checkParseMatchesProto(t, frame)
	})
}

// checkParseMatchesProto fails t unless parseRaftFrame and proto.Unmarshal
// agree on frame.
func checkParseMatchesProto(t *rapid.T, frame []byte) {
	var pf strandpb.RaftFrame
	perr := proto.Unmarshal(frame, &pf)
	from, msgs, ok := parseRaftFrame(frame, nil, nil)
	if ok != (perr == nil) {
		t.Fatalf("parse ok=%v, proto.Unmarshal err=%v, frame %x", ok, perr, frame)
	}
	if !ok {
		return
	}
	if from != pf.GetFromNode() || len(msgs) != len(pf.GetMessages()) {
		t.Fatalf("from %d/%d, %d/%d messages", from, pf.GetFromNode(), len(msgs), len(pf.GetMessages()))
	}
	for i, rm := range pf.GetMessages() {
		if string(msgs[i].topic) != rm.GetTopic() || msgs[i].partition != rm.GetPartition() || !bytes.Equal(msgs[i].message, rm.GetMessage()) {
			t.Fatalf("message %d differs", i)
		}
	}
}

// TestParseRaftFrameMatchesProtoOnArbitraryBytes shows parseRaftFrame and
// proto.Unmarshal agree on arbitrary bytes.
func TestParseRaftFrameMatchesProtoOnArbitraryBytes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		checkParseMatchesProto(t, rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "frame"))
	})
}
