package fake

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"time"

	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
)

// proxyAnswerWaitMax bounds how long a DropAfter waits for the server's
// answer (the proof the request was handled) before dropping anyway.
const proxyAnswerWaitMax = 10 * time.Second

// proxy is one fake node as clients and peers see it: a listener on its
// own loopback port in front of one real server. A client connection is
// relayed request by request (each decoded, controlled, forwarded); a peer
// connection (a Hello naming a peer node) is relayed frame by frame, and
// its frames are dropped while the fake isolates either end.
type proxy struct {
	c        *Cluster
	id       uint64
	ln       net.Listener
	mu       sync.Mutex
	upstream string // the real server's address; Replace changes it
	sessions map[*session]struct{}
	peers    map[io.Closer]struct{}
}

// session is one client connection and its connection to the server.
// Upstream correlation ids are the session's own, so a request can be sent
// twice (Duplicate) and each answer told apart.
type session struct {
	p        *proxy
	cc, uc   net.Conn
	closeMu  sync.Once
	done     chan struct{}
	writeMu  sync.Mutex
	out      []byte
	mu       sync.Mutex
	nextID   uint64
	pending  map[uint64]pendingReq
	handlers sync.WaitGroup
}

// pendingReq is a request forwarded and not yet answered.
type pendingReq struct {
	clientID uint64
	discard  bool          // the first copy of a duplicated request
	answered chan struct{} // closed when answered (DropAfter waits on it)
}

func (p *proxy) accept() {
	defer p.c.wg.Done()
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.c.wg.Add(1)
		go p.serve(nc)
	}
}

// serve reads the Hello and relays the connection as a client's or a
// peer's.
func (p *proxy) serve(cc net.Conn) {
	defer p.c.wg.Done()
	br := bufio.NewReader(cc)
	hello := &strandpb.Request{}
	cc.SetReadDeadline(time.Now().Add(wireCallTimeout))
	if _, err := frame.Decode(br, nil, frame.BytesMaxDefault, hello); err != nil {
		cc.Close()
		return
	}
	cc.SetReadDeadline(time.Time{})
	p.mu.Lock()
	upstream := p.upstream
	p.mu.Unlock()
	uc, err := net.DialTimeout("tcp", upstream, wireCallTimeout)
	if err != nil {
		cc.Close()
		return
	}
	ubr := bufio.NewReader(uc)
	answer := &strandpb.Response{}
	uc.SetDeadline(time.Now().Add(wireCallTimeout))
	out, err := frame.Append(nil, hello)
	if err == nil {
		_, err = uc.Write(out)
	}
	if err == nil {
		_, err = frame.Decode(ubr, nil, frame.BytesMaxDefault, answer)
	}
	if err == nil {
		out, err = frame.Append(out[:0], answer)
	}
	if err == nil {
		_, err = cc.Write(out)
	}
	uc.SetDeadline(time.Time{})
	if err != nil || answer.GetHello() == nil {
		cc.Close()
		uc.Close()
		return
	}
	if from := hello.GetHello().GetPeerNodeId(); from != 0 {
		p.relayPeer(from, cc, br, uc)
		return
	}
	p.relayClient(cc, br, uc, ubr)
}

// relayPeer copies a peer's raft frames to the server, dropping those sent
// while the fake isolates the sender or this node.
func (p *proxy) relayPeer(from uint64, cc net.Conn, br *bufio.Reader, uc net.Conn) {
	closer := closeBoth{cc, uc}
	if !p.track(closer, true) {
		closer.Close()
		return
	}
	defer p.track(closer, false)
	defer closer.Close()
	p.c.wg.Add(1)
	go func() { // the server sends nothing on a peer link; notice its close
		defer p.c.wg.Done()
		io.Copy(io.Discard, uc)
		closer.Close()
	}()
	var buf, prefix []byte
	for {
		payload, err := frame.Read(br, buf, frame.BytesMaxDefault)
		if err != nil {
			return
		}
		buf = payload
		if p.c.isolated(from) || p.c.isolated(p.id) {
			continue
		}
		prefix = binary.BigEndian.AppendUint32(prefix[:0], uint32(len(payload)))
		if _, err := (&net.Buffers{prefix, payload}).WriteTo(uc); err != nil {
			return
		}
	}
}

// closeBoth closes a relayed pair of connections.
type closeBoth struct{ a, b net.Conn }

func (cb closeBoth) Close() error {
	cb.a.Close()
	return cb.b.Close()
}

// track adds (or removes) a peer link; false when the cluster is closing.
func (p *proxy) track(cl io.Closer, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !add {
		delete(p.peers, cl)
		return true
	}
	if p.peers == nil {
		return false
	}
	p.peers[cl] = struct{}{}
	return true
}

// relayClient runs a client session: the reader (here) decodes and
// controls each request as it arrives, a handler forwards them in order,
// and an answer reader relays the server's answers back.
func (p *proxy) relayClient(cc net.Conn, br *bufio.Reader, uc net.Conn, ubr *bufio.Reader) {
	s := &session{p: p, cc: cc, uc: uc, done: make(chan struct{}), pending: make(map[uint64]pendingReq)}
	p.mu.Lock()
	if p.sessions == nil {
		p.mu.Unlock()
		s.close()
		return
	}
	p.sessions[s] = struct{}{}
	p.mu.Unlock()
	queue := make(chan queued, 256)
	s.handlers.Add(2)
	go s.handleLoop(queue)
	go s.answerLoop(ubr)
	defer func() {
		close(queue)
		s.close()
		s.handlers.Wait()
		p.mu.Lock()
		delete(p.sessions, s)
		p.mu.Unlock()
	}()
	var buf []byte
	for {
		req := &strandpb.Request{}
		var err error
		if buf, err = frame.Decode(br, buf, frame.BytesMaxDefault, req); err != nil {
			return
		}
		select {
		case queue <- queued{req: req, action: p.c.control(p.id, req)}:
		case <-s.done:
			return
		}
	}
}

// queued is a request read and controlled, waiting for the handler.
type queued struct {
	req    *strandpb.Request
	action Action
}

func (s *session) close() {
	s.closeMu.Do(func() {
		close(s.done)
		s.cc.Close()
		s.uc.Close()
	})
}

// handleLoop handles queued requests in order until the queue closes or
// one closes the session; later requests are then dropped.
func (s *session) handleLoop(queue <-chan queued) {
	defer s.handlers.Done()
	for q := range queue {
		if !s.handle(q.req, q.action) {
			s.close()
		}
	}
}

// handle carries out one request's action; false closes the session.
func (s *session) handle(req *strandpb.Request, a Action) bool {
	if a.Hold != nil {
		select {
		case <-a.Hold:
		case <-s.done:
			return false
		}
	}
	select {
	case <-s.done:
		return false
	default:
	}
	if a.DropBefore {
		return false
	}
	if a.Error != nil {
		return s.write(errorResponse(req, a.Error))
	}
	if a.Duplicate && !s.forward(req, true, nil) {
		return false
	}
	var answered chan struct{}
	if a.DropAfter {
		answered = make(chan struct{})
	}
	if !s.forward(req, false, answered) {
		return false
	}
	if a.DropAfter {
		t := time.NewTimer(proxyAnswerWaitMax)
		defer t.Stop()
		select {
		case <-answered:
		case <-s.done:
		case <-t.C:
		}
		return false
	}
	return true
}

// forward sends req to the server under a fresh correlation id.
func (s *session) forward(req *strandpb.Request, discard bool, answered chan struct{}) bool {
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	s.pending[id] = pendingReq{clientID: req.GetCorrelationId(), discard: discard, answered: answered}
	s.mu.Unlock()
	up := &strandpb.Request{CorrelationId: id, Body: req.GetBody()}
	out, err := frame.Append(nil, up)
	if err != nil {
		panic("fake: cannot frame a request that was decoded: " + err.Error())
	}
	_, err = s.uc.Write(out)
	return err == nil
}

// answerLoop relays the server's answers under the client's correlation
// ids, dropping the answer to the first copy of a duplicated request.
func (s *session) answerLoop(ubr *bufio.Reader) {
	defer s.handlers.Done()
	defer s.close()
	var buf []byte
	for {
		resp := &strandpb.Response{}
		var err error
		if buf, err = frame.Decode(ubr, buf, frame.BytesMaxDefault, resp); err != nil {
			return
		}
		s.mu.Lock()
		pr, ok := s.pending[resp.GetCorrelationId()]
		delete(s.pending, resp.GetCorrelationId())
		s.mu.Unlock()
		if !ok {
			return // the server answered a request nobody sent: a server bug
		}
		if pr.answered != nil {
			close(pr.answered)
			continue // DropAfter: applied, never answered
		}
		if pr.discard {
			continue
		}
		resp.CorrelationId = pr.clientID
		if !s.write(resp) {
			return
		}
	}
}

func (s *session) write(resp *strandpb.Response) bool {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	var err error
	if s.out, err = frame.Append(s.out[:0], resp); err != nil {
		panic("fake: cannot frame a response: " + err.Error())
	}
	_, err = s.cc.Write(s.out)
	return err == nil
}

// setUpstream points the proxy at a new server and closes every relayed
// connection to the old one, sessions and peer links alike.
func (p *proxy) setUpstream(addr string) {
	p.mu.Lock()
	p.upstream = addr
	peers := p.peers
	p.peers = make(map[io.Closer]struct{})
	p.mu.Unlock()
	for cl := range peers {
		cl.Close()
	}
	p.dropSessions()
}

// dropSessions closes every client session (peer links stay).
func (p *proxy) dropSessions() {
	p.mu.Lock()
	ss := make([]*session, 0, len(p.sessions))
	for s := range p.sessions {
		ss = append(ss, s)
	}
	p.mu.Unlock()
	for _, s := range ss {
		s.close()
	}
}

// shut stops accepting and closes every session and peer link.
func (p *proxy) shut() {
	p.ln.Close()
	p.dropSessions()
	p.mu.Lock()
	peers := p.peers
	p.peers, p.sessions = nil, nil
	p.mu.Unlock()
	for cl := range peers {
		cl.Close()
	}
}

// errorResponse answers req with e everywhere it can go.
func errorResponse(req *strandpb.Request, e *strandpb.Error) *strandpb.Response {
	resp := &strandpb.Response{CorrelationId: req.GetCorrelationId()}
	switch b := req.GetBody().(type) {
	case *strandpb.Request_Produce:
		out := &strandpb.ProduceResponse{}
		for _, p := range b.Produce.GetPartitions() {
			out.Partitions = append(out.Partitions, &strandpb.ProduceResponse_Partition{Topic: p.GetTopic(), Partition: p.GetPartition(), Error: e, BaseOffset: -1})
		}
		resp.Body = &strandpb.Response_Produce{Produce: out}
	case *strandpb.Request_Fetch:
		out := &strandpb.FetchResponse{}
		for _, p := range b.Fetch.GetPartitions() {
			out.Partitions = append(out.Partitions, &strandpb.FetchResponse_Partition{Topic: p.GetTopic(), Partition: p.GetPartition(), Error: e})
		}
		resp.Body = &strandpb.Response_Fetch{Fetch: out}
	case *strandpb.Request_ListOffsets:
		out := &strandpb.ListOffsetsResponse{}
		for _, p := range b.ListOffsets.GetPartitions() {
			out.Partitions = append(out.Partitions, &strandpb.ListOffsetsResponse_Partition{Topic: p.GetTopic(), Partition: p.GetPartition(), Error: e})
		}
		resp.Body = &strandpb.Response_ListOffsets{ListOffsets: out}
	case *strandpb.Request_MovePartitions:
		// A node answers each move on its own (each is its own metadata
		// proposal), so a refusal such as NOT_CONTROLLER comes per move.
		out := &strandpb.MovePartitionsResponse{}
		for _, m := range b.MovePartitions.GetMoves() {
			out.Moves = append(out.Moves, &strandpb.MovePartitionsResponse_Move{Topic: m.GetTopic(), Partition: m.GetPartition(), Error: e})
		}
		resp.Body = &strandpb.Response_MovePartitions{MovePartitions: out}
	default:
		resp.Error = e
	}
	return resp
}
