// Package objstore is the object store Strand tiers sealed segments into
// (issue 27, R7): the one way node code reaches a bucket, as raftlog.Disk is
// the one way it reaches files, so the same node runs against a local
// directory (embedded default), an S3-compatible server, or the simulator's
// faulty store.
//
// # Contract
//
// A Store holds objects named by slash-separated keys. Every operation
// answers nil or an *Error whose Kind says what the caller may do:
//
//   - Put stores a whole object under a key, replacing any object there. A
//     reader sees the old object or the new one, never part of either (S3's
//     PUT and a local temp-file rename both give that). A Put that answers an
//     error may or may not have stored the object (a lost answer): the caller
//     that must know reads it back (Stat) before it relies on either outcome.
//   - Get reads a byte range of an object; a range past the end is cut at the
//     end, an offset past the end is KindRange.
//   - Stat answers an object's size, or KindNotFound.
//   - List answers the objects whose keys start with a prefix, sorted by key,
//     so that listing order never leaks into behaviour.
//   - Delete removes an object; removing a missing object is not an error
//     (S3's DELETE is idempotent, and an upload's cleanup may run twice).
//
// Kinds: KindNotFound (no such object: definite), KindRange (an offset past
// the end: definite), KindUnavailable (the store did not answer, or answered
// a transient failure: retry later; a Put may have happened), KindDenied
// (credentials or policy refuse: an operator must act), KindNoBucket (the
// bucket does not exist: an operator must act), KindInvalid (a bad key or
// argument: a bug in the caller).
//
// Keys are checked the same way by every implementation (ValidKey): not
// empty, at most 512 bytes, no leading or trailing slash, no empty, "." or
// ".." element, no byte below 0x20 and no backslash, so a key that works on
// one store works on all of them.
//
// Implementations: objstore/dirstore (a directory on the local file system),
// objstore/s3store (S3's API through minio-go), objstore/memstore (memory,
// with faults a seeded simulator decides). objstore/storetest is the
// conformance suite each of them passes.
package objstore
