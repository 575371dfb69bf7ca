package main

import (
	"bytes"
	"strings"
	"testing"
)

// Bad --exec and dlq input is a usage error (exit 2) that says what to
// do, refused before any connection is made (no cluster runs here).
func TestDeadLetterFlagsRefused(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"consume", "t", "--group", "g", "--exec", "true", "--max-attempts", "0"}, "--max-attempts 0: want at least 1"},
		{[]string{"consume", "t", "--group", "g", "--exec", "true", "--dlq-topic", "t"}, "--dlq-topic t is the topic being consumed"},
		{[]string{"consume", "t", "--group", "g", "--exec", "true", "--retry-topic", "t.dlq"}, "--retry-topic t.dlq: name a topic other than"},
		{[]string{"consume", "t", "--exec", "true"}, "--exec needs --group GROUP"},
		{[]string{"consume", "t", "--group", "g", "--max-attempts", "2"}, "--max-attempts needs --exec"},
		{[]string{"consume", "t", "--group", "g", "--exec", "true", "-J"}, "--exec runs a command per record instead of printing it"},
		{[]string{"dlq", "redrive", "t.dlq", "--to", "t.dlq"}, "that is the dead-letter topic itself"},
		{[]string{"dlq", "describe"}, "want one dead-letter topic"},
		{[]string{"dlq", "describe", "t.dlq.redriven"}, "that is a redrive ledger; name the dead-letter topic t.dlq"},
		{[]string{"dlq", "purge", "t.dlq"}, `unknown subcommand "purge"`},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(append(c.args, "-b", "127.0.0.1:1"), strings.NewReader(""), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("strand %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(c.args, " "), code, stderr.String(), c.want)
		}
	}
}
