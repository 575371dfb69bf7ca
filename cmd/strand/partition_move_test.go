package main

import (
	"slices"
	"strings"
	"testing"
)

// parseMove takes TOPIC/PARTITION and a replica list and refuses, as a
// usage error naming what to give, a missing partition, a bad id, a
// repeated node and a missing --replicas.
func TestParseMove(t *testing.T) {
	m, err := parseMove("hello/2", "1,4, 5")
	if err != nil || m.Topic != "hello" || m.Partition != 2 || !slices.Equal(m.Replicas, []uint64{1, 4, 5}) {
		t.Fatalf("hello/2 --replicas 1,4,5: %+v %v", m, err)
	}
	for _, tc := range []struct{ arg, replicas, want string }{
		{"hello", "1,2,3", "want TOPIC/PARTITION"},
		{"hello/x", "1,2,3", "want TOPIC/PARTITION"},
		{"/0", "1,2,3", "want TOPIC/PARTITION"},
		{"hello/0", "", "--replicas is required"},
		{"hello/0", "1,0,2", "above 0"},
		{"hello/0", "1,2,2", "node 2 twice"},
	} {
		_, err := parseMove(tc.arg, tc.replicas)
		if err == nil || !isUsageError(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s --replicas %q: %v, want a usage error saying %q", tc.arg, tc.replicas, err, tc.want)
		}
	}
}

// `strand partition move --help` prints the synopsis and an example.
func TestPartitionMoveHelp(t *testing.T) {
	var out, errOut strings.Builder
	if code := run([]string{"partition", "move", "--help"}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"strand partition move TOPIC/PARTITION (--replicas", "Example:", "--no-wait", "--cancel"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}
