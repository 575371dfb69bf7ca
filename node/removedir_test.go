package node

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// TestReplicaRemovalSurvivesKillAnywhere removes a checkpointed replica's
// files (removeReplicaFiles, as a delete or the sweep does) and kills the
// process after every possible number of disk operations: the page cache
// survives, so the removals done so far stay visible, but none is durable
// before its SyncDir. The restarted node removes the rest (the sweep
// redoes removeReplicaFiles), then the power goes. Nothing of the replica
// may come back: in particular no checkpoint header whose index chunks are
// gone (the simulator's seed 155: a kill between removing header 32 and
// syncing its directory; the redo listed the directory empty and skipped
// the SyncDir, removed and synced the chunk, and a power loss then kept
// header 32 naming ordinal 0 of a chunk no longer there).
//
// It also cuts the power instead (no redo) at every step of the removal and
// of a repair's discard (discardReplica): every header left must restore,
// that is name only records still on disk.
func TestReplicaRemovalSurvivesKillAnywhere(t *testing.T) {
	defer func(n int64) { indexChunkRecords = n }(indexChunkRecords)
	indexChunkRecords = 4
	base := checkpointedReplica(t)
	logs := coreLog{h: slog.DiscardHandler}
	const dir = "p/t/0"
	removals := map[string]func(c *Core) error{
		"remove": func(c *Core) error { c.removeReplicaFiles(dir, logs); return nil },
		"discard": func(c *Core) error {
			return c.discardReplica(dir)
		},
	}
	for _, name := range []string{"remove", "discard"} {
		remove := removals[name]
		for cut := 0; ; cut++ {
			if cut > 1000 {
				t.Fatalf("%s: still cutting after %d operations", name, cut)
			}
			disk := &cutDisk{Disk: base.Clone(), budget: cut}
			_ = remove(&Core{cfg: Config{Disk: disk}})
			if disk.budget != 0 {
				if cut < 4 {
					t.Fatalf("%s took %d disk operations: too few to remove a checkpointed replica", name, cut)
				}
				break
			}
			when := fmt.Sprintf("%s: cut after %d ops", name, cut)
			// A power cut there: every header left must restore.
			crashed := &cutDisk{Disk: disk.Clone(), budget: -1}
			crashed.Crash(nil)
			requireHeadersRestore(t, when+", power lost", crashed.Disk, dir)
			if name != "remove" {
				continue
			}
			// A kill there: the restarted node's sweep finishes the
			// removal, then the power goes.
			disk.budget = -1
			_ = remove(&Core{cfg: Config{Disk: disk}})
			disk.Crash(nil)
			var left []string
			for _, f := range disk.Files() {
				if strings.HasPrefix(f, dir+"/") {
					left = append(left, f)
				}
			}
			if len(left) > 0 {
				t.Fatalf("%s, killed, removal finished, power lost: files came back: %v", when, left)
			}
		}
	}
}

// checkpointedReplica returns a disk holding replica p/t/0's raft log and
// checkpoints with index chunks, all durable.
func checkpointedReplica(t *testing.T) *memdisk.Disk {
	t.Helper()
	const entries = powerCutEntries // apply's length
	s := newCheckpointScenario(t, entries)
	base := memdisk.New()
	log, err := raftlog.Open(base, "p/t/0/log", raftlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := &raftpb.HardState{Term: proto.Uint64(1), Vote: proto.Uint64(1), Commit: proto.Uint64(entries)}
	if err := log.Save(s.entries, hs); err != nil {
		t.Fatal(err)
	}
	if err := log.Sync(); err != nil {
		t.Fatal(err)
	}
	_ = log.Close()
	c := &Core{cfg: Config{Disk: base}}
	g, _ := openCheckpointGroup(t, c)
	if _, err := (powerCutCase{every: 7}).apply(c, g, s, 1); err != nil {
		t.Fatal(err)
	}
	_ = g.log.Close()
	base.Crash(nil) // only what is durable
	if names, _ := base.List("p/t/0/checkpoint/index"); len(names) < 2 {
		t.Fatalf("index chunks %v: want several", names)
	}
	return base
}

// requireHeadersRestore fails unless every checkpoint header of the replica
// in dir restores from disk.
func requireHeadersRestore(t *testing.T, when string, disk *memdisk.Disk, dir string) {
	t.Helper()
	names, _ := disk.List(dir + "/checkpoint")
	for _, n := range names {
		data, err := readFile(disk, dir+"/checkpoint/"+n)
		if err != nil {
			t.Fatalf("%s: header %s: %v", when, n, err)
		}
		if _, err := decodeCheckpoint(disk, dir+"/checkpoint/index", data, false); err != nil {
			t.Fatalf("%s: header %s does not restore: %v", when, n, err)
		}
	}
}

// TestClearingCheckpointAfterAKilledClear: a clearing checkpoint write
// (the chunks' numbering unknown) removes the older headers first; a
// process kill after those removals, before their SyncDir, leaves them
// gone from the listing but durable. The restarted replica finds no header,
// replays, and its next checkpoint clears again: it must make the older
// headers' removal durable before it removes the chunks, though it lists
// none, or a power cut there keeps a header naming removed or rewritten
// records.
func TestClearingCheckpointAfterAKilledClear(t *testing.T) {
	defer func(n int64) { indexChunkRecords = n }(indexChunkRecords)
	indexChunkRecords = 4
	s := newCheckpointScenario(t, powerCutEntries)
	killed := checkpointedReplica(t)
	headers, _ := killed.List("p/t/0/checkpoint")
	for _, h := range headers {
		if err := killed.Remove("p/t/0/checkpoint/" + h); err != nil { // unlinked, not synced
			t.Fatal(err)
		}
	}
	for cut := 0; ; cut++ {
		if cut > 1000 {
			t.Fatalf("still cutting after %d operations", cut)
		}
		disk := &cutDisk{Disk: killed.Clone(), budget: -1}
		c := &Core{cfg: Config{Disk: disk}}
		g, applied := openCheckpointGroup(t, c)
		if applied != 0 {
			t.Fatalf("restored at %d from a header the kill unlinked", applied)
		}
		disk.budget = cut
		_, err := (powerCutCase{every: powerCutEntries}).apply(c, g, s, powerCutEntries)
		_ = g.log.Close()
		if err == nil {
			break
		}
		when := fmt.Sprintf("cut after %d ops of the clearing checkpoint", cut)
		disk.Crash(nil)
		disk.budget = -1
		requireHeadersRestore(t, when, disk.Disk, "p/t/0")
		g, applied = openCheckpointGroup(t, c)
		s.check(t, when, g, applied, 0)
		_ = g.log.Close()
	}
}

// TestDroppedWALSurvivesKillAnywhere: a start without Config.WAL replays
// the write-ahead log a run with it left, then removes it (dropWAL). The
// process is killed after every possible number of disk operations of that
// start: the page cache survives, so the segments unlinked so far stay
// gone from the listing, but no unlink is durable before the SyncDir. The
// restarted node runs dropWAL again, then the power goes: no segment of
// the write-ahead log may come back, or the next start replays its old
// records over logs that have moved on since. A kill between the unlinks
// and their SyncDir leaves the directory listing empty: the redo must sync
// it all the same.
func TestDroppedWALSurvivesKillAnywhere(t *testing.T) {
	c := walSingleNode(t, 2, true, nil)
	produceAckedThenClose(t, c, "drop")
	base := c.disks[1].Clone()
	base.Crash(nil) // only what is durable
	if names, _ := base.List(walDir); len(names) == 0 {
		t.Fatal("no write-ahead log segment to drop")
	}
	logs := coreLog{h: slog.DiscardHandler}
	drop := func(disk *cutDisk) error {
		return (&Core{cfg: Config{Disk: disk}, log: logs}).dropWAL()
	}
	for cut := 0; ; cut++ {
		if cut > 1000 {
			t.Fatalf("still cutting after %d operations", cut)
		}
		disk := &cutDisk{Disk: base.Clone(), budget: cut}
		err := drop(disk)
		if disk.budget != 0 {
			if err != nil {
				t.Fatalf("dropWAL without a cut: %v", err)
			}
			break
		}
		when := fmt.Sprintf("cut after %d ops", cut)
		// A kill there: the restarted node drops the log again, then the
		// power goes.
		disk.budget = -1
		if err := drop(disk); err != nil {
			t.Fatalf("%s, killed: the restart's dropWAL: %v", when, err)
		}
		disk.Crash(nil)
		if names, _ := disk.List(walDir); len(names) != 0 {
			t.Fatalf("%s, killed, restarted without the WAL, power lost: write-ahead log segments came back: %v", when, names)
		}
	}
}

// TestSweepMakesTheTombstoneDurableFirst: a replica's removal writes its
// tombstone, then syncs its directory, then removes its files (the
// tombstone durable before any file goes: removeReplica). A process kill
// between the tombstone's write and that SyncDir leaves the tombstone
// listed but not durable. The restarted node's sweep finds it
// (deletedHere) and removes the files; cut after every number of its disk
// operations and the power lost there, a replica whose log lost any file
// must keep its tombstone, or it comes back empty with no record of the
// delete nor of the term it may have voted in (deletedBefore).
func TestSweepMakesTheTombstoneDurableFirst(t *testing.T) {
	defer func(n int64) { indexChunkRecords = n }(indexChunkRecords)
	indexChunkRecords = 4
	base := checkpointedReplica(t)
	const dir = "p/t/0"
	logNames, _ := base.List(dir + "/log")
	if len(logNames) == 0 {
		t.Fatal("no log files")
	}
	// The kill inside markDeleted: the tombstone written and synced, its
	// directory not.
	if err := writeFile(base, dir+"/"+deletedName, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	logs := coreLog{h: slog.DiscardHandler}
	for cut := 0; ; cut++ {
		if cut > 1000 {
			t.Fatalf("still cutting after %d operations", cut)
		}
		disk := &cutDisk{Disk: base.Clone(), budget: cut}
		(&Core{cfg: Config{Disk: disk}, log: logs}).sweepReplica(TopicPartition{Topic: "t"}, 1, dir)
		done := disk.budget != 0
		disk.Crash(nil)
		names, _ := disk.List(dir + "/log")
		if len(names) < len(logNames) && !deletedHere(Config{Disk: disk}, dir) {
			t.Fatalf("cut after %d ops of the sweep, power lost: log files %v of %v left and no tombstone", cut, names, logNames)
		}
		if done {
			break
		}
	}
}
