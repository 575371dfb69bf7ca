package main

import (
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// `strand topic describe`'s compaction line: the dirty ratio with the
// bytes on either side, the last compaction done (generation, decision
// time, cleaned-to offset), the leader's last pass, a pass under way, a topic altered back to
// delete, and a stuck leader.
func TestFormatCompaction(t *testing.T) {
	at := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC).UnixMilli()
	for _, tc := range []struct {
		pc   clientlib.PartitionCompaction
		want string
	}{
		{clientlib.PartitionCompaction{Compacts: true, DirtyBytes: 2048},
			"dirty ratio 1.00 (dirty 2.0 KiB, clean 0 B); no compaction yet"},
		{clientlib.PartitionCompaction{Compacts: true, Decided: 3, Done: 3, DecidedTimeMs: at, CleanedTo: 1200, PrefixBytes: 3072, DirtyBytes: 1024},
			"dirty ratio 0.25 (dirty 1.0 KiB, clean 3.0 KiB); last compaction generation 3 at 2026-12-07T09:00:00Z, cleaned to offset 1200"},
		{clientlib.PartitionCompaction{Compacts: true, Decided: 3, Done: 3, DecidedTimeMs: at, CleanedTo: 1200, PrefixBytes: 3072, DirtyBytes: 1024,
			LastPassBytesIn: 10 << 20, LastPassBytesOut: 3072, LastPassDuration: 1234567 * time.Microsecond},
			"dirty ratio 0.25 (dirty 1.0 KiB, clean 3.0 KiB); last compaction generation 3 at 2026-12-07T09:00:00Z, cleaned to offset 1200; last pass read 10.0 MiB, wrote 3.0 KiB in 1s"},
		{clientlib.PartitionCompaction{Compacts: true, Decided: 3, Done: 3, DecidedTimeMs: at, CleanedTo: 1200, PrefixBytes: 3072,
			LastPassBytesIn: 4096, LastPassBytesOut: 3072, LastPassDuration: 42 * time.Millisecond},
			"dirty ratio 0.00 (dirty 0 B, clean 3.0 KiB); last compaction generation 3 at 2026-12-07T09:00:00Z, cleaned to offset 1200; last pass read 4.0 KiB, wrote 3.0 KiB in 42ms"},
		{clientlib.PartitionCompaction{Compacts: true, Decided: 4, Done: 3, DecidedTimeMs: at, CleanableEnd: 1500, CleanedTo: 1200, PrefixBytes: 1024, DirtyBytes: 1024},
			"dirty ratio 0.50 (dirty 1.0 KiB, clean 1.0 KiB); last compaction generation 3, cleaned to offset 1200; generation 4 under way since 2026-12-07T09:00:00Z (offsets below 1500)"},
		{clientlib.PartitionCompaction{Decided: 1, Done: 1, DecidedTimeMs: at, CleanedTo: 5, Stuck: "a missed generation"},
			"dirty ratio 0.00 (dirty 0 B, clean 0 B); last compaction generation 1 at 2026-12-07T09:00:00Z, cleaned to offset 5; the topic no longer compacts; stuck on the leader: a missed generation"},
	} {
		if got := formatCompaction(tc.pc); got != tc.want {
			t.Errorf("formatCompaction(%+v)\n got %q\nwant %q", tc.pc, got, tc.want)
		}
	}
}
