package compact

import (
	"errors"
	"strings"
	"testing"
)

// TestConfigDefaults shows Kafka's defaults: delete only, dirty ratio 0.5,
// no minimum lag, no maximum lag, tombstones kept a day, segments rolled
// weekly; and that they validate.
func TestConfigDefaults(t *testing.T) {
	c := DefaultConfig()
	if c.Policy != PolicyDelete || c.MinCleanableDirtyRatio != 0.5 || c.MinCompactionLagMs != 0 ||
		c.MaxCompactionLagMs != 1<<63-1 || c.DeleteRetentionMs != 86_400_000 || c.SegmentMs != 604_800_000 {
		t.Fatalf("defaults %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestParsePolicy shows Kafka's list syntax accepted in any order and with
// spaces, and an empty, unknown or repeated item refused naming the value.
func TestParsePolicy(t *testing.T) {
	for value, want := range map[string]Policy{
		"delete": PolicyDelete, "compact": PolicyCompact, "compact,delete": PolicyCompact | PolicyDelete,
		"delete, compact": PolicyCompact | PolicyDelete,
	} {
		if got, err := ParsePolicy(value); err != nil || got != want {
			t.Errorf("%q: %v, %v", value, got, err)
		}
	}
	for _, value := range []string{"", "compact,", "Compact", "compact,compact", "none"} {
		if _, err := ParsePolicy(value); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), `"`+value+`"`) {
			t.Errorf("%q: %v", value, err)
		}
	}
	if s := (PolicyCompact | PolicyDelete).String(); s != "compact,delete" {
		t.Errorf("String %q", s)
	}
}

// TestConfigSetAndValidate shows each key parsed in range and refused out
// of it with a message naming key and value, and min.compaction.lag.ms >
// max.compaction.lag.ms refused by Validate.
func TestConfigSetAndValidate(t *testing.T) {
	good := map[string]string{
		ConfigCleanupPolicy: "compact", ConfigMinCleanableDirtyRatio: "0.01", ConfigMinCompactionLagMs: "1000",
		ConfigMaxCompactionLagMs: "2000", ConfigDeleteRetentionMs: "0", ConfigSegmentMs: "100",
	}
	c := DefaultConfig()
	for key, value := range good {
		var err error
		if c, err = c.Set(key, value); err != nil {
			t.Fatalf("%s=%s: %v", key, value, err)
		}
	}
	if err := c.Validate(); err != nil || c.MinCleanableDirtyRatio != 0.01 || c.MaxCompactionLagMs != 2000 {
		t.Fatalf("%+v: %v", c, err)
	}
	bad := [][2]string{
		{ConfigMinCleanableDirtyRatio, "1.5"}, {ConfigMinCleanableDirtyRatio, "NaN"}, {ConfigMinCleanableDirtyRatio, "-0.1"},
		{ConfigMinCompactionLagMs, "-1"}, {ConfigMaxCompactionLagMs, "0"}, {ConfigDeleteRetentionMs, "-1"},
		{ConfigSegmentMs, "99"}, {ConfigDeleteRetentionMs, "1d"}, {"retention.ms", "1"},
	}
	for _, kv := range bad {
		if _, err := c.Set(kv[0], kv[1]); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), kv[0]) {
			t.Errorf("%s=%s: %v", kv[0], kv[1], err)
		}
	}
	c.MinCompactionLagMs = 3000
	if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "min.compaction.lag.ms=3000 is greater than max.compaction.lag.ms=2000") {
		t.Fatalf("min > max: %v", err)
	}
}

// TestDueAndCleanableEnd shows a pass is due once the dirty ratio reaches
// the minimum or the oldest dirty record waited the maximum lag, never
// for a delete-only topic or with nothing dirty, and the cleanable end is
// the least bound.
func TestDueAndCleanableEnd(t *testing.T) {
	c, _ := DefaultConfig().Set(ConfigCleanupPolicy, "compact")
	c.MaxCompactionLagMs = 1000
	for _, tc := range []struct {
		clean, dirty, oldest, now int64
		want                      bool
	}{
		{100, 100, 0, 10, true}, {101, 99, 0, 10, false}, {1000, 1, 0, 1000, true}, {100, 0, 0, 5000, false},
	} {
		if got := Due(c, tc.clean, tc.dirty, tc.oldest, tc.now); got != tc.want {
			t.Errorf("Due(%+v) = %t", tc, got)
		}
	}
	if Due(DefaultConfig(), 0, 100, 0, 0) {
		t.Error("a delete-only topic is due")
	}
	if e := CleanableEnd(Bounds{LastStableOffset: 50, Checkpointed: 40, ActiveSegmentBase: 45, LagEnd: 60}); e != 40 {
		t.Errorf("CleanableEnd %d", e)
	}
}
