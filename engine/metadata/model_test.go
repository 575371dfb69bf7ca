package metadata

import (
	"bytes"
	"errors"
	"slices"
	"sort"
	"testing"

	"pgregory.net/rapid"
)

// model is the trivial reference the state machine is checked against:
// maps and counters, no placement (placement is checked by its own
// properties and by Check).
type model struct {
	nodes       map[uint64]Node
	topics      map[string]modelTopic
	nextTopicID uint64
	nextPID     int64
	version     uint64
	clusterID   UUID
	// uuidsEver holds every topic uuid ever handed out: none may return.
	uuidsEver map[UUID]bool
}

type modelTopic struct {
	id         uint64
	partitions int32
	rf         int32
	config     TopicConfig
	uuid       UUID
	leaders    []Leader
	replicas   [][]uint64
}

// configCase is one config entry with its known validity and effect.
type configCase struct {
	entry ConfigEntry
	apply func(*TopicConfig) // nil: invalid
}

// cleanup.policy=compact is taken (the node gates it before proposing),
// max.message.bytes is refused everywhere but its enforced maximum
// (checkEnforced); retention and segment keys are taken within range.
var configCases = []configCase{
	{ConfigEntry{ConfigRetentionMs, "1000"}, func(c *TopicConfig) { c.RetentionMs = 1000 }},
	{ConfigEntry{ConfigRetentionMs, "-1"}, func(c *TopicConfig) { c.RetentionMs = -1 }},
	{ConfigEntry{ConfigRetentionMs, "-2"}, nil},
	{ConfigEntry{ConfigRetentionBytes, "5000"}, func(c *TopicConfig) { c.RetentionBytes = 5000 }},
	{ConfigEntry{ConfigSegmentBytes, "100"}, nil},
	{ConfigEntry{ConfigSegmentBytes, "8192"}, func(c *TopicConfig) { c.SegmentBytes = 8192 }},
	{ConfigEntry{ConfigSegmentMs, "5000"}, func(c *TopicConfig) { c.SegmentMs = 5000 }},
	{ConfigEntry{ConfigSegmentMs, "0"}, nil},
	{ConfigEntry{ConfigCleanupPolicy, "compact"}, func(c *TopicConfig) { c.CleanupPolicy = CleanupCompact }},
	{ConfigEntry{ConfigCleanupPolicy, " delete , compact"}, func(c *TopicConfig) { c.CleanupPolicy = CleanupCompactDelete }},
	{ConfigEntry{ConfigDeleteRetentionMs, "0"}, func(c *TopicConfig) { c.DeleteRetentionMs = 0 }},
	{ConfigEntry{ConfigDeleteRetentionMs, "-1"}, nil},
	{ConfigEntry{ConfigMinCleanableDirtyRatio, "0.1"}, func(c *TopicConfig) { c.MinCleanableDirtyRatio = 0.1 }},
	{ConfigEntry{ConfigMinCleanableDirtyRatio, "1.5"}, nil},
	{ConfigEntry{ConfigMaxCompactionLagMs, "1000"}, func(c *TopicConfig) { c.MaxCompactionLagMs = 1000 }},
	{ConfigEntry{ConfigMaxCompactionLagMs, "0"}, nil},
	{ConfigEntry{ConfigCleanupPolicy, "delete"}, func(c *TopicConfig) { c.CleanupPolicy = CleanupDelete }},
	{ConfigEntry{ConfigCleanupPolicy, "x"}, nil},
	{ConfigEntry{ConfigMaxMessageBytes, "512"}, func(c *TopicConfig) { c.MaxMessageBytes = 512 }},
	{ConfigEntry{ConfigMaxMessageBytes, "1048576"}, func(c *TopicConfig) { c.MaxMessageBytes = MaxMessageBytesMax }},
	{ConfigEntry{ConfigMaxMessageBytes, "2000000"}, nil},
	{ConfigEntry{"nope", "1"}, nil},
}

// drawConfigs draws up to 3 entries and what the model expects of them.
func drawConfigs(t *rapid.T, base TopicConfig) ([]ConfigEntry, TopicConfig, bool) {
	idx := rapid.SliceOfN(rapid.IntRange(0, len(configCases)-1), 0, 3).Draw(t, "configs")
	entries := make([]ConfigEntry, len(idx))
	c, valid := base, true
	for i, k := range idx {
		entries[i] = configCases[k].entry
		if configCases[k].apply == nil {
			valid = false
		} else {
			configCases[k].apply(&c)
		}
	}
	return entries, c, valid
}

// machine pairs the state under test with the model.
type machine struct {
	a *applier
	m *model
}

var topicNamePool = []string{"a", "b", "orders", "x.y_z-1", "", "bad name", ".."}

func (mc *machine) register(t *rapid.T) {
	id := rapid.Uint64Range(0, 7).Draw(t, "id")
	n := Node{ID: id, Address: rapid.SampledFrom([]string{"", "h1:1", "h2:2"}).Draw(t, "address"),
		Rack: rapid.SampledFrom([]string{"", "r1", "r2"}).Draw(t, "rack")}
	r := mc.a.do(EncodeRegisterNode(n.ID, n.Address, n.Rack))
	var want error
	switch old, ok := mc.m.nodes[id]; {
	case id == 0 || n.Address == "":
		want = ErrInvalidNode
	case ok && old == n:
	default:
		mc.m.nodes[id] = n
		mc.m.version++
	}
	expect(t, r, want)
}

func (mc *machine) fence(t *rapid.T) {
	id := rapid.Uint64Range(1, 7).Draw(t, "id")
	fenced := rapid.Bool().Draw(t, "fenced")
	r := mc.a.do(EncodeSetNodeFenced(id, fenced))
	n, ok := mc.m.nodes[id]
	var want error
	switch {
	case !ok:
		want = ErrUnknownNode
	case n.Fenced != fenced:
		n.Fenced = fenced
		mc.m.nodes[id] = n
		mc.m.version++
	}
	expect(t, r, want)
}

func (mc *machine) create(t *rapid.T) {
	name := rapid.SampledFrom(topicNamePool).Draw(t, "name")
	partitions := int32(rapid.IntRange(-1, 12).Draw(t, "partitions"))
	rf := int32(rapid.IntRange(-1, 5).Draw(t, "rf"))
	entries, config, valid := drawConfigs(t, DefaultTopicConfig())
	data, err := EncodeCreateTopic(name, partitions, rf, entries)
	if seed := rapid.IntRange(0, 3).Draw(t, "seed"); seed > 0 {
		// A cluster seed: only the first applied one becomes the id.
		u := UUID{byte(seed), 0xc1}
		data = WithClusterSeed(data, u)
		if mc.m.clusterID.IsZero() {
			mc.m.clusterID = u
		}
	}
	r := mc.a.do(data, err)
	eligible := 0
	for _, n := range mc.m.nodes {
		if !n.Fenced {
			eligible++
		}
	}
	_, exists := mc.m.topics[name]
	var want error
	switch {
	case name == "" || name == ".." || name == "bad name":
		want = ErrInvalidTopicName
	case exists:
		want = ErrTopicExists
	case partitions < 1:
		want = ErrInvalidPartitions
	case rf < 1:
		want = ErrInvalidReplicationFactor
	case int(rf) > eligible:
		want = ErrNotEnoughReplicas
	case !valid:
		want = ErrInvalidConfig
	default:
		if r.Topic.UUID.IsZero() || mc.m.uuidsEver[r.Topic.UUID] {
			t.Fatalf("topic %q got uuid %s, zero or handed out before", name, r.Topic.UUID)
		}
		mc.m.uuidsEver[r.Topic.UUID] = true
		mc.m.topics[name] = modelTopic{id: mc.m.nextTopicID, partitions: partitions, rf: rf, config: config,
			uuid: r.Topic.UUID, leaders: make([]Leader, partitions), replicas: r.Topic.Replicas}
		mc.m.nextTopicID++
		mc.m.version++
		for p, replicas := range r.Topic.Replicas {
			for _, id := range replicas {
				if mc.m.nodes[id].Fenced {
					t.Fatalf("partition %d placed on fenced node %d", p, id)
				}
			}
		}
	}
	expect(t, r, want)
}

func (mc *machine) remove(t *rapid.T) {
	name := rapid.SampledFrom(topicNamePool).Draw(t, "name")
	r := mc.a.do(EncodeDeleteTopic(name))
	var want error
	if _, ok := mc.m.topics[name]; ok {
		delete(mc.m.topics, name)
		mc.m.version++
	} else {
		want = ErrUnknownTopic
	}
	expect(t, r, want)
}

// grow adds partitions to a topic (or is refused): the model keeps the old
// partitions' replicas and leaders, appends the placed ones, and checks
// they sit on distinct unfenced nodes, rf of them.
func (mc *machine) grow(t *rapid.T) {
	name := rapid.SampledFrom(topicNamePool).Draw(t, "name")
	partitions := int32(rapid.IntRange(-1, 24).Draw(t, "partitions"))
	validate := rapid.Bool().Draw(t, "validateOnly")
	r := mc.a.do(EncodeCreatePartitions(name, partitions, validate))
	top, ok := mc.m.topics[name]
	eligible := 0
	for _, n := range mc.m.nodes {
		if !n.Fenced {
			eligible++
		}
	}
	var want error
	switch {
	case !ok:
		want = ErrUnknownTopic
	case partitions <= top.partitions:
		want = ErrInvalidPartitions
	case int(top.rf) > eligible:
		want = ErrNotEnoughReplicas
	default:
		if r.Topic == nil || r.Topic.Partitions() != partitions || r.AddedPartitions != partitions-top.partitions {
			t.Fatalf("grow %q to %d: result %+v", name, partitions, r)
		}
		for p, replicas := range r.Topic.Replicas {
			if p < int(top.partitions) {
				if !slices.Equal(replicas, top.replicas[p]) {
					t.Fatalf("partition %d moved from %v to %v", p, top.replicas[p], replicas)
				}
				continue
			}
			if len(replicas) != int(top.rf) || len(slices.Compact(slices.Sorted(slices.Values(replicas)))) != len(replicas) {
				t.Fatalf("new partition %d: replicas %v, want %d distinct", p, replicas, top.rf)
			}
			for _, id := range replicas {
				if n, ok := mc.m.nodes[id]; !ok || n.Fenced {
					t.Fatalf("new partition %d placed on fenced or unknown node %d", p, id)
				}
			}
		}
		if validate {
			break
		}
		top.partitions = partitions
		top.replicas = r.Topic.Replicas
		top.leaders = append(top.leaders, make([]Leader, partitions-int32(len(top.leaders)))...)
		mc.m.topics[name] = top
		mc.m.version++
	}
	expect(t, r, want)
}

func (mc *machine) alter(t *rapid.T) {
	name := rapid.SampledFrom(topicNamePool).Draw(t, "name")
	top, ok := mc.m.topics[name]
	entries, config, valid := drawConfigs(t, top.config)
	resetRetention := rapid.Bool().Draw(t, "reset")
	var resets []string
	if resetRetention {
		resets = []string{ConfigRetentionMs}
		config.RetentionMs = RetentionMsDefault
	}
	r := mc.a.do(EncodeAlterTopicConfig(name, entries, resets))
	var want error
	switch {
	case !ok:
		want = ErrUnknownTopic
	case !valid:
		want = ErrInvalidConfig
	case config != top.config:
		top.config = config
		mc.m.topics[name] = top
		mc.m.version++
	}
	expect(t, r, want)
}

func (mc *machine) allocate(t *rapid.T) {
	count := int32(rapid.SampledFrom([]int{-1, 0, 1, 2, 1000, ProducerIDBlockMax, ProducerIDBlockMax + 1}).Draw(t, "count"))
	r := mc.a.do(EncodeAllocateProducerIDs(count))
	var want error
	if count < 1 || count > ProducerIDBlockMax {
		want = ErrInvalidProducerIDCount
	} else {
		if r.FirstProducerID != mc.m.nextPID || r.ProducerIDCount != count {
			t.Fatalf("allocated [%d,+%d), want [%d,+%d)", r.FirstProducerID, r.ProducerIDCount, mc.m.nextPID, count)
		}
		mc.m.nextPID += int64(count)
		mc.m.version++
	}
	expect(t, r, want)
}

// report sends a batch of leader reports, some stale, some about
// partitions or topic incarnations that do not exist, some naming a node
// that is not a replica: only a newer term for a replica of a live
// partition is taken.
func (mc *machine) report(t *rapid.T) {
	n := rapid.IntRange(0, 4).Draw(t, "reports")
	var reports []LeaderReport
	for range n {
		r := LeaderReport{
			Topic:     rapid.SampledFrom(topicNamePool).Draw(t, "topic"),
			Partition: int32(rapid.IntRange(-1, 12).Draw(t, "partition")),
			Leader:    Leader{Node: rapid.Uint64Range(1, 7).Draw(t, "leader"), Term: rapid.Uint64Range(1, 6).Draw(t, "term")},
		}
		mt, ok := mc.m.topics[r.Topic]
		r.TopicID = mt.id
		if rapid.Bool().Draw(t, "stale incarnation") {
			r.TopicID = mc.m.nextTopicID + 1 // never a live topic's
			ok = false
		}
		reports = append(reports, r)
		if !ok || r.Partition < 0 || r.Partition >= mt.partitions || r.Leader.Term <= mt.leaders[r.Partition].Term ||
			!slices.Contains(mt.replicas[r.Partition], r.Leader.Node) {
			continue
		}
		mt.leaders[r.Partition] = r.Leader
	}
	expect(t, mc.a.do(EncodeReportLeaders(reports)), nil)
}

// restart replaces the state with one restored from its snapshot.
func (mc *machine) restart(t *rapid.T) {
	snap := mc.a.s.Snapshot()
	s, err := Restore(snap)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if !bytes.Equal(s.Snapshot(), snap) {
		t.Fatal("restored state snapshots differently")
	}
	if s.Digest() != mc.a.s.Digest() {
		t.Fatalf("restored digest %016x, original %016x", s.Digest(), mc.a.s.Digest())
	}
	mc.a.s = s
}

// garbage applies undecodable bytes or an empty entry: nothing changes.
func (mc *machine) garbage(t *rapid.T) {
	if rapid.Bool().Draw(t, "empty") {
		mc.a.s.ApplyEmpty(mc.a.s.AppliedIndex() + 1)
		return
	}
	r := mc.a.do([]byte{0x0a, 0xff}, nil)
	expect(t, r, ErrInvalidCommand)
}

// expect checks r's error and version against the model's expectation.
func expect(t *rapid.T, r Result, want error) {
	if want == nil && r.Err != nil || want != nil && !errors.Is(r.Err, want) {
		t.Fatalf("error %v, want %v", r.Err, want)
	}
}

// check compares everything the state exposes with the model.
func (mc *machine) check(t *rapid.T) {
	s, m := mc.a.s, mc.m
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if s.ClusterID() != m.clusterID {
		t.Fatalf("cluster id %s, model %s", s.ClusterID(), m.clusterID)
	}
	if s.Version() != m.version || s.NextProducerID() != m.nextPID {
		t.Fatalf("version %d pid %d, model %d %d", s.Version(), s.NextProducerID(), m.version, m.nextPID)
	}
	nodes := s.Nodes()
	if len(nodes) != len(m.nodes) {
		t.Fatalf("%d nodes, model %d", len(nodes), len(m.nodes))
	}
	for _, n := range nodes {
		if m.nodes[n.ID] != n {
			t.Fatalf("node %+v, model %+v", n, m.nodes[n.ID])
		}
	}
	names := make([]string, 0, len(m.topics))
	for name := range m.topics {
		names = append(names, name)
	}
	sort.Strings(names)
	topics := s.Topics()
	if len(topics) != len(names) {
		t.Fatalf("%d topics, model %d", len(topics), len(names))
	}
	for i, top := range topics {
		mt := m.topics[names[i]]
		if top.Name != names[i] || top.ID != mt.id || top.Partitions() != mt.partitions ||
			top.ReplicationFactor != mt.rf || top.Config != mt.config || top.UUID != mt.uuid ||
			!slices.Equal(top.Leaders, mt.leaders) || !slices.EqualFunc(top.Replicas, mt.replicas, slices.Equal) {
			t.Fatalf("topic %+v, model %s %+v", top, names[i], mt)
		}
	}
}

// TestStateMachineAgainstModel runs random command sequences, with
// restarts from snapshots, against the trivial model.
func TestStateMachineAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		mc := &machine{a: newApplier(t), m: &model{
			nodes: map[uint64]Node{}, topics: map[string]modelTopic{}, nextTopicID: 1, nextPID: FirstProducerID,
			uuidsEver: map[UUID]bool{},
		}}
		t.Repeat(map[string]func(*rapid.T){
			"register": mc.register, "fence": mc.fence, "create": mc.create, "delete": mc.remove,
			"alter": mc.alter, "allocate": mc.allocate, "restart": mc.restart, "garbage": mc.garbage,
			"report": mc.report, "grow": mc.grow,
			"": mc.check,
		})
	})
}
