package raftlog_test

import (
	"fmt"
	"testing"

	"github.com/strandlog/strand/raftlog"
)

// TestReopenKeepsSyncedState shows entries, hard state and snapshot survive Close and Open, across segment rolls.
func TestReopenKeepsSyncedState(t *testing.T) {
	for _, kind := range diskKinds {
		t.Run(kind.name, func(t *testing.T) {
			disk := kind.make(t)
			opts := raftlog.Options{SegmentBytesMax: 200}
			l := mustOpen(t, disk, opts)
			for i := uint64(1); i <= 30; i++ {
				must(t, l.Append(entriesOf(entry(i, 1+i/10, fmt.Sprintf("data-%d", i)))))
			}
			must(t, l.SetHardState(hardState(3, 2, 25)))
			must(t, l.CreateSnapshot(12, nil, []byte("snap")))
			must(t, l.Sync())
			must(t, l.Close())
			l = mustOpen(t, disk, opts)
			first, _ := l.FirstIndex()
			last, _ := l.LastIndex()
			if first != 13 || last != 30 {
				t.Fatalf("first %d last %d", first, last)
			}
			ents, err := l.Entries(13, 31, 1<<30)
			must(t, err)
			for j, e := range ents {
				i := uint64(13 + j)
				if e.GetIndex() != i || e.GetTerm() != 1+i/10 || string(e.Data) != fmt.Sprintf("data-%d", i) {
					t.Fatalf("entry %d: %v", i, e)
				}
			}
			hs, _, err := l.InitialState()
			must(t, err)
			if hs.GetTerm() != 3 || hs.GetVote() != 2 || hs.GetCommit() != 25 {
				t.Fatalf("hard state %v", hs)
			}
			snap, _ := l.Snapshot()
			if snap.GetMetadata().GetIndex() != 12 || string(snap.Data) != "snap" {
				t.Fatalf("snapshot %v", snap)
			}
			must(t, l.Close())
		})
	}
}
