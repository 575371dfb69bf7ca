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
