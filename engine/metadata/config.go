package metadata

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/proto/strandpb"
)

// Topic configuration keys, as Kafka names them.
const (
	ConfigRetentionMs    = "retention.ms"
	ConfigRetentionBytes = "retention.bytes"
	ConfigSegmentBytes   = "segment.bytes"
	ConfigSegmentMs      = "segment.ms"
	ConfigCleanupPolicy  = "cleanup.policy"
	// Tiered storage, KIP-405's names (engine/tier; doc.go, "Tiered
	// storage"): upload sealed segments to the node's object store, and
	// how much of the log stays on local disk.
	ConfigRemoteStorageEnable = "remote.storage.enable"
	ConfigLocalRetentionMs    = "local.retention.ms"
	ConfigLocalRetentionBytes = "local.retention.bytes"
	ConfigMaxMessageBytes     = "max.message.bytes"
	// ConfigRemoteRecoveryFrom (Strand's own, as Redpanda's
	// redpanda.remote.recovery): set by `strand topic recover` at create,
	// the UUID of the topic whose objects in the bucket this one was
	// recovered from; its partitions start from that remote log and keep
	// uploading under that UUID. Fixed once the topic exists.
	ConfigRemoteRecoveryFrom = "strand.remote.recovery.from"
	// The compaction keys (engine/compact parses and checks them).
	ConfigMinCleanableDirtyRatio = compact.ConfigMinCleanableDirtyRatio
	ConfigMinCompactionLagMs     = compact.ConfigMinCompactionLagMs
	ConfigMaxCompactionLagMs     = compact.ConfigMaxCompactionLagMs
	ConfigDeleteRetentionMs      = compact.ConfigDeleteRetentionMs
)

// Defaults and bounds of topic configuration values.
const (
	// RetentionMsDefault is 7 days (R5); -1 means no time limit.
	RetentionMsDefault int64 = 7 * 24 * 60 * 60 * 1000
	// RetentionBytesDefault -1 means no size limit.
	RetentionBytesDefault int64 = -1
	// SegmentBytesDefault is 64 MiB: retention frees disk in steps of a
	// segment, and a node holds thousands of partitions (Kafka's 1 GiB
	// would keep up to 1 GiB per partition past retention.bytes).
	SegmentBytesDefault int64 = 64 << 20
	// LocalRetentionDefault (-2, KIP-405's) keeps locally all that the
	// total retention keeps (retention.ms or retention.bytes).
	LocalRetentionDefault int64 = -2
	// SegmentBytesMin keeps segments from being absurdly small.
	SegmentBytesMin int64 = 4096
	// SegmentBytesMax is 1 GiB: segment offsets stay within int32 sizes.
	SegmentBytesMax int64 = 1 << 30
	// SegmentMsDefault is 7 days, Kafka's: an idle partition's active
	// segment rolls (and so can age out) at least this often.
	SegmentMsDefault int64 = 7 * 24 * 60 * 60 * 1000
	// SegmentMsMin keeps a segment roll from happening on every tick.
	SegmentMsMin int64 = 100
	// MaxMessageBytesDefault is 1 MiB (R4); it is also the maximum, since
	// the partition engine refuses larger records anyway. A smaller value
	// bounds a batch as sent (Kafka's max.message.bytes).
	MaxMessageBytesDefault int32 = 1 << 20
	// MaxMessageBytesMax is the largest max.message.bytes accepted.
	MaxMessageBytesMax int32 = 1 << 20
	// configEntriesMax bounds the entries one command may carry.
	configEntriesMax = 64
)

// CleanupPolicy is a topic's cleanup.policy: bits, as compact.Policy's.
type CleanupPolicy int32

// The cleanup policies.
const (
	// CleanupDelete deletes whole oldest segments past retention (R5).
	CleanupDelete CleanupPolicy = CleanupPolicy(compact.PolicyDelete)
	// CleanupCompact keeps the latest value per key (R6).
	CleanupCompact CleanupPolicy = CleanupPolicy(compact.PolicyCompact)
	// CleanupCompactDelete is both: compaction, and time and size
	// retention of whole segments.
	CleanupCompactDelete = CleanupDelete | CleanupCompact
)

// String is the policy's configuration value.
func (p CleanupPolicy) String() string {
	switch p {
	case CleanupDelete, CleanupCompact, CleanupCompactDelete:
		return compact.Policy(p).String()
	}
	return fmt.Sprintf("CleanupPolicy(%d)", int32(p))
}

// Compacts reports whether the policy includes compaction.
func (p CleanupPolicy) Compacts() bool { return p&CleanupCompact != 0 }

// Deletes reports whether the policy includes time and size retention.
func (p CleanupPolicy) Deletes() bool { return p&CleanupDelete != 0 }

// TopicConfig is a topic's full configuration, defaults filled in.
type TopicConfig struct {
	RetentionMs     int64
	RetentionBytes  int64
	SegmentBytes    int64
	SegmentMs       int64
	CleanupPolicy   CleanupPolicy
	MaxMessageBytes int32
	// The compaction settings (engine/compact.Config): stored, described
	// and checked whatever the policy, as Kafka does; they act only while
	// the policy compacts.
	MinCleanableDirtyRatio float64
	MinCompactionLagMs     int64
	MaxCompactionLagMs     int64
	DeleteRetentionMs      int64
	// Tiered storage: RemoteStorageEnable uploads sealed segments;
	// LocalRetentionMs and LocalRetentionBytes bound the local part (-2:
	// the total's, -1: no limit, allowed only when the total has none).
	RemoteStorageEnable bool
	LocalRetentionMs    int64
	LocalRetentionBytes int64
	// RemoteRecoveryFrom is strand.remote.recovery.from (zero: none).
	RemoteRecoveryFrom UUID
}

// LocalRetention answers the effective local retention (ms, bytes): -2
// resolved to the total retention's.
func (c TopicConfig) LocalRetention() (ms, bytes int64) {
	ms, bytes = c.LocalRetentionMs, c.LocalRetentionBytes
	if ms == LocalRetentionDefault {
		ms = c.RetentionMs
	}
	if bytes == LocalRetentionDefault {
		bytes = c.RetentionBytes
	}
	return ms, bytes
}

// validateTiering refuses what tiered storage cannot honour: remote
// storage on a topic that compacts (a compacted log is rewritten in
// place; KIP-405 refuses it too), and a local retention above the total
// one (a local segment would outlive the log: KIP-405's rule, -1 counting
// as infinite).
func (c TopicConfig) validateTiering() error {
	if !c.RemoteRecoveryFrom.IsZero() && !c.RemoteStorageEnable {
		return fmt.Errorf("%w: %s needs %s=true (a topic is recovered from the bucket tiered storage wrote)",
			ErrInvalidConfig, ConfigRemoteRecoveryFrom, ConfigRemoteStorageEnable)
	}
	if c.RemoteStorageEnable && c.CleanupPolicy.Compacts() {
		return fmt.Errorf("%w: %s=true on a topic whose %s is %s: a compacted topic cannot be tiered; use %s=delete",
			ErrInvalidConfig, ConfigRemoteStorageEnable, ConfigCleanupPolicy, c.CleanupPolicy, ConfigCleanupPolicy)
	}
	above := func(local, total int64) bool {
		if local == LocalRetentionDefault || total == -1 {
			return false
		}
		return local == -1 || local > total
	}
	if above(c.LocalRetentionMs, c.RetentionMs) {
		return fmt.Errorf("%w: %s=%d is above %s=%d (the local part of the log cannot outlive the whole)",
			ErrInvalidConfig, ConfigLocalRetentionMs, c.LocalRetentionMs, ConfigRetentionMs, c.RetentionMs)
	}
	if above(c.LocalRetentionBytes, c.RetentionBytes) {
		return fmt.Errorf("%w: %s=%d is above %s=%d (the local part of the log cannot outgrow the whole)",
			ErrInvalidConfig, ConfigLocalRetentionBytes, c.LocalRetentionBytes, ConfigRetentionBytes, c.RetentionBytes)
	}
	return nil
}

// Compaction is c's compaction settings in engine/compact's form.
func (c TopicConfig) Compaction() compact.Config {
	return compact.Config{
		Policy:                 compact.Policy(c.CleanupPolicy),
		MinCleanableDirtyRatio: c.MinCleanableDirtyRatio,
		MinCompactionLagMs:     c.MinCompactionLagMs,
		MaxCompactionLagMs:     c.MaxCompactionLagMs,
		DeleteRetentionMs:      c.DeleteRetentionMs,
		SegmentMs:              c.SegmentMs,
	}
}

// ConfigEntry is one configuration key and its value as text, as admin
// requests carry them.
type ConfigEntry struct {
	Name  string
	Value string
}

// DefaultTopicConfig is the configuration of a topic created without
// overrides.
func DefaultTopicConfig() TopicConfig {
	return TopicConfig{
		RetentionMs:     RetentionMsDefault,
		RetentionBytes:  RetentionBytesDefault,
		SegmentBytes:    SegmentBytesDefault,
		SegmentMs:       SegmentMsDefault,
		CleanupPolicy:   CleanupDelete,
		MaxMessageBytes: MaxMessageBytesDefault,

		MinCleanableDirtyRatio: compact.MinCleanableDirtyRatioDefault,
		MinCompactionLagMs:     compact.MinCompactionLagMsDefault,
		MaxCompactionLagMs:     compact.MaxCompactionLagMsDefault,
		DeleteRetentionMs:      compact.DeleteRetentionMsDefault,

		LocalRetentionMs:    LocalRetentionDefault,
		LocalRetentionBytes: LocalRetentionDefault,
	}
}

// Entries returns every key and value of c, sorted by key, for describe
// (strand.remote.recovery.from only when set).
func (c TopicConfig) Entries() []ConfigEntry {
	out := c.entries()
	if !c.RemoteRecoveryFrom.IsZero() {
		out = append(out, ConfigEntry{ConfigRemoteRecoveryFrom, c.RemoteRecoveryFrom.String()})
	}
	return out
}

// entries is Entries without strand.remote.recovery.from.
func (c TopicConfig) entries() []ConfigEntry {
	return []ConfigEntry{
		{ConfigCleanupPolicy, c.CleanupPolicy.String()},
		{ConfigDeleteRetentionMs, strconv.FormatInt(c.DeleteRetentionMs, 10)},
		{ConfigLocalRetentionBytes, strconv.FormatInt(c.LocalRetentionBytes, 10)},
		{ConfigLocalRetentionMs, strconv.FormatInt(c.LocalRetentionMs, 10)},
		{ConfigMaxCompactionLagMs, strconv.FormatInt(c.MaxCompactionLagMs, 10)},
		{ConfigMaxMessageBytes, strconv.FormatInt(int64(c.MaxMessageBytes), 10)},
		{ConfigMinCleanableDirtyRatio, strconv.FormatFloat(c.MinCleanableDirtyRatio, 'g', -1, 64)},
		{ConfigMinCompactionLagMs, strconv.FormatInt(c.MinCompactionLagMs, 10)},
		{ConfigRemoteStorageEnable, strconv.FormatBool(c.RemoteStorageEnable)},
		{ConfigRetentionBytes, strconv.FormatInt(c.RetentionBytes, 10)},
		{ConfigRetentionMs, strconv.FormatInt(c.RetentionMs, 10)},
		{ConfigSegmentBytes, strconv.FormatInt(c.SegmentBytes, 10)},
		{ConfigSegmentMs, strconv.FormatInt(c.SegmentMs, 10)},
	}
}

// set parses value for key into c; an unknown key or a value out of range
// fails with ErrInvalidConfig.
func (c *TopicConfig) set(key, value string) error {
	switch key {
	case ConfigCleanupPolicy, ConfigMinCleanableDirtyRatio, ConfigMinCompactionLagMs, ConfigMaxCompactionLagMs,
		ConfigDeleteRetentionMs:
		return c.setCompaction(key, value)
	case ConfigRetentionMs:
		return parseInt(key, value, -1, 1<<62, &c.RetentionMs)
	case ConfigRetentionBytes:
		return parseInt(key, value, -1, 1<<62, &c.RetentionBytes)
	case ConfigSegmentBytes:
		return parseInt(key, value, SegmentBytesMin, SegmentBytesMax, &c.SegmentBytes)
	case ConfigSegmentMs:
		return parseInt(key, value, SegmentMsMin, 1<<62, &c.SegmentMs)
	case ConfigLocalRetentionMs:
		return parseInt(key, value, LocalRetentionDefault, 1<<62, &c.LocalRetentionMs)
	case ConfigLocalRetentionBytes:
		return parseInt(key, value, LocalRetentionDefault, 1<<62, &c.LocalRetentionBytes)
	case ConfigRemoteStorageEnable:
		switch value {
		case "true":
			c.RemoteStorageEnable = true
		case "false":
			c.RemoteStorageEnable = false
		default:
			return fmt.Errorf("%w: %s=%q: want true or false", ErrInvalidConfig, key, value)
		}
		return nil
	case ConfigRemoteRecoveryFrom:
		u, ok := ParseUUID(value)
		if !ok || u.IsZero() {
			return fmt.Errorf("%w: %s=%q: want a topic UUID (8-4-4-4-12 hex digits)", ErrInvalidConfig, key, value)
		}
		c.RemoteRecoveryFrom = u
		return nil
	case ConfigMaxMessageBytes:
		var v int64
		if err := parseInt(key, value, 1, int64(MaxMessageBytesMax), &v); err != nil {
			return err
		}
		c.MaxMessageBytes = int32(v)
		return nil
	}
	return fmt.Errorf("%w: unknown key %q", ErrInvalidConfig, key)
}

// setCompaction parses one of engine/compact's keys into c.
func (c *TopicConfig) setCompaction(key, value string) error {
	cc, err := c.Compaction().Set(key, value)
	if err != nil {
		return compactConfigError{err}
	}
	c.CleanupPolicy = CleanupPolicy(cc.Policy)
	c.MinCleanableDirtyRatio = cc.MinCleanableDirtyRatio
	c.MinCompactionLagMs, c.MaxCompactionLagMs = cc.MinCompactionLagMs, cc.MaxCompactionLagMs
	c.DeleteRetentionMs = cc.DeleteRetentionMs
	return nil
}

// notEnforced gives, for each key the nodes do not enforce yet, what they
// do instead. Setting such a key is refused: a topic must not report a
// setting it does not have. A key leaves this table in the change that
// enforces it.
var notEnforced = map[string]string{}

// checkEnforced refuses key as just set in c when the nodes would not
// honour it. max.message.bytes is enforced up to its maximum: a leader
// refuses a batch (as sent, compressed or not) longer than a smaller
// value, and every partition refuses records over 1 MiB
// (recordbatch.RecordBytesMax); a larger value is refused. The
// compaction settings are accepted whatever the policy, as Kafka accepts
// them on a delete topic; every cleanup.policy (delete, compact,
// compact,delete) is enforced.
func checkEnforced(key string, _ TopicConfig) error {
	if why, ok := notEnforced[key]; ok {
		return fmt.Errorf("%w: %s is not enforced yet (%s); leave it unset", ErrInvalidConfig, key, why)
	}
	return nil
}

// Enforced reports whether the nodes honour key set to value. Describe
// output uses it to mark stored defaults that have no effect yet.
func Enforced(key, value string) bool {
	var c TopicConfig
	if c.set(key, value) != nil || checkEnforced(key, c) != nil {
		return false
	}
	// Local retention is enforced on a tiered topic (node/tier.go's
	// tierLocalLimit) and means nothing on another one: LocalRetentionNote
	// says which, given the topic's configuration.
	return true
}

// LocalRetentionNote is what describe prints beside a local retention key
// (local.retention.ms or .bytes) set to other than its default, given the
// topic's remote.storage.enable: on a tiered topic the raft log keeps to
// it and older records are read from the bucket; on another one it has no
// effect (all of the log is local, retention.* alone deletes). "" for any
// other key or the default.
func LocalRetentionNote(key, value string, tiered bool) string {
	if (key != ConfigLocalRetentionMs && key != ConfigLocalRetentionBytes) || value == strconv.FormatInt(LocalRetentionDefault, 10) {
		return ""
	}
	if tiered {
		return "enforced: older records leave the local disk once uploaded, and are read from the bucket"
	}
	return "no effect: the topic is not tiered (remote.storage.enable=false), so the whole log stays local and retention.* alone deletes"
}

// reset puts key back to its default; an unknown key fails.
func (c *TopicConfig) reset(key string) error {
	d := DefaultTopicConfig()
	switch key {
	case ConfigCleanupPolicy:
		c.CleanupPolicy = d.CleanupPolicy
	case ConfigMinCleanableDirtyRatio:
		c.MinCleanableDirtyRatio = d.MinCleanableDirtyRatio
	case ConfigMinCompactionLagMs:
		c.MinCompactionLagMs = d.MinCompactionLagMs
	case ConfigMaxCompactionLagMs:
		c.MaxCompactionLagMs = d.MaxCompactionLagMs
	case ConfigDeleteRetentionMs:
		c.DeleteRetentionMs = d.DeleteRetentionMs
	case ConfigRetentionMs:
		c.RetentionMs = d.RetentionMs
	case ConfigRetentionBytes:
		c.RetentionBytes = d.RetentionBytes
	case ConfigSegmentBytes:
		c.SegmentBytes = d.SegmentBytes
	case ConfigSegmentMs:
		c.SegmentMs = d.SegmentMs
	case ConfigRemoteStorageEnable:
		c.RemoteStorageEnable = d.RemoteStorageEnable
	case ConfigLocalRetentionMs:
		c.LocalRetentionMs = d.LocalRetentionMs
	case ConfigLocalRetentionBytes:
		c.LocalRetentionBytes = d.LocalRetentionBytes
	case ConfigMaxMessageBytes:
		c.MaxMessageBytes = d.MaxMessageBytes
	case ConfigRemoteRecoveryFrom:
		c.RemoteRecoveryFrom = d.RemoteRecoveryFrom
	default:
		return fmt.Errorf("%w: unknown key %q", ErrInvalidConfig, key)
	}
	return nil
}

// parseInt parses a plain decimal value within [lo, hi] into out.
func parseInt(key, value string, lo, hi int64, out *int64) error {
	v, err := strconv.ParseInt(value, 10, 64)
	if err != nil || v < lo || v > hi {
		return fmt.Errorf("%w: %s=%q: want an integer in [%d, %d]", ErrInvalidConfig, key, value, lo, hi)
	}
	*out = v
	return nil
}

// withEntries returns base with sets applied, then resets; all or nothing.
// A set of a key the nodes do not enforce fails (checkEnforced); a reset
// to the default is always allowed.
func withEntries(base TopicConfig, sets []*strandpb.MetadataConfigEntry, resets []string) (TopicConfig, error) {
	if len(sets)+len(resets) > configEntriesMax {
		return base, fmt.Errorf("%w: more than %d entries", ErrInvalidConfig, configEntriesMax)
	}
	c := base
	for _, e := range sets {
		if err := c.set(e.GetName(), e.GetValue()); err != nil {
			return base, err
		}
		if err := checkEnforced(e.GetName(), c); err != nil {
			return base, err
		}
	}
	for _, key := range resets {
		if err := c.reset(key); err != nil {
			return base, err
		}
	}
	if err := c.Compaction().Validate(); err != nil {
		return base, compactConfigError{err}
	}
	if err := c.validateTiering(); err != nil {
		return base, err
	}
	if base.RemoteStorageEnable && c.RemoteRecoveryFrom != base.RemoteRecoveryFrom {
		return base, fmt.Errorf("%w: %s is fixed when the topic is created (it names the objects its partitions start from)",
			ErrInvalidConfig, ConfigRemoteRecoveryFrom)
	}
	if base.RemoteStorageEnable && !c.RemoteStorageEnable {
		return base, fmt.Errorf("%w: %s cannot be turned off once on (its uploaded segments would be left behind, as KIP-405 refuses it)",
			ErrInvalidConfig, ConfigRemoteStorageEnable)
	}
	return c, nil
}

// validate checks every field of c is within its range (for Restore).
func (c TopicConfig) validate() error {
	for _, e := range c.Entries() {
		var probe TopicConfig
		if err := probe.set(e.Name, e.Value); err != nil {
			return err
		}
	}
	if err := c.Compaction().Validate(); err != nil {
		return compactConfigError{err}
	}
	return c.validateTiering()
}

// compactConfigError is engine/compact's ErrInvalidConfig as this
// package's: both match errors.Is, and the text names "invalid topic
// config" once ("metadata: invalid topic config: KEY=..."), not once per
// package.
type compactConfigError struct{ err error }

func (e compactConfigError) Error() string {
	return ErrInvalidConfig.Error() + ": " + strings.TrimPrefix(e.err.Error(), compact.ErrInvalidConfig.Error()+": ")
}

func (e compactConfigError) Unwrap() []error { return []error{ErrInvalidConfig, e.err} }

// toProto converts c for a snapshot.
func (c TopicConfig) toProto() *strandpb.MetadataTopicConfig {
	return &strandpb.MetadataTopicConfig{
		RetentionMs:     c.RetentionMs,
		RetentionBytes:  c.RetentionBytes,
		SegmentBytes:    c.SegmentBytes,
		SegmentMs:       c.SegmentMs,
		CleanupPolicy:   strandpb.MetadataCleanupPolicy(c.CleanupPolicy),
		MaxMessageBytes: c.MaxMessageBytes,

		MinCleanableDirtyRatio: &c.MinCleanableDirtyRatio,
		MinCompactionLagMs:     &c.MinCompactionLagMs,
		MaxCompactionLagMs:     &c.MaxCompactionLagMs,
		DeleteRetentionMs:      &c.DeleteRetentionMs,

		RemoteStorageEnable: c.RemoteStorageEnable,
		LocalRetentionMs:    nonDefault(c.LocalRetentionMs, LocalRetentionDefault),
		LocalRetentionBytes: nonDefault(c.LocalRetentionBytes, LocalRetentionDefault),
		RemoteRecoveryFrom:  c.RemoteRecoveryFrom.Bytes(),
	}
}

// nonDefault is &v, or nil when v is def: a snapshot leaves a tiering
// setting out while it has its default, so the bytes (and the digest) of
// a state that never set one are as before tiering existed.
func nonDefault(v, def int64) *int64 {
	if v == def {
		return nil
	}
	return &v
}

// configFromProto converts a snapshot's config back; a compaction setting
// absent (a snapshot written before it existed) is its default.
func configFromProto(p *strandpb.MetadataTopicConfig) TopicConfig {
	c := TopicConfig{
		RetentionMs:     p.GetRetentionMs(),
		RetentionBytes:  p.GetRetentionBytes(),
		SegmentBytes:    p.GetSegmentBytes(),
		SegmentMs:       segmentMsFromProto(p.GetSegmentMs()),
		CleanupPolicy:   CleanupPolicy(p.GetCleanupPolicy()),
		MaxMessageBytes: p.GetMaxMessageBytes(),
	}
	d := DefaultTopicConfig()
	if p == nil {
		p = &strandpb.MetadataTopicConfig{}
	}
	c.MinCleanableDirtyRatio = orDefault(p.MinCleanableDirtyRatio, d.MinCleanableDirtyRatio)
	c.MinCompactionLagMs = orDefault(p.MinCompactionLagMs, d.MinCompactionLagMs)
	c.MaxCompactionLagMs = orDefault(p.MaxCompactionLagMs, d.MaxCompactionLagMs)
	c.DeleteRetentionMs = orDefault(p.DeleteRetentionMs, d.DeleteRetentionMs)
	c.RemoteStorageEnable = p.GetRemoteStorageEnable()
	c.LocalRetentionMs = orDefault(p.LocalRetentionMs, d.LocalRetentionMs)
	c.LocalRetentionBytes = orDefault(p.LocalRetentionBytes, d.LocalRetentionBytes)
	c.RemoteRecoveryFrom, _ = UUIDFromBytes(p.GetRemoteRecoveryFrom()) // a bad length: zero, which validate does not see
	return c
}

// orDefault is *v, or def when the field is absent.
func orDefault[T any](v *T, def T) T {
	if v == nil {
		return def
	}
	return *v
}

// segmentMsFromProto reads segment.ms from a snapshot: 0 is a snapshot
// written before the key existed, whose topics had the default.
func segmentMsFromProto(v int64) int64 {
	if v == 0 {
		return SegmentMsDefault
	}
	return v
}
