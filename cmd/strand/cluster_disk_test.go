package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// `strand cluster` names a node whose disk stalled, as it names a full
// one, in its text and in its JSON, beside the healthy nodes (which show
// neither). Before, the members carried no stall, so a stalled node read
// as healthy there while /api/cluster and the console said STALLED.
func TestClusterShowsStalledDisk(t *testing.T) {
	members := clientlib.Members{MetadataLeader: 1, AnsweredBy: 1, Members: []clientlib.Member{
		{ID: 1, Address: "127.0.0.1:1", State: "active", Role: "voter"},
		{ID: 2, Address: "127.0.0.1:2", State: "active", Role: "voter", DiskStalled: true},
		{ID: 3, Address: "127.0.0.1:3", State: "active", Role: "voter", DiskFull: true},
	}}
	var out bytes.Buffer
	printMembers(&out, members, time.Now())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a line per member:\n%s", out.String())
	}
	for i, want := range []string{"", diskStalledNote, diskFullNote} {
		if got := strings.Contains(lines[i], "DISK"); want == "" && got || want != "" && !strings.HasSuffix(lines[i], want) {
			t.Errorf("node %d: %q, want note %q", i+1, lines[i], want)
		}
	}
	cj := clusterJSONOf(context.Background(), nil, clientlib.ClusterInfo{ControllerID: 1}, members, nil, time.Now())
	for _, n := range cj.Nodes {
		if n.DiskStalled != (n.ID == 2) || n.DiskFull != (n.ID == 3) {
			t.Errorf("json node %d: disk_stalled %v disk_full %v", n.ID, n.DiskStalled, n.DiskFull)
		}
	}
}
