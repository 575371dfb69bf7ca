package simnet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/node"
)

// The compacted-topic workload (issue 24), Options.Compacted.
//
// The nodes run as users' do (cleanup.policy=compact is taken by
// default), with node.Config.PrefixChunkBytes of 1 (one batch a chunk),
// so a replica that installs a peer's prefix (after a raft snapshot past
// its own: the raft logs are trimmed up to the prefixes) does so in
// several chunks. A writer on clientlib's own idempotent producer
// creates topicKV (cleanup.policy=compact, 4 KiB segments rolled after a
// second at most, a dirty ratio of 1%, delete.retention.ms
// kvDeleteRetention) through clientlib's
// CreateTopic, then writes kvWritesMax updates over kvKeys keys, one in
// kvTombstoneOneIn a tombstone (a null value; the key then rests a while
// before its next update), each record carrying its
// write id in a header; one write event in kvBurstOneIn is a burst of
// records sent together (one batch). The leaders decide passes at their retention
// checks and every replica compacts, under every fault of the seed; the
// replicas' digests (digests.go) compare each replica's engine state,
// compaction record included, with a reference at every applied index.
// A reader on clientlib's own Consumer reads the whole partition from
// the earliest offset now and then while the writer runs, and once more
// after the final heal.
//
// One kv seed in two (kvCompactDelete, a function of the seed) makes the
// topic cleanup.policy=compact,delete with retention.ms and retention.bytes
// drawn small (kvRetention), so the leaders' retention trims move the log
// start inside and past the compacted prefixes while passes run, under the
// same faults; the reader's consumer then resets to the earliest offset
// when a trim passes its position. When the writer is done the topic is
// altered to compact (alterToCompact), so the final read checks every key
// retention has not reached by then.
//
// Checks, on every read:
//   - the log starts at 0 (a compact topic's log start never moves; on a
//     compact,delete one it may), no record is read below the log start
//     its fetch answered with, and offsets strictly increase;
//   - every record is a write the writer made, with its key, value (or
//     null) and header, at the offset its acknowledgement named when it
//     was acknowledged, never a write whose failure was definite, never
//     twice, and in the writer's order (one idempotent producer: a later
//     write never sits below an earlier one);
//
// and on the final read, after the writer stopped:
//   - every key's last record sits at or after its last acknowledged
//     write (compaction kept the latest value, or a newer maybe-written
//     one), unless that write is a tombstone, no record of the key is
//     left and delete.retention.ms (less the spread of the nodes' clock
//     skews since the tombstone was sent, jumps included) had passed
//     since the tombstone was sent, or the write lies below the log start
//     a fetch of the read answered with (retention removed it: only on a
//     compact,delete topic, never otherwise).
const (
	topicKV           = "sim-kv"
	kvKeys            = 24
	kvWritesMax       = 240
	kvTombstoneOneIn  = 4
	kvDeleteRetention = 8 * time.Second
	kvSegmentBytes    = 4096
	kvWriteGapMax     = 100 * time.Millisecond  // think time between writes
	kvReadEvery       = 1500 * time.Millisecond // a read from the start while the writer runs
	kvReadLimit       = 30 * time.Second        // a read's bound (the final read must finish)
	kvIDHeader        = "w"
	kvBurstOneIn      = 3 // a write event in three is a burst (one batch)
	kvBurstMax        = 6
	// A tombstoned key rests this long before the writer updates it
	// again, so that reads meet tombstones that are their key's latest
	// write, inside and past delete.retention.ms.
	kvRestMin = 2 * time.Second
	kvRestMax = 12 * time.Second
	// On a compact,delete topic, one write event in kvDeleteEvery first
	// deletes the records below up to kvDeleteStep offsets past the log
	// start (deleteSome).
	kvDeleteEvery = 25
	kvDeleteStep  = 8
)

// kvCheckpointEntriesMax caps a seed's checkpoint interval when it runs
// the workload: a pass cleans only below the leader's checkpoint, and
// with production's 1,024 entries the topic's some 240 records would
// never see one (the topic's 4 KiB segments roll every 40 or so). With
// 32, a seed whose writes came late or in large batches (a partition
// unavailable a while, its producer's batches piling up) had its tail
// behind no checkpoint for the rest of the run, and one kv seed in three
// compacted at most once (seeds 1-40); with 8 and the topic's segment.ms
// of a second (the open segment, which a pass never cleans, rolls once
// the writes stop) passes come twice as often (TestSimCompacted: 52
// decisions in 10 seeds, from 24).
const kvCheckpointEntriesMax = 8

// kvPolicyStream separates the policy draws from the seed's other uses.
const kvPolicyStream = 0x6b76706f6c696379

// kvCompactDelete reports whether a seed running the workload makes
// topicKV cleanup.policy=compact,delete (one such seed in two): a function
// of the seed alone, so the catch-rate sweep knows the seeds that ran it.
func kvCompactDelete(o Options) bool { return o.Compacted && mix64(o.Seed^kvPolicyStream)&1 == 1 }

// kvRetention is a compact,delete seed's retention.ms and retention.bytes
// (-1: none; never both): seconds of a writer's run of some twenty, and a
// few of the topic's 4 KiB segments, so trims come while the writer runs.
func kvRetention(o Options) (ms, bytes int64) {
	x := mix64(o.Seed ^ kvPolicyStream ^ 1)
	ms = []int64{2000, 4000, 8000, -1}[x%4]
	bytes = []int64{-1, 8 << 10, 16 << 10}[(x/4)%3]
	if ms < 0 && bytes < 0 {
		bytes = 16 << 10
	}
	return ms, bytes
}

// WithCompacted is o with the compacted-topic workload on.
func WithCompacted(o Options) Options {
	o.Compacted = true
	return capCheckpointEntries(o, kvCheckpointEntriesMax) // wire_txn.go
}

// kvWrite is one record the writer produced.
type kvWrite struct {
	key    int
	tomb   bool
	sentAt time.Duration
	state  kvState
	offset int64 // when acknowledged
}

// kvState is a write's outcome as its promise told it.
type kvState uint8

const (
	kvPending kvState = iota
	kvAcked
	kvMaybe  // failed, may be in the log (clientlib.MaybeWritten)
	kvFailed // failed definitely: never in the log
)

// kvSim is the workload and its history.
type kvSim struct {
	ww     *wireWorkload
	writer *wireClient
	reader *wireClient
	prod   *clientlib.Client
	cons   *clientlib.Client
	writes []kvWrite
	// deletes: topicKV is compact,delete (kvCompactDelete); trimming: a
	// DeleteRecords of the writer's runs (deleteSome); logStart: the
	// newest log start one answered with.
	deletes  bool
	trimming bool
	logStart int64
	// restUntil is, per key, until when the writer leaves it deleted
	// after a tombstone (a read then finds the tombstone its latest).
	restUntil [kvKeys]time.Duration
	pending   int  // writes whose promise has not run
	stopped   bool // the writer is done (counted out of the workload)
	reading   bool // a read runs
	finished  bool // the final read is due or ran
	// finalThen is set when the final read waits for a read of the run
	// to end; it runs after the final read.
	finalThen func()
}

// kvClients counts the client slots the workload uses.
func kvClients(o Options) int {
	if !o.Compacted {
		return 0
	}
	return 2
}

// kvPartitions counts topicKV's partitions, checked as groups after the
// transactional workload's (world.groupOf).
func kvPartitions(o Options) int {
	if !o.Compacted {
		return 0
	}
	return 1
}

// kvTP is topicKV's partition.
var kvTP = node.TopicPartition{Topic: topicKV, Partition: 0}

// newKVSim creates the workload's clients from index first on; nil
// without Options.Compacted.
func newKVSim(ww *wireWorkload, first int) *kvSim {
	if !ww.w.opts.Compacted {
		return nil
	}
	s := &kvSim{ww: ww, deletes: kvCompactDelete(ww.w.opts)}
	s.writer = newWireClient(ww, first, kindMember)
	s.writer.inFlightMax = wireInFlightChoices[s.writer.rng.IntN(len(wireInFlightChoices))]
	s.writer.idempotent = true // the order check needs it (and compaction keeps producer state)
	s.prod = newLibClient(s.writer, clientlib.AcksAll)
	s.reader = newWireClient(ww, first+1, kindMember)
	o := ww.w.opts
	seeds := make([]string, len(ww.peers))
	for i, p := range ww.peers {
		seeds[i] = p.Address
	}
	cl, err := clientlib.NewClient(append([]clientlib.Opt{clientlib.Simulated(libTransport{s.reader}),
		clientlib.SeedAddresses(seeds...), clientlib.RandSeed(s.reader.rng.Uint64()),
		clientlib.RequestTimeout(o.libRequestTimeout()), clientlib.StallTimeout(o.libStallTimeout()), clientlib.MaxRetries(attemptsMax),
		clientlib.RetryBackoff(wireBackoff.Base, wireBackoff.Max), clientlib.MetadataMaxAge(libMetadataMaxAge)},
		ww.sasl.libOpts(s.reader)...)...)
	if err != nil {
		panic("simnet: kv reader options: " + err.Error())
	}
	s.cons = cl
	return s
}

// configure sets a node's prefix installs to chunks of one batch (the
// topic's prefixes are a few KiB: an install then takes several chunks).
func (s *kvSim) configure(cfg *node.Config) {
	if s != nil {
		cfg.PrefixChunkBytes = 1
	}
}

// start creates topicKV, then writes; the workload counts as active
// until the writer is done.
func (s *kvSim) start() {
	if s == nil {
		return
	}
	s.ww.active++
	s.writer.after(0, func() { s.create(0) })
}

// create makes topicKV through clientlib's CreateTopic until it exists.
func (s *kvSim) create(attempt int) {
	cfg := map[string]string{"cleanup.policy": "compact", "segment.bytes": strconv.Itoa(kvSegmentBytes),
		"min.cleanable.dirty.ratio": "0.01", "segment.ms": "1000", "delete.retention.ms": strconv.FormatInt(kvDeleteRetention.Milliseconds(), 10)}
	if s.deletes {
		ms, bytes := kvRetention(s.ww.w.opts)
		cfg["cleanup.policy"] = "compact,delete"
		cfg["retention.ms"], cfg["retention.bytes"] = strconv.FormatInt(ms, 10), strconv.FormatInt(bytes, 10)
	}
	var err error
	s.ww.w.simRun(s.prod, func(ctx context.Context) {
		err = s.prod.CreateTopic(ctx, topicKV, 1, int32(s.ww.w.opts.Replication), cfg)
	}, func() {
		if err == nil || errors.Is(err, clientlib.ErrTopicExists) {
			s.ww.w.coverage.Inc("kv/topic-created")
			if s.deletes {
				s.ww.w.coverage.Inc("kv/compact-delete")
			}
			s.writer.after(s.gap(), s.write)
			s.reader.after(kvReadEvery, s.readDuringRun)
			return
		}
		if attempt >= attemptsMax {
			s.ww.w.fail("kv: create topic %s kept failing: %v", topicKV, err)
			s.stop()
			return
		}
		s.writer.after(wireBackoff.Delay(attempt+1, s.writer.rng), func() { s.create(attempt + 1) })
	})
}

// gap is the writer's think time.
func (s *kvSim) gap() time.Duration {
	return time.Duration(1 + s.writer.rng.Int64N(int64(kvWriteGapMax)))
}

// write produces the next update (or tombstone) of a drawn key, or, one
// time in kvBurstOneIn, a burst of 2 to kvBurstMax of them at once, which
// the producer sends as one batch (keys drawn independently, so a burst
// may update one key twice): a pass then thins batches of several
// records, keeping some and removing others inside one offset range. The
// next write waits a think time per record of the burst, so the writes
// span as long as without bursts: with one think time, the writer ended
// sooner, fewer reads ran while tombstones were young, and TombstoneEarly
// was caught in 16 of 50 kv seeds (seeds 1-200), from 36.
func (s *kvSim) write() {
	if len(s.writes) >= kvWritesMax {
		if s.pending == 0 {
			s.stop()
		}
		return
	}
	n := 1
	if s.writer.rng.IntN(kvBurstOneIn) == 0 {
		n = 2 + s.writer.rng.IntN(kvBurstMax-1)
		s.ww.w.coverage.Inc("kv/burst")
	}
	if s.deletes && !s.trimming && len(s.writes)%kvDeleteEvery == kvDeleteEvery-1 {
		s.deleteSome()
	}
	gap := time.Duration(0)
	for i := 0; i < n && len(s.writes) < kvWritesMax; i++ {
		s.writeOne()
		gap += s.gap() // a burst of n waits n think times: the writes span the same time
	}
	s.writer.after(max(gap, 1), s.write)
}

// deleteSome deletes the records below a few offsets past the log start
// last seen (DeleteRecords, which Kafka takes on a compact,delete topic),
// so trims cut into the compacted prefixes, mid-batch too, while passes
// run, beside retention's (which seldom reaches a prefix holding only the
// young latest values of a small key space). A few offsets a time: the
// final read still judges most keys.
func (s *kvSim) deleteSome() {
	top := int64(-1)
	for _, wr := range s.writes {
		if wr.state == kvAcked {
			top = max(top, wr.offset)
		}
	}
	before := min(s.logStart+1+s.writer.rng.Int64N(kvDeleteStep), top+1)
	if before <= s.logStart {
		return
	}
	s.trimming = true
	var logStart int64
	var err error
	s.ww.w.simRun(s.prod, func(ctx context.Context) {
		logStart, err = s.prod.DeleteRecords(ctx, topicKV, 0, before)
	}, func() {
		s.trimming = false
		if err == nil {
			s.logStart = max(s.logStart, logStart)
			s.ww.w.coverage.Inc("kv/delete-records")
		}
	})
}

// writeOne produces one update (or tombstone) of a drawn key.
func (s *kvSim) writeOne() {
	rng := s.writer.rng
	now := s.ww.w.now()
	key := rng.IntN(kvKeys)
	for i := 0; i < kvKeys && s.restUntil[key] > now; i++ {
		key = (key + 1) % kvKeys // a deleted key stays deleted a while
	}
	id := len(s.writes)
	s.writes = append(s.writes, kvWrite{key: key, tomb: rng.IntN(kvTombstoneOneIn) == 0, sentAt: now, offset: -1})
	wr := &s.writes[id]
	if wr.tomb {
		s.restUntil[key] = now + kvRestMin + time.Duration(rng.Int64N(int64(kvRestMax-kvRestMin)))
	}
	r := &clientlib.Record{Topic: topicKV, Partition: 0, Key: kvKey(wr.key),
		Headers: []clientlib.Header{{Key: kvIDHeader, Value: []byte(strconv.Itoa(id))}}}
	if !wr.tomb {
		r.Value = kvValue(id)
	}
	s.pending++
	s.prod.Produce(context.Background(), r, func(r *clientlib.Record, err error) { s.written(id, r, err) })
}

// written records write id's outcome.
func (s *kvSim) written(id int, r *clientlib.Record, err error) {
	wr := &s.writes[id]
	s.pending--
	switch {
	case err == nil && r.Offset >= 0:
		wr.state, wr.offset = kvAcked, r.Offset
		s.ww.w.coverage.Inc("kv/acked")
		if wr.tomb {
			s.ww.w.coverage.Inc("kv/tombstone-acked")
		}
	case err != nil && libFailureDefinite(err):
		wr.state = kvFailed
		s.ww.w.coverage.Inc("kv/failed-definite")
	default:
		wr.state = kvMaybe
		s.ww.w.coverage.Inc("kv/maybe")
	}
	if len(s.writes) >= kvWritesMax && s.pending == 0 {
		s.stop()
	}
}

// stop counts the writer out of the workload, once: on a compact,delete
// topic after altering it to compact (alterToCompact).
func (s *kvSim) stop() {
	if s.stopped {
		return
	}
	if s.trimming {
		s.writer.after(kvWriteGapMax, s.stop) // the DeleteRecords task first: one task a client
		return
	}
	s.stopped = true
	if s.deletes {
		s.alterToCompact(0)
		return
	}
	s.ww.clientDone()
}

// alterToCompact alters a compact,delete topicKV to cleanup.policy=compact
// once the writer is done (topic alter under the seed's faults), so that
// retention, which raced the passes while the writer ran, removes no more:
// the final read then holds every key whose latest write is still past the
// log start to compaction's promise. A failed alter is retried; given up,
// the final read only excuses more keys (below the log start).
func (s *kvSim) alterToCompact(attempt int) {
	var err error
	s.ww.w.simRun(s.prod, func(ctx context.Context) {
		_, err = s.prod.AlterTopicConfig(ctx, topicKV, map[string]string{"cleanup.policy": "compact"}, nil)
	}, func() {
		if err == nil || attempt >= attemptsMax {
			if err == nil {
				s.ww.w.coverage.Inc("kv/altered-to-compact")
			}
			s.ww.clientDone()
			return
		}
		s.writer.after(wireBackoff.Delay(attempt+1, s.writer.rng), func() { s.alterToCompact(attempt + 1) })
	})
}

func kvKey(k int) []byte { return []byte("k" + strconv.Itoa(k)) }

func kvValue(id int) []byte { return []byte("v" + strconv.Itoa(id)) }

// readDuringRun reads the partition from the start while the writer runs.
func (s *kvSim) readDuringRun() {
	if s.stopped || s.finished {
		return
	}
	if !s.reading {
		s.read(false, s.afterRead)
	}
	s.reader.after(kvReadEvery, s.readDuringRun)
}

// afterRead ends a read of the run: the final read follows if it waited.
func (s *kvSim) afterRead() {
	if then := s.finalThen; then != nil {
		s.finalThen = nil
		s.read(true, then)
	}
}

// finish runs the final read after the heal, then then.
func (s *kvSim) finish(then func()) {
	if s == nil || s.finished {
		then()
		return
	}
	s.finished = true
	if s.reading {
		s.finalThen = then // after the read in flight (afterRead)
		return
	}
	s.read(true, then)
}

// kvRead is one read of the whole partition.
type kvRead struct {
	final    bool
	start    time.Duration
	target   int64 // read until the position reaches it
	answered bool  // a fetch answered: target covers its high-water mark
	polls    int
	failed   int   // Polls in a row that brought an error and no record
	logStart int64 // the largest log start a fetch answered with
	// below is the first record read below the log start its fetch
	// answered with (nil: none).
	below *clientlib.Record
	recs  []*clientlib.Record
	k     *clientlib.Consumer
}

// read reads topicKV from the earliest offset up to the high-water mark
// its first answer names, and past every write acknowledged before it
// began; then checks, then runs then.
func (s *kvSim) read(final bool, then func()) {
	s.reading = true
	opts := []clientlib.ConsumerOpt{clientlib.FetchMaxWait(libConsumerMaxWaitMin)}
	if s.deletes {
		opts = append(opts, clientlib.OffsetResetPolicy(clientlib.ResetEarliest)) // a trim may pass the position
	}
	rd := &kvRead{final: final, start: s.ww.w.now(), logStart: -1, k: clientlib.NewConsumer(s.cons, opts...)}
	rd.k.Assign(topicKV, 0, clientlib.OffsetEarliest())
	for _, wr := range s.writes {
		if wr.state == kvAcked {
			rd.target = max(rd.target, wr.offset+1)
		}
	}
	s.poll(rd, then)
}

// poll runs one Poll of read rd as a task.
func (s *kvSim) poll(rd *kvRead, then func()) {
	w := s.ww.w
	if w.now()-rd.start > kvReadLimit {
		s.reading = false
		if rd.final {
			w.fail("kv: the final read of %s from the start did not reach offset %d in %v (at %d)",
				topicKV, rd.target, kvReadLimit, s.position(rd))
		} else {
			w.coverage.Inc("kv/read-incomplete")
		}
		then()
		return
	}
	var fs clientlib.Fetches
	s.ww.w.simRun(s.cons, func(ctx context.Context) { fs = rd.k.Poll(ctx) }, func() {
		erred, got := false, false
		for _, f := range fs {
			erred, got = erred || f.Err != nil, got || len(f.Records) > 0
			if f.Topic != topicKV || f.Partition != 0 {
				continue
			}
			if f.Err != nil {
				w.coverage.Inc("kv/read-error")
				// The records before a corrupt batch come with its
				// error (clientlib's FetchPartition): the consumer's
				// position is past them, so they are part of the read.
				rd.recs = append(rd.recs, f.Records...)
				continue
			}
			if !rd.answered || rd.final {
				// The final read goes to the newest high-water mark:
				// a record committed during it may supersede one read.
				rd.target = max(rd.target, f.HighWatermark)
			}
			rd.answered, rd.logStart = true, max(rd.logStart, f.LogStartOffset)
			for _, r := range f.Records {
				if r.Offset < f.LogStartOffset && rd.below == nil {
					rd.below = r // checked with the read
				}
			}
			rd.recs = append(rd.recs, f.Records...)
		}
		rd.polls++
		// An empty partition may answer no Poll with a fetch: a few
		// polls at the target do.
		if at := s.position(rd); at >= max(rd.target, 0) && (rd.answered || rd.polls >= 3) {
			if !rd.answered && len(rd.recs) == 0 {
				// No fetch answered, no record came: the position is
				// where "earliest" resolved, the log start then. (Records
				// that came with a fetch's error, those before a corrupt
				// batch, moved the position past them: seed 141 read
				// offset 0 so and took 1 for the log start.)
				rd.logStart = max(rd.logStart, at)
			}
			s.reading = false
			s.check(rd)
			then()
			return
		}
		// An application backs off while its polls fail (a definite
		// error such as an unknown SASL user comes back at once):
		// Kafka's retry.backoff.ms, doubling.
		if erred && !got {
			rd.failed++
		} else {
			rd.failed = 0
		}
		wait := s.reader.thinkTime() + time.Millisecond
		if rd.failed > 0 {
			wait += wireBackoff.Delay(rd.failed, s.reader.rng)
		}
		s.reader.after(wait, func() { s.poll(rd, then) })
	})
}

// checkLatest holds read rd to compaction's promise, given the offset of
// each key's last record it read (-1: none): a key's latest write is
// never compacted away, except a tombstone once delete.retention.ms has
// passed. Which write is a key's latest: on the final read (the writer
// done) its last acknowledged one, as a newer maybe-written record may
// supersede it only from a higher offset, which the read covers; on a
// read during the run, only a key whose last write sent before the read
// ended was acknowledged before it began (nothing can supersede it).
func (s *kvSim) checkLatest(rd *kvRead, last []int64, fail func(string, ...any)) {
	w := s.ww.w
	for k := range kvKeys {
		latest := -1
		for id, wr := range s.writes {
			switch {
			case wr.key != k:
			case rd.final && wr.state == kvAcked && (latest < 0 || wr.offset > s.writes[latest].offset):
				latest = id
			case !rd.final:
				latest = id // the last sent; judged below
			}
		}
		if latest < 0 {
			continue
		}
		wr := s.writes[latest]
		if !rd.final && (wr.state != kvAcked || wr.sentAt >= rd.start || wr.offset >= rd.target) {
			continue // still in flight, or it may be superseded unseen
		}
		if last[k] >= wr.offset {
			continue
		}
		if wr.offset < rd.logStart {
			// Below the log start: retention removed it (only a
			// compact,delete topic's log start moves: check).
			w.coverage.Inc("kv/retention-removed")
			continue
		}
		if wr.tomb && last[k] < 0 {
			// A pass stamps the tombstone's horizon from its leader's
			// clock, after the tombstone was sent, and a later pass,
			// perhaps on another leader, compares with its own: the
			// clocks may disagree by the skews' spread since the send
			// (jumps and steps included).
			if slack := kvDeleteRetention - w.skewSpread(wr.sentAt, w.now()); w.now()-wr.sentAt < slack {
				fail("key %d's tombstone (write %d at offset %d, sent at %v) removed %v later, before delete.retention.ms %v",
					k, latest, wr.offset, wr.sentAt, w.now()-wr.sentAt, kvDeleteRetention)
			}
			w.coverage.Inc("kv/tombstone-removed")
			continue
		}
		if rd.final && last[k] < 0 && s.maybeTombstoneAged(k, wr) {
			w.coverage.Inc("kv/maybe-tombstone-removed")
			continue
		}
		fail("key %d's latest write %d (offset %d, tombstone %v) is gone; its last record read is at offset %d",
			k, latest, wr.offset, wr.tomb, last[k])
	}
}

// maybeTombstoneAged reports whether a tombstone of key k whose outcome
// stayed unknown was sent after acked (so, if written, it is at a higher
// offset: the writer's idempotent producer keeps its order) and is older
// than delete.retention.ms by the clocks' spread: written, it superseded
// acked, and compaction then removed it, leaving the key no record. (Seed
// 107 of the standard sample failed so: write 25 acknowledged at offset
// 7, tombstone 37 maybe written, key 13 without a record at the end.)
func (s *kvSim) maybeTombstoneAged(k int, acked kvWrite) bool {
	w := s.ww.w
	for _, x := range s.writes {
		if x.key == k && x.tomb && x.state == kvMaybe && x.sentAt > acked.sentAt &&
			w.now()-x.sentAt >= kvDeleteRetention-w.skewSpread(x.sentAt, w.now()) {
			return true
		}
	}
	return false
}

// position is rd's consumer position (-1: none yet).
func (s *kvSim) position(rd *kvRead) int64 {
	at, ok := rd.k.Position(topicKV, 0)
	if !ok {
		return -1
	}
	return at
}

// check holds read rd to the workload's promises.
func (s *kvSim) check(rd *kvRead) {
	w := s.ww.w
	fail := func(format string, args ...any) {
		w.fail("kv: %s read from %v: %s", map[bool]string{true: "final", false: "a"}[rd.final], rd.start,
			fmt.Sprintf(format, args...))
	}
	w.coverage.Inc("kv/read")
	if rd.logStart > 0 && !s.deletes {
		fail("log start %d: a compact topic's log start never moves", rd.logStart)
	}
	if rd.below != nil {
		fail("record at offset %d read below the log start its fetch answered with", rd.below.Offset)
	}
	last := make([]int64, kvKeys) // per key, the offset of its last record read
	for k := range last {
		last[k] = -1
	}
	prevOffset, prevID := int64(-1), -1
	for _, r := range rd.recs {
		if r.Offset <= prevOffset {
			fail("offset %d after %d", r.Offset, prevOffset)
			return
		}
		prevOffset = r.Offset
		id := -1
		for _, h := range r.Headers {
			if h.Key == kvIDHeader {
				if v, err := strconv.Atoi(string(h.Value)); err == nil {
					id = v
				}
			}
		}
		if id < 0 || id >= len(s.writes) {
			fail("record at offset %d names no write (headers %v)", r.Offset, r.Headers)
			return
		}
		wr := s.writes[id]
		switch {
		case string(r.Key) != string(kvKey(wr.key)):
			fail("write %d read at offset %d with key %q, written with %q", id, r.Offset, r.Key, kvKey(wr.key))
		case wr.tomb != (r.Value == nil) || !wr.tomb && string(r.Value) != string(kvValue(id)):
			fail("write %d read at offset %d with value %q (tombstone %v)", id, r.Offset, r.Value, wr.tomb)
		case wr.state == kvFailed:
			fail("write %d read at offset %d: its failure was definite", id, r.Offset)
		case wr.state == kvAcked && wr.offset != r.Offset:
			fail("write %d read at offset %d, acknowledged at %d", id, r.Offset, wr.offset)
		case id <= prevID:
			fail("write %d read at offset %d after write %d: one producer's order is the log's", id, r.Offset, prevID)
		}
		prevID = id
		last[wr.key] = r.Offset
	}
	s.checkLatest(rd, last, fail)
	if n := int64(len(rd.recs)); rd.target > 0 && n < rd.target {
		w.coverage.Inc("kv/compacted-read") // fewer records than offsets: something was compacted away
	}
}
