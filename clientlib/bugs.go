//go:build !simbugs

package clientlib

// Production builds carry no planted bug: the hooks below are constant
// false and the compiler removes them. The simulator's bug-planting build
// (-tags simbugs, bugs_simbugs.go) gives them a switch.

// bugAutoCommitFetched: auto-commit runs after Poll's fetch, committing
// the positions of the records Poll is about to return, before the
// application has them (at-most-once on a crash mid-batch).
func bugAutoCommitFetched() bool { return false }

// bugSeekSkipsTarget: Seek to an exact offset lands one past it, so the
// record at the target is never handed out.
func bugSeekSkipsTarget() bool { return false }

// bugExhaustedDefinite: a record whose retries ran out is failed as
// definitely not written even when an attempt's outcome was unknown, so the
// application is told "not written" for a record that may be in the log.
func bugExhaustedDefinite() bool { return false }

// bugAdminDropsRefusal: the security admin calls (users, ACLs, quotas)
// take a definite whole-request refusal for success, so an administrator
// is told a change was made that the cluster refused.
func bugAdminDropsRefusal() bool { return false }

// bugStallNotSent: a call given up because its node stalled is reported as
// not sent, so definitely not applied, although the node may have applied
// it and only its answer was slow.
func bugStallNotSent() bool { return false }

// bugIgnoresThrottle: the client ignores an answer's throttle_ms (as
// before KIP-219), so its next request goes into the connection the node
// paused, stalls, and the client suspects a healthy node and reconnects,
// escaping the quota.
func bugIgnoresThrottle() bool { return false }

// bugCommitSkipsFlush: CommitTransaction sends EndTxn(commit) without
// first waiting for the transaction's records (no Flush), so a record
// still buffered or in flight lands after the commit markers, outside
// the transaction it was reported committed with.
func bugCommitSkipsFlush() bool { return false }

// bugUnsureForgotten: an admin call that changes state forgets a node's
// attempt whose outcome was unknown when another node then answers (the
// in-attempt record controllerRequest and anyRequestUnsure keep), so a
// definite refusal after it says "not applied" of a change that may have
// been made.
func bugUnsureForgotten() bool { return false }

// bugCoordinatorBehindThrottle: group and transaction coordinator
// requests go on the node's data connection, as before coordconn.go, so
// a fetch's or produce's quota throttle holds a group member's
// heartbeats past its session.
func bugCoordinatorBehindThrottle() bool { return false }
