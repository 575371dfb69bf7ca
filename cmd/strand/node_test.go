package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestMembershipCommandsRefuseBadUsage: the membership commands refuse
// what they cannot run before contacting anyone (exit 2, a message saying
// what to give), and their help comes from the one table.
func TestMembershipCommandsRefuseBadUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"node"}, "want a subcommand: list, add, decommission"},
		{[]string{"node", "remove"}, `unknown subcommand "remove"`},
		{[]string{"node", "decommission"}, "give the node's id"},
		{[]string{"node", "decommission", "x"}, `"x" is not a node id`},
		{[]string{"node", "add", "--id", "4"}, "--address \"\": want HOST:PORT"},
		{[]string{"serve", "--id", "4", "--data-dir", "d", "--join", "127.0.0.1:1"}, "--join needs --listen or --advertise"},
		{[]string{"serve", "--id", "4", "--data-dir", "d", "--join", "127.0.0.1:1", "--listen", "127.0.0.1:2",
			"--peers", "4=127.0.0.1:2"}, "--join needs --listen or --advertise (the address the others reach this node at) and no --peers"},
		{[]string{"cluster", "rebalance", "extra"}, "takes no arguments"},
		// A dry run that would apply (it balanced leaders) or a flag of the
		// other subcommand (ignored) was accepted before.
		{[]string{"cluster", "leaders", "--balance", "--dry-run"}, "cluster leaders has no --dry-run"},
		{[]string{"cluster", "rebalance", "--balance"}, "--balance is for cluster leaders"},
	} {
		var out, errOut bytes.Buffer
		code := run(tc.args, strings.NewReader(""), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("strand %v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, errOut.String(), tc.want)
		}
	}
	for _, name := range []string{"node add", "node decommission", "cluster rebalance", "cluster leaders"} {
		checkHelp(t, append(strings.Fields(name), "--help"), []string{"Usage:\n  strand " + name, "Example:\n  strand " + name})
	}
	checkHelp(t, []string{"node", "--help"}, []string{"Usage:\n  strand node add", "strand node decommission"})
}
