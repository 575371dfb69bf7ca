package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/clientlib"
)

// addPartitionsFlags are the flags of `strand topic add-partitions`: the
// new total as kafka-topics --alter --partitions gives it, or how many to
// add as rpk topic add-partitions --num does; exactly one.
type addPartitionsFlags struct {
	partitions   int32
	num          int32
	validateOnly bool
}

func (ap *addPartitionsFlags) register(fs *pflag.FlagSet) {
	fs.Int32VarP(&ap.partitions, "partitions", "p", 0, "the topic's new partition count, above its current one (kafka-topics --alter --partitions)")
	fs.Int32VarP(&ap.num, "num", "n", 0, "how many partitions to add (rpk topic add-partitions --num)")
	fs.BoolVar(&ap.validateOnly, "validate-only", false, "check and place the new partitions, change nothing")
}

// validate refuses a missing, doubled or non-positive count before
// anything is sent.
func (ap *addPartitionsFlags) validate(fs *pflag.FlagSet) error {
	total, add := flagSet(fs, "partitions"), flagSet(fs, "num")
	switch {
	case total == add:
		return usageError("topic add-partitions: want either --partitions N (the new total) or --num N (how many to add)")
	case total && ap.partitions < 1:
		return usageError("--partitions %d: want the topic's new total, 2 or more", ap.partitions)
	case add && ap.num < 1:
		return usageError("--num %d: want 1 or more", ap.num)
	}
	return nil
}

// topicAddPartitions grows a topic and prints what the cluster applied.
// --num reads the current count first (a concurrent grow in between makes
// the cluster refuse the stale total, so nothing is applied twice).
func topicAddPartitions(ctx context.Context, c *clientlib.Client, w io.Writer, name string, ap addPartitionsFlags) error {
	total := ap.partitions
	if ap.num > 0 {
		details, err := c.DescribeTopics(ctx, name)
		if err != nil {
			return err
		}
		if len(details) != 1 || details[0].Err != nil {
			if len(details) == 1 {
				return details[0].Err
			}
			return userErr(nil, "describing topic %s answered %d topics", name, len(details))
		}
		if int64(details[0].Partitions)+int64(ap.num) > math.MaxInt32 {
			return usageError("--num %d: topic %s has %d partitions; the total would overflow", ap.num, name, details[0].Partitions)
		}
		total = details[0].Partitions + ap.num
	}
	got, err := c.CreatePartitions(ctx, name, total, ap.validateOnly)
	switch {
	case errors.Is(err, clientlib.ErrTopicNotFound):
		return topicErr(name, err)
	case err != nil:
		return err
	case ap.validateOnly:
		fmt.Fprintf(w, "topic %s would have %s (%d added); nothing changed (--validate-only)\n", name, plural(int(got.Partitions), "partition"), got.Added)
	case got.Added < 0:
		fmt.Fprintf(w, "topic %s has %s (an earlier attempt, whose answer was lost, added them)\n", name, plural(int(got.Partitions), "partition"))
	default:
		fmt.Fprintf(w, "added %s to topic %s: it has %s\n", plural(int(got.Added), "partition"), name, plural(int(got.Partitions), "partition"))
	}
	return nil
}
