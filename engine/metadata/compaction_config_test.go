package metadata

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/proto/strandpb"
)

// TestCompactionSettings shows the compaction keys as Kafka has them:
// Kafka's defaults described, each set and reset on an existing topic and
// at create, and bad values refused naming key and value with nothing
// stored: min.compaction.lag.ms above max.compaction.lag.ms (whichever is
// set last), a negative delete.retention.ms, a ratio outside [0, 1].
func TestCompactionSettings(t *testing.T) {
	a := newApplier(t)
	a.nodes(1)
	a.ok(EncodeCreateTopic("t", 1, 1, []ConfigEntry{{ConfigDeleteRetentionMs, "5000"}}))
	got, _ := a.s.Topic("t")
	want := DefaultTopicConfig()
	want.DeleteRetentionMs = 5000
	if got.Config != want {
		t.Fatalf("created %+v, want %+v", got.Config, want)
	}
	d := DefaultTopicConfig().Compaction()
	if d != compact.DefaultConfig() {
		t.Fatalf("defaults %+v, want Kafka's %+v", d, compact.DefaultConfig())
	}
	r := a.ok(EncodeAlterTopicConfig("t", []ConfigEntry{
		{ConfigMinCleanableDirtyRatio, "0.25"}, {ConfigMinCompactionLagMs, "100"}, {ConfigMaxCompactionLagMs, "60000"},
		{ConfigDeleteRetentionMs, "0"},
	}, nil))
	want = DefaultTopicConfig()
	want.MinCleanableDirtyRatio, want.MinCompactionLagMs, want.MaxCompactionLagMs, want.DeleteRetentionMs = 0.25, 100, 60000, 0
	if r.Topic.Config != want {
		t.Fatalf("altered %+v, want %+v", r.Topic.Config, want)
	}
	v := a.s.Version()
	for _, bad := range []struct {
		sets   []ConfigEntry
		resets []string
		says   string
	}{
		{[]ConfigEntry{{ConfigMinCompactionLagMs, "60001"}}, nil, "min.compaction.lag.ms=60001 is greater than max.compaction.lag.ms=60000"},
		{[]ConfigEntry{{ConfigMaxCompactionLagMs, "99"}}, nil, "min.compaction.lag.ms=100 is greater than max.compaction.lag.ms=99"},
		{[]ConfigEntry{{ConfigMinCompactionLagMs, "100000"}}, []string{ConfigMaxCompactionLagMs + "x"}, "unknown key"},
		{[]ConfigEntry{{ConfigDeleteRetentionMs, "-1"}}, nil, `delete.retention.ms="-1"`},
		{[]ConfigEntry{{ConfigMinCleanableDirtyRatio, "1.01"}}, nil, `min.cleanable.dirty.ratio="1.01"`},
		{[]ConfigEntry{{ConfigMinCleanableDirtyRatio, "NaN"}}, nil, `min.cleanable.dirty.ratio="NaN"`},
		{[]ConfigEntry{{ConfigMinCompactionLagMs, "-5"}}, nil, `min.compaction.lag.ms="-5"`},
		{[]ConfigEntry{{ConfigCleanupPolicy, "compact,compact"}}, nil, "names compact twice"},
	} {
		r := a.do(EncodeAlterTopicConfig("t", bad.sets, bad.resets))
		if !errors.Is(r.Err, ErrInvalidConfig) || !strings.Contains(r.Err.Error(), bad.says) {
			t.Errorf("%v %v: %v, want ErrInvalidConfig saying %q", bad.sets, bad.resets, r.Err, bad.says)
		}
	}
	wantErr(t, a.do(EncodeCreateTopic("u", 1, 1, []ConfigEntry{{ConfigMinCompactionLagMs, "10"}, {ConfigMaxCompactionLagMs, "5"}})),
		ErrInvalidConfig)
	if got, _ := a.s.Topic("t"); got.Config != want || a.s.Version() != v {
		t.Fatalf("refused alters changed the state: %+v, version %d -> %d", got.Config, v, a.s.Version())
	}
	if _, ok := a.s.Topic("u"); ok {
		t.Fatalf("a refused create made the topic")
	}
	r = a.ok(EncodeAlterTopicConfig("t", nil, []string{ConfigMinCleanableDirtyRatio, ConfigMinCompactionLagMs,
		ConfigMaxCompactionLagMs, ConfigDeleteRetentionMs}))
	if r.Topic.Config != DefaultTopicConfig() {
		t.Fatalf("reset %+v, want the defaults", r.Topic.Config)
	}
}

// TestCompactionSettingsSnapshot shows the settings survive a snapshot, and
// a snapshot written before they existed (fields absent) restores Kafka's
// defaults, not zeros (a zero max.compaction.lag.ms would be invalid and a
// zero ratio would compact on every byte).
func TestCompactionSettingsSnapshot(t *testing.T) {
	a := newApplier(t)
	a.nodes(1)
	a.ok(EncodeCreateTopic("t", 1, 1, []ConfigEntry{{ConfigMinCleanableDirtyRatio, "0"}, {ConfigDeleteRetentionMs, "7"}}))
	s, err := Restore(a.s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := s.Topic("t")
	if got.Config.MinCleanableDirtyRatio != 0 || got.Config.DeleteRetentionMs != 7 {
		t.Fatalf("restored %+v", got.Config)
	}
	var snap strandpb.MetadataSnapshot
	if err := proto.Unmarshal(a.s.Snapshot(), &snap); err != nil {
		t.Fatal(err)
	}
	for _, tp := range snap.Topics {
		c := tp.Config
		c.MinCleanableDirtyRatio, c.MinCompactionLagMs, c.MaxCompactionLagMs, c.DeleteRetentionMs = nil, nil, nil, nil
	}
	old, err := proto.MarshalOptions{Deterministic: true}.Marshal(&snap)
	if err != nil {
		t.Fatal(err)
	}
	s, err = Restore(old)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Topic("t"); got.Config != DefaultTopicConfig() {
		t.Fatalf("an old snapshot restored %+v, want the defaults", got.Config)
	}
}
