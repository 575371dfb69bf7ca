//go:build faultinject

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// A real node whose data directory sits on a device that stops answering
// writes and fsyncs: a FUSE loopback file system served by this test,
// whose every write and fsync waits while it is frozen, as a gray-failing
// disk does (the kernel holds the node's thread inside pwrite or fsync;
// nothing in the node is told). The node must notice by itself: its
// leaderships move to the other nodes within an election timeout plus a
// second, writes go on through them, its /readyz answers 503 naming the
// file of the stuck job, its log says the disk stalled; once the device
// answers again, /readyz is 200 and the log says so. (TestDiskStallMovesLeaders
// stalls the node's own storage jobs through its fault switch; this one
// stalls the kernel underneath it.) It needs /dev/fuse and the right to
// mount (root); without them it skips and says so.
func TestDiskStallFrozenDevice(t *testing.T) {
	skipShort(t)
	requireFUSE(t)
	dir := t.TempDir()
	var parts []string
	addrs := make([]string, 3)
	admins := make([]string, 3)
	for i, port := range freePorts(t, 6) {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if i < 3 {
			addrs[i] = addr
			parts = append(parts, fmt.Sprintf("%d=%s", i+1, addr))
		} else {
			admins[i-3] = addr
		}
	}
	gates := make([]*freezeGate, 3)
	procs := make([]*proc, 3)
	for i := range procs {
		data := filepath.Join(dir, fmt.Sprintf("data-%d", i+1))
		gates[i] = mountFreezable(t, filepath.Join(dir, fmt.Sprintf("backing-%d", i+1)), data)
		procs[i] = startProc(t, filepath.Join(dir, fmt.Sprintf("node-%d.log", i+1)), nil,
			"serve", "--id", strconv.Itoa(i+1), "--listen", addrs[i], "--peers", strings.Join(parts, ","),
			"--data-dir", data, "--admin-listen", admins[i])
	}
	t.Cleanup(func() { // before the unmounts (cleanups run last first)
		for i, p := range procs {
			gates[i].thaw()
			p.kill()
		}
	})
	waitFor(t, "cluster", 30*time.Second, func() error { return clusterReady(addrs, 3) })
	victim, acks, stop := startStallWorkload(t, addrs)
	defer stop()

	gate := gates[victim-1]
	gate.freeze()
	frozen := time.Now()
	waitFor(t, "leaders off the node with the frozen disk", 15*time.Second, func() error {
		leaders, err := stallLeaders(addrs)
		for p, l := range leaders {
			if l == victim || l == 0 {
				return fmt.Errorf("partition %d led by %d (%v)", p, l, err)
			}
		}
		return err
	})
	moved := time.Since(frozen)
	t.Logf("node %d's leaderships moved %v after its disk froze (%d writes or fsyncs held)", victim, moved.Round(time.Millisecond), gate.held())
	if moved > stallMoveMax {
		t.Errorf("node %d's leaderships moved %v after its disk froze, more than %v", victim, moved, stallMoveMax)
	}
	if gate.held() == 0 {
		t.Fatalf("the frozen device held no write or fsync of node %d: the test stalled nothing", victim)
	}
	time.Sleep(time.Second)
	if gap := acks.longestGap(time.Now().Add(-time.Second), time.Now()); gap > 500*time.Millisecond {
		t.Errorf("writes stopped for %v after the move, the disk still frozen", gap)
	}
	readyz := "http://" + admins[victim-1] + "/readyz"
	code, body, err := httpGet(readyz)
	if err != nil || code != 503 || !strings.Contains(body, "disk stalled") || !strings.Contains(body, filepath.Join(dir, fmt.Sprintf("data-%d", victim))) {
		t.Errorf("node %d /readyz with its disk frozen: %d %v %q; want 503 naming the stalled file", victim, code, err, body)
	}
	t.Logf("node %d /readyz with its disk frozen: %d %s", victim, code, strings.TrimSpace(body))

	gate.thaw()
	log := filepath.Join(dir, fmt.Sprintf("node-%d.log", victim))
	waitFor(t, "the node to see its disk again", 15*time.Second, func() error {
		b, _ := os.ReadFile(log)
		for _, want := range []string{"disk stalled", "disk responsive again"} {
			if !strings.Contains(string(b), want) {
				return fmt.Errorf("no %q in node %d's log", want, victim)
			}
		}
		if code, body, err := httpGet(readyz); err != nil || code != 200 {
			return fmt.Errorf("/readyz %d %v %s", code, err, body)
		}
		return nil
	})

	// SIGTERM with the disk frozen again: the clean close waits on a write
	// or fsync that does not return, and says so; a second SIGTERM ends the
	// wait (the process exits once the kernel lets its threads go: when the
	// device answers); exit 1, saying why.
	gate.freeze()
	waitFor(t, "a write or fsync held by the frozen device", 10*time.Second, func() error {
		if gate.held() == 0 {
			return fmt.Errorf("none yet")
		}
		return nil
	})
	victimProc := procs[victim-1]
	victimProc.cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, "the shutdown to say it waits", 15*time.Second, func() error {
		if b, _ := os.ReadFile(log); !strings.Contains(string(b), "shutdown still waiting for the clean close") {
			return fmt.Errorf("no word of the wait in node %d's log", victim)
		}
		return nil
	})
	victimProc.cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, "the forced exit to be said", 15*time.Second, func() error {
		if b, _ := os.ReadFile(log); !strings.Contains(string(b), "exit forced by a second signal") {
			return fmt.Errorf("no word of the forced exit in node %d's log", victim)
		}
		return nil
	})
	gate.thaw()
	select {
	case <-victimProc.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("node %d did not exit within 15 s of its disk answering again", victim)
	}
	var exit *exec.ExitError
	if !errors.As(victimProc.Err(), &exit) || exit.ExitCode() != 1 {
		t.Fatalf("node %d forced out of its shutdown: %v, want exit status 1", victim, victimProc.Err())
	}
}

// requireFUSE skips the test when this process cannot serve a FUSE mount.
func requireFUSE(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no FUSE here (%v): the frozen-device test needs /dev/fuse and root", err)
	}
	f.Close()
	if os.Geteuid() != 0 {
		t.Skip("not root: the frozen-device test mounts a FUSE file system itself")
	}
}

// freezeGate holds every write and fsync of a freezable file system while
// frozen.
type freezeGate struct {
	mu      sync.Mutex
	cond    *sync.Cond
	frozen  bool
	waiting int // writes and fsyncs held since the last freeze
}

func (g *freezeGate) freeze() {
	g.mu.Lock()
	g.frozen, g.waiting = true, 0
	g.mu.Unlock()
}

func (g *freezeGate) thaw() {
	g.mu.Lock()
	g.frozen = false
	g.cond.Broadcast()
	g.mu.Unlock()
}

// held is how many writes and fsyncs the gate held since the last freeze.
func (g *freezeGate) held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// pass returns at once while thawed, else once thawed.
func (g *freezeGate) pass() {
	g.mu.Lock()
	if g.frozen {
		g.waiting++
	}
	for g.frozen {
		g.cond.Wait()
	}
	g.mu.Unlock()
}

// mountFreezable serves backing at mountpoint through FUSE (a loopback
// whose files' writes and fsyncs pass the returned gate) until the test
// ends.
func mountFreezable(t *testing.T, backing, mountpoint string) *freezeGate {
	t.Helper()
	for _, d := range []string{backing, mountpoint} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		t.Fatal(err)
	}
	gate := &freezeGate{}
	gate.cond = sync.NewCond(&gate.mu)
	root := &fs.LoopbackRoot{Path: backing, Dev: uint64(st.Dev)}
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &freezeNode{LoopbackNode: fs.LoopbackNode{RootData: r}, gate: gate}
	}
	root.RootNode = root.NewNode(root, nil, "", &st)
	server, err := fs.Mount(mountpoint, root.RootNode, &fs.Options{MountOptions: fuse.MountOptions{
		DirectMountStrict: true, FsName: "strand-freezable", Name: "strandtest"}})
	if err != nil {
		t.Skipf("cannot mount a FUSE file system here (%v): the frozen-device test needs it", err)
	}
	t.Cleanup(func() {
		gate.thaw()
		if err := server.Unmount(); err != nil {
			t.Errorf("unmount %s: %v", mountpoint, err)
		}
	})
	return gate
}

// freezeNode is a loopback node whose opened files pass its gate.
type freezeNode struct {
	fs.LoopbackNode
	gate *freezeGate
}

var _ = (fs.NodeOpener)((*freezeNode)(nil))
var _ = (fs.NodeCreater)((*freezeNode)(nil))

func (n *freezeNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	return n.wrap(fh), fl, errno
}

func (n *freezeNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	in, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	return in, n.wrap(fh), fl, errno
}

func (n *freezeNode) wrap(fh fs.FileHandle) fs.FileHandle {
	if lf, ok := fh.(*fs.LoopbackFile); ok {
		return &freezeFile{LoopbackFile: lf, gate: n.gate}
	}
	return fh
}

// freezeFile is a loopback file whose writes and fsyncs pass the gate.
type freezeFile struct {
	*fs.LoopbackFile
	gate *freezeGate
}

func (f *freezeFile) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	f.gate.pass()
	return f.LoopbackFile.Write(ctx, data, off)
}

func (f *freezeFile) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	f.gate.pass()
	return f.LoopbackFile.Fsync(ctx, flags)
}
