package simnet

import "github.com/strandlog/strand/raftlog/audit"

// The node-wide write-ahead log in the simulator (Options.WAL). Its sync is
// the node's one sync job per round, so the storage pipeline's crash points
// (storage.go) land between its write and its fsync and between the fsync
// and the acknowledgements; a power loss keeps a random prefix of its
// unsynced writes, the last torn, and one round's writes hold the records
// of several partitions. The durability audit recovers a log as the node
// does: the log's synced bytes with the write-ahead log's durable records
// replayed over them.

// walBytesMaxSim rotates the write-ahead log often within a run (a seed
// writes a few MB), so lazy log syncs and segment removal are exercised.
// It also sets a WAL seed's cost: the durability audit recovers the
// write-ahead log at each of its syncs it checks (32 KiB: 1.7 times a seed
// without the WAL, 256 KiB 3.5 times, when each recovery decoded it whole;
// 1.3 times at 32 KiB since wal.Cache decodes only appended records).
const walBytesMaxSim = 32 << 10

// walLogFlushBytesSim starts a log's background flush (node's
// walFlushEarly) every 32 KiB written, so seeds crash with those fsyncs in
// flight and between them and a rotation.
const walLogFlushBytesSim = 32 << 10

// walDirSim is the write-ahead log's directory (node's walDir).
const walDirSim = "wal"

// newAuditor returns the durability auditor of n's disk.
func (d *durability) newAuditor(n *simNode) *audit.Auditor {
	a := audit.New(n.disk)
	if d.w.opts.WAL {
		a.UseWAL(walDirSim)
	}
	return a
}
