package server

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/node"
)

// The JSON API the console draws: /api/cluster, /api/topics, /api/groups
// (and /api/transactions, admin_txn_api.go).
// Each answer is built from fresh AdminViews of the nodes this listener
// serves (strand dev: all; strand serve: its own), the same views /metrics
// reads. Sizes, high-water marks and follower states come from a hosted
// replica (the leader's when it is here); values a listener cannot see are
// -1 or "unknown", never guessed.

// apiCluster is /api/cluster.
type apiCluster struct {
	Node            uint64    `json:"node"` // the node whose metadata is shown
	ClusterID       string    `json:"cluster_id,omitempty"`
	MetadataLeader  uint64    `json:"metadata_leader"`
	MetadataVersion uint64    `json:"metadata_version"`
	Nodes           []apiNode `json:"nodes"`
	// Moves are the partition moves in progress the metadata records,
	// with their progress where this listener serves the leader.
	Moves     []apiMove `json:"moves"`
	MovesNote string    `json:"moves_note,omitempty"`
	Time      time.Time `json:"time"`
	// NodesDown are the nodes the shown node counts down and
	// UnderReplicated the partitions led by the nodes served here with a
	// follower not in step: cluster health, where /readyz is each node's
	// own readiness only (strand cluster health asks the cluster).
	NodesDown       []uint64 `json:"nodes_down"`
	UnderReplicated int      `json:"under_replicated_partitions"`
}

// apiNode is one node: registration from the metadata, health from its
// own view when this listener serves it.
type apiNode struct {
	ID           uint64 `json:"id"`
	Address      string `json:"address"`
	KafkaAddress string `json:"kafka_address,omitempty"`
	Rack         string `json:"rack,omitempty"`
	Registered   bool   `json:"registered"`
	Fenced       bool   `json:"fenced"`
	// State is the membership state: active, decommissioning or removed
	// (empty for a node not registered yet).
	State string `json:"state,omitempty"`
	// Health is "ready", "not ready" or "unknown" (not served by this
	// listener); Reason says why it is not ready.
	Health   string `json:"health"`
	Reason   string `json:"reason,omitempty"`
	DiskFull bool   `json:"disk_full"`
	Replicas int    `json:"replicas"` // hosted, -1 when unknown
	Leading  int    `json:"leading"`  // partitions led, -1 when unknown
	// DiskStalled: a storage job of the node has not returned for longer
	// than its stall threshold, so it does not lead (node/stall.go).
	DiskStalled bool `json:"disk_stalled"`
	// Liveness is "up", or "down" once the shown node (Node of
	// apiCluster) has not heard from it for three election timeouts;
	// LastContactMs is the time since that node last heard from it (0 for
	// itself, -1 when it does not watch the node).
	Liveness      string `json:"liveness"`
	LastContactMs int64  `json:"last_contact_ms"`
}

// apiMove is a partition move in progress: its replicas (from), its
// target (to), and from the partition leader's view when this listener
// serves it, the catch-up done (node.MoveRatio, in percent; -1 unknown)
// and each added node's progress. Leader is the reported leader when this
// listener does not serve it.
type apiMove struct {
	Topic     string          `json:"topic"`
	Partition int32           `json:"partition"`
	From      []uint64        `json:"from"`
	To        []uint64        `json:"to"`
	Percent   float64         `json:"percent"`
	Leader    uint64          `json:"leader,omitempty"`
	Adding    []apiMoveTarget `json:"adding,omitempty"`
}

// apiMoveTarget is one node a move adds, as its partition leader sees it.
type apiMoveTarget struct {
	Node    uint64  `json:"node"`
	Percent float64 `json:"percent"`
	Voter   bool    `json:"voter"` // promoted: the joint configuration was entered
}

// reportedLeader is partition p of topic's leader as v's metadata last
// heard it reported (0: none).
func reportedLeader(v node.AdminView, topic string, p int32) uint64 {
	i := slices.IndexFunc(v.Topics, func(t metadata.Topic) bool { return t.Name == topic })
	if i < 0 || int(p) >= len(v.Topics[i].Leaders) {
		return 0
	}
	return v.Topics[i].Leaders[p].Node
}

// movesOf lists v0's moves in progress with the progress of those whose
// leader is among views.
func movesOf(v0 node.AdminView, views []node.AdminView) []apiMove {
	out := []apiMove{}
	for _, m := range v0.Moves {
		am := apiMove{Topic: m.Topic, Partition: m.Partition, From: m.Replicas, To: m.Target, Percent: -1,
			Leader: reportedLeader(v0, m.Topic, m.Partition)}
		tp := node.TopicPartition{Topic: m.Topic, Partition: m.Partition}
		for _, v := range views {
			i := slices.IndexFunc(v.Replicas, func(r node.ReplicaView) bool { return r.TopicPartition == tp && r.IsLeader })
			if i < 0 {
				continue
			}
			r := v.Replicas[i]
			am.Leader, am.Percent = uint64(v.ID), 100*node.MoveRatio(r.Move)
			for _, p := range r.Move {
				am.Adding = append(am.Adding, apiMoveTarget{Node: uint64(p.Node), Percent: 100 * node.MoveRatio([]node.MoveProgress{p}), Voter: p.Voter})
			}
			break
		}
		out = append(out, am)
	}
	return out
}

// apiTopics is /api/topics.
type apiTopics struct {
	Topics []apiTopic `json:"topics"`
}

type apiTopic struct {
	Name           string         `json:"name"`
	ID             string         `json:"id"`
	RetentionMs    int64          `json:"retention_ms"`
	RetentionBytes int64          `json:"retention_bytes"`
	Partitions     []apiPartition `json:"partitions"`
}

type apiPartition struct {
	Partition  int32  `json:"partition"`
	Leader     uint64 `json:"leader"` // 0: none
	LeaderTerm uint64 `json:"leader_term"`
	// HighWatermark, LogStartOffset and SizeBytes are the replica's on
	// node From (the leader's when it is served here); -1 when no served
	// node hosts the partition.
	HighWatermark   int64        `json:"high_watermark"`
	LogStartOffset  int64        `json:"log_start_offset"`
	SizeBytes       int64        `json:"size_bytes"`
	From            uint64       `json:"from"`
	UnderReplicated bool         `json:"under_replicated"`
	Replicas        []apiReplica `json:"replicas"`
	// LastStableOffset is where read_committed reads end; LSOLag, the
	// records open transactions hold back from them (high-water mark −
	// LSO, as strand_partition_lso_lag_records). -1 when unknown.
	LastStableOffset int64 `json:"last_stable_offset"`
	LSOLag           int64 `json:"lso_lag_records"`
	// Compaction is node From's compaction state of the partition; absent
	// when its topic does not compact and never did.
	Compaction *apiCompaction `json:"compaction,omitempty"`
}

// apiCompaction is a replica's node.CompactionView as the console shows
// it: the dirty ratio and the bytes on either side, the last generation
// done, its cleaned-to offset and decision time (ms, 0: none or a later
// one under way), a pass under way, why none can run, and the replica's
// last pass: the bytes it read and wrote and how long it took (ms; all 0:
// none since the node opened), as describe and /metrics give them.
type apiCompaction struct {
	DirtyRatio       float64 `json:"dirty_ratio"`
	DirtyBytes       int64   `json:"dirty_bytes"`
	CleanBytes       int64   `json:"clean_bytes"`
	Generation       uint64  `json:"generation"`
	CleanedTo        int64   `json:"cleaned_to"`
	LastTimeMs       int64   `json:"last_time_ms"`
	InProgress       bool    `json:"in_progress"`
	Stuck            string  `json:"stuck,omitempty"`
	NoLongerSet      bool    `json:"no_longer_compacts,omitempty"`
	LastPassBytesIn  int64   `json:"last_pass_bytes_in"`
	LastPassBytesOut int64   `json:"last_pass_bytes_out"`
	LastPassMs       float64 `json:"last_pass_ms"`
}

// compactionAPI is cv as /api/topics gives it, nil when cv's topic does
// not compact and never did.
func compactionAPI(cv node.CompactionView) *apiCompaction {
	if !cv.Compacts && cv.Decided == 0 {
		return nil
	}
	ac := &apiCompaction{DirtyRatio: cv.DirtyRatio(), DirtyBytes: cv.DirtyBytes, CleanBytes: cv.PrefixBytes,
		Generation: cv.Done, CleanedTo: cv.CleanedTo, InProgress: cv.Decided > cv.Done, Stuck: cv.Stuck,
		NoLongerSet: !cv.Compacts, LastPassBytesIn: cv.LastPassBytesIn, LastPassBytesOut: cv.LastPassBytesOut,
		LastPassMs: float64(cv.LastPassDuration) / float64(time.Millisecond)}
	if cv.Done > 0 && cv.Done == cv.Decided {
		ac.LastTimeMs = cv.DecidedTimeMs
	}
	return ac
}

// apiReplica is one replica's state: "leader", "in sync", "catching up"
// (from the leader's view), "follower" (its own view), "rebuilding", "no
// leader" or "unknown".
type apiReplica struct {
	Node  uint64 `json:"node"`
	State string `json:"state"`
	Lag   uint64 `json:"lag_entries,omitempty"`
}

// apiGroups is /api/groups.
type apiGroups struct {
	Groups         []apiGroup `json:"groups"`
	SampleInterval float64    `json:"sample_interval_seconds"`
	Truncated      bool       `json:"truncated"`
}

type apiGroup struct {
	ID          string              `json:"id"`
	State       string              `json:"state"`
	Members     int                 `json:"members"`
	Coordinator uint64              `json:"coordinator"`
	LagRecords  int64               `json:"lag_records"`  // sum over partitions with a known lag
	LagSeconds  float64             `json:"lag_seconds"`  // largest over those partitions
	AtRisk      bool                `json:"at_risk"`      // some committed offset is below its log start
	RetentionMs int64               `json:"retention_ms"` // smallest retention.ms of its topics, 0: none known
	DeadLetters int64               `json:"dead_letters"` // records dead-lettered, summed over partitions
	Partitions  []apiGroupPartition `json:"partitions"`
	// History holds the sampled lag over the last hour, oldest first, the
	// last point taken at this answer.
	History []lagSample `json:"history"`
	// LagStableRecords is LagRecords to the last stable offsets: the lag
	// of read_committed consumers (Kafka does not record which a group is).
	LagStableRecords int64 `json:"lag_stable_records"`
}

type apiGroupPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"`
	// Known: the coordinator hosts the partition, so the fields below are
	// its replica's; otherwise they are -1.
	Known          bool    `json:"known"`
	HighWatermark  int64   `json:"high_watermark"`
	LogStartOffset int64   `json:"log_start_offset"`
	Lag            int64   `json:"lag"`
	LagSeconds     float64 `json:"lag_seconds"`
	Headroom       int64   `json:"headroom_records"`
	AtRisk         bool    `json:"at_risk"`
	DeadLetters    int64   `json:"dead_letters"` // from the committed metadata (clientlib's Handle)
	// LastStableOffset is where read_committed reads end and LagStable the
	// lag to it (a read_committed consumer's).
	LastStableOffset int64 `json:"last_stable_offset"`
	LagStable        int64 `json:"lag_stable"`
}

// lagSample is one point of a group's lag history.
type lagSample struct {
	TimeMs  int64   `json:"t"`
	Records int64   `json:"records"`
	Seconds float64 `json:"seconds"`
}

// writeJSON answers v as JSON, or 503 when no node could answer.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	enc.Encode(v)
}

// servedViews returns the views that answered, or answers 503 and false.
func (a *Admin) servedViews(w http.ResponseWriter, ctx context.Context) ([]node.AdminView, bool) {
	views, errs := a.views(ctx)
	var out []node.AdminView
	for i := range views {
		if errs[i] == nil {
			out = append(out, views[i])
		}
	}
	if len(out) == 0 {
		http.Error(w, "no node answered: "+errs[0].Error(), http.StatusServiceUnavailable)
		return nil, false
	}
	return out, true
}

func (a *Admin) apiCluster(w http.ResponseWriter, req *http.Request) {
	views, ok := a.servedViews(w, req.Context())
	if !ok {
		return
	}
	writeJSON(w, clusterOf(views, a.nodes[0].ClusterID()))
}

func (a *Admin) apiTopics(w http.ResponseWriter, req *http.Request) {
	views, ok := a.servedViews(w, req.Context())
	if !ok {
		return
	}
	writeJSON(w, apiTopics{Topics: topicsOf(views)})
}

func (a *Admin) apiGroups(w http.ResponseWriter, req *http.Request) {
	views, ok := a.servedViews(w, req.Context())
	if !ok {
		return
	}
	now := time.Now()
	groups, truncated := groupsOf(views, now)
	for i := range groups {
		groups[i].History = append(a.lag.history(groups[i].ID), lagSample{TimeMs: now.UnixMilli(),
			Records: groups[i].LagRecords, Seconds: groups[i].LagSeconds})
	}
	writeJSON(w, apiGroups{Groups: groups, SampleInterval: lagSampleInterval.Seconds(), Truncated: truncated})
}

// clusterOf builds /api/cluster from views (views[0]'s metadata).
func clusterOf(views []node.AdminView, clusterID []byte) apiCluster {
	v0 := views[0]
	out := apiCluster{Node: uint64(v0.ID), MetadataLeader: uint64(v0.MetaLeader), MetadataVersion: v0.MetaVersion,
		Moves: movesOf(v0, views), Time: time.Now().UTC()}
	if len(clusterID) > 0 {
		out.ClusterID = hexString(clusterID)
	}
	for _, n := range v0.Nodes {
		out.Nodes = append(out.Nodes, apiNode{ID: n.ID, Address: n.Address, KafkaAddress: n.KafkaAddress, Rack: n.Rack,
			Registered: true, Fenced: n.Fenced, State: n.State.String()})
	}
	for _, p := range v0.Peers {
		if !slices.ContainsFunc(out.Nodes, func(n apiNode) bool { return n.ID == uint64(p.ID) }) {
			out.Nodes = append(out.Nodes, apiNode{ID: uint64(p.ID), Address: p.Address, KafkaAddress: p.KafkaAddress, Rack: p.Rack})
		}
	}
	slices.SortFunc(out.Nodes, func(a, b apiNode) int { return cmp.Compare(a.ID, b.ID) })
	fillLiveness(&out, views)
	for i := range out.Nodes {
		n := &out.Nodes[i]
		n.Health, n.Replicas, n.Leading = "unknown", -1, -1
		j := slices.IndexFunc(views, func(v node.AdminView) bool { return uint64(v.ID) == n.ID })
		if j < 0 {
			continue
		}
		v := views[j]
		ready, why := readiness(v)
		n.Health, n.Reason, n.DiskFull, n.Replicas, n.Leading = "ready", why, v.DiskFull, len(v.Replicas), 0
		n.DiskStalled = v.DiskStalled
		if !ready {
			n.Health = "not ready"
		}
		for _, r := range v.Replicas {
			if r.IsLeader {
				n.Leading++
			}
		}
	}
	return out
}

// fillLiveness sets each node's liveness as views[0] sees it, and the
// cluster's health figures.
func fillLiveness(out *apiCluster, views []node.AdminView) {
	out.NodesDown = []uint64{}
	for i := range out.Nodes {
		n := &out.Nodes[i]
		n.Liveness, n.LastContactMs = "unknown", -1
		j := slices.IndexFunc(views[0].Liveness, func(l node.PeerLiveness) bool { return uint64(l.Node) == n.ID })
		if j < 0 {
			continue
		}
		l := views[0].Liveness[j]
		n.Liveness, n.LastContactMs, n.DiskFull, n.DiskStalled = "up", l.SilentFor.Milliseconds(), l.DiskFull, l.DiskStalled
		if l.Down {
			n.Liveness = "down"
			out.NodesDown = append(out.NodesDown, n.ID)
		}
	}
	for _, v := range views {
		for _, r := range v.Replicas {
			if !r.IsLeader {
				continue
			}
			for _, f := range r.Followers {
				if f.Lagging(r.LastIndex, adminReplicaLagMax) {
					out.UnderReplicated++
					break
				}
			}
		}
	}
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// replicaKey names a replica: its node and partition.
type replicaKey struct {
	node node.NodeID
	tp   node.TopicPartition
}

// indexReplicas maps every served replica by node and partition.
func indexReplicas(views []node.AdminView) map[replicaKey]*node.ReplicaView {
	out := map[replicaKey]*node.ReplicaView{} // lookup only
	for i := range views {
		for j := range views[i].Replicas {
			r := &views[i].Replicas[j]
			out[replicaKey{views[i].ID, r.TopicPartition}] = r
		}
	}
	return out
}

// topicsOf builds /api/topics from views (views[0]'s metadata).
func topicsOf(views []node.AdminView) []apiTopic {
	replicas := indexReplicas(views)
	out := []apiTopic{}
	for _, t := range views[0].Topics {
		at := apiTopic{Name: t.Name, ID: t.UUID.String(), RetentionMs: t.Config.RetentionMs, RetentionBytes: t.Config.RetentionBytes}
		for p, set := range t.Replicas {
			if set == nil {
				continue
			}
			tp := node.TopicPartition{Topic: t.Name, Partition: int32(p)}
			ap := apiPartition{Partition: int32(p), HighWatermark: -1, LogStartOffset: -1, SizeBytes: -1, LastStableOffset: -1, LSOLag: -1}
			if p < len(t.Leaders) {
				ap.Leader, ap.LeaderTerm = t.Leaders[p].Node, t.Leaders[p].Term
			}
			fillPartition(&ap, tp, set, replicas)
			at.Partitions = append(at.Partitions, ap)
		}
		out = append(out, at)
	}
	return out
}

// fillPartition sets ap's log figures and replica states from the served
// replicas, preferring the leader's view.
func fillPartition(ap *apiPartition, tp node.TopicPartition, set []uint64, replicas map[replicaKey]*node.ReplicaView) {
	var src *node.ReplicaView
	for _, id := range set {
		r := replicas[replicaKey{node.NodeID(id), tp}]
		if r != nil && (src == nil || r.IsLeader) {
			src, ap.From = r, id
		}
	}
	if src != nil {
		ap.HighWatermark, ap.LogStartOffset, ap.SizeBytes = src.HighWatermark, src.LogStartOffset, src.SizeBytes
		ap.LastStableOffset, ap.LSOLag = src.LastStableOffset, max(0, src.HighWatermark-src.LastStableOffset)
		ap.Compaction = compactionAPI(src.Compaction)
		if src.IsLeader || ap.Leader == 0 {
			ap.Leader, ap.LeaderTerm = uint64(src.Leader), src.Term
		}
	}
	for _, id := range set {
		ar := apiReplica{Node: id, State: "unknown"}
		own := replicas[replicaKey{node.NodeID(id), tp}]
		switch {
		case id == ap.Leader:
			ar.State = "leader"
		case src != nil && src.IsLeader:
			ar.State = "in sync"
			for _, f := range src.Followers {
				if uint64(f.Node) == id && f.Lagging(src.LastIndex, adminReplicaLagMax) {
					ar.State, ar.Lag, ap.UnderReplicated = "catching up", src.LastIndex-min(f.Match, src.LastIndex), true
					if f.Silent {
						ar.State = "not answering"
					}
				}
			}
		case own != nil && own.Rejoining:
			ar.State = "rebuilding"
		case own != nil && own.Leader == 0:
			ar.State = "no leader"
		case own != nil:
			ar.State = "follower"
		}
		ap.Replicas = append(ap.Replicas, ar)
	}
}

// groupsOf builds the groups of /api/groups (without history) from every
// served coordinator, sorted by id; a group two views both coordinate (a
// coordinator moving) is shown once, from the newer term.
func groupsOf(views []node.AdminView, now time.Time) ([]apiGroup, bool) {
	retention := map[string]int64{} // lookup only
	for _, t := range views[0].Topics {
		retention[t.Name] = t.Config.RetentionMs
	}
	var out []apiGroup
	truncated := false
	for _, v := range views {
		truncated = truncated || v.GroupsTruncated
		for _, g := range v.Groups {
			ag := apiGroup{ID: g.ID, State: g.State, Members: g.Members, Coordinator: uint64(v.ID), Partitions: []apiGroupPartition{}}
			for _, o := range g.Offsets {
				gp := apiGroupPartition{Topic: o.Topic, Partition: o.Partition, Committed: o.Committed, HighWatermark: -1,
					LogStartOffset: -1, Lag: -1, Headroom: -1, LagSeconds: -1, LastStableOffset: -1, LagStable: -1}
				gp.DeadLetters, _ = deadLetterCount(o.Metadata)
				ag.DeadLetters += gp.DeadLetters
				if ms := retention[o.Topic]; ms > 0 && (ag.RetentionMs == 0 || ms < ag.RetentionMs) {
					ag.RetentionMs = ms
				}
				if o.Hosted {
					l := offsetLag(o, now)
					gp.Known, gp.HighWatermark, gp.LogStartOffset = true, o.HighWatermark, o.LogStartOffset
					gp.Lag, gp.LagSeconds, gp.Headroom, gp.AtRisk = l.Records, l.Seconds, l.Headroom, l.AtRisk
					gp.LastStableOffset, gp.LagStable = o.LastStableOffset, l.Stable
					ag.LagRecords += l.Records
					ag.LagStableRecords += l.Stable
					ag.LagSeconds = max(ag.LagSeconds, l.Seconds)
					ag.AtRisk = ag.AtRisk || l.AtRisk
				}
				ag.Partitions = append(ag.Partitions, gp)
			}
			out = append(out, ag)
		}
	}
	slices.SortStableFunc(out, func(a, b apiGroup) int { return cmp.Compare(a.ID, b.ID) })
	out = slices.CompactFunc(out, func(a, b apiGroup) bool { return a.ID == b.ID })
	if out == nil {
		out = []apiGroup{}
	}
	return out, truncated
}

// Lag history: every lagSampleInterval the listener samples each group's
// lag into a ring of lagSamplesMax points (one hour), for at most
// lagGroupsMax groups (the first seen keep their rings; a group gone for
// an hour is dropped).
const (
	lagSampleInterval = 10 * time.Second
	lagSamplesMax     = 360
	lagGroupsMax      = 256
)

// lagHistory holds the sampled rings; the sampler writes, HTTP handlers
// read, under mu.
type lagHistory struct {
	mu    sync.Mutex
	rings map[string]*lagRing // lookup only
}

// lagRing is one group's last lagSamplesMax samples.
type lagRing struct {
	samples [lagSamplesMax]lagSample
	next    int // where the next sample goes
	n       int // samples held
}

func newLagHistory() *lagHistory { return &lagHistory{rings: map[string]*lagRing{}} }

// add drops the rings whose newest sample is older than a ring spans, then
// records one sample per group.
func (h *lagHistory) add(groups []apiGroup, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	horizon := now.Add(-lagSamplesMax * lagSampleInterval).UnixMilli()
	for id, r := range h.rings { // first, so a dropped ring frees its slot
		if r.samples[(r.next+lagSamplesMax-1)%lagSamplesMax].TimeMs < horizon {
			delete(h.rings, id)
		}
	}
	for _, g := range groups {
		r := h.rings[g.ID]
		if r == nil {
			if len(h.rings) >= lagGroupsMax {
				continue
			}
			r = &lagRing{}
			h.rings[g.ID] = r
		}
		r.samples[r.next] = lagSample{TimeMs: now.UnixMilli(), Records: g.LagRecords, Seconds: g.LagSeconds}
		r.next = (r.next + 1) % lagSamplesMax
		r.n = min(r.n+1, lagSamplesMax)
	}
}

// history returns group's samples, oldest first.
func (h *lagHistory) history(group string) []lagSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rings[group]
	if r == nil {
		return nil
	}
	out := make([]lagSample, 0, r.n+1)
	for i := range r.n {
		out = append(out, r.samples[(r.next-r.n+i+lagSamplesMax)%lagSamplesMax])
	}
	return out
}

// sampleLag samples every lagSampleInterval until Close, starting at once.
func (a *Admin) sampleLag() {
	t := time.NewTicker(lagSampleInterval)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), adminViewTimeout)
		views, errs := a.views(ctx)
		cancel()
		var served []node.AdminView
		for i := range views {
			if errs[i] == nil {
				served = append(served, views[i])
			}
		}
		if len(served) > 0 {
			now := time.Now()
			groups, _ := groupsOf(served, now)
			a.lag.add(groups, now)
		}
		select {
		case <-a.stop:
			return
		case <-t.C:
		}
	}
}
