package node

// The fetch read budget. Fetches are served on the one goroutine that runs
// the Core, in Process, right after the apply that makes them servable:
// reading the log (page cache or disk), checking CRCs and slicing out
// batches. With many readers catching up at once (fan-out: 1,000 groups
// behind the tail) one Process call read hundreds of MiB, 100 ms and more,
// and every produce waited behind it in each node's loop it passes through
// (measured with `strand bench cluster --phases fanout`: produce fell from
// 69k to 34k msgs/s beside 100 groups). So a Process call reads at most
// Config.FetchReadBytesPerProcess bytes of batches for fetches (a single
// read may pass it by its own size, so a large batch is never stuck); the
// reads and long-poll wakes left over are served first thing in the next
// Process call, after the inputs that arrived meanwhile (produces, fsync
// completions, raft messages) had their turn. The host calls Process at
// least once a tick, so a deferred read waits at most a tick. Reads of the
// metadata group are never deferred (they read no batches). A read the
// tail cache cannot serve runs as a storage job (fetch_cold.go) and is
// charged when its completion serves it; the budget bounds what the loop
// itself reads and slices. Rejected: a budget per tick (a rate limit idles
// the loop while readers wait).

// fetchReadBytesPerProcessDefault is the default
// Config.FetchReadBytesPerProcess.
const fetchReadBytesPerProcessDefault = 4 << 20

// fetchBudget is the fetch bytes the current Process call may still read
// and the groups whose reads wait for the next call, in deferral order.
type fetchBudget struct {
	left     int64
	deferred []*group
}

// serveDeferredReads starts a Process call: refill the budget, then serve
// the reads and wakes the previous call left over.
func (c *Core) serveDeferredReads() {
	c.fetchBudget.left = c.cfg.FetchReadBytesPerProcess
	groups := c.fetchBudget.deferred
	c.fetchBudget.deferred = nil
	for _, g := range groups {
		g.readsDeferred = false
		if c.byTP[g.tp] != g {
			continue // stopped meanwhile: its reads were failed
		}
		c.serveReads(g)
		if len(g.parked) > 0 {
			c.wakeParked(g)
		}
	}
}

// fetchBudgetSpent tells whether reads of g must wait for the next Process
// call, and if so queues g for it.
func (c *Core) fetchBudgetSpent(g *group) bool {
	if !g.sm.policy().readBudgeted || c.fetchBudget.left > 0 {
		return false
	}
	if !g.readsDeferred {
		g.readsDeferred = true
		c.fetchBudget.deferred = append(c.fetchBudget.deferred, g)
	}
	return true
}

// chargeFetch takes the batch bytes of res from the budget.
func (c *Core) chargeFetch(res *FetchResult) {
	for _, b := range res.Batches {
		c.fetchBudget.left -= int64(len(b.Batch))
	}
}
