package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/node"
)

// adminTestWait bounds every wait of the admin tests.
const adminTestWait = 30 * time.Second

// startTestCluster starts n nodes on free loopback ports, one process.
func startTestCluster(t *testing.T, n int) []*Server {
	t.Helper()
	lns := make([]net.Listener, n)
	peers := make([]node.Peer, n)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		peers[i] = node.Peer{ID: node.NodeID(i + 1), Address: ln.Addr().String()}
	}
	servers := make([]*Server, n)
	for i := range servers {
		rt, err := Start(Config{Core: node.Config{ID: peers[i].ID, Nodes: peers}, DataDir: t.TempDir(), Listener: lns[i]})
		if err != nil {
			t.Fatal(err)
		}
		servers[i] = rt
		t.Cleanup(func() {
			if err := rt.Close(); err != nil {
				t.Errorf("close node %d: %v", rt.id(), err)
			}
		})
	}
	return servers
}

// startTestAdmin serves the admin API of servers on a free loopback port.
func startTestAdmin(t *testing.T, servers ...*Server) *Admin {
	t.Helper()
	a, err := ListenAdmin("127.0.0.1:0", nil, servers...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// httpGet answers the status and body of GET url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: adminTestWait}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// waitReady polls /readyz (bounded) until it answers 200.
func waitReady(t *testing.T, a *Admin) {
	t.Helper()
	deadline := time.Now().Add(adminTestWait)
	for {
		code, body := httpGet(t, a.URL()+"readyz")
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d after %v: %s", code, adminTestWait, body)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, bounded above
	}
}

// scrape parses /metrics with Prometheus' own text parser.
func scrape(t *testing.T, a *Admin) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := httpGet(t, a.URL()+"metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

func labelNames(m *dto.Metric) []string {
	var out []string
	for _, l := range m.GetLabel() {
		out = append(out, l.GetName())
	}
	slices.Sort(out)
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// value is a gauge's or counter's value, a histogram's count.
func value(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}

// sum adds the values of family name's series matching every label=value.
func sum(fams map[string]*dto.MetricFamily, name string, match ...string) float64 {
	total := 0.0
	for _, m := range fams[name].GetMetric() {
		ok := true
		for i := 0; i+1 < len(match); i += 2 {
			ok = ok && label(m, match[i]) == match[i+1]
		}
		if ok {
			total += value(m)
		}
	}
	return total
}

// leaderSum adds family name's per-replica values over the replicas that
// lead their partition of topic (strand_partition_leader == node).
func leaderSum(fams map[string]*dto.MetricFamily, name, topic string) float64 {
	leaders := map[string]string{}
	for _, m := range fams["strand_partition_leader"].GetMetric() {
		if label(m, "topic") == topic && fmt.Sprint(value(m)) == label(m, "node") {
			leaders[label(m, "partition")] = label(m, "node")
		}
	}
	total := 0.0
	for _, m := range fams[name].GetMetric() {
		if label(m, "topic") == topic && leaders[label(m, "partition")] == label(m, "node") {
			total += value(m)
		}
	}
	return total
}

// produceAndCommit produces n records to topic (acks=all, round robin over
// partitions) and commits offset commit for group on every partition.
func produceAndCommit(t *testing.T, c *clientlib.Client, topic string, partitions int32, n int, group string, commit int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), adminTestWait)
	defer cancel()
	var rs []*clientlib.Record
	for i := range n {
		rs = append(rs, &clientlib.Record{Topic: topic, Partition: int32(i) % partitions, Value: []byte(fmt.Sprintf("v%d", i))})
	}
	if err := c.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if group == "" {
		return
	}
	offsets := map[clientlib.TopicPartition]int64{}
	for p := range partitions {
		offsets[clientlib.TopicPartition{Topic: topic, Partition: p}] = commit
	}
	if err := c.CommitOffsets(ctx, group, offsets); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

func newTestClient(t *testing.T, rt *Server) *clientlib.Client {
	t.Helper()
	c, err := clientlib.NewClient(clientlib.SeedAddresses(rt.Addr().String()), clientlib.ManualPartitioner(),
		clientlib.RequiredAcks(clientlib.AcksAll))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// /metrics of a real three-node cluster parses with Prometheus' text
// parser; the required families are there with their label sets and
// types; and producing moves high-water marks, group lag, request counts,
// bytes in, the commit and fsync histograms.
func TestAdminMetricsScrape(t *testing.T) {
	servers := startTestCluster(t, 3)
	a := startTestAdmin(t, servers...)
	waitReady(t, a)
	c := newTestClient(t, servers[0])
	ctx, cancel := context.WithTimeout(context.Background(), adminTestWait)
	defer cancel()
	if err := c.CreateTopic(ctx, "orders", 3, 3, nil); err != nil {
		t.Fatal(err)
	}
	produceAndCommit(t, c, "orders", 3, 9, "billing", 1)
	waitReady(t, a) // __strand_offsets' partitions elect their leaders
	before := scrape(t, a)
	for deadline := time.Now().Add(adminTestWait); time.Now().Before(deadline); {
		if sum(before, "strand_group_lag_records", "group", "billing") == 6 { // settled: see below
			break
		}
		time.Sleep(20 * time.Millisecond) // polling a convergence condition
		before = scrape(t, a)
	}

	replica := []string{"node", "partition", "topic"}
	group := []string{"group", "node", "partition", "topic"}
	want := []struct {
		name   string
		typ    dto.MetricType
		labels []string
	}{
		{"strand_partition_high_watermark", dto.MetricType_GAUGE, replica},
		{"strand_partition_log_start_offset", dto.MetricType_GAUGE, replica},
		{"strand_partition_size_bytes", dto.MetricType_GAUGE, replica},
		{"strand_partition_leader", dto.MetricType_GAUGE, replica},
		{"strand_partition_term", dto.MetricType_GAUGE, replica},
		{"strand_partition_under_replicated", dto.MetricType_GAUGE, replica},
		{"strand_partition_offline", dto.MetricType_GAUGE, replica},
		{"strand_partition_follower_lag_entries", dto.MetricType_GAUGE, []string{"follower", "node", "partition", "topic"}},
		{"strand_partitions_under_replicated", dto.MetricType_GAUGE, []string{"node"}},
		{"strand_partitions_offline", dto.MetricType_GAUGE, []string{"node"}},
		{"strand_node_ready", dto.MetricType_GAUGE, []string{"node"}},
		{"strand_disk_free_bytes", dto.MetricType_GAUGE, []string{"node"}},
		{"strand_disk_stalled", dto.MetricType_GAUGE, []string{"node"}},
		{"strand_storage_job_oldest_seconds", dto.MetricType_GAUGE, []string{"node"}},
		{"strand_storage_jobs_slow_total", dto.MetricType_COUNTER, []string{"node"}},
		{"strand_disk_stalls_total", dto.MetricType_COUNTER, []string{"node"}},
		{"strand_catchup_bytes_total", dto.MetricType_COUNTER, []string{"node"}},
		{"strand_raft_commit_duration_seconds", dto.MetricType_HISTOGRAM, []string{"node"}},
		{"strand_fsync_duration_seconds", dto.MetricType_HISTOGRAM, []string{"node"}},
		{"strand_loop_process_seconds", dto.MetricType_HISTOGRAM, []string{"node"}},
		{"strand_produce_request_duration_seconds", dto.MetricType_HISTOGRAM, []string{"acks", "node"}},
		{"strand_produce_requests_total", dto.MetricType_COUNTER, []string{"acks", "node"}},
		{"strand_fetch_request_duration_seconds", dto.MetricType_HISTOGRAM, []string{"node"}},
		{"strand_fetch_requests_total", dto.MetricType_COUNTER, []string{"node"}},
		{"strand_produce_bytes_total", dto.MetricType_COUNTER, []string{"node"}},
		{"strand_fetch_bytes_total", dto.MetricType_COUNTER, []string{"node"}},
		{"strand_group_committed_offset", dto.MetricType_GAUGE, group},
		{"strand_group_lag_records", dto.MetricType_GAUGE, group},
		{"strand_group_lag_seconds", dto.MetricType_GAUGE, group},
		{"strand_group_retention_headroom_records", dto.MetricType_GAUGE, group},
	}
	for _, w := range want {
		f := before[w.name]
		if f == nil || len(f.GetMetric()) == 0 {
			t.Errorf("%s: missing", w.name)
			continue
		}
		if f.GetType() != w.typ {
			t.Errorf("%s: type %v, want %v", w.name, f.GetType(), w.typ)
		}
		for _, m := range f.GetMetric() {
			if got := labelNames(m); !slices.Equal(got, w.labels) {
				t.Errorf("%s: labels %v, want %v", w.name, got, w.labels)
				break
			}
		}
	}
	for name, f := range before {
		if f.GetType() == dto.MetricType_COUNTER && !strings.HasSuffix(name, "_total") {
			t.Errorf("counter %s does not end in _total", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if hwm := leaderSum(before, "strand_partition_high_watermark", "orders"); hwm != 9 {
		t.Errorf("high-water marks of orders' leaders add up to %v, want 9", hwm)
	}
	if lag := sum(before, "strand_group_lag_records", "group", "billing"); lag != 6 {
		t.Errorf("group lag %v, want 6 (3 partitions × (3 records - committed 1))", lag)
	}
	if got := sum(before, "strand_partitions_offline"); got != 0 {
		t.Errorf("%v offline replicas in a settled cluster", got)
	}

	produceAndCommit(t, c, "orders", 3, 6, "", 0)
	// A coordinator computes lag from its own replica of each partition,
	// which may be a follower that applies the commit a moment after the
	// leader acknowledged it: scrape until the lag settles (bounded).
	after := scrape(t, a)
	for deadline := time.Now().Add(adminTestWait); time.Now().Before(deadline); {
		if sum(after, "strand_group_lag_records", "group", "billing")-sum(before, "strand_group_lag_records", "group", "billing") == 6 {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling a convergence condition
		after = scrape(t, a)
	}
	if d := leaderSum(after, "strand_partition_high_watermark", "orders") - leaderSum(before, "strand_partition_high_watermark", "orders"); d != 6 {
		t.Errorf("high-water marks moved by %v, want 6", d)
	}
	if d := sum(after, "strand_group_lag_records", "group", "billing") - sum(before, "strand_group_lag_records", "group", "billing"); d != 6 {
		t.Errorf("group lag moved by %v, want 6", d)
	}
	for _, name := range []string{"strand_produce_requests_total", "strand_produce_bytes_total", "strand_raft_commit_duration_seconds",
		"strand_fsync_duration_seconds", "strand_produce_request_duration_seconds", "strand_partition_size_bytes"} {
		if sum(after, name) <= sum(before, name) {
			t.Errorf("%s did not move: %v then %v", name, sum(before, name), sum(after, name))
		}
	}
	if sum(after, "strand_produce_requests_total", "acks", "all") == 0 {
		t.Errorf("no produce counted with acks=\"all\"")
	}
}

// /healthz answers 200 while the node runs and 503 once it stopped;
// /readyz answers 503 with a reason until the node's registration is
// applied and its replicas caught up, then 200.
func TestAdminHealthAndReadiness(t *testing.T) {
	// Node 1 of a two-node cluster whose node 2 never starts: no metadata
	// majority, so never ready.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	peers := []node.Peer{{ID: 1, Address: ln.Addr().String()}, {ID: 2, Address: "127.0.0.1:1"}}
	alone, err := Start(Config{Core: node.Config{ID: 1, Nodes: peers}, DataDir: t.TempDir(), Listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	a := startTestAdmin(t, alone)
	if code, body := httpGet(t, a.URL()+"healthz"); code != http.StatusOK {
		t.Errorf("/healthz of a running node: %d %s", code, body)
	}
	code, body := httpGet(t, a.URL()+"readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "no metadata leader") {
		t.Errorf("/readyz without a metadata majority: %d %q, want 503 naming the metadata leader", code, body)
	}
	if err := alone.Close(); err != nil {
		t.Fatal(err)
	}
	if code, body := httpGet(t, a.URL()+"healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "node 1 stopped") {
		t.Errorf("/healthz of a stopped node: %d %q, want 503", code, body)
	}
	if code, _ := httpGet(t, a.URL()+"readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz of a stopped node: %d, want 503", code)
	}

	one := startTestServer(t)
	b := startTestAdmin(t, one)
	waitReady(t, b)
	if code, body := httpGet(t, b.URL()+"debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("/debug/pprof/: %d", code)
	}
}

// readiness names what is missing: a registration not applied yet, and a
// replica without leader or applying behind its commit index.
func TestReadinessReasons(t *testing.T) {
	v := node.AdminView{ID: 1, MetaLeader: 1}
	if ok, why := readiness(v); ok || !strings.Contains(why, "registration") {
		t.Errorf("unregistered: %v %q", ok, why)
	}
	v.Registered = true
	v.Replicas = []node.ReplicaView{
		{GroupStatus: node.GroupStatus{TopicPartition: node.TopicPartition{Topic: "a", Partition: 0}, Leader: 2, CommitIndex: 10, AppliedIndex: 10}},
		{GroupStatus: node.GroupStatus{TopicPartition: node.TopicPartition{Topic: "a", Partition: 1}, Leader: 0}},
		{GroupStatus: node.GroupStatus{TopicPartition: node.TopicPartition{Topic: "a", Partition: 2}, Leader: 2, CommitIndex: 1000, AppliedIndex: 1}},
	}
	ok, why := readiness(v)
	if ok || !strings.Contains(why, "2 of 3 replicas") || !strings.Contains(why, "a/1 no leader") || !strings.Contains(why, "a/2 applied 1 of 1000") {
		t.Errorf("lagging replicas: %v %q", ok, why)
	}
	v.Replicas = v.Replicas[:1]
	if ok, why := readiness(v); !ok {
		t.Errorf("caught up: not ready: %q", why)
	}
	v.DiskStalled, v.OldestStorageJob, v.OldestStorageJobFile = true, 3*time.Second, "p/a@1/0/log"
	if ok, why := readiness(v); ok || !strings.Contains(why, "disk stalled") || !strings.Contains(why, "p/a@1/0/log") {
		t.Errorf("stalled disk: %v %q", ok, why)
	}
}

// The JSON API shows the topic with its leaders and replica states, and
// the group with its lag, from the same views as /metrics.
func TestAdminAPI(t *testing.T) {
	servers := startTestCluster(t, 3)
	a := startTestAdmin(t, servers...)
	waitReady(t, a)
	c := newTestClient(t, servers[0])
	ctx, cancel := context.WithTimeout(context.Background(), adminTestWait)
	defer cancel()
	if err := c.CreateTopic(ctx, "orders", 2, 3, nil); err != nil {
		t.Fatal(err)
	}
	produceAndCommit(t, c, "orders", 2, 10, "billing", 2)
	waitReady(t, a) // __strand_offsets' partitions elect their leaders
	var cluster apiCluster
	getJSONInto(t, a.URL()+"api/cluster", &cluster)
	if len(cluster.Nodes) != 3 || cluster.MetadataLeader == 0 || cluster.Moves == nil {
		t.Errorf("cluster: %+v", cluster)
	}
	for _, n := range cluster.Nodes {
		if n.Health != "ready" || !n.Registered || n.Replicas < 2 {
			t.Errorf("node %+v", n)
		}
	}
	var topics apiTopics
	getJSONInto(t, a.URL()+"api/topics", &topics)
	i := slices.IndexFunc(topics.Topics, func(t apiTopic) bool { return t.Name == "orders" })
	if i < 0 || len(topics.Topics[i].Partitions) != 2 {
		t.Fatalf("topics: %+v", topics)
	}
	for _, p := range topics.Topics[i].Partitions {
		leaders := 0
		for _, r := range p.Replicas {
			if r.State == "leader" {
				leaders++
			}
		}
		if p.Leader == 0 || p.HighWatermark != 5 || leaders != 1 || len(p.Replicas) != 3 {
			t.Errorf("partition %+v", p)
		}
	}
	var groups apiGroups
	getJSONInto(t, a.URL()+"api/groups", &groups)
	if len(groups.Groups) != 1 || groups.Groups[0].ID != "billing" || groups.Groups[0].LagRecords != 6 || len(groups.Groups[0].History) == 0 {
		t.Errorf("groups: %+v", groups)
	}
}

func getJSONInto(t *testing.T, url string, v any) {
	t.Helper()
	code, body := httpGet(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v\n%s", url, err, body)
	}
}

// A view request the loop never answers in time fails with a timeout
// instead of hanging the HTTP goroutine, and a full queue fails at once.
func TestAdminViewBounded(t *testing.T) {
	r := &Server{adminQueries: make(chan adminQuery, 1), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if _, err := r.view(ctx); err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Errorf("unanswered view: %v, want a deadline error", err)
	}
	if _, err := r.view(context.Background()); err != errAdminBusy {
		t.Errorf("view with the queue full: %v, want errAdminBusy", err)
	}
}

// The lag history keeps the last hour of samples per group, oldest first,
// drops a group silent for longer, and tracks at most lagGroupsMax groups.
func TestLagHistoryRing(t *testing.T) {
	h := newLagHistory()
	start := time.UnixMilli(1_700_000_000_000)
	for i := range lagSamplesMax + 5 {
		h.add([]apiGroup{{ID: "g", LagRecords: int64(i)}}, start.Add(time.Duration(i)*lagSampleInterval))
	}
	got := h.history("g")
	if len(got) != lagSamplesMax || got[0].Records != 5 || got[len(got)-1].Records != lagSamplesMax+4 {
		t.Fatalf("history: %d samples, first %+v last %+v", len(got), got[0], got[len(got)-1])
	}
	for i := 1; i < len(got); i++ {
		if got[i].TimeMs <= got[i-1].TimeMs {
			t.Fatalf("samples out of order at %d: %+v then %+v", i, got[i-1], got[i])
		}
	}
	later := start.Add(time.Duration(2*lagSamplesMax+10) * lagSampleInterval)
	var many []apiGroup
	for i := range lagGroupsMax + 10 {
		many = append(many, apiGroup{ID: fmt.Sprintf("h%03d", i)})
	}
	h.add(many, later)
	if h.history("g") != nil {
		t.Errorf("group silent for over an hour still has a history")
	}
	if len(h.rings) != lagGroupsMax {
		t.Errorf("%d groups tracked, want %d", len(h.rings), lagGroupsMax)
	}
}

// The cluster API marks a stalled node, from its own view and from the
// liveness view of the node answering.
func TestClusterAPIShowsStalledDisk(t *testing.T) {
	peers := []node.Peer{{ID: 1, Address: "a:1"}, {ID: 2, Address: "a:2"}}
	views := []node.AdminView{
		{ID: 1, Peers: peers, Liveness: []node.PeerLiveness{{Node: 1}, {Node: 2, DiskStalled: true}}},
		{ID: 2, Peers: peers, DiskStalled: true, OldestStorageJob: 2 * time.Second, OldestStorageJobFile: "p/t@1/0/log"},
	}
	out := clusterOf(views, nil)
	for _, n := range out.Nodes {
		if n.DiskStalled != (n.ID == 2) {
			t.Errorf("node %d: disk_stalled %v", n.ID, n.DiskStalled)
		}
		if n.ID == 2 && (n.Health != "not ready" || !strings.Contains(n.Reason, "disk stalled")) {
			t.Errorf("node 2: %s %q", n.Health, n.Reason)
		}
	}
}
