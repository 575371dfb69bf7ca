package metadata

import (
	"testing"
)

// TestTopicUUIDs shows the identities a client checks: the cluster id is
// the first seed applied (later ones are ignored); a topic deleted and
// created again under its name gets a new uuid; uuids survive a snapshot
// and restore; and two clusters that run the same commands with other
// seeds give their topics other uuids.
func TestTopicUUIDs(t *testing.T) {
	run := func(seed UUID) (*applier, []UUID) {
		a := newApplier(t)
		data, err := EncodeRegisterNode(1, "h:1", "")
		a.ok(WithClusterSeed(data, seed), err)
		data, err = EncodeRegisterNode(2, "h:2", "")
		a.ok(WithClusterSeed(data, UUID{0xff}), err) // a second seed: ignored
		if a.s.ClusterID() != seed {
			t.Fatalf("cluster id %s, want the first seed %s", a.s.ClusterID(), seed)
		}
		var ids []UUID
		for range 3 {
			r := a.ok(EncodeCreateTopic("hello", 2, 1, nil))
			ids = append(ids, r.Topic.UUID)
			a.ok(EncodeDeleteTopic("hello"))
		}
		r := a.ok(EncodeCreateTopic("hello", 2, 1, nil))
		return a, append(ids, r.Topic.UUID)
	}
	a, ids := run(UUID{1, 2, 3})
	seen := map[UUID]bool{}
	for _, id := range ids {
		if id.IsZero() || seen[id] {
			t.Fatalf("topic ids %v: zero or repeated across delete and re-create", ids)
		}
		seen[id] = true
	}
	restored, err := Restore(a.s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	top, _ := restored.Topic("hello")
	if restored.ClusterID() != a.s.ClusterID() || top.UUID != ids[len(ids)-1] {
		t.Fatalf("after restore: cluster %s topic %s, want %s %s", restored.ClusterID(), top.UUID, a.s.ClusterID(), ids[len(ids)-1])
	}
	_, other := run(UUID{9})
	for i := range ids {
		if other[i] == ids[i] {
			t.Fatalf("two clusters gave topic %d the same id %s", i, ids[i])
		}
	}
	if s := ids[0].String(); len(s) != 36 || s[14] != '8' {
		t.Fatalf("uuid text %q: want 8-4-4-4-12 hex, version 8", s)
	}
}

// TestLeaderReports shows which reports the state takes: a newer term for
// a replica of a live partition; never an older or equal term, a node
// that is no replica, or a report about a deleted topic of the same name.
// Leaders survive a snapshot and leave the version alone.
func TestLeaderReports(t *testing.T) {
	a := newApplier(t)
	a.nodes(3)
	top := *a.ok(EncodeCreateTopic("t", 1, 2, nil)).Topic
	replicas := top.Replicas[0]
	outsider := uint64(6) - replicas[0] - replicas[1] // the third node
	version := a.s.Version()
	report := func(node, term uint64, topicID uint64) {
		t.Helper()
		a.ok(EncodeReportLeaders([]LeaderReport{{Topic: "t", TopicID: topicID, Partition: 0, Leader: Leader{Node: node, Term: term}}}))
	}
	want := func(l Leader) {
		t.Helper()
		if got, _ := a.s.Leader("t", 0); got != l {
			t.Fatalf("leader %+v, want %+v", got, l)
		}
	}
	report(replicas[0], 5, top.ID)
	want(Leader{replicas[0], 5})
	report(replicas[1], 4, top.ID) // stale term
	want(Leader{replicas[0], 5})
	report(replicas[1], 5, top.ID) // same term: one leader per term
	want(Leader{replicas[0], 5})
	report(outsider, 9, top.ID) // not a replica
	want(Leader{replicas[0], 5})
	report(replicas[1], 7, top.ID)
	want(Leader{replicas[1], 7})
	if a.s.Version() != version {
		t.Fatalf("version %d after leader reports, want %d", a.s.Version(), version)
	}
	restored, err := Restore(a.s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := restored.Leader("t", 0); l != (Leader{replicas[1], 7}) {
		t.Fatalf("leader after restore %+v", l)
	}
	a.ok(EncodeDeleteTopic("t"))
	again := *a.ok(EncodeCreateTopic("t", 1, 2, nil)).Topic
	report(again.Replicas[0][0], 9, top.ID) // about the deleted incarnation
	want(Leader{})
	tooMany := make([]LeaderReport, LeaderReportsMax+1)
	wantErr(t, a.do(EncodeReportLeaders(tooMany)), ErrInvalidCommand)
}
