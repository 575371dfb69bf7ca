package engine

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// scriptArgs reads a command's key=value arguments as int64s.
func scriptArgs(t *testing.T, d *datadriven.TestData) map[string]int64 {
	args := map[string]int64{}
	for _, a := range d.CmdArgs {
		if len(a.Vals) != 1 {
			d.Fatalf(t, "argument %q: want one value", a.Key)
		}
		n, err := strconv.ParseInt(a.Vals[0], 10, 64)
		if err != nil {
			d.Fatalf(t, "argument %q: %v", a.Key, err)
		}
		args[a.Key] = n
	}
	return args
}

// runScriptCommand runs one command and renders its outcome.
func runScriptCommand(t *testing.T, p **Partition, d *datadriven.TestData) string {
	args := scriptArgs(t, d)
	part := *p
	next := part.AppliedIndex() + 1
	switch d.Cmd {
	case "apply":
		producer := NoProducer
		if id, ok := args["producer"]; ok {
			producer = Producer{ID: id, Epoch: int32(args["epoch"]), BaseSequence: int32(args["seq"])}
		}
		records := int(max(args["records"], 1))
		encode := EncodeProduceEntry
		if args["txn"] == 1 {
			encode = EncodeTransactionalProduceEntry
		}
		r := part.Apply(next, encode(nil, args["time"], 0, producer, batchOf(t, records, args["ts"])))
		return fmt.Sprintf("%s next=%d", strings.Replace(outcome(r), " count=", " records=", 1), part.HighWatermark())
	case "trim":
		part.Apply(next, EncodeTrimEntry(nil, args["time"], 0, args["offset"]))
		return fmt.Sprintf("log-start=%d next=%d", part.LogStartOffset(), part.HighWatermark())
	case "empty":
		part.ApplyEmpty(next)
		return fmt.Sprintf("applied=%d next=%d", part.AppliedIndex(), part.HighWatermark())
	case "compacted":
		part.Compacted(uint64(args["index"]))
		return fmt.Sprintf("log-start=%d compactable=%d", part.LogStartOffset(), part.CompactableIndex())
	case "locate":
		locs, err := part.Locate(args["offset"], int(max(args["max"], 1)))
		if errors.Is(err, ErrOffsetOutOfRange) {
			return "offset out of range"
		}
		out := []string{fmt.Sprintf("batches=%d", len(locs))}
		for _, l := range locs {
			out = append(out, fmt.Sprintf("base=%d records=%d raft=%d max-ts=%d", l.BaseOffset, l.RecordCount, l.RaftIndex, l.MaxTimestampMs))
		}
		return strings.Join(out, "\n")
	case "offset-for-time":
		return fmt.Sprintf("offset=%d", part.OffsetForTimestamp(args["ts"]))
	case "snapshot-restore":
		q, err := RestorePartition(part.Snapshot())
		if err != nil {
			return "error " + err.Error()
		}
		*p = q
		return fmt.Sprintf("applied=%d log-start=%d next=%d producers=%d", q.AppliedIndex(), q.LogStartOffset(), q.HighWatermark(), len(q.producers))
	}
	return runTxnScriptCommand(t, part, d, args)
}

// runTxnScriptCommand runs one transaction command and renders its outcome.
func runTxnScriptCommand(t *testing.T, part *Partition, d *datadriven.TestData, args map[string]int64) string {
	next := part.AppliedIndex() + 1
	switch d.Cmd {
	case "begin":
		r := part.Apply(next, EncodeTxnBeginEntry(nil, args["time"], 0, args["producer"], int32(args["epoch"])))
		return fmt.Sprintf("%s lso=%d", strings.Replace(outcome(r), "ok base=0 count=0", "ok", 1), part.LastStableOffset())
	case "marker":
		m := Marker{ProducerID: args["producer"], ProducerEpoch: int32(args["epoch"]),
			CoordinatorEpoch: int32(args["coord"]), Commit: args["commit"] == 1}
		r := part.Apply(next, EncodeTxnMarkerEntry(nil, args["time"], 0, m))
		return fmt.Sprintf("%s lso=%d next=%d", strings.Replace(outcome(r), " count=", " records=", 1),
			part.LastStableOffset(), part.HighWatermark())
	case "stable":
		return fmt.Sprintf("lso=%d next=%d log-start=%d open=%v", part.LastStableOffset(), part.HighWatermark(),
			part.LogStartOffset(), part.AppendOpenTxns(nil))
	case "aborted":
		return fmt.Sprintf("aborted=%v", part.AppendAbortedTxns(nil, args["from"], args["to"]))
	case "read-committed":
		locs, err := part.AppendReadable(nil, args["offset"], 10, ReadCommitted)
		if err != nil {
			return "error " + err.Error()
		}
		out := fmt.Sprintf("batches=%d", len(locs))
		for _, l := range locs {
			out += fmt.Sprintf(" %d+%d", l.BaseOffset, l.RecordCount)
		}
		return out
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// TestScripts runs the scenario scripts in testdata/partition with
// cockroachdb/datadriven: each is a readable story of one rule, opening with
// a # line saying what it shows. -rewrite regenerates the expected output;
// commit it only once it is understood.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, filepath.Join("testdata", "partition"), func(t *testing.T, path string) {
		p := NewPartition()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			got := runScriptCommand(t, &p, d)
			if err := p.check(); err != nil {
				d.Fatalf(t, "invariant: %v", err)
			}
			return got + "\n"
		})
	})
}
