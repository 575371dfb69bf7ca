package simnet

import (
	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/linearizability"
	"github.com/strandlog/strand/proto/strandpb"
	"time"
)

// txnReadBytes is the reader's fetch budget per partition: a native
// read_committed answer leaves out aborted batches, and one whose read
// held only aborted batches answers none, so the reader could never pass
// them (seed 11 stalled at offset 8 with a budget of one batch): the
// budget spans every aborted run of the workload's small transactions.
const txnReadBytes = 1 << 20

// tail is the reader while the producers run: it follows partition q at
// read_committed from where it was, one fetch, then the next partition,
// so reads overlap open transactions (an aborted or intermediate read,
// or one that splits a transaction, shows here first).
func (s *txnSim) tail(q int32) {
	if s.active == 0 || s.finished {
		return
	}
	c := s.reader
	offset := s.tailPos[q]
	req := &strandpb.Request{Body: &strandpb.Request_Fetch{Fetch: &strandpb.FetchRequest{IsolationLevel: 1, IncludeMarkers: true,
		Partitions: []*strandpb.FetchRequest_Partition{{Topic: topicTxn, Partition: q, Offset: offset, MaxBytes: txnReadBytes}}}}}
	call := int64(s.ww.w.now())
	target := c.randomNode()
	if s.readLeader >= 0 {
		target = s.readLeader
	}
	nextQ := (q + 1) % txnTopicPartitions
	var wc *wireCall
	wc = s.ww.call(c, target, req, func(resp *strandpb.Response, err error) {
		part, err := s.fetchedPartition(resp, err, wc)
		if err != nil {
			s.readLeader = leaderHint(c, err)
			s.tailPos[q] = s.skipTrimmed(linearizability.TopicPartition{Topic: topicTxn, Partition: q}, offset, err)
			c.after(wireBackoff.Delay(2, c.rng), func() { s.tail(nextQ) })
			return
		}
		s.readLeader = target
		s.tailPos[q] = s.recordPoll(linearizability.TopicPartition{Topic: topicTxn, Partition: q}, offset, part, call)
		c.after(time.Duration(1+c.rng.IntN(20))*time.Millisecond, func() { s.tail(nextQ) })
	})
}

// skipTrimmed is the offset to read tp from after err: the log start
// when it passed offset (the partition is then not drained whole), else
// offset.
func (s *txnSim) skipTrimmed(tp linearizability.TopicPartition, offset int64, err error) int64 {
	var e *clientlib.Error
	if asWireError(err, &e) && e.Code == strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE && e.LogStartOffset > offset {
		s.trimmed[tp] = true
		s.ww.w.coverage.Inc("txn/read-trimmed")
		return e.LogStartOffset
	}
	return offset
}

// fetchedPartition is a one-partition fetch answer's partition, or its
// error; an answer damaged in flight (corrupt.go) whose batches do not
// decode is refused CORRUPT_BATCH, as a client must.
func (s *txnSim) fetchedPartition(resp *strandpb.Response, err error, wc *wireCall) (*strandpb.FetchResponse_Partition, error) {
	part, err := fetchedPart(resp, err)
	if err == nil && wc.respDamaged {
		if r := decodeWireFetch(0, part); r.err != nil {
			s.ww.w.coverage.Inc("event/corrupt-fetch-refused")
			return nil, &clientlib.Error{Code: strandpb.ErrorCode_ERROR_CODE_CORRUPT_BATCH, Message: r.err.Error()}
		}
	}
	return part, err
}

// fetchedPart is a one-partition fetch answer's partition, or its error.
func fetchedPart(resp *strandpb.Response, err error) (*strandpb.FetchResponse_Partition, error) {
	if err == nil {
		err = wireErr(resp.GetError())
	}
	if err != nil {
		return nil, err
	}
	ps := resp.GetFetch().GetPartitions()
	if len(ps) != 1 {
		return nil, &clientlib.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST}
	}
	if err := wireErr(ps[0].GetError()); err != nil {
		return nil, err
	}
	return ps[0], nil
}

// leaderHint is the node an error names as leader, -1 when none.
func leaderHint(c *wireClient, err error) int {
	if e := (*clientlib.Error)(nil); asWireError(err, &e) && e.LeaderID != 0 {
		return c.nodeIndexOf(e.LeaderID)
	}
	return -1
}

// finish runs, once the run healed: the session members close, every
// partition of topicTxn and topicTxnOut is read at read_committed from
// offset 0, the history is checked, then runs then (the final drain).
func (s *txnSim) finish(then func()) {
	if s == nil || s.finished {
		then()
		return
	}
	s.finished = true
	s.endTasks() // the producers are done; zombies still paused are fenced
	s.ses.stop(0, func() { s.readPartition(0, 0, 0, then) })
}

// readPartition fetches drainTPs[i] at read_committed from offset on
// until it reached the high-water mark with nothing open (LSO equal to
// it), recording each answer as a poll, then reads the next partition;
// after the last it reads the session group's offsets and checks.
func (s *txnSim) readPartition(i int, offset int64, round int, then func()) {
	if i == len(s.drainTPs) {
		s.ses.readCommitted(0, func(committed map[linearizability.TopicPartition]int64) {
			s.check()
			s.ses.checkExactlyOnce(committed)
			then()
		})
		return
	}
	tp := s.drainTPs[i]
	c := s.reader
	if round >= txnReadsMax {
		s.ww.w.coverage.Inc("txn/read-incomplete")
		s.readPartition(i+1, 0, 0, then)
		return
	}
	req := &strandpb.Request{Body: &strandpb.Request_Fetch{Fetch: &strandpb.FetchRequest{MaxWaitMs: 0, IsolationLevel: 1,
		IncludeMarkers: true, Partitions: []*strandpb.FetchRequest_Partition{{Topic: tp.Topic, Partition: tp.Partition, Offset: offset, MaxBytes: txnReadBytes}}}}}
	call := int64(s.ww.w.now())
	target := c.randomNode()
	if s.readLeader >= 0 {
		target = s.readLeader
	}
	var wc *wireCall
	wc = s.ww.call(c, target, req, func(resp *strandpb.Response, err error) {
		part, err := s.fetchedPartition(resp, err, wc)
		if err != nil {
			s.readLeader = leaderHint(c, err)
			next := s.skipTrimmed(tp, offset, err)
			c.after(wireBackoff.Delay(min(round+1, 8), c.rng), func() { s.readPartition(i, next, round+1, then) })
			return
		}
		s.readLeader = target
		next := s.recordPoll(tp, offset, part, call)
		if next >= part.GetHighWatermark() && part.GetLastStableOffset() >= part.GetHighWatermark() {
			if !s.trimmed[tp] {
				s.hist.Drained = append(s.hist.Drained, tp)
			}
			s.readPartition(i+1, 0, 0, then)
			return
		}
		delay := c.thinkTime()
		if next == offset {
			delay = wireBackoff.Delay(min(round+1, 8), c.rng) // an open transaction: wait for its end
		}
		c.after(delay, func() { s.readPartition(i, next, round+1, then) })
	})
}

// recordPoll records one read_committed answer of partition tp as a poll
// and returns the offset to read next.
func (s *txnSim) recordPoll(tp linearizability.TopicPartition, offset int64, part *strandpb.FetchResponse_Partition, call int64) int64 {
	poll := linearizability.TxnPoll{Client: linearizability.ClientID(s.reader.index), TP: tp, ReadCommitted: true,
		Call: call, Return: int64(s.ww.w.now())}
	next := offset
	for _, b := range part.GetBatches() {
		at := b.GetBaseOffset()
		if b.GetMarker() != nil {
			next = max(next, at+1)
			continue
		}
		err := recordbatch.Decode(b.GetRecords(), func(_ int, rec recordbatch.Record) error {
			if at >= offset {
				poll.Records = append(poll.Records, linearizability.TxnRead{TP: tp, Offset: at, Value: string(rec.Value)})
			}
			at++
			return nil
		})
		if err != nil {
			s.ww.w.fail("txn: fetched batch of %s at %d does not decode: %v", tp, b.GetBaseOffset(), err)
		}
		next = max(next, at)
	}
	if len(poll.Records) > 0 {
		s.ww.w.coverage.Inc("txn/read-committed")
	}
	s.hist.Polls = append(s.hist.Polls, poll)
	return next
}

// checkEarlyEnd checks the history of a run that ended before the final
// reads (the time limit or the event budget): no partition is drained, so
// lost writes go unchecked, but every read made is.
func (s *txnSim) checkEarlyEnd() {
	if s != nil && !s.checked {
		s.check()
	}
}

// check runs CheckTxn over the history: every anomaly fails the seed.
func (s *txnSim) check() {
	s.checked = true
	for i, t := range s.hist.Txns {
		if t.Outcome == linearizability.TxnAborted && s.sentCommit[i] {
			panic("simnet: a transaction that sent EndTxn(commit) recorded as aborted")
		}
	}
	for _, a := range linearizability.CheckTxn(&s.hist, linearizability.TxnOptions{}) {
		s.ww.w.fail("txn: %s", a)
	}
	s.ww.w.coverage.Inc("txn/checked")
}
