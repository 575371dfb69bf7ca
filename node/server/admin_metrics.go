package server

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/raftlog"
)

// serverMetrics are what only the process can measure: request latency as
// the loop sees it (from taking a request to its answer), bytes in and out,
// and fsync time in the storage pool. Everything else comes from the
// Core's AdminView at scrape time.
type serverMetrics struct {
	produce      *prometheus.HistogramVec // by acks
	produceCount *prometheus.CounterVec   // by acks
	fetch        prometheus.Histogram
	fetchCount   prometheus.Counter
	bytesIn      prometheus.Counter
	bytesOut     prometheus.Counter
	fsync        prometheus.Histogram
	// process times each Core.Process call: the loop stalls every
	// partition for that long, so its top bucket is the longest stall.
	process prometheus.Histogram
}

// secondsBuckets are the request and fsync latency buckets, from
// node.LatencyBuckets so every latency histogram lines up.
func secondsBuckets() []float64 {
	out := make([]float64, len(node.LatencyBuckets))
	for i, b := range node.LatencyBuckets {
		out[i] = b.Seconds()
	}
	return out
}

func newServerMetrics(id node.NodeID) *serverMetrics {
	labels := prometheus.Labels{"node": strconv.FormatUint(uint64(id), 10)}
	return &serverMetrics{
		produce: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "strand_produce_request_duration_seconds",
			Help: "Time from the loop taking a produce request to its answer, by acks (0, 1, all).", ConstLabels: labels,
			Buckets: secondsBuckets()}, []string{"acks"}),
		produceCount: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_produce_requests_total",
			Help: "Produce requests answered, by acks.", ConstLabels: labels}, []string{"acks"}),
		fetch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strand_fetch_request_duration_seconds",
			Help: "Time from the loop taking a fetch request to its answer (long polls included).", ConstLabels: labels,
			Buckets: secondsBuckets()}),
		fetchCount: prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_fetch_requests_total",
			Help: "Fetch requests answered.", ConstLabels: labels}),
		bytesIn: prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_produce_bytes_total",
			Help: "Batch bytes received in produce requests (bytes in).", ConstLabels: labels}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_fetch_bytes_total",
			Help: "Batch bytes sent in fetch answers (bytes out).", ConstLabels: labels}),
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strand_fsync_duration_seconds",
			Help: "Time of one storage job (SyncJob.Run: a log sync, a checkpoint write, ...) in the storage pool.", ConstLabels: labels,
			Buckets: secondsBuckets()}),
		process: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strand_loop_process_seconds",
			Help: "Time of one Core.Process call on the loop, during which no partition of the node moves.", ConstLabels: labels,
			Buckets: secondsBuckets()}),
	}
}

// collect sends every server-side metric.
func (m *serverMetrics) collect(ch chan<- prometheus.Metric) {
	m.produce.Collect(ch)
	m.produceCount.Collect(ch)
	m.fetch.Collect(ch)
	m.fetchCount.Collect(ch)
	m.bytesIn.Collect(ch)
	m.bytesOut.Collect(ch)
	m.fsync.Collect(ch)
	m.process.Collect(ch)
}

// acksLabel names a produce's acks as the metrics do.
func acksLabel(acks int32) string {
	switch acks {
	case 0:
		return "0"
	case 1:
		return "1"
	}
	return "all"
}

// observe wraps respond so the answer to req is counted; it returns respond
// itself for the requests it does not count. Runs on the loop.
func (m *serverMetrics) observe(req *strandpb.Request, respond func(*strandpb.Response)) func(*strandpb.Response) {
	switch {
	case req.GetProduce() != nil:
		p := req.GetProduce()
		in := 0
		for _, part := range p.GetPartitions() {
			in += len(part.GetBatch())
		}
		m.bytesIn.Add(float64(in))
		acks := acksLabel(p.GetAcks())
		start := time.Now()
		return func(resp *strandpb.Response) {
			m.produce.WithLabelValues(acks).Observe(time.Since(start).Seconds())
			m.produceCount.WithLabelValues(acks).Inc()
			respond(resp)
		}
	case req.GetFetch() != nil:
		start := time.Now()
		return func(resp *strandpb.Response) {
			out := 0
			for _, part := range resp.GetFetch().GetPartitions() {
				for _, b := range part.GetBatches() {
					out += len(b.GetRecords())
				}
			}
			m.bytesOut.Add(float64(out))
			m.fetch.Observe(time.Since(start).Seconds())
			m.fetchCount.Inc()
			respond(resp)
		}
	}
	return respond
}

// collector turns one AdminView per node into metrics at every scrape: no
// state of its own, so nothing can drift from the Core.
type collector struct{ a *Admin }

// Describe sends nothing: the series' label values come with the views,
// so the collector is unchecked (prometheus.Collector's contract).
func (c *collector) Describe(chan<- *prometheus.Desc) {}

// Descriptions of the metrics taken from AdminViews.
var (
	replicaLabels  = []string{"node", "topic", "partition"}
	descPartHWM    = prometheus.NewDesc("strand_partition_high_watermark", "Offset after the last committed record of the replica.", replicaLabels, nil)
	descPartStart  = prometheus.NewDesc("strand_partition_log_start_offset", "First offset the replica still holds.", replicaLabels, nil)
	descPartSize   = prometheus.NewDesc("strand_partition_size_bytes", "Bytes of the replica's log segments.", replicaLabels, nil)
	descPartLeader = prometheus.NewDesc("strand_partition_leader", "Node id of the leader the replica knows (0: none).", replicaLabels, nil)
	descPartTerm   = prometheus.NewDesc("strand_partition_term", "Raft term of the replica.", replicaLabels, nil)
	descPartUnder  = prometheus.NewDesc("strand_partition_under_replicated",
		"1 when this node leads the partition and a follower is not in step (probing, snapshot, more than 256 entries behind, or its node silent for three election timeouts).", replicaLabels, nil)
	descPartOffline  = prometheus.NewDesc("strand_partition_offline", "1 when the replica knows no leader.", replicaLabels, nil)
	descFollowerLag  = prometheus.NewDesc("strand_partition_follower_lag_entries", "On the leader: raft entries a follower lacks (catch-up progress).", append(replicaLabels[:3:3], "follower"), nil)
	descMoveProgress = prometheus.NewDesc("strand_partition_move_progress_ratio",
		"On the leader of a partition being moved: the least caught-up added replica's match over the leader's last index (1: catch-up done).", replicaLabels, nil)
	descPartLSOLag = prometheus.NewDesc("strand_partition_lso_lag_records",
		"High-water mark minus last stable offset: records an open transaction holds back from read_committed readers.", replicaLabels, nil)
	descMovesCount   = prometheus.NewDesc("strand_partition_moves_in_progress", "Partition moves the applied metadata records as in progress.", []string{"node"}, nil)
	descUnderCount   = prometheus.NewDesc("strand_partitions_under_replicated", "Partitions this node leads with a follower not in step.", []string{"node"}, nil)
	descOfflineCount = prometheus.NewDesc("strand_partitions_offline", "Replicas on this node that know no leader.", []string{"node"}, nil)
	descLedCount     = prometheus.NewDesc("strand_partitions_led", "Partitions this node leads.", []string{"node"}, nil)
	descReplicaCount = prometheus.NewDesc("strand_replicas", "Partition replicas hosted on this node.", []string{"node"}, nil)
	descRejoining    = prometheus.NewDesc("strand_replicas_rejoining", "Replicas rebuilding lost state from their peers.", []string{"node"}, nil)
	descReady        = prometheus.NewDesc("strand_node_ready", "1 when /readyz would answer 200 for this node (its own readiness, not the cluster's).", []string{"node"}, nil)
	descPeerUp       = prometheus.NewDesc("strand_peer_up",
		"1 when this node heard from the peer within three election timeouts, 0 when it counts the peer down.", []string{"node", "peer"}, nil)
	descPeerContact   = prometheus.NewDesc("strand_peer_last_contact_seconds", "Time since this node last heard from the peer.", []string{"node", "peer"}, nil)
	descNodesDown     = prometheus.NewDesc("strand_cluster_nodes_down", "Nodes this node counts down (silent for three election timeouts): cluster health as it sees it.", []string{"node"}, nil)
	descMetaLeader    = prometheus.NewDesc("strand_metadata_leader", "Node id of the metadata group's leader (0: none known).", []string{"node"}, nil)
	descMetaVersion   = prometheus.NewDesc("strand_metadata_version", "Applied metadata version.", []string{"node"}, nil)
	descDiskFree      = prometheus.NewDesc("strand_disk_free_bytes", "Free bytes of the data directory's file system.", []string{"node"}, nil)
	descDiskFull      = prometheus.NewDesc("strand_disk_full", "1 while the node refuses produce for want of space.", []string{"node"}, nil)
	descDiskStalled   = prometheus.NewDesc("strand_disk_stalled", "1 while a storage job is in flight past the stall threshold: no leading, no produce.", []string{"node"}, nil)
	descStorageOldest = prometheus.NewDesc("strand_storage_job_oldest_seconds", "Age of the oldest storage job (fsync, unlink) in flight.", []string{"node"}, nil)
	descStorageSlow   = prometheus.NewDesc("strand_storage_jobs_slow_total", "Storage jobs that ran longer than the slow threshold.", []string{"node"}, nil)
	descDiskStalls    = prometheus.NewDesc("strand_disk_stalls_total", "Times the node turned stalled.", []string{"node"}, nil)
	descCommitLatency = prometheus.NewDesc("strand_raft_commit_duration_seconds", "Proposal to apply on the leader of acks=all produces.", []string{"node"}, nil)
	descCatchUpBytes  = prometheus.NewDesc("strand_catchup_bytes_total", "Entry bytes sent to catching-up followers.", []string{"node"}, nil)
	descCatchUpHeld   = prometheus.NewDesc("strand_catchup_throttled_total", "Catch-up appends held back by the throttle.", []string{"node"}, nil)
	descSnapsSent     = prometheus.NewDesc("strand_snapshots_sent_total", "Raft snapshots sent to lagging followers.", []string{"node"}, nil)
	descFramesSent    = prometheus.NewDesc("strand_raft_frames_sent_total", "Raft frames sent to peers.", []string{"node"}, nil)
	descFramesRecv    = prometheus.NewDesc("strand_raft_frames_received_total", "Raft frames received from peers.", []string{"node"}, nil)
	descTxnBegun      = prometheus.NewDesc("strand_txn_begun_total", "Transactions begun on the transaction coordinators this node led.", []string{"node"}, nil)
	descTxnCommitted  = prometheus.NewDesc("strand_txn_committed_total", "Transactions whose commit this node's coordinators decided.", []string{"node"}, nil)
	descTxnAborted    = prometheus.NewDesc("strand_txn_aborted_total",
		"Transactions whose abort this node's coordinators decided (by the client, a timeout, a new producer of the id or strand txn abort).", []string{"node"}, nil)
	descTxnTimedOut   = prometheus.NewDesc("strand_txn_timed_out_total", "Transactions this node's coordinators aborted past transaction.timeout.ms.", []string{"node"}, nil)
	descTxnRetries    = prometheus.NewDesc("strand_txn_marker_retries_total", "Transaction marker writes that failed and are written again.", []string{"node"}, nil)
	descTxnOpen       = prometheus.NewDesc("strand_txn_open", "Transactions open or being completed on the coordinators this node leads.", []string{"node"}, nil)
	descTxnOldest     = prometheus.NewDesc("strand_txn_oldest_open_seconds", "Age of the oldest open transaction on this node's coordinators (0: none).", []string{"node"}, nil)
	descViewErrors    = prometheus.NewDesc("strand_admin_view_errors", "1 when this scrape could not read the node's state (stopped or busy).", []string{"node"}, nil)
	groupLabels       = []string{"node", "group", "topic", "partition"}
	descGroupOffset   = prometheus.NewDesc("strand_group_committed_offset", "Committed offset of a group, on its coordinator.", groupLabels, nil)
	descGroupLag      = prometheus.NewDesc("strand_group_lag_records", "Records from the committed offset to the high-water mark (coordinator's replica): a read_uncommitted consumer's lag, as Kafka's tools measure it.", groupLabels, nil)
	descGroupLagSec   = prometheus.NewDesc("strand_group_lag_seconds", "Age of the first record the group has not consumed (0 when caught up).", groupLabels, nil)
	descGroupHeadroom = prometheus.NewDesc("strand_group_retention_headroom_records",
		"Records between the log start and the committed offset: what retention may delete before the group loses data (0: already lost).", groupLabels, nil)
	descGroupDeadLetters = prometheus.NewDesc("strand_group_dead_letters",
		"Records of the partition the group dead-lettered (the count clientlib's Handle and strand consume --exec keep in the committed offset's metadata).", groupLabels, nil)
	descGroupMembers = prometheus.NewDesc("strand_group_members", "Members of a group, on its coordinator.", []string{"node", "group"}, nil)
)

// descGroupLagStable is a read_committed group's lag. Kafka does not record
// a group's isolation level, so both lags are given.
var descGroupLagStable = prometheus.NewDesc("strand_group_lag_stable_records",
	"Records from the committed offset to the last stable offset (coordinator's replica): a read_committed consumer's lag, held back by open transactions.", groupLabels, nil)

// Collect takes one view per node and sends its metrics.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), adminViewTimeout)
	defer cancel()
	views, errs := c.a.views(ctx)
	now := time.Now()
	for i, n := range c.a.nodes {
		id := strconv.FormatUint(uint64(n.id()), 10)
		n.metrics.collect(ch)
		failed := 0.0
		if errs[i] != nil {
			failed = 1
		}
		ch <- gauge(descViewErrors, failed, id)
		if errs[i] != nil {
			continue
		}
		collectNode(ch, id, views[i], n)
		collectTxn(ch, id, views[i], now)
		collectReplicas(ch, id, views[i])
		collectCompaction(ch, id, views[i])
		collectTier(ch, id, views[i]) // admin_metrics_tier.go
		collectGroups(ch, id, views[i], now)
	}
}

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(d *prometheus.Desc, v uint64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// collectNode sends the node-wide metrics of v.
func collectNode(ch chan<- prometheus.Metric, id string, v node.AdminView, n *Server) {
	ready, _ := readiness(v)
	ch <- gauge(descReady, boolValue(ready), id)
	ch <- gauge(descMetaLeader, float64(v.MetaLeader), id)
	ch <- gauge(descMetaVersion, float64(v.MetaVersion), id)
	ch <- gauge(descDiskFull, boolValue(v.DiskFull), id)
	ch <- gauge(descDiskStalled, boolValue(v.DiskStalled), id)
	ch <- gauge(descStorageOldest, v.OldestStorageJob.Seconds(), id)
	ch <- counter(descStorageSlow, v.Stats.StorageJobsSlow, id)
	ch <- counter(descDiskStalls, v.Stats.DiskStallsEntered, id)
	down := 0
	for _, l := range v.Liveness {
		if l.Node == v.ID {
			continue
		}
		peer := strconv.FormatUint(uint64(l.Node), 10)
		ch <- gauge(descPeerUp, boolValue(!l.Down), id, peer)
		ch <- gauge(descPeerContact, l.SilentFor.Seconds(), id, peer)
		down += int(boolValue(l.Down))
	}
	ch <- gauge(descNodesDown, float64(down), id)
	// Only a Disk the server opened itself (osdisk, under the lock) is
	// known safe to ask off the loop.
	if sr, ok := n.cfg.Core.Disk.(raftlog.SpaceReporter); ok && n.lock != nil {
		if free, err := sr.FreeBytes(); err == nil {
			ch <- gauge(descDiskFree, float64(free), id)
		}
	}
	s := v.Stats
	ch <- counter(descCatchUpBytes, s.CatchUpBytes, id)
	ch <- counter(descCatchUpHeld, s.CatchUpThrottled, id)
	ch <- counter(descSnapsSent, s.SnapshotsSent, id)
	ch <- counter(descFramesSent, s.FramesSent, id)
	ch <- counter(descFramesRecv, s.FramesReceived, id)
	ch <- constHistogram(descCommitLatency, s.CommitLatency, id)
}

// collectTxn sends the transaction coordinators' counters and gauges.
func collectTxn(ch chan<- prometheus.Metric, id string, v node.AdminView, now time.Time) {
	s := v.Stats
	ch <- counter(descTxnBegun, s.TxnBegun, id)
	ch <- counter(descTxnCommitted, s.TxnCommitted, id)
	ch <- counter(descTxnAborted, s.TxnAborted, id)
	ch <- counter(descTxnTimedOut, s.TxnTimedOut, id)
	ch <- counter(descTxnRetries, s.TxnMarkerRetries, id)
	ch <- gauge(descTxnOpen, float64(v.Txn.Open), id)
	oldest := 0.0
	if v.Txn.OldestStartMs >= 0 {
		oldest = max(0, now.Sub(time.UnixMilli(v.Txn.OldestStartMs)).Seconds())
	}
	ch <- gauge(descTxnOldest, oldest, id)
}

// constHistogram is h as a Prometheus histogram (cumulative buckets, in
// seconds).
func constHistogram(d *prometheus.Desc, h node.LatencyHistogram, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(node.LatencyBuckets))
	var cum uint64
	for i, b := range node.LatencyBuckets {
		cum += h.Counts[i]
		buckets[b.Seconds()] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.Sum.Seconds(), buckets, labels...)
}

// collectReplicas sends every replica's metrics and the node's counts.
func collectReplicas(ch chan<- prometheus.Metric, id string, v node.AdminView) {
	var under, offline, led, rejoining int
	for _, r := range v.Replicas {
		p := strconv.Itoa(int(r.Partition))
		ch <- gauge(descPartHWM, float64(r.HighWatermark), id, r.Topic, p)
		ch <- gauge(descPartStart, float64(r.LogStartOffset), id, r.Topic, p)
		ch <- gauge(descPartSize, float64(r.SizeBytes), id, r.Topic, p)
		ch <- gauge(descPartLeader, float64(r.Leader), id, r.Topic, p)
		ch <- gauge(descPartTerm, float64(r.Term), id, r.Topic, p)
		ch <- gauge(descPartLSOLag, float64(max(0, r.HighWatermark-r.LastStableOffset)), id, r.Topic, p)
		isUnder := false
		for _, f := range r.Followers {
			lag := uint64(0)
			if r.LastIndex > f.Match {
				lag = r.LastIndex - f.Match
			}
			ch <- gauge(descFollowerLag, float64(lag), id, r.Topic, p, strconv.FormatUint(uint64(f.Node), 10))
			isUnder = isUnder || f.Lagging(r.LastIndex, adminReplicaLagMax)
		}
		if r.IsLeader && moving(v, r.TopicPartition) {
			ch <- gauge(descMoveProgress, node.MoveRatio(r.Move), id, r.Topic, p)
		}
		ch <- gauge(descPartUnder, boolValue(isUnder), id, r.Topic, p)
		ch <- gauge(descPartOffline, boolValue(r.Leader == 0), id, r.Topic, p)
		under += int(boolValue(isUnder))
		offline += int(boolValue(r.Leader == 0))
		led += int(boolValue(r.IsLeader))
		rejoining += int(boolValue(r.Rejoining))
	}
	ch <- gauge(descUnderCount, float64(under), id)
	ch <- gauge(descOfflineCount, float64(offline), id)
	ch <- gauge(descLedCount, float64(led), id)
	ch <- gauge(descReplicaCount, float64(len(v.Replicas)), id)
	ch <- gauge(descRejoining, float64(rejoining), id)
	ch <- gauge(descMovesCount, float64(len(v.Moves)), id)
}

// moving reports whether v's metadata records a move of tp in progress.
func moving(v node.AdminView, tp node.TopicPartition) bool {
	return slices.ContainsFunc(v.Moves, func(m metadata.MoveInProgress) bool {
		return m.Topic == tp.Topic && m.Partition == tp.Partition
	})
}

// collectGroups sends the groups this node coordinates; lag only for the
// partitions it hosts a replica of.
func collectGroups(ch chan<- prometheus.Metric, id string, v node.AdminView, now time.Time) {
	for _, g := range v.Groups {
		ch <- gauge(descGroupMembers, float64(g.Members), id, g.ID)
		for _, o := range g.Offsets {
			p := strconv.Itoa(int(o.Partition))
			ch <- gauge(descGroupOffset, float64(o.Committed), id, g.ID, o.Topic, p)
			if n, ok := deadLetterCount(o.Metadata); ok {
				ch <- gauge(descGroupDeadLetters, float64(n), id, g.ID, o.Topic, p)
			}
			if !o.Hosted {
				continue
			}
			l := offsetLag(o, now)
			ch <- gauge(descGroupLag, float64(l.Records), id, g.ID, o.Topic, p)
			ch <- gauge(descGroupLagStable, float64(l.Stable), id, g.ID, o.Topic, p)
			ch <- gauge(descGroupLagSec, l.Seconds, id, g.ID, o.Topic, p)
			ch <- gauge(descGroupHeadroom, float64(l.Headroom), id, g.ID, o.Topic, p)
		}
	}
}

// lagOf is one committed offset's lag.
type lagOf struct {
	Records  int64 // to the high-water mark (read_uncommitted)
	Stable   int64 // to the last stable offset (read_committed)
	Seconds  float64
	Headroom int64 // records between the log start and the committed offset
	AtRisk   bool  // the committed offset is below the log start: data lost
}

// offsetLag computes o's lag at now (o must be Hosted).
func offsetLag(o node.GroupOffsetView, now time.Time) lagOf {
	from := max(o.Committed, o.LogStartOffset)
	l := lagOf{Records: max(0, o.HighWatermark-from), Stable: max(0, o.LastStableOffset-from),
		Headroom: max(0, o.Committed-o.LogStartOffset), AtRisk: o.Committed < o.LogStartOffset}
	if l.Records > 0 && o.NextAppendTimeMs >= 0 {
		l.Seconds = max(0, now.Sub(time.UnixMilli(o.NextAppendTimeMs)).Seconds())
	}
	return l
}

// deadLetterCount reads the dead-letter count clientlib's Handle commits
// as an offset's metadata, "strand.dlq=N" (clientlib.DeadLetterMetadata;
// the server does not import the client). False for other metadata.
func deadLetterCount(metadata string) (int64, bool) {
	v, ok := strings.CutPrefix(metadata, "strand.dlq=")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n >= 0
}
