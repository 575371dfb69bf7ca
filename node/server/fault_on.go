//go:build faultinject

package server

import (
	"os"
	"sync/atomic"
	"time"
)

// Fault injection for real-process tests and measurements, compiled in
// only with -tags faultinject. When the environment names a file in
// STRAND_FAULT_ISOLATE_FILE, the node is cut off from its peers while that
// file exists: every raft frame it sends or receives is dropped, as in a
// network partition around it; client connections are unaffected. The
// file is polled, so a test isolates and heals a node by creating and
// removing it. A file holding "stall" models a partition that drops
// packets under TCP instead (iptables DROP): the node's peer connections
// stop moving, frames pile up in the send queues (then are dropped at their
// bounds), and all that is queued is delivered at the heal.

// faultEnvIsolateFile names the file whose existence isolates the node.
const faultEnvIsolateFile = "STRAND_FAULT_ISOLATE_FILE"

// faultEnvDiskStallFile names the file whose existence stalls the node's
// disk: while it exists every storage job (fsync, unlink) a sync worker
// takes waits before it runs, as on a device that stopped answering
// (node/stall.go's watchdog must then hand the node's leaderships on).
// The wait ends when the file goes, or after faultDiskStallMax.
const faultEnvDiskStallFile = "STRAND_FAULT_DISK_STALL_FILE"

// faultDiskStallMax bounds one job's injected stall, so a test that dies
// with the file in place does not leave a process that never exits.
const faultDiskStallMax = 2 * time.Minute

// faultPollInterval is how often the isolation file is checked.
const faultPollInterval = 10 * time.Millisecond

// faultState is whether the node is isolated now, and how.
type faultState struct {
	cut      atomic.Bool // frames are dropped
	stall    atomic.Bool // connections stop moving
	diskPath string      // STRAND_FAULT_DISK_STALL_FILE
}

// start polls the isolation file until stop closes.
func (f *faultState) start(stop <-chan struct{}) {
	f.diskPath = os.Getenv(faultEnvDiskStallFile)
	path := os.Getenv(faultEnvIsolateFile)
	if path == "" {
		return
	}
	go func() {
		ticker := time.NewTicker(faultPollInterval)
		defer ticker.Stop()
		for {
			content, err := os.ReadFile(path)
			stall := err == nil && string(content) == "stall"
			f.cut.Store(err == nil && !stall)
			f.stall.Store(stall)
			select {
			case <-stop:
				return
			case <-ticker.C:
			}
		}
	}()
}

// isolated reports whether peer traffic is cut (frames dropped).
func (f *faultState) isolated() bool { return f.cut.Load() }

// wait blocks while peer connections are stalled, until the heal or until
// done closes.
func (f *faultState) wait(done <-chan struct{}) {
	for f.stall.Load() {
		select {
		case <-done:
			return
		case <-time.After(faultPollInterval):
		}
	}
}

// diskWait blocks while the disk-stall file exists (at most
// faultDiskStallMax): the sync pool calls it before each job.
func (f *faultState) diskWait() {
	if f.diskPath == "" {
		return
	}
	for start := time.Now(); time.Since(start) < faultDiskStallMax; time.Sleep(faultPollInterval) {
		if _, err := os.Stat(f.diskPath); err != nil {
			return
		}
	}
}
