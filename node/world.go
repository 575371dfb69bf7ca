package node

import "time"

// NodeID names a node of the cluster; 0 is never a valid id (raft's None).
type NodeID uint64

// Clock is a node's only source of time. The driver calls Core.Tick at a
// fixed interval, so timeouts inside the core are counted in ticks, as in
// raft; Realtime is read only to stamp entries (append time).
type Clock interface {
	Monotonic() time.Duration // since an arbitrary origin; never decreases
	Realtime() time.Time      // may jump; read only to stamp entries
}

// Network carries frames between nodes. Send never blocks and returns no
// error: frames may be lost, duplicated or reordered anyway. The frame
// belongs to the network once passed in.
type Network interface {
	Send(to NodeID, frame []byte)
}
