package engine

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// rewrite regenerates the expected output of the scripts in
// testdata/partition; commit the result only once it is understood.
var rewrite = flag.Bool("rewrite", false, "rewrite testdata/partition scripts with actual output")

// scriptCase is one command of a script and its expected output.
type scriptCase struct {
	comments []string
	command  string
	want     string
}

// parseScript splits a script into cases: optional # comment lines, one
// command line, a "----" line, expected output up to a blank line.
func parseScript(t *testing.T, path string, text string) []scriptCase {
	var cases []scriptCase
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		var c scriptCase
		for ; i < len(lines) && (strings.HasPrefix(lines[i], "#") || lines[i] == ""); i++ {
			if lines[i] != "" {
				c.comments = append(c.comments, lines[i])
			}
		}
		if i >= len(lines) {
			break
		}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command %q not followed by ----", path, i+1, lines[i])
		}
		c.command = lines[i]
		i += 2
		var want []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		c.want = strings.Join(want, "\n")
		cases = append(cases, c)
	}
	return cases
}

// scriptArgs parses "name key=value ..." into the name and an int64 map.
func scriptArgs(t *testing.T, command string) (string, map[string]int64) {
	fields := strings.Fields(command)
	args := map[string]int64{}
	for _, f := range fields[1:] {
		key, value, ok := strings.Cut(f, "=")
		n, err := strconv.ParseInt(value, 10, 64)
		if !ok || err != nil {
			t.Fatalf("command %q: bad argument %q", command, f)
		}
		args[key] = n
	}
	return fields[0], args
}

// runScriptCommand runs one command and renders its outcome.
func runScriptCommand(t *testing.T, p **Partition, command string) string {
	name, args := scriptArgs(t, command)
	part := *p
	next := part.AppliedIndex() + 1
	switch name {
	case "apply":
		producer := NoProducer
		if id, ok := args["producer"]; ok {
			producer = Producer{ID: id, Epoch: int32(args["epoch"]), BaseSequence: int32(args["seq"])}
		}
		records := int(max(args["records"], 1))
		r := part.Apply(next, EncodeProduceEntry(nil, args["time"], 0, producer, batchOf(t, records, args["ts"])))
		return fmt.Sprintf("%s next=%d", strings.Replace(outcome(r), " count=", " records=", 1), part.HighWatermark())
	case "trim":
		part.Apply(next, EncodeTrimEntry(nil, 0, 0, args["offset"]))
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
	t.Fatalf("unknown command %q", command)
	return ""
}

// TestScripts runs the scenario scripts in testdata/partition: each is a
// readable story of one rule, opening with a # line saying what it shows.
func TestScripts(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "partition", "*.txt"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			text, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			p := NewPartition()
			var out strings.Builder
			for i, c := range parseScript(t, path, string(text)) {
				got := runScriptCommand(t, &p, c.command)
				if err := p.check(); err != nil {
					t.Fatalf("%s: after %q: invariant: %v", path, c.command, err)
				}
				if !*rewrite && got != c.want {
					t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", path, c.command, got, c.want)
				}
				if i > 0 {
					out.WriteString("\n")
				}
				for _, line := range c.comments {
					out.WriteString(line + "\n")
				}
				fmt.Fprintf(&out, "%s\n----\n%s\n", c.command, got)
			}
			if *rewrite {
				if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
