package compact

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Topic configuration keys of compaction, as Kafka names them.
const (
	ConfigCleanupPolicy          = "cleanup.policy"
	ConfigMinCleanableDirtyRatio = "min.cleanable.dirty.ratio"
	ConfigMinCompactionLagMs     = "min.compaction.lag.ms"
	ConfigMaxCompactionLagMs     = "max.compaction.lag.ms"
	ConfigDeleteRetentionMs      = "delete.retention.ms"
	ConfigSegmentMs              = "segment.ms"
)

// Kafka's defaults, and Strand's floor for segment.ms (engine/metadata's
// SegmentMsMin: a roll on every tick is no use).
const (
	MinCleanableDirtyRatioDefault = 0.5
	MinCompactionLagMsDefault     = int64(0)
	MaxCompactionLagMsDefault     = int64(math.MaxInt64)
	DeleteRetentionMsDefault      = int64(24 * 60 * 60 * 1000)
	SegmentMsDefault              = int64(7 * 24 * 60 * 60 * 1000)
	SegmentMsMin                  = int64(100)
)

// ErrInvalidConfig: a compaction setting out of range, unparsable, or
// inconsistent with another. The message names key and value.
var ErrInvalidConfig = errors.New("compact: invalid topic config")

// Policy is a topic's cleanup.policy: delete, compact or both.
type Policy uint8

// The policy bits.
const (
	PolicyDelete  Policy = 1
	PolicyCompact Policy = 2
)

// Compacts reports whether the policy includes compaction.
func (p Policy) Compacts() bool { return p&PolicyCompact != 0 }

// Deletes reports whether the policy includes time and size retention.
func (p Policy) Deletes() bool { return p&PolicyDelete != 0 }

// String is the policy's canonical configuration value.
func (p Policy) String() string {
	switch p {
	case PolicyDelete:
		return "delete"
	case PolicyCompact:
		return "compact"
	case PolicyDelete | PolicyCompact:
		return "compact,delete"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// ParsePolicy parses cleanup.policy as Kafka does: a comma-separated list
// of delete and compact in any order, spaces around items ignored. An
// empty list, an unknown item or a repeated one is refused.
func ParsePolicy(value string) (Policy, error) {
	var p Policy
	for _, item := range strings.Split(value, ",") {
		var bit Policy
		switch strings.TrimSpace(item) {
		case "delete":
			bit = PolicyDelete
		case "compact":
			bit = PolicyCompact
		default:
			return 0, fmt.Errorf("%w: %s=%q: want delete, compact or compact,delete", ErrInvalidConfig, ConfigCleanupPolicy, value)
		}
		if p&bit != 0 {
			return 0, fmt.Errorf("%w: %s=%q names %s twice", ErrInvalidConfig, ConfigCleanupPolicy, value, bit)
		}
		p |= bit
	}
	return p, nil
}

// Config is a topic's compaction settings, defaults filled in.
type Config struct {
	Policy                 Policy
	MinCleanableDirtyRatio float64
	MinCompactionLagMs     int64
	MaxCompactionLagMs     int64
	DeleteRetentionMs      int64
	SegmentMs              int64
}

// DefaultConfig is Kafka's: delete only, the compaction settings at their
// defaults for when the policy changes.
func DefaultConfig() Config {
	return Config{
		Policy:                 PolicyDelete,
		MinCleanableDirtyRatio: MinCleanableDirtyRatioDefault,
		MinCompactionLagMs:     MinCompactionLagMsDefault,
		MaxCompactionLagMs:     MaxCompactionLagMsDefault,
		DeleteRetentionMs:      DeleteRetentionMsDefault,
		SegmentMs:              SegmentMsDefault,
	}
}

// IsKey reports whether key is one Set parses.
func IsKey(key string) bool {
	switch key {
	case ConfigCleanupPolicy, ConfigMinCleanableDirtyRatio, ConfigMinCompactionLagMs,
		ConfigMaxCompactionLagMs, ConfigDeleteRetentionMs, ConfigSegmentMs:
		return true
	}
	return false
}

// Set returns c with key parsed from value; each value alone must be in
// range (Validate checks the settings together). An unknown key or a bad
// value is ErrInvalidConfig naming both.
func (c Config) Set(key, value string) (Config, error) {
	var err error
	switch key {
	case ConfigCleanupPolicy:
		c.Policy, err = ParsePolicy(value)
	case ConfigMinCleanableDirtyRatio:
		c.MinCleanableDirtyRatio, err = parseRatio(key, value)
	case ConfigMinCompactionLagMs:
		c.MinCompactionLagMs, err = parseMs(key, value, 0)
	case ConfigMaxCompactionLagMs:
		c.MaxCompactionLagMs, err = parseMs(key, value, 1)
	case ConfigDeleteRetentionMs:
		c.DeleteRetentionMs, err = parseMs(key, value, 0)
	case ConfigSegmentMs:
		c.SegmentMs, err = parseMs(key, value, SegmentMsMin)
	default:
		err = fmt.Errorf("%w: unknown key %q", ErrInvalidConfig, key)
	}
	return c, err
}

// Validate checks the settings together: min.compaction.lag.ms may not
// exceed max.compaction.lag.ms (Kafka refuses it too), and each value is
// in its range (a Config built without Set).
func (c Config) Validate() error {
	switch {
	case c.Policy == 0 || c.Policy > PolicyDelete|PolicyCompact:
		return fmt.Errorf("%w: %s %s", ErrInvalidConfig, ConfigCleanupPolicy, c.Policy)
	case !(c.MinCleanableDirtyRatio >= 0 && c.MinCleanableDirtyRatio <= 1):
		return fmt.Errorf("%w: %s=%v: want a number in [0, 1]", ErrInvalidConfig, ConfigMinCleanableDirtyRatio, c.MinCleanableDirtyRatio)
	case c.MinCompactionLagMs < 0 || c.MaxCompactionLagMs < 1 || c.DeleteRetentionMs < 0 || c.SegmentMs < SegmentMsMin:
		return fmt.Errorf("%w: %s=%d, %s=%d, %s=%d, %s=%d out of range", ErrInvalidConfig,
			ConfigMinCompactionLagMs, c.MinCompactionLagMs, ConfigMaxCompactionLagMs, c.MaxCompactionLagMs,
			ConfigDeleteRetentionMs, c.DeleteRetentionMs, ConfigSegmentMs, c.SegmentMs)
	case c.MinCompactionLagMs > c.MaxCompactionLagMs:
		return fmt.Errorf("%w: %s=%d is greater than %s=%d: set %s at most %s, or raise %s", ErrInvalidConfig,
			ConfigMinCompactionLagMs, c.MinCompactionLagMs, ConfigMaxCompactionLagMs, c.MaxCompactionLagMs,
			ConfigMinCompactionLagMs, ConfigMaxCompactionLagMs, ConfigMaxCompactionLagMs)
	}
	return nil
}

// parseRatio parses a ratio in [0, 1].
func parseRatio(key, value string) (float64, error) {
	v, err := strconv.ParseFloat(value, 64)
	if err != nil || !(v >= 0 && v <= 1) {
		return 0, fmt.Errorf("%w: %s=%q: want a number in [0, 1]", ErrInvalidConfig, key, value)
	}
	return v, nil
}

// parseMs parses a decimal count of milliseconds of at least lo.
func parseMs(key, value string, lo int64) (int64, error) {
	v, err := strconv.ParseInt(value, 10, 64)
	if err != nil || v < lo {
		return 0, fmt.Errorf("%w: %s=%q: want whole milliseconds, at least %d", ErrInvalidConfig, key, value, lo)
	}
	return v, nil
}

// Bounds are the offsets a leader's cleanable end stays below (doc.go,
// "Replicas").
type Bounds struct {
	// LastStableOffset: every transaction below it has its marker.
	LastStableOffset int64
	// Checkpointed: the leader's applied and checkpointed offset, so the
	// decision never reaches entries a restart would replay.
	Checkpointed int64
	// ActiveSegmentBase: the raft log's open segment is never compacted.
	ActiveSegmentBase int64
	// LagEnd: the first offset appended within min.compaction.lag.ms.
	LagEnd int64
}

// CleanableEnd is the least of the bounds.
func CleanableEnd(b Bounds) int64 {
	return min(b.LastStableOffset, b.Checkpointed, b.ActiveSegmentBase, b.LagEnd)
}

// Due reports whether a compaction pass should run (Kafka's choice of the
// dirtiest log): the policy compacts, there are dirty bytes, and either
// dirty/(clean+dirty) reached min.cleanable.dirty.ratio or the oldest
// dirty record has waited max.compaction.lag.ms.
func Due(c Config, cleanBytes, dirtyBytes, oldestDirtyAppendMs, nowMs int64) bool {
	if !c.Policy.Compacts() || dirtyBytes <= 0 {
		return false
	}
	if nowMs-oldestDirtyAppendMs >= c.MaxCompactionLagMs {
		return true
	}
	return float64(dirtyBytes)/float64(cleanBytes+dirtyBytes) >= c.MinCleanableDirtyRatio
}
