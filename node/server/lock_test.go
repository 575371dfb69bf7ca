package server

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/strandlog/strand/node"
)

// A second lock on a data directory is refused, naming the holder's pid,
// even from the same process (flock is per open file description); once
// released, the directory can be locked again.
func TestLockDataDirRefusesSecondHolder(t *testing.T) {
	dir := t.TempDir()
	first, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockDataDir(dir)
	var locked *DataDirLockedError
	if !errors.As(err, &locked) {
		t.Fatalf("second lock: got %v, want a DataDirLockedError", err)
	}
	if locked.PID != os.Getpid() || !strings.Contains(err.Error(), "in use by process") {
		t.Fatalf("second lock: pid %d, message %q; want pid %d named", locked.PID, err, os.Getpid())
	}
	if err := first.unlock(); err != nil {
		t.Fatal(err)
	}
	again, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	again.unlock()
}

// A second Server on a data directory in use fails to start (before it
// writes anything) and a Server started after the first closed succeeds.
func TestStartRefusesDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	start := func() (*Server, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		rt, err := Start(Config{
			Core:    node.Config{ID: 1, Nodes: []node.Peer{{ID: 1, Address: ln.Addr().String()}}},
			DataDir: dir, Listener: ln,
		})
		if err != nil {
			ln.Close()
		}
		return rt, err
	}
	first, err := start()
	if err != nil {
		t.Fatal(err)
	}
	var locked *DataDirLockedError
	if second, err := start(); !errors.As(err, &locked) {
		if second != nil {
			second.Close()
		}
		first.Close()
		t.Fatalf("second start: got %v, want a DataDirLockedError", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	third, err := start()
	if err != nil {
		t.Fatalf("start after close: %v", err)
	}
	if err := third.Close(); err != nil {
		t.Fatal(err)
	}
}
