package node

import (
	"bytes"
	"log/slog"
	"regexp"
	"strings"
	"testing"
)

// The core logs through Config.Logger: leadership changes of the metadata
// group and of each partition at info with node, topic and partition, and
// etcd raft's own messages at debug with the same attributes. Records carry
// no time: the core reads no clock.
func TestCoreLogsLeadershipWithAttributes(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newMetaCluster(t, 3, 3, func(cfg *Config) { cfg.Logger = logger })
	c.createTopic(c.metaLeaderOf(), "events", 2, 3)
	c.leader(TopicPartition{Topic: "events", Partition: 0}) // ticks until elected
	c.leader(TopicPartition{Topic: "events", Partition: 1})
	out := buf.String()
	for _, want := range []string{
		`level=INFO msg="became leader" node=\d group=metadata term=\d+`,
		`level=INFO msg="became leader" node=\d topic=events partition=0 term=\d+`,
		`level=INFO msg="became leader" node=\d topic=events partition=1 term=\d+`,
		`level=DEBUG msg="raft: \d became leader at term \d+" node=\d topic=events partition=1`,
	} {
		if !regexp.MustCompile(`(?m)^` + want + `$`).MatchString(out) {
			t.Errorf("no log line matches %s", want)
		}
	}
	if strings.Contains(out, "time=") {
		t.Errorf("the core stamped a time on a record")
	}
	if t.Failed() {
		t.Logf("log:\n%s", out)
	}
}

// raft's Panic and Fatal must not return (raft relies on it): the adapter
// logs them and panics.
func TestRaftLoggerPanicAndFatalStop(t *testing.T) {
	var buf bytes.Buffer
	l := raftLogger{coreLog{h: slog.NewTextHandler(&buf, nil)}}
	for name, call := range map[string]func(){
		"Panicf": func() { l.Panicf("broken %d", 1) },
		"Fatalf": func() { l.Fatalf("broken %d", 2) },
		"Panic":  func() { l.Panic("broken 3") },
		"Fatal":  func() { l.Fatal("broken 4") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s returned", name)
				}
			}()
			call()
		}()
	}
	if got := strings.Count(buf.String(), "level=ERROR"); got != 4 {
		t.Errorf("%d error records, want 4:\n%s", got, buf.String())
	}
}

// countingStringer counts how often it is formatted.
type countingStringer struct{ n *int }

func (s countingStringer) String() string { *s.n++; return "x" }

// raft narrates every step at Debug and Info: a message the handler drops
// is not formatted, and one it wants is, at the adapter's level.
func TestRaftLoggerFormatsOnlyWhatTheHandlerWants(t *testing.T) {
	var buf bytes.Buffer
	formatted := 0
	arg := countingStringer{&formatted}
	l := raftLogger{coreLog{h: slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})}}
	l.Debug(arg)
	l.Debugf("%v", arg)
	l.Info(arg)
	l.Infof("%v", arg)
	if formatted != 0 || buf.Len() != 0 {
		t.Errorf("debug and info below the handler's level: formatted %d times, logged %q", formatted, buf.String())
	}
	l.Warning(arg)
	l.Warningf("%v", arg)
	l.Error(arg)
	l.Errorf("%v", arg)
	if formatted != 4 {
		t.Errorf("warning and error formatted %d times, want 4", formatted)
	}
	if w, e := strings.Count(buf.String(), `level=WARN msg="raft: x"`), strings.Count(buf.String(), `level=ERROR msg="raft: x"`); w != 2 || e != 2 {
		t.Errorf("%d warn and %d error records, want 2 and 2:\n%s", w, e, buf.String())
	}
}
