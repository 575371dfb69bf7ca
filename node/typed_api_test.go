package node

import "github.com/strandlog/strand/proto/strandpb"

// The tests drive the Core through produce, fetch and HandleAs. These
// wrappers run the completions the call queued before returning, as
// HandleAs does at its end, so a test sees an answer that is already
// known (a definite failure) at once.

// produceNow is produce (or, for a transactional request, its verified
// form, as HandleAs routes it) followed by the flush of its completions.
func (c *Core) produceNow(req ProduceRequest, done func(ProduceResult)) {
	defer c.flush()
	if req.Transactional {
		c.produceTransactional(req, done)
		return
	}
	c.produce(req, done)
}

// fetchNow is fetch followed by the flush of its completions.
func (c *Core) fetchNow(req FetchRequest, done func(FetchResult)) {
	defer c.flush()
	c.fetch(req, done)
}

// handleAnonymous is HandleAs for User:ANONYMOUS, the principal of a
// connection without authentication.
func (c *Core) handleAnonymous(req *strandpb.Request, respond func(*strandpb.Response)) {
	c.HandleAs(Caller{Principal: Anonymous}, req, respond)
}
