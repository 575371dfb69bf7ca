// Package compacted stores one replica's compacted prefix of a partition
// (issue 24; engine/compact's doc says what a pass writes and why): the
// batches a compaction pass emitted, in engine/compact's batch form, as
// segment files with a sparse offset index, replaced whole by the next
// pass. It reaches storage only through raftlog.Disk, so it runs on the OS
// (raftlog/osdisk) and in the simulator's memdisk alike, and it is pure
// like raftlog (the determinism guard holds it to an import allowlist).
//
// # Files
//
// In the store's directory:
//
//	manifest                       the current generation (below)
//	<generation>-<segment>.seg     its batches, back to back; %020d-%06d
//	manifest.tmp                   a manifest being written (never read)
//
// The manifest (little-endian, CRC32C like the batches):
//
//	0  magic       "SCM1"
//	4  crc         u32  CRC32C of bytes [8, end)
//	8  generation  u64  the decision that wrote it, ≥ 1
//	16 start       i64  the prefix covers offsets [start, end)
//	24 end         i64  the pass's Result.CleanedTo
//	32 digest      [32] SHA-256 of the batches in order (Result.Digest)
//	64 segments    u32, then per segment:
//	     base i64 (its first batch's base offset), end i64 (after its last
//	     batch), bytes i64 (the file's exact size), index count u32, then
//	     per index entry: offset i64 (a batch's base offset), position i64,
//	     max timestamp i64 (running maximum up to that batch, for a
//	     timestamp lookup)
//
// decodeManifest accepts a manifest only with its CRC, exact lengths,
// segments non-empty and in offset order inside [start, end), each index
// starting at its segment's first batch and strictly increasing in offset
// and position (FuzzDecodeManifest). A batch is indexed when it starts a
// segment or lies IndexIntervalBytes past the last indexed one, so a read
// scans at most that far; a segment rolls past SegmentBytes. The index
// lives in the manifest, not beside each segment: one file, one CRC, one
// atomic switch for the whole generation.
//
// # Switching generations
//
// A pass writes generation g+1 beside g: Begin (on the goroutine that owns
// the Store), Append and Commit (which touch only the new files and the
// manifest, so they may run off it while reads go on), then Finish (owner:
// reads see g+1) and the removal of g's files (StaleRemoval: bound on the
// owner, run off it, possibly beside generation g+2's writer, so it
// removes only generations below g+1, never manifest.tmp). Commit:
// every segment synced (none before: Append never waits for the disk), the
// directory synced, the manifest written to manifest.tmp and synced,
// renamed over manifest, the directory synced: that SyncDir is the commit
// point. A crash
// before it leaves g's manifest naming g's untouched files; after it,
// g+1's, whose segments were durable before the manifest named them. Open
// removes every segment file the manifest does not name (a half-written
// generation or the one replaced) and manifest.tmp, so a crash at any step
// leaves exactly one whole generation (TestSwitchSurvivesPowerCutAnywhere
// cuts the power after every disk operation of a switch, from an empty
// store and from a full one). An error from the rename on is ErrFailed
// and Finish fails the store: which manifest is durable is unknown until
// Open (as raftlog treats a failed fsync), and RemoveStale could delete the
// generation it names. The directory sync before the rename is for file
// systems that may persist a rename before earlier creations; memdisk
// persists a directory's names all at once, so no test shows it.
//
// # Reads and checks
//
// Read(offset, maxBytes) binary searches the segments and the sparse index
// and returns whole batches from the one holding offset (or the next, when
// compaction removed offset), within maxBytes but at least one.
// OffsetForTimestamp finds the first batch whose running maximum timestamp
// reaches a time (the engine's rule for the raft log) from the index's
// running maxima, scanning at most IndexIntervalBytes. Every batch read has
// its magic, length, CRC and offsets checked against its segment; Open
// checks the manifest and each segment's size; Verify reads the whole
// generation, decodes every batch (compact.DecodeBatch), checks the index
// entries and the digest. Defects are ErrCorrupt naming file and position
// (TestBitFlipsAreCaught flips bits through a segment, FuzzReadSegment
// fills one with arbitrary bytes);
// the node's answer is to install the prefix again from a peer whose digest
// for that generation matches the engine's record. Append checks each
// batch whole (it may come from a peer) and Commit checks the digest, so a
// generation with the wrong bytes never becomes current (ErrDigestMismatch).
//
// # Node integration
//
// The node runs passes into a store (node's compaction_replica.go: the
// write job, then Commit as a job of its own, Finish and RemoveStale) and
// trims its raft log up to engine's RaftTrimBound of End; its fetch
// reads with ReadBatches (bounded in bytes and batches; it returns the
// offset the read covered, End when it reached the end) and ListOffsets
// by timestamp uses OffsetForTimestamp (node's compaction_fetch.go); a
// stuck replica installs a peer's prefix through a Writer, so Commit
// checks the digest the engine recorded (node's compaction_install.go).
// Not yet: an I/O budget for passes (Append checks each batch whole with
// compact.DecodeBatch, which a trusted pass could skip).
package compacted
