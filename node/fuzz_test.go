package node

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

var writeFuzzSeeds = flag.Bool("write-fuzz-seeds", false, "rewrite testdata/fuzz/FuzzReceive from receiveSeeds")

// fuzzSeed is the first cluster seed under which node 1 leads both
// groups; 0 until fuzzCore found it.
var fuzzSeed uint64

// fuzzCore is node 1 of a three-node cluster in which it leads both the
// metadata group and partition orders/0 (topic orders, id 1, on all three
// nodes), so fuzzed frames reach a leader's paths of both kinds of group:
// forwarded proposals and reads, heartbeats and appends. The cluster is
// then left alone: only the fuzzed frames reach node 1. The metadata
// places orders/0 on [2 1 3], and a new partition's preferred replica
// campaigns at once (elect.go): node 2's frames are dropped while the
// partition elects, so the first election is won, in term 2, by whichever
// of nodes 1 and 3 times out first.
func fuzzCore(t testing.TB) *Core {
	for seed := max(fuzzSeed, 1); seed <= 64; seed++ {
		c := newCluster(t, seed, 3, nil, nil)
		c.waitRegistered(3)
		if c.metaLeaderOf() != 1 {
			continue
		}
		c.drop = func(e envelope) bool { return e.from == 2 }
		c.createSpecs(replicated(3, "orders", 1))
		lead := c.leader(tp0)
		c.drop = nil
		if lead == 1 && c.metaLeaderOf() == 1 {
			fuzzSeed = seed
			c.settle()
			c.queue = nil
			return c.cores[1]
		}
	}
	t.Fatal("no cluster seed up to 64 makes node 1 lead both groups")
	return nil
}

// frameOf marshals raft messages for partition orders/0 (topic id 1) from
// node from.
func frameOf(from NodeID, msgs ...*raftpb.Message) []byte {
	f := &strandpb.RaftFrame{FromNode: uint64(from)}
	for _, m := range msgs {
		data, err := proto.Marshal(m)
		if err != nil {
			panic(err)
		}
		f.Messages = append(f.Messages, &strandpb.RaftMessage{Topic: "orders@1", Partition: 0, Message: data})
	}
	data, err := proto.Marshal(f)
	if err != nil {
		panic(err)
	}
	return data
}

// receiveSeeds are frames a peer could send, valid and damaged: for the
// partition, then for the metadata group (receiveMetaSeeds).
func receiveSeeds() [][]byte {
	entry := &raftpb.Entry{Term: new(uint64(2)), Index: new(uint64(4)), Data: []byte("not an entry")}
	cc, err := proto.Marshal(&raftpb.ConfChange{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: new(uint64(1))})
	if err != nil {
		panic(err)
	}
	removal := &raftpb.Entry{Type: raftpb.EntryConfChange.Enum(), Term: new(uint64(2)), Index: new(uint64(4)), Data: cc}
	seeds := [][]byte{
		{},
		[]byte("garbage"),
		frameOf(2, &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: new(uint64(1)), From: new(uint64(2)), Term: new(uint64(2)), Commit: new(uint64(3))}),
		frameOf(2, &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: new(uint64(1)), From: new(uint64(2)), Term: new(uint64(2)), Commit: new(uint64(99))}),
		frameOf(3, &raftpb.Message{Type: raftpb.MsgApp.Enum(), To: new(uint64(1)), From: new(uint64(3)), Term: new(uint64(2)),
			LogTerm: new(uint64(1)), Index: new(uint64(3)), Commit: new(uint64(4)), Entries: []*raftpb.Entry{entry}}),
		frameOf(2, &raftpb.Message{Type: raftpb.MsgPreVote.Enum(), To: new(uint64(1)), From: new(uint64(2)), Term: new(uint64(5)),
			LogTerm: new(uint64(1)), Index: new(uint64(3))}),
		frameOf(2, &raftpb.Message{Type: raftpb.MsgVote.Enum(), To: new(uint64(1)), From: new(uint64(2)), Term: new(uint64(5)),
			LogTerm: new(uint64(1)), Index: new(uint64(3))}),
		frameOf(2, &raftpb.Message{Type: raftpb.MsgAppResp.Enum(), To: new(uint64(1)), From: new(uint64(2)), Term: new(uint64(1)), Index: new(uint64(3))}),
		frameOf(2, &raftpb.Message{Type: raftpb.MsgSnap.Enum(), To: new(uint64(1)), From: new(uint64(2)), Term: new(uint64(3))}),
		frameOf(3, &raftpb.Message{Type: raftpb.MsgApp.Enum(), To: new(uint64(1)), From: new(uint64(3)), Term: new(uint64(2)),
			LogTerm: new(uint64(1)), Index: new(uint64(3)), Commit: new(uint64(4)), Entries: []*raftpb.Entry{removal}}),
	}
	return append(seeds, receiveMetaSeeds()...)
}

// FuzzReceive feeds arbitrary bytes to Receive (the one decoder of raft
// frames, for partitions and the metadata group alike) of a node leading
// both kinds of group, and runs the Ready cycle: whatever arrives, the node
// neither panics nor fails to process.
func FuzzReceive(f *testing.F) {
	for _, seed := range receiveSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		core := fuzzCore(t)
		core.Receive(frame)
		if err := core.Process(); err != nil {
			t.Fatalf("process after receive: %v", err)
		}
		core.Tick()
		if err := core.Process(); err != nil {
			t.Fatalf("process after tick: %v", err)
		}
	})
}

// The checked-in corpus matches receiveSeeds (rewrite with
// -write-fuzz-seeds), and every seed is received without harm.
func TestReceiveSeedsCheckedIn(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReceive")
	for i, seed := range receiveSeeds() {
		name := filepath.Join(dir, fmt.Sprintf("seed%02d", i))
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", seed)
		if *writeFuzzSeeds {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(name)
		if err != nil || string(got) != content {
			t.Fatalf("%s is missing or stale: run go test ./node -run TestReceiveSeedsCheckedIn -write-fuzz-seeds", name)
		}
	}
	core := fuzzCore(t)
	before := core.Stats()
	for _, seed := range receiveSeeds() {
		core.Receive(seed)
		if err := core.Process(); err != nil {
			t.Fatal(err)
		}
	}
	st := core.Stats()
	if st.FramesDropped == before.FramesDropped || st.MessagesStepped == before.MessagesStepped {
		t.Fatalf("stats %+v: want dropped frames and stepped messages", st)
	}
	// The metadata seeds alone drop 5 messages (empty proposal, conf
	// change, empty read, read response without context, foreign sender).
	if dropped := st.MessagesDropped - before.MessagesDropped; dropped < 5 {
		t.Fatalf("dropped %d messages, want at least 5: %+v", dropped, st)
	}
	if unknown := st.MessagesUnknownGroup - before.MessagesUnknownGroup; unknown != 4 {
		t.Fatalf("%d messages to unknown groups, want 4 (wrong topic incarnations)", unknown)
	}
}

// metaFrameOf marshals raft messages for the metadata group from node from.
func metaFrameOf(from NodeID, msgs ...*raftpb.Message) []byte {
	f := &strandpb.RaftFrame{FromNode: uint64(from)}
	for _, m := range msgs {
		data, err := proto.Marshal(m)
		if err != nil {
			panic(err)
		}
		f.Messages = append(f.Messages, &strandpb.RaftMessage{Topic: metaTopic, Message: data})
	}
	data, err := proto.Marshal(f)
	if err != nil {
		panic(err)
	}
	return data
}

// receiveMetaSeeds are metadata-group frames a follower could forward,
// valid and damaged (raft itself panics on an empty MsgProp or MsgReadIndex),
// and partition frames naming topics of the wrong incarnation.
func receiveMetaSeeds() [][]byte {
	to, from := new(uint64(1)), new(uint64(2))
	cc, err := proto.Marshal(&raftpb.ConfChange{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: new(uint64(2))})
	if err != nil {
		panic(err)
	}
	wrongTopic := func(topic string) []byte {
		data, _ := proto.Marshal(&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: to, From: from, Term: new(uint64(9))})
		f, _ := proto.Marshal(&strandpb.RaftFrame{FromNode: 2, Messages: []*strandpb.RaftMessage{{Topic: topic, Message: data}}})
		return f
	}
	return [][]byte{
		metaFrameOf(2, &raftpb.Message{Type: raftpb.MsgProp.Enum(), To: to, From: from}),
		metaFrameOf(2, &raftpb.Message{Type: raftpb.MsgProp.Enum(), To: to, From: from, Entries: []*raftpb.Entry{{Data: []byte("not a command")}}}),
		metaFrameOf(2, &raftpb.Message{Type: raftpb.MsgProp.Enum(), To: to, From: from,
			Entries: []*raftpb.Entry{{Type: raftpb.EntryConfChange.Enum(), Data: cc}}}),
		metaFrameOf(2, &raftpb.Message{Type: raftpb.MsgReadIndex.Enum(), To: to, From: from}),
		metaFrameOf(2, &raftpb.Message{Type: raftpb.MsgReadIndex.Enum(), To: to, From: from, Entries: []*raftpb.Entry{{Data: []byte("12345678")}}}),
		metaFrameOf(2, &raftpb.Message{Type: raftpb.MsgReadIndexResp.Enum(), To: to, From: from, Term: new(uint64(2)), Index: new(uint64(1 << 40))}),
		metaFrameOf(2, &raftpb.Message{Type: raftpb.MsgProp.Enum(), To: to, From: new(uint64(4)), Entries: []*raftpb.Entry{{Data: []byte("x")}}}),
		wrongTopic("orders@0"),
		wrongTopic("orders@x"),
		wrongTopic("orders@7"),
		wrongTopic("@metadata@1"),
	}
}
