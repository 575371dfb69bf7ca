package fake

import (
	"sort"

	"github.com/strandlog/strand/proto/strandpb"
)

// Action is what a control does to one request.
type Action struct {
	// Error answers the request with this error and applies nothing: in
	// every partition of a produce, fetch or list-offsets request and in
	// every move of a move-partitions request, else as the response's
	// error.
	Error *strandpb.Error
	// DropBefore closes the connection without applying or answering.
	DropBefore bool
	// DropAfter applies the request, then closes the connection without
	// answering: the client cannot know the outcome.
	DropAfter bool
	// Hold delays handling the request until the channel is closed; the
	// connection's later requests are still read (and controlled) but
	// wait behind it.
	Hold <-chan struct{}
	// Duplicate applies the request twice, as a network that duplicates a
	// frame would; the second outcome is the answer.
	Duplicate bool
}

// ControlFunc inspects each request a node receives as it is read (before
// the requests ahead of it on the connection are handled) and returns the
// action to take and whether it applies. Controls run in
// the order they were added; the first that applies wins. It is called
// without the cluster's lock held, so it may call Cluster methods (e.g.
// MoveLeader, which blocks this connection's reader while it waits), and
// from many goroutines, so it must be safe for that.
type ControlFunc func(nodeID uint64, req *strandpb.Request) (Action, bool)

// Control adds a control and returns the function that removes it.
func (c *Cluster) Control(fn ControlFunc) (remove func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextControlID++
	id := c.nextControlID
	c.controls[id] = fn
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.controls, id)
	}
}

// control finds the action for a request.
func (c *Cluster) control(nodeID uint64, req *strandpb.Request) Action {
	c.mu.Lock()
	ids := make([]uint64, 0, len(c.controls))
	for id := range c.controls {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	fns := make([]ControlFunc, len(ids))
	for i, id := range ids {
		fns[i] = c.controls[id]
	}
	c.mu.Unlock()
	for _, fn := range fns {
		if a, ok := fn(nodeID, req); ok {
			return a
		}
	}
	return Action{}
}

// FailTimes returns a control that answers the first n requests matching
// match with code (and no leader hint), then stops applying.
func FailTimes(n int, code strandpb.ErrorCode, match func(nodeID uint64, req *strandpb.Request) bool) ControlFunc {
	var left = make(chan struct{}, n)
	for i := 0; i < n; i++ {
		left <- struct{}{}
	}
	return func(nodeID uint64, req *strandpb.Request) (Action, bool) {
		if !match(nodeID, req) {
			return Action{}, false
		}
		select {
		case <-left:
			return Action{Error: &strandpb.Error{Code: code, Message: "injected"}}, true
		default:
			return Action{}, false
		}
	}
}

// IsProduce matches produce requests.
func IsProduce(_ uint64, req *strandpb.Request) bool { return req.GetProduce() != nil }

// IsMovePartitions matches partition-move requests.
func IsMovePartitions(_ uint64, req *strandpb.Request) bool { return req.GetMovePartitions() != nil }

// IsFetch matches fetch requests.
func IsFetch(_ uint64, req *strandpb.Request) bool { return req.GetFetch() != nil }
