package metadata

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestTieringSettings shows KIP-405's three keys: their defaults
// (remote storage off, local retention -2: the total's), set at create and
// by alter, kept by a snapshot, and the refusals, each naming what to do
// with nothing stored: remote storage on a compacted topic (either order),
// a local retention above the total (or unlimited under a limited total),
// turning remote storage off once on, values out of range.
func TestTieringSettings(t *testing.T) {
	d := DefaultTopicConfig()
	if d.RemoteStorageEnable || d.LocalRetentionMs != -2 || d.LocalRetentionBytes != -2 {
		t.Fatalf("defaults %+v, want KIP-405's (false, -2, -2)", d)
	}
	if ms, b := d.LocalRetention(); ms != d.RetentionMs || b != d.RetentionBytes {
		t.Fatalf("effective local retention %d/%d, want the total's", ms, b)
	}
	a := newApplier(t)
	a.nodes(1)
	a.ok(EncodeCreateTopic("t", 1, 1, []ConfigEntry{{ConfigRemoteStorageEnable, "true"}, {ConfigLocalRetentionMs, "60000"}}))
	got, _ := a.s.Topic("t")
	want := DefaultTopicConfig()
	want.RemoteStorageEnable, want.LocalRetentionMs = true, 60000
	if got.Config != want {
		t.Fatalf("created %+v, want %+v", got.Config, want)
	}
	r := a.ok(EncodeAlterTopicConfig("t", []ConfigEntry{{ConfigRetentionBytes, "1000000"}, {ConfigLocalRetentionBytes, "1000"}}, nil))
	want.RetentionBytes, want.LocalRetentionBytes = 1000000, 1000
	if r.Topic.Config != want {
		t.Fatalf("altered %+v, want %+v", r.Topic.Config, want)
	}
	v := a.s.Version()
	for _, bad := range []struct {
		sets   []ConfigEntry
		resets []string
		says   string
	}{
		{[]ConfigEntry{{ConfigCleanupPolicy, "compact"}}, nil, "a compacted topic cannot be tiered"},
		{[]ConfigEntry{{ConfigLocalRetentionMs, "604800001"}}, nil, "local.retention.ms=604800001 is above retention.ms=604800000"},
		{[]ConfigEntry{{ConfigLocalRetentionMs, "-1"}}, nil, "local.retention.ms=-1 is above retention.ms"},
		{[]ConfigEntry{{ConfigRetentionBytes, "999"}}, nil, "local.retention.bytes=1000 is above retention.bytes=999"},
		{[]ConfigEntry{{ConfigRemoteStorageEnable, "false"}}, nil, "cannot be turned off"},
		{nil, []string{ConfigRemoteStorageEnable}, "cannot be turned off"},
		{[]ConfigEntry{{ConfigRemoteStorageEnable, "yes"}}, nil, `remote.storage.enable="yes": want true or false`},
		{[]ConfigEntry{{ConfigLocalRetentionBytes, "-3"}}, nil, `local.retention.bytes="-3"`},
	} {
		r := a.do(EncodeAlterTopicConfig("t", bad.sets, bad.resets))
		if !errors.Is(r.Err, ErrInvalidConfig) || !strings.Contains(r.Err.Error(), bad.says) {
			t.Errorf("%v %v: %v, want ErrInvalidConfig saying %q", bad.sets, bad.resets, r.Err, bad.says)
		}
	}
	wantErr(t, a.do(EncodeCreateTopic("c", 1, 1, []ConfigEntry{{ConfigCleanupPolicy, "compact"}, {ConfigRemoteStorageEnable, "true"}})),
		ErrInvalidConfig)
	if got, _ := a.s.Topic("t"); got.Config != want || a.s.Version() != v {
		t.Fatalf("refused alters changed the state: %+v, version %d -> %d", got.Config, v, a.s.Version())
	}
	if _, ok := a.s.Topic("c"); ok {
		t.Fatalf("a refused create made the topic")
	}
	s, err := Restore(a.s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Topic("t"); got.Config != want {
		t.Fatalf("restored %+v, want %+v", got.Config, want)
	}
}

// TestTieringSettingsDefaultBytes shows a topic that never set a tiering
// key snapshots to the same bytes with or without them in the defaults:
// the settings are left out while default, so no state's digest moved.
func TestTieringSettingsDefaultBytes(t *testing.T) {
	a := newApplier(t)
	a.nodes(1)
	a.ok(EncodeCreateTopic("t", 1, 1, nil))
	before := a.s.Snapshot()
	a.ok(EncodeAlterTopicConfig("t", []ConfigEntry{{ConfigLocalRetentionMs, "-2"}}, nil))
	a.ok(EncodeAlterTopicConfig("t", []ConfigEntry{{ConfigRetentionMs, "604800000"}}, nil))
	after := a.s.Snapshot()
	if bytes.Contains(after, []byte{0xf0, 0x02}) || len(after) != len(before) {
		t.Fatalf("a default local retention is written to the snapshot (%d bytes, was %d)", len(after), len(before))
	}
}

// TestRemoteRecoveryFrom shows strand.remote.recovery.from: set at create
// on a tiered topic (a UUID, described, kept by a snapshot), refused
// without remote storage or with a value that is no UUID, and fixed once
// the topic exists (neither set, changed nor reset by an alter).
func TestRemoteRecoveryFrom(t *testing.T) {
	const from = "0123abcd-4567-89ef-8123-456789abcdef"
	u, ok := ParseUUID(from)
	if !ok || u.String() != from {
		t.Fatalf("ParseUUID(%q) = %v %v", from, u, ok)
	}
	for _, bad := range []string{"", "0123abcd456789ef8123456789abcdef", "0123abcd-4567-89ef-8123-456789abcdeg"} {
		if _, ok := ParseUUID(bad); ok {
			t.Errorf("ParseUUID(%q) accepted", bad)
		}
	}
	a := newApplier(t)
	a.nodes(1)
	wantErr(t, a.do(EncodeCreateTopic("plain", 1, 1, []ConfigEntry{{ConfigRemoteRecoveryFrom, from}})), ErrInvalidConfig)
	wantErr(t, a.do(EncodeCreateTopic("zero", 1, 1, []ConfigEntry{{ConfigRemoteStorageEnable, "true"},
		{ConfigRemoteRecoveryFrom, "00000000-0000-0000-0000-000000000000"}})), ErrInvalidConfig)
	a.ok(EncodeCreateTopic("r", 1, 1, []ConfigEntry{{ConfigRemoteStorageEnable, "true"}, {ConfigRemoteRecoveryFrom, from}}))
	a.ok(EncodeCreateTopic("t", 1, 1, []ConfigEntry{{ConfigRemoteStorageEnable, "true"}}))
	got, _ := a.s.Topic("r")
	if got.Config.RemoteRecoveryFrom != u {
		t.Fatalf("created with %v, want %v", got.Config.RemoteRecoveryFrom, u)
	}
	if e := got.Config.Entries(); e[len(e)-1] != (ConfigEntry{ConfigRemoteRecoveryFrom, from}) {
		t.Fatalf("entries end with %v", e[len(e)-1])
	}
	if plain, _ := a.s.Topic("t"); len(plain.Config.Entries()) != len(got.Config.Entries())-1 {
		t.Fatal("a topic without the key describes it")
	}
	for _, alter := range []struct {
		topic  string
		sets   []ConfigEntry
		resets []string
	}{
		{"r", []ConfigEntry{{ConfigRemoteRecoveryFrom, "1123abcd-4567-89ef-8123-456789abcdef"}}, nil},
		{"r", nil, []string{ConfigRemoteRecoveryFrom}},
		{"t", []ConfigEntry{{ConfigRemoteRecoveryFrom, from}}, nil},
	} {
		r := a.do(EncodeAlterTopicConfig(alter.topic, alter.sets, alter.resets))
		if !errors.Is(r.Err, ErrInvalidConfig) || !strings.Contains(r.Err.Error(), "fixed when the topic is created") {
			t.Errorf("alter %s %v %v: %v, want it refused", alter.topic, alter.sets, alter.resets, r.Err)
		}
	}
	s, err := Restore(a.s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if back, _ := s.Topic("r"); back.Config != got.Config {
		t.Fatalf("restored %+v, want %+v", back.Config, got.Config)
	}
}
