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

// faultPollInterval is how often the isolation file is checked.
const faultPollInterval = 10 * time.Millisecond

// faultState is whether the node is isolated now, and how.
type faultState struct {
	cut   atomic.Bool // frames are dropped
	stall atomic.Bool // connections stop moving
}

// start polls the isolation file until stop closes.
func (f *faultState) start(stop <-chan struct{}) {
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
