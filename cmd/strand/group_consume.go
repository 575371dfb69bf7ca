package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// groupCommitEvery is how often `consume --group` commits what it printed.
const groupCommitEvery = 5 * time.Second

// groupSession is `strand consume TOPIC --group G`: a member of the group
// that prints its partitions' records and commits exactly what it printed
// (every 5 s, before a partition moves away, and on exit).
type groupSession struct {
	cs     *consumeSession
	group  string
	g      *clientlib.GroupConsumer
	stderr io.Writer
	next   map[clientlib.TopicPartition]int64 // offset after the last printed record
	done   map[clientlib.TopicPartition]int64 // last committed
	// cut: --count left records Poll handed out unprinted; commits then
	// stop at the last printed record, not the consumer's position.
	cut bool
}

// readEnds fails fast on an unknown topic and, with --until-end, records
// each partition's high-water mark as the end to read to.
func (cs *consumeSession) readEnds(ctx context.Context, untilEnd bool) error {
	offs, err := cs.c.ListOffsets(ctx, cs.topic, nil, cs.latest())
	if err != nil || !untilEnd {
		return err
	}
	cs.ends = map[int32]int64{}
	for _, o := range offs {
		cs.ends[o.Partition] = cs.endOf(o)
	}
	return nil
}

// runGroup joins group and prints until done, Ctrl-C or an error; it
// commits and leaves the group on the way out.
func (cs *consumeSession) runGroup(ctx context.Context, group, instance string, start clientlib.Offset, untilEnd bool, stderr io.Writer) error {
	gs := &groupSession{cs: cs, group: group, stderr: stderr,
		next: map[clientlib.TopicPartition]int64{}, done: map[clientlib.TopicPartition]int64{}}
	g, err := clientlib.NewGroupConsumer(cs.c, group, []string{cs.topic},
		clientlib.AutoCommitInterval(0), clientlib.StartWithoutCommit(start), clientlib.InstanceID(instance),
		clientlib.GroupConsumerOpts(clientlib.FetchIsolation(cs.isolation)),
		clientlib.OnAssigned(func(_ context.Context, ps []clientlib.TopicPartition) {
			fmt.Fprintf(stderr, "strand: group %s: assigned %s\n", group, formatPartitions(ps))
		}),
		clientlib.OnRevoked(func(ctx context.Context, ps []clientlib.TopicPartition) {
			gs.commit(ctx, ps)
			gs.forget(ps)
			fmt.Fprintf(stderr, "strand: group %s: revoked %s\n", group, formatPartitions(ps))
		}),
		clientlib.OnLost(func(ps []clientlib.TopicPartition) {
			gs.forget(ps)
			fmt.Fprintf(stderr, "strand: group %s: lost %s (fenced or session expired; rejoining)\n", group, formatPartitions(ps))
		}))
	if err != nil {
		return err
	}
	gs.g = g
	if err := cs.readEnds(ctx, untilEnd); err != nil {
		return err
	}
	err = gs.loop(ctx)
	cctx, cancel := context.WithTimeout(context.Background(), cs.timeout)
	defer cancel()
	gs.commit(cctx, g.Assigned())
	if cerr := g.Close(cctx); err == nil && cerr != nil && ctx.Err() == nil {
		err = wrapErr(cerr, "leaving group %s", group)
	}
	return err
}

// loop polls, prints and commits periodically.
func (gs *groupSession) loop(ctx context.Context) error {
	cs := gs.cs
	nextCommit := time.Now().Add(groupCommitEvery)
	for ctx.Err() == nil {
		if gs.finished() {
			return nil
		}
		for _, fp := range gs.g.Poll(ctx) {
			if fp.Err != nil && ctx.Err() == nil && !clientlib.IsRetriable(fp.Err) && !rejoining(fp.Err) {
				if fp.Topic == "" {
					return wrapErr(fp.Err, "group %s", gs.group)
				}
				return consumeError(cs.topic, fp)
			}
			for _, r := range fp.Records {
				if cs.limit > 0 && cs.printed >= cs.limit {
					gs.cut = true
					break
				}
				writeRecord(cs.out, cs.format, r)
				cs.printed++
				gs.next[clientlib.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = r.Offset + 1
			}
		}
		if err := cs.out.Flush(); err != nil {
			return err
		}
		if time.Now().After(nextCommit) {
			gs.commit(ctx, gs.g.Assigned())
			nextCommit = time.Now().Add(groupCommitEvery)
		}
	}
	return nil
}

// finished: --count reached, or with --until-end every owned partition
// reached the high-water mark seen at start.
func (gs *groupSession) finished() bool {
	cs := gs.cs
	if cs.limit > 0 && cs.printed >= cs.limit {
		return true
	}
	owned := gs.g.Assigned()
	if cs.ends == nil || len(owned) == 0 {
		return false
	}
	for _, tp := range owned {
		if pos, ok := gs.g.Position(tp.Topic, tp.Partition); !ok || pos < cs.ends[tp.Partition] {
			return false
		}
	}
	return true
}

// commit commits the printed positions of ps that moved; a refusal
// (the partition moved on) is reported, not fatal. Unless --count cut a
// Poll short, the position committed is the consumer's, which is past
// the transaction markers and aborted records after the last printed
// record (as Kafka's consumer commits its position): committing only past
// the last record left a group lagging by its markers for ever.
func (gs *groupSession) commit(ctx context.Context, ps []clientlib.TopicPartition) {
	offsets := map[clientlib.TopicPartition]int64{}
	for _, tp := range ps {
		n, ok := gs.next[tp]
		if pos, known := gs.g.Position(tp.Topic, tp.Partition); known && !gs.cut && ok && pos > n {
			n = pos
		}
		if ok && n != gs.done[tp] {
			offsets[tp] = n
		}
	}
	if len(offsets) == 0 {
		return
	}
	if err := gs.g.CommitOffsets(ctx, offsets); err != nil {
		fmt.Fprintf(gs.stderr, "strand: group %s: commit: %s\n", gs.group, userMessage(err))
		return
	}
	for tp, n := range offsets {
		gs.done[tp] = n
	}
}

// forget drops the printed and committed positions of partitions that
// moved away: if one comes back, another member may have committed past
// them, and committing the old position would move the group back.
func (gs *groupSession) forget(ps []clientlib.TopicPartition) {
	for _, tp := range ps {
		delete(gs.next, tp)
		delete(gs.done, tp)
	}
}

// rejoining reports whether err only means the member rejoins (fenced, or
// forgotten by the coordinator): the next Poll does it.
func rejoining(err error) bool {
	return errors.Is(err, clientlib.ErrFencedMemberEpoch) || errors.Is(err, clientlib.ErrUnknownMemberID)
}
