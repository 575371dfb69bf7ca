package node

import "time"

// Upload throttling (issue 27: "uploads run off the loop, throttled"):
// Config.TierUploadBytesPerSec is a node-wide budget, timed by the Clock as
// the compaction passes' is (compaction_replica.go's passBudget). An
// upload job starts only while the budget is not in debt
// (tierUploadHeld); one that put its object charges the object's bytes
// when it ends (tierUploadCharge; a failed one charges nothing), moving
// the time the budget is free again by bytes/rate. One object is one Put,
// so the rate holds over uploads, not within one (an object is at most a
// sealed segment); deletions, orphan sweeps and remote reads are not
// charged. A held upload waits for a later
// retention check; produce and fetch never wait for it. 0: unlimited, and
// the clock is not read for it.

// tierUploadHeld reports whether the node's upload budget is in debt: no
// upload starts now.
func (c *Core) tierUploadHeld() bool {
	return c.cfg.TierUploadBytesPerSec > 0 && c.cfg.Clock.Monotonic() < c.uploadFreeAt
}

// tierUploadCharge adds an upload of n bytes to the budget's debt.
func (c *Core) tierUploadCharge(n int64) {
	rate := c.cfg.TierUploadBytesPerSec
	if rate <= 0 || n <= 0 {
		return
	}
	d := time.Duration(n/rate)*time.Second + time.Duration(n%rate)*time.Second/time.Duration(rate)
	c.uploadFreeAt = max(c.uploadFreeAt, c.cfg.Clock.Monotonic()) + d
}
