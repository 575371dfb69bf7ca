package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runAdmin runs the binary with the cluster's brokers before the command
// (the global-flags form) and no profile file.
func runAdmin(t *testing.T, c *testCluster, args ...string) cliOutcome {
	t.Helper()
	out, errOut, err := runCLIResult(t, []string{configFileEnv + "=" + filepath.Join(c.dir, "no-profiles.yaml")}, "",
		append([]string{"-b", strings.Join(c.addrs, ",")}, args...)...)
	o := cliOutcome{stdout: out, stderr: errOut}
	if err != nil {
		o.code = 1
		if strings.Contains(err.Error(), "exit status 2") {
			o.code = 2
		}
	}
	return o
}

// decodeJSON unmarshals a command's stdout or fails the test.
func decodeJSON(t *testing.T, what string, o cliOutcome, v any) {
	t.Helper()
	if o.code != 0 {
		t.Fatalf("%s: exit %d, stderr %q", what, o.code, o.stderr)
	}
	if err := json.Unmarshal([]byte(o.stdout), v); err != nil {
		t.Fatalf("%s: %v in %q", what, err, o.stdout)
	}
}

// Against four real nodes: a partition move that would drop the
// replication factor is refused (it used to go through, exit 0) and goes
// through with --allow-rf-change; list and describe commands print JSON
// with --format json; internal topics stay out of topic list and of a
// decommission plan unless --internal.
func TestAdminOutputAndRFGuard(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 4)
	if o := runAdmin(t, c, "topic", "create", "hello", "-p", "2", "-r", "3"); o.code != 0 {
		t.Fatalf("create: %+v", o)
	}
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(c.addrs, "hello", 2) })

	var desc topicJSON
	decodeJSON(t, "topic describe", runAdmin(t, c, "topic", "describe", "hello", "--format", "json"), &desc)
	if desc.Name != "hello" || desc.Partitions != 2 || desc.ReplicationFactor != 3 || len(desc.PartitionList) != 2 ||
		len(desc.PartitionList[0].Replicas) != 3 || desc.Configs["retention.ms"] == "" {
		t.Fatalf("describe json: %+v", desc)
	}
	keep := desc.PartitionList[0].Replicas[0]
	o := runAdmin(t, c, "partition", "move", "hello/0", "--replicas", itoaID(keep))
	if o.code != 1 || !strings.Contains(o.stderr, "would change its replication factor from 3 to 1") ||
		!strings.Contains(o.stderr, "--allow-rf-change") {
		t.Fatalf("move to one replica: %+v", o)
	}
	decodeJSON(t, "topic describe", runAdmin(t, c, "topic", "describe", "hello", "--format", "json"), &desc)
	if len(desc.PartitionList[0].Replicas) != 3 {
		t.Fatalf("refused move changed the replicas: %+v", desc.PartitionList[0])
	}
	o = runAdmin(t, c, "partition", "move", "hello/1", "--replicas", joinIDs(desc.PartitionList[1].Replicas[:2]), "--allow-rf-change", "--wait", "60s")
	if o.code != 0 || !strings.Contains(o.stdout, "changing the replication factor of hello/1 from 3 to 2") ||
		!strings.Contains(o.stdout, "moved hello/1: replicas "+joinIDs(desc.PartitionList[1].Replicas[:2])) {
		t.Fatalf("allowed move: %+v", o)
	}

	// A committed offset creates __strand_offsets.
	if o := runAdmin(t, c, "group", "reset", "readers", "-t", "hello", "--to-earliest", "--execute"); o.code != 0 {
		t.Fatalf("group reset: %+v", o)
	}
	var topics []struct {
		Name     string
		Internal bool
	}
	decodeJSON(t, "topic list", runAdmin(t, c, "topic", "list", "--format", "json"), &topics)
	if len(topics) != 1 || topics[0].Name != "hello" {
		t.Errorf("topic list json: %+v", topics)
	}
	if o := runAdmin(t, c, "topic", "list"); o.stdout != "hello\n" {
		t.Errorf("topic list: %+v", o)
	}
	if o := runAdmin(t, c, "topic", "list", "--internal"); o.stdout != "__strand_offsets\nhello\n" {
		t.Errorf("topic list --internal: %+v", o)
	}

	var groups []struct{ Group, State string }
	decodeJSON(t, "group list", runAdmin(t, c, "group", "list", "--format", "json"), &groups)
	if len(groups) != 1 || groups[0].Group != "readers" {
		t.Errorf("group list json: %+v", groups)
	}
	var group struct {
		Group   string
		Offsets []struct {
			Topic     string
			Partition int32
			Committed int64
		}
	}
	decodeJSON(t, "group describe", runAdmin(t, c, "group", "describe", "readers", "--format", "json"), &group)
	if group.Group != "readers" || len(group.Offsets) != 2 || group.Offsets[0].Committed != 0 {
		t.Errorf("group describe json: %+v", group)
	}
	var nodes []struct {
		ID    uint64
		State string
	}
	decodeJSON(t, "node list", runAdmin(t, c, "node", "list", "--format", "json"), &nodes)
	if len(nodes) != 4 || nodes[0].ID != 1 || nodes[0].State != "active" {
		t.Errorf("node list json: %+v", nodes)
	}
	for _, cmd := range []string{"user", "acl", "quota"} {
		var list []map[string]any
		decodeJSON(t, cmd+" list", runAdmin(t, c, cmd, "list", "--format", "json"), &list)
	}
	checkDecommissionPlan(t, c)
}

// checkDecommissionPlan checks a decommission dry run of a node holding
// __strand_offsets replicas counts their moves, and lists them with
// --internal and in JSON.
func checkDecommissionPlan(t *testing.T, c *testCluster) {
	t.Helper()
	for id := 1; id <= 4; id++ {
		var plan struct {
			DryRun bool `json:"dry_run"`
			Moves  []struct {
				Topic    string
				Internal bool
			}
		}
		decodeJSON(t, "decommission plan", runAdmin(t, c, "node", "decommission", itoaID(uint64(id)), "--dry-run", "--format", "json"), &plan)
		internal := 0
		for _, m := range plan.Moves {
			if m.Internal != (m.Topic == "__strand_offsets") {
				t.Fatalf("plan json marks %+v", m)
			}
			if m.Internal {
				internal++
			}
		}
		if !plan.DryRun || internal == 0 {
			continue
		}
		o := runAdmin(t, c, "node", "decommission", itoaID(uint64(id)), "--dry-run")
		if o.code != 0 || strings.Contains(o.stdout, "__strand_offsets") || !strings.Contains(o.stdout, "of internal topics (--internal lists them)") {
			t.Errorf("decommission plan: %+v", o)
		}
		o = runAdmin(t, c, "node", "decommission", itoaID(uint64(id)), "--dry-run", "--internal")
		if o.code != 0 || strings.Count(o.stdout, "__strand_offsets/") != internal {
			t.Errorf("decommission plan --internal: want %d internal moves: %+v", internal, o)
		}
		return
	}
	t.Error("no node holds a __strand_offsets replica to move")
}

// itoaID prints a node id.
func itoaID(id uint64) string { return joinIDs([]uint64{id}) }
