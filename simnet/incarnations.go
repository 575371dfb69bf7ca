package simnet

import (
	"strconv"

	"github.com/strandlog/strand/engine/metadata"
)

// Topic incarnations on the node side. A topic deleted and re-created
// under the same name is a new set of raft groups: their indexes, terms,
// leaders, high-water marks and engine states have nothing to do with the
// old ones', so every per-group check keys on a slot, one per (group
// index, metadata topic id) as node.GroupStatus.TopicID and the
// ApplyObserver report it. The first incarnation of group g seen takes
// slot g, so a run without re-creations checks exactly as before; later
// incarnations get slots after the metadata group's (Options.Partitions)
// and the group coordinators' partitions (wire_group.go).
// Group indexes stay name-based for the faults and the clients.
//
// Rejected: inferring the incarnation from a node's metadata (a replica of
// the old incarnation may still apply after its node's metadata names the
// new one: reconciliation runs at the end of a round).

// slotKey names one incarnation of a group.
type slotKey struct {
	group   int
	topicID uint64
}

// incarnations hands out the slots of one run.
type incarnations struct {
	w       *world
	byKey   map[slotKey]int
	claimed map[int]bool // base slots taken
	next    int          // the next slot after the base ones
	// groupOf is each slot's group index.
	groupOf map[int]int
	ids     map[metadata.UUID]uint64 // topic UUID -> metadata topic id, as nodes showed them
	newest  map[string]uint64        // per topic name, the greatest id in ids
}

func newIncarnations(w *world) *incarnations {
	return &incarnations{w: w, byKey: map[slotKey]int{}, claimed: map[int]bool{}, next: w.opts.Partitions + 1 + coordinatorPartitions(w.opts),
		groupOf: map[int]int{}, ids: map[metadata.UUID]uint64{},
		newest: map[string]uint64{}}
}

// slot is the slot of group g's incarnation topicID.
func (in *incarnations) slot(g int, topicID uint64) int {
	k := slotKey{group: g, topicID: topicID}
	if s, ok := in.byKey[k]; ok {
		return s
	}
	s := g
	if in.claimed[g] {
		s = in.next
		in.next++
		in.w.coverage.Inc("event/topic-incarnation-replicated")
	}
	in.claimed[g] = true
	in.byKey[k] = s
	in.groupOf[s] = g
	return s
}

// label names slot s in failure messages: its group and, for a later
// incarnation, the slot.
func (in *incarnations) label(s int) string {
	g, ok := in.groupOf[s]
	if !ok || g == s {
		return strconv.Itoa(s)
	}
	return strconv.Itoa(g) + " (incarnation slot " + strconv.Itoa(s) + ")"
}

// topicIDOf is the metadata topic id (which names replica directories)
// of the topic whose client-visible id is uuid, as some live node's
// applied metadata has recorded it; ids are never reused, so a mapping
// once seen stays true after the topic is deleted. false: no node ever
// showed it (the caller skips what it wanted to check).
func (in *incarnations) topicIDOf(uuid []byte) (uint64, bool) {
	u, ok := metadata.UUIDFromBytes(uuid)
	if !ok {
		return 0, false
	}
	if id, ok := in.ids[u]; ok {
		return id, true
	}
	for _, n := range in.w.nodes {
		c, ok := n.core.(interface {
			MetadataNodes() ([]metadata.Node, []metadata.Topic)
		})
		if !n.up || !ok {
			continue
		}
		_, topics := c.MetadataNodes()
		for _, t := range topics {
			in.ids[t.UUID] = t.ID
			in.newest[t.Name] = max(in.newest[t.Name], t.ID)
		}
	}
	id, ok := in.ids[u]
	return id, ok
}

// replicaLogDir is the log directory of a replica of topic's incarnation
// topicID (node.managedDir's layout, plus "/log").
func replicaLogDir(topic string, topicID uint64, partition int32) string {
	return "p/" + topic + "@" + strconv.FormatUint(topicID, 10) + "/" + strconv.Itoa(int(partition)) + "/log"
}

// hosts reports whether live node n still hosts the replica of topic's
// incarnation topicID, partition.
func hosts(n *simNode, topic string, partition int32, topicID uint64) bool {
	if !n.up {
		return false
	}
	for _, s := range n.core.Status() {
		if s.Topic == topic && s.Partition == partition && s.TopicID == topicID {
			return true
		}
	}
	return false
}
