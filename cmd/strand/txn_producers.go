package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// txnProducers prints the producers each partition of topic (or only
// partition, when not -1) remembers, as its leader answers Kafka's
// DescribeProducers: the way to find the producer whose open transaction
// holds a partition's last stable offset back (rpk cluster txn
// describe-producers). A partition its leader could not answer is
// printed with the error, and the command fails after printing the rest.
func txnProducers(ctx context.Context, c *clientlib.Client, w io.Writer, format outputFormat, topic string, partition int32) error {
	partitions := []int32{partition}
	if partition < 0 {
		info, err := c.Metadata(ctx)
		if err != nil {
			return err
		}
		t, ok := topicNamed(info, topic)
		if !ok {
			return userErr(nil, "topic %q does not exist ('strand topic list' shows the topics)", topic)
		}
		partitions = partitions[:0]
		for _, p := range t.Partitions {
			partitions = append(partitions, p.Partition)
		}
	}
	described := c.DescribeProducers(ctx, topic, partitions)
	if format.json() {
		if err := writeJSON(w, producersJSON(described)); err != nil {
			return err
		}
	} else if err := printProducers(w, described); err != nil {
		return err
	}
	for _, pp := range described {
		if pp.Err != nil {
			return fmt.Errorf("partition %d: %w", pp.Partition, pp.Err)
		}
	}
	return nil
}

// topicNamed finds topic in a metadata answer.
func topicNamed(info clientlib.ClusterInfo, topic string) (clientlib.TopicMetadata, bool) {
	for _, t := range info.Topics {
		if t.Name == topic && t.Err == nil {
			return t, true
		}
	}
	return clientlib.TopicMetadata{}, false
}

// printProducers prints one row per producer: -1 fields as "-".
func printProducers(w io.Writer, described []clientlib.PartitionProducers) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tPRODUCER ID\tEPOCH\tLAST SEQUENCE\tLAST WRITE\tCOORDINATOR EPOCH\tTXN START OFFSET")
	for _, pp := range described {
		if pp.Err != nil {
			fmt.Fprintf(tw, "%d\terror: %v\n", pp.Partition, pp.Err)
			continue
		}
		if len(pp.Producers) == 0 {
			fmt.Fprintf(tw, "%d\t(none)\n", pp.Partition)
		}
		for _, a := range pp.Producers {
			last := "-"
			if !a.LastWrite.IsZero() {
				last = a.LastWrite.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\t%s\n", pp.Partition, a.ProducerID, a.Epoch, dashIfNone(int64(a.LastSequence)),
				last, dashIfNone(int64(a.CoordinatorEpoch)), dashIfNone(a.TxnStartOffset))
		}
	}
	return tw.Flush()
}

// dashIfNone prints n, or "-" for -1 (none).
func dashIfNone(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

// producerJSON is one producer of strand txn producers --format json
// (-1: none, as Kafka's DescribeProducers answers).
type producerJSON struct {
	Partition        int32  `json:"partition"`
	ProducerID       int64  `json:"producer_id"`
	Epoch            int32  `json:"producer_epoch"`
	LastSequence     int32  `json:"last_sequence"`
	LastTimestampMs  int64  `json:"last_timestamp_ms"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"`
	TxnStartOffset   int64  `json:"current_txn_start_offset"`
	Error            string `json:"error,omitempty"`
}

// producersJSON flattens the answer: one entry per producer, and one per
// partition that failed.
func producersJSON(described []clientlib.PartitionProducers) []producerJSON {
	out := []producerJSON{}
	for _, pp := range described {
		if pp.Err != nil {
			out = append(out, producerJSON{Partition: pp.Partition, ProducerID: -1, Epoch: -1, LastSequence: -1, LastTimestampMs: -1,
				CoordinatorEpoch: -1, TxnStartOffset: -1, Error: pp.Err.Error()})
			continue
		}
		for _, a := range pp.Producers {
			ms := int64(-1)
			if !a.LastWrite.IsZero() {
				ms = a.LastWrite.UnixMilli()
			}
			out = append(out, producerJSON{Partition: pp.Partition, ProducerID: a.ProducerID, Epoch: a.Epoch, LastSequence: a.LastSequence,
				LastTimestampMs: ms, CoordinatorEpoch: a.CoordinatorEpoch, TxnStartOffset: a.TxnStartOffset})
		}
	}
	return out
}
