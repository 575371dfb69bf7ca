package raftlog_test

import (
	"io"
	"log"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// runReady drives one node's Ready cycles until none is left, persisting
// before advancing, and returns the normal entries it applied.
func runReady(t *testing.T, rn *raft.RawNode, l *raftlog.Log) []string {
	var applied []string
	for k := 0; k < 100 && rn.HasReady(); k++ {
		rd := rn.Ready()
		must(t, l.Append(rd.Entries))
		if !raft.IsEmptyHardState(rd.HardState) {
			must(t, l.SetHardState(rd.HardState))
		}
		must(t, l.Sync())
		for _, e := range rd.CommittedEntries {
			switch e.GetType() {
			case raftpb.EntryType_EntryConfChange:
				cc := &raftpb.ConfChange{}
				must(t, proto.Unmarshal(e.GetData(), cc))
				rn.ApplyConfChange(cc)
			case raftpb.EntryType_EntryNormal:
				if len(e.GetData()) > 0 {
					applied = append(applied, string(e.GetData()))
				}
			}
		}
		rn.Advance(rd)
	}
	return applied
}

func newRawNode(t *testing.T, l *raftlog.Log, applied uint64) *raft.RawNode {
	rn, err := raft.NewRawNode(&raft.Config{
		ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: l, Applied: applied,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 64,
		Logger: &raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)},
	})
	must(t, err)
	return rn
}

// TestDrivesRaft shows a single-node etcd raft group runs on a Log: it bootstraps, elects itself, commits proposals, and after a crash restarts from the log with its entries and hard state.
func TestDrivesRaft(t *testing.T) {
	disk := memdisk.New()
	l := mustOpen(t, disk, raftlog.Options{SegmentBytesMax: 512})
	rn := newRawNode(t, l, 0)
	must(t, rn.Bootstrap([]raft.Peer{{ID: 1}}))
	runReady(t, rn, l)
	must(t, rn.Campaign())
	runReady(t, rn, l)
	var applied []string
	for _, p := range []string{"a", "bb", "ccc", "dddd"} {
		must(t, rn.Propose([]byte(p)))
		applied = append(applied, runReady(t, rn, l)...)
	}
	if len(applied) != 4 || applied[3] != "dddd" {
		t.Fatalf("applied %q", applied)
	}
	l.Close()
	disk.Crash(nil)
	l = mustOpen(t, disk, raftlog.Options{SegmentBytesMax: 512})
	hs, _, _ := l.InitialState()
	last, _ := l.LastIndex()
	if hs.GetCommit() != last || hs.GetTerm() != 2 || hs.GetVote() != 1 {
		t.Fatalf("after crash hard state %v, last index %d", hs, last)
	}
	rn = newRawNode(t, l, 0)
	replayed := runReady(t, rn, l)
	if len(replayed) != 4 || replayed[0] != "a" {
		t.Fatalf("replayed after restart %q", replayed)
	}
	must(t, rn.Campaign())
	runReady(t, rn, l)
	must(t, rn.Propose([]byte("after restart")))
	if got := runReady(t, rn, l); len(got) != 1 || got[0] != "after restart" {
		t.Fatalf("applied after restart %q", got)
	}
}
