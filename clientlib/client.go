package clientlib

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/internal/clientcore"
	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
)

// Client talks to a Strand cluster. It is safe for concurrent use.
type Client struct {
	cfg   config
	start time.Time

	mu      sync.Mutex
	conns   map[connKey]*brokerConn
	dialing map[connKey]chan struct{} // closed when the dial ends
	meta    *clientcore.LeaderCache
	metaAt  time.Duration // when meta was last refreshed (monotonic); see metaKnown
	// metaKnown: a metadata refresh succeeded once.
	metaKnown bool
	// reached: a node answered a request once (unreachable).
	reached atomic.Bool
	refresh chan struct{}
	metaErr error
	// clusterID is the first cluster id a node named (checkClusterLocked).
	clusterID []byte
	// clusterErr is sticky once a node of another cluster answered: every
	// later metadata refresh fails with it (use a new Client).
	clusterErr error
	rng        *rand.Rand
	closed     bool
	suspects   clientcore.Suspects // nodes that stalled recently
	// redial is each address's reconnect backoff (redial.go).
	redial map[string]redialState

	// metaVersion is the highest metadata_version an applied answer
	// carried: a node answering an older one lags (refreshTopic).
	metaVersion uint64

	groupCoords coordinators // each group's coordinator (group.go)
	// simTask is the simulated Client's running blocking call (sim_task.go).
	simTask *simTask
	// simWatch is what a simulated Client read, for its calls' stall
	// verdicts (sim_watch.go).
	simWatch simWatch

	producerOnce sync.Once
	closeOnce    sync.Once
	producer     *producer
	// txn is the transaction state of a TransactionalID client; nil else.
	txn *txnState
}

// NewClient validates the options and returns a Client. It does not
// connect: the first request dials the seeds.
func NewClient(opts ...Opt) (*Client, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.acks != AcksAll {
		cfg.idempotent = false
	}
	if !cfg.idempotent {
		cfg.inFlightBatchesMax = 1
	}
	start := time.Now()
	seed := cfg.randSeed
	if !cfg.randSeeded {
		seed = uint64(start.UnixNano())
	}
	var txn *txnState
	if cfg.transactionalID != "" {
		txn = newTxnState(cfg.transactionalID, cfg.transactionTimeout)
	}
	c := &Client{
		txn:     txn,
		cfg:     cfg,
		start:   start,
		conns:   make(map[connKey]*brokerConn),
		dialing: make(map[connKey]chan struct{}),
		meta:    clientcore.NewLeaderCache(),
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
	if c.cfg.simulated != nil {
		c.simSASLNonces()
		c.cfg.simulated = newSimConns(c.cfg.simulated, c)
	}
	return c, nil
}

// markSuspect records that node stalled: for twice StallTimeout (about
// an election and a metadata refresh) its partitions wait for fresh
// metadata instead of being sent to it again, and metadata is asked of
// other nodes first.
func (c *Client) markSuspect(node uint64) {
	now := c.monotonic()
	c.mu.Lock()
	c.suspects.Mark(node, now, 2*c.cfg.stallTimeout)
	c.mu.Unlock()
	if p := c.existingProducer(); p != nil {
		p.poke()
	}
}

// stallBound is the stall bound for a new connection to node:
// StallTimeout doubled per recent stall, at most RequestTimeout (0 when
// stall detection is off).
func (c *Client) stallBound(node uint64) time.Duration {
	if c.cfg.stallTimeout <= 0 {
		return 0
	}
	now := c.monotonic()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.suspects.Bound(node, now, c.cfg.stallTimeout, max(c.cfg.requestTimeout, c.cfg.stallTimeout))
}

// suspectUntil is when node's suspicion lapses; 0: not suspect.
func (c *Client) suspectUntil(node uint64) time.Duration {
	now := c.monotonic()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.suspects.Until(node, now)
}

// monotonic is the client's clock for the pure pieces: time since start.
func (c *Client) monotonic() time.Duration {
	if t := c.cfg.simulated; t != nil {
		return t.Now()
	}
	return time.Since(c.start)
}

// backoffDelay draws a retry delay from the client's random source.
func (c *Client) backoffDelay(attempt int) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.backoff.Delay(attempt, c.rng)
}

// Close flushes the producer (bounded by its retries and delivery timeout),
// fails what it could not deliver with ErrClientClosed, and closes every
// connection. Calls after Close fail with ErrClientClosed. A
// transactional Client aborts its open transaction first (as Kafka's and
// franz-go's producers do on close), so read_committed readers are not
// held back until the coordinator's transaction timeout.
func (c *Client) Close() {
	c.closeOnce.Do(func() {
		c.abortOnClose()
		// Flush first, while connections and metadata still work.
		if p := c.existingProducer(); p != nil {
			p.close()
		}
		c.mu.Lock()
		c.closed = true
		conns := c.conns
		c.conns = map[connKey]*brokerConn{}
		c.mu.Unlock()
		for _, bc := range conns {
			bc.kill(errConnClosed)
		}
	})
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// conn returns the live data connection to addr, dialing when there is
// none.
func (c *Client) conn(ctx context.Context, addr string) (*brokerConn, error) {
	return c.connTo(ctx, connKey{addr: addr})
}

// connTo returns the live connection key names, dialing when there is
// none. Dials are single-flight per key, so a node has one data
// connection and at most one coordinator connection (coordconn.go).
func (c *Client) connTo(ctx context.Context, key connKey) (*brokerConn, error) {
	addr := key.addr
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClientClosed
		}
		if bc := c.conns[key]; bc != nil && !bc.isDead() {
			c.mu.Unlock()
			return bc, nil
		}
		wait, dialing := c.dialing[key]
		if !dialing {
			break // c.mu still held
		}
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := c.redialRefusedLocked(addr); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	done := make(chan struct{})
	c.dialing[key] = done
	c.mu.Unlock()
	bc, err := dialConn(ctx, &c.cfg, addr, c.markSuspect, c.stallBound)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.dialing, key)
	close(done)
	c.dialedLocked(ctx, addr, err)
	if err != nil {
		return nil, err
	}
	if err := c.checkClusterLocked(bc.clusterID, addr); err != nil {
		bc.kill(err)
		return nil, err
	}
	if c.closed {
		bc.kill(errConnClosed)
		return nil, ErrClientClosed
	}
	c.conns[key] = bc
	return bc, nil
}

// liveConn is the node's live connection, or nil when there is none (no
// dial is started).
func (c *Client) liveConn(node uint64) *brokerConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	addr, ok := c.meta.Address(node)
	if !ok || c.closed {
		return nil
	}
	if bc := c.conns[connKey{addr: addr}]; bc != nil && !bc.isDead() {
		return bc
	}
	return nil
}

// request sends req to addr on its data connection and waits for the
// answer; extra is added to the request timeout (a fetch's max wait).
func (c *Client) request(ctx context.Context, addr string, req *strandpb.Request, extra time.Duration) (*strandpb.Response, error) {
	return c.requestOn(ctx, connKey{addr: addr}, req, extra)
}

// requestOn is request on the connection key names.
func (c *Client) requestOn(ctx context.Context, key connKey, req *strandpb.Request, extra time.Duration) (*strandpb.Response, error) {
	if c.cfg.simulated != nil {
		return c.simRequest(key, req, extra)
	}
	bc, err := c.connTo(ctx, key)
	if err != nil {
		return nil, err
	}
	resp, err := bc.roundTrip(ctx, req, false, c.cfg.requestTimeout+extra, extra)
	if err == nil {
		c.reached.Store(true)
	}
	return resp, err
}

// requestNode sends req to the node with id, by its cached address.
func (c *Client) requestNode(ctx context.Context, id uint64, req *strandpb.Request, extra time.Duration) (*strandpb.Response, error) {
	c.mu.Lock()
	addr, ok := c.meta.Address(id)
	c.mu.Unlock()
	if !ok {
		return nil, &ConnError{Addr: "node " + itoa(id), Err: errUnknownNode}
	}
	return c.request(ctx, addr, req, extra)
}

// candidates lists addresses to ask for metadata: known nodes, then
// seeds; the nodes that throttle the Client's data connection go last
// (throttled.go).
func (c *Client) candidates() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	seen := map[string]bool{}
	now := c.monotonic()
	var suspect []string
	for _, id := range c.meta.NodeIDs() {
		a, _ := c.meta.Address(id)
		if seen[a] {
			continue
		}
		seen[a] = true
		if c.suspects.Until(id, now) != 0 {
			suspect = append(suspect, a)
			continue
		}
		out = append(out, a)
	}
	// Start at a random known node so clients spread their metadata load;
	// suspect nodes come last.
	if len(out) > 1 {
		k := c.rng.IntN(len(out))
		out = append(out[k:], out[:k]...)
	}
	out = append(out, suspect...)
	for _, a := range c.cfg.seeds {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return c.throttledLastLocked(out)
}

// anyRequest sends req to the first node that answers: known nodes, then
// seeds. When none answers it fails with a *NotStrandError if an address
// is not a Strand node, an *UnreachableError if no address could be
// connected to and none ever answered (unreachable), else the last
// failure.
func (c *Client) anyRequest(ctx context.Context, req *strandpb.Request) (*strandpb.Response, error) {
	resp, _, err := c.anyRequestAt(ctx, req)
	return resp, err
}

// anyRequestAt is anyRequest, also returning the address that answered.
func (c *Client) anyRequestAt(ctx context.Context, req *strandpb.Request) (*strandpb.Response, string, error) {
	return c.anyRequestLast(ctx, req, "")
}

// anyRequestLast is anyRequestAt asking the node at address lastAddr
// after every other ("": none).
func (c *Client) anyRequestLast(ctx context.Context, req *strandpb.Request, lastAddr string) (*strandpb.Response, string, error) {
	return c.anyRequestUnsure(ctx, req, lastAddr, nil)
}

// anyRequestUnsure is anyRequestLast, setting *unsure (when not nil) if a
// node's attempt failed with its outcome unknown (it may have been
// applied) before another answered: the answer or error returned is the
// last node's, which cannot say so.
func (c *Client) anyRequestUnsure(ctx context.Context, req *strandpb.Request, lastAddr string, unsure *bool) (*strandpb.Response, string, error) {
	var last error
	addrs := askLast(c.candidates(), lastAddr)
	unreached := 0
	var noneResp *strandpb.Response // a node's answer naming no coordinator (namesNoCoordinator)
	var noneFrom string
	for _, addr := range addrs {
		resp, err := c.request(ctx, addr, req, 0)
		if err == nil && namesNoCoordinator(req, resp) {
			if noneResp == nil {
				noneResp, noneFrom = resp, addr
			}
			continue
		}
		if err == nil {
			return resp, addr, nil
		}
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		var ns *NotStrandError
		if errors.As(err, &ns) {
			return nil, "", err
		}
		noteUnsure(unsure, err)
		var ce *ConnError
		if errors.As(err, &ce) && !ce.Sent {
			unreached++
			last = ce
			continue
		}
		last = err
	}
	if noneResp != nil {
		return noneResp, noneFrom, nil
	}
	if unreached == len(addrs) && len(addrs) > 0 {
		return nil, "", c.unreachable(addrs, last)
	}
	return nil, "", last
}

// unreachable is the failure of a request that no address took (every
// one refused or timed out dialing; last is the last one's *ConnError).
// While no node ever answered the Client it is an *UnreachableError,
// definite, so a wrong address fails at once; once one has, it is last,
// retried as any connection that was never sent on: a cluster that
// answered before is restarting (a power cut, a rolling upgrade), not
// absent, and Kafka's clients wait for it as the producer does
// (judgeWaiting).
func (c *Client) unreachable(addrs []string, last error) error {
	if c.reached.Load() {
		return last
	}
	return &UnreachableError{Addrs: addrs, Err: last}
}

// namesNoCoordinator reports whether resp answers a FindCoordinator req
// COORDINATOR_NOT_AVAILABLE: that node's metadata names no leader of the
// coordinator's partition (a removed node that still runs, a node whose
// metadata is behind, or no leader yet). The lookup then asks the other
// candidates before it takes that answer: asking the node last next
// time (the caller's stale node) was not enough when two nodes answer so,
// and a client alternated between two removed nodes (simnet seed 351: a
// group member got no partition for 12 s after the heal while every
// other node named the coordinator).
func namesNoCoordinator(req *strandpb.Request, resp *strandpb.Response) bool {
	return req.GetFindCoordinator() != nil && resp.GetError().GetCode() == strandpb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE
}

// askLast is addrs with lastAddr moved to the end ("": none).
func askLast(addrs []string, lastAddr string) []string {
	if i := slices.Index(addrs, lastAddr); i >= 0 && lastAddr != "" {
		addrs = append(append(addrs[:i:i], addrs[i+1:]...), lastAddr)
	}
	return addrs
}

// frameMax is the frame limit toward the node at addr: its connection's
// (the smaller of the node's announced limit and ours), or ours while
// there is no connection.
func (c *Client) frameMax(addr string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if bc := c.conns[connKey{addr: addr}]; bc != nil {
		return bc.frameMax
	}
	return frame.BytesMaxDefault
}

// frameMaxNode is frameMax toward the node with id.
func (c *Client) frameMaxNode(id uint64) int {
	c.mu.Lock()
	addr, ok := c.meta.Address(id)
	c.mu.Unlock()
	if !ok {
		return frame.BytesMaxDefault
	}
	return c.frameMax(addr)
}

// RefreshMetadata fetches nodes, topics and leaders now. Concurrent calls
// share one request. A call returns ctx.Err() when its ctx ends first;
// the shared request goes on for the others (bounded by RequestTimeout).
func (c *Client) RefreshMetadata(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClientClosed
	}
	if c.clusterErr != nil {
		defer c.mu.Unlock()
		return c.clusterErr
	}
	if ch := c.refresh; ch != nil {
		c.mu.Unlock()
		return c.awaitRefresh(ctx, ch)
	}
	ch := make(chan struct{})
	c.refresh = ch
	c.mu.Unlock()
	if c.cfg.simulated != nil {
		return c.sharedRefresh(ctx, ch) // the task's own; nothing cancels a simulated ctx
	}
	// The shared refresh must not die with the first caller's context,
	// and the first caller must not outwait its own: before, it ran the
	// request itself, deaf to ctx (boundedCtx) until RequestTimeout, so
	// a Poll whose ctx was cancelled while the refresh waited out a
	// node's throttle did not return (TestPollReturnsWhenCancelledInThrottle).
	go c.sharedRefresh(ctx, ch)
	return c.awaitRefresh(ctx, ch)
}

// awaitRefresh waits for the shared refresh that closes ch, or for ctx,
// and returns the refresh's outcome (metaErr) or ctx's error.
func (c *Client) awaitRefresh(ctx context.Context, ch chan struct{}) error {
	select {
	case <-ch:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.metaErr
}

// sharedRefresh runs the metadata request RefreshMetadata's callers share
// and closes ch when its outcome (metaErr) is set.
func (c *Client) sharedRefresh(ctx context.Context, ch chan struct{}) error {
	rctx, cancel := c.boundedCtx(ctx)
	defer cancel()
	resp, addr, err := c.anyRequestAt(rctx, &strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}})
	c.mu.Lock()
	err = c.applyMetadataLocked(resp, addr, err)
	c.metaErr = err
	c.refresh = nil
	close(ch)
	c.mu.Unlock()
	return err
}

// applyMetadataLocked takes a metadata answer from addr (err: the
// request's failure) into the cache and returns the refresh's outcome.
// The caller holds c.mu.
func (c *Client) applyMetadataLocked(resp *strandpb.Response, addr string, err error) error {
	if err == nil {
		err = errorFromWire(resp.GetError())
	}
	if err == nil {
		err = c.checkClusterLocked(resp.GetMetadata().GetClusterId(), addr)
	}
	if err == nil && resp.GetMetadata() != nil {
		c.meta.ApplyMetadata(resp.GetMetadata())
		c.metaAt, c.metaKnown = c.monotonic(), true
		c.metaVersion = max(c.metaVersion, resp.GetMetadata().GetMetadataVersion())
	}
	return err
}

// refreshTopics asks any node about topics by name (see refreshTopic: a
// topic of none of the names is cached as unknown, and an answer older
// than metadata already applied is refused).
func (c *Client) refreshTopics(ctx context.Context, topics []string) error {
	rctx, cancel := c.requestCtx(ctx)
	defer cancel()
	req := &strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{Topics: topics}}}
	resp, addr, err := c.anyRequestAt(rctx, req)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applyNamedMetadataLocked(resp, addr, err)
}

// applyNamedMetadataLocked takes an answer about topics by name from addr
// (err: the request's failure) into the cache, unless it is older than
// metadata already applied: a node restarting or rebuilding its metadata
// must not make a live topic look deleted. The caller holds c.mu.
func (c *Client) applyNamedMetadataLocked(resp *strandpb.Response, addr string, err error) error {
	if err == nil {
		err = errorFromWire(resp.GetError())
	}
	if err == nil {
		err = c.checkClusterLocked(resp.GetMetadata().GetClusterId(), addr)
	}
	if err != nil {
		return err
	}
	m := resp.GetMetadata()
	if v := m.GetMetadataVersion(); v < c.metaVersion {
		return &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE,
			Message: fmt.Sprintf("%s answered metadata version %d, older than version %d already seen", addr, v, c.metaVersion)}
	}
	if m != nil {
		c.meta.ApplyMetadata(m)
		c.metaVersion = max(c.metaVersion, m.GetMetadataVersion())
	}
	return nil
}

// metadataStale reports whether the cache needs a refresh before use.
func (c *Client) metadataStale() bool {
	now := c.monotonic()
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.metaKnown || now-c.metaAt > c.cfg.metadataMaxAge
}

// ensureMetadata refreshes when the cache is empty or too old.
func (c *Client) ensureMetadata(ctx context.Context) error {
	c.mu.Lock()
	err := c.clusterErr
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if !c.metadataStale() {
		return nil
	}
	return c.RefreshMetadata(ctx)
}

// applyNotLeader applies a NOT_LEADER hint; true when the leader changed.
func (c *Client) applyNotLeader(topic string, partition int32, err error) bool {
	se, ok := err.(*Error)
	if !ok || se.Code != strandpb.ErrorCode_ERROR_CODE_NOT_LEADER {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.meta.ApplyNotLeader(topic, partition, se.LeaderID, se.LeaderAddress)
}

// leader looks up a partition's leader in the cache.
func (c *Client) leader(topic string, partition int32) (uint64, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.meta.Leader(topic, partition)
}
