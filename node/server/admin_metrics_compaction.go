package server

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strandlog/strand/node"
)

// Compacted topics' metrics (issue 24), from each replica's
// node.CompactionView: per partition that compacts (or did), the dirty
// ratio and the bytes on either side of it, the last generation done, its
// cleaned-to offset and decision time; per node, the passes made current
// and the diverging reports; per node the bytes its passes read and wrote
// (counters), and per partition the replica's last pass: its bytes read
// and written and its duration (gauges, 0 until a pass since the node
// opened). strand_partition_compaction_clean_bytes is what the last pass
// wrote, the whole prefix.
var (
	descCompactDirtyRatio = prometheus.NewDesc("strand_partition_compaction_dirty_ratio",
		"Dirty bytes over clean plus dirty bytes of a compacted replica: what min.cleanable.dirty.ratio is compared with (1 before the first pass).", replicaLabels, nil)
	descCompactDirty = prometheus.NewDesc("strand_partition_compaction_dirty_bytes",
		"Raft log bytes past the replica's compacted prefix (to a segment's granularity): the next pass's input beside the prefix.", replicaLabels, nil)
	descCompactClean = prometheus.NewDesc("strand_partition_compaction_clean_bytes",
		"Bytes of the replica's compacted prefix: what its last pass wrote.", replicaLabels, nil)
	descCompactGen = prometheus.NewDesc("strand_partition_compaction_generation",
		"Last compaction generation reported done for the partition (0: none).", replicaLabels, nil)
	descCompactCleanedTo = prometheus.NewDesc("strand_partition_compaction_cleaned_to_offset",
		"End of the last compaction reported done: below it each key holds only its latest record.", replicaLabels, nil)
	descCompactTime = prometheus.NewDesc("strand_partition_compaction_last_decision_timestamp_seconds",
		"Unix time of the last compaction decision (the leader's clock; 0: none).", replicaLabels, nil)
	descCompactPending = prometheus.NewDesc("strand_partition_compaction_in_progress",
		"1 while a decided compaction generation is not reported done.", replicaLabels, nil)
	descCompactStuck = prometheus.NewDesc("strand_partition_compaction_stuck",
		"1 when this replica can run no compaction pass (its log says why).", replicaLabels, nil)
	descCompactPasses = prometheus.NewDesc("strand_compaction_passes_total",
		"Compaction passes this node's replicas made current.", []string{"node"}, nil)
	descCompactBytesIn = prometheus.NewDesc("strand_compaction_bytes_in_total",
		"Bytes compaction passes on this node's replicas read (the prefix and the raft entries gathered), counted when a pass is made current.", []string{"node"}, nil)
	descCompactBytesOut = prometheus.NewDesc("strand_compaction_bytes_out_total",
		"Bytes compaction passes on this node's replicas wrote (the new prefixes), counted when a pass is made current.", []string{"node"}, nil)
	descCompactLastIn = prometheus.NewDesc("strand_partition_compaction_last_pass_bytes_in",
		"Bytes the replica's last compaction pass read (0: none since the node opened).", replicaLabels, nil)
	descCompactLastOut = prometheus.NewDesc("strand_partition_compaction_last_pass_bytes_out",
		"Bytes the replica's last compaction pass wrote (0: none since the node opened).", replicaLabels, nil)
	descCompactLastSeconds = prometheus.NewDesc("strand_partition_compaction_last_pass_seconds",
		"Duration of the replica's last compaction pass, from gathering its input to its switch (0: none since the node opened).", replicaLabels, nil)
	descCompactDiverged = prometheus.NewDesc("strand_compaction_diverged_total",
		"Compaction reports applied with another outcome than the one recorded (a bug or a damaged prefix).", []string{"node"}, nil)
)

// collectCompaction sends the compaction metrics of v's replicas of
// topics that compact or did.
func collectCompaction(ch chan<- prometheus.Metric, id string, v node.AdminView) {
	ch <- counter(descCompactPasses, v.Stats.CompactionPasses, id)
	ch <- counter(descCompactDiverged, v.Stats.CompactionsDiverged, id)
	ch <- counter(descCompactBytesIn, v.Stats.CompactionBytesIn, id)
	ch <- counter(descCompactBytesOut, v.Stats.CompactionBytesOut, id)
	for _, r := range v.Replicas {
		cv := r.Compaction
		if !cv.Compacts && cv.Decided == 0 {
			continue
		}
		p := strconv.Itoa(int(r.Partition))
		ch <- gauge(descCompactDirtyRatio, cv.DirtyRatio(), id, r.Topic, p)
		ch <- gauge(descCompactDirty, float64(cv.DirtyBytes), id, r.Topic, p)
		ch <- gauge(descCompactClean, float64(cv.PrefixBytes), id, r.Topic, p)
		ch <- gauge(descCompactGen, float64(cv.Done), id, r.Topic, p)
		ch <- gauge(descCompactCleanedTo, float64(cv.CleanedTo), id, r.Topic, p)
		ch <- gauge(descCompactTime, float64(cv.DecidedTimeMs)/1000, id, r.Topic, p)
		ch <- gauge(descCompactPending, boolValue(cv.Decided > cv.Done), id, r.Topic, p)
		ch <- gauge(descCompactStuck, boolValue(cv.Stuck != ""), id, r.Topic, p)
		ch <- gauge(descCompactLastIn, float64(cv.LastPassBytesIn), id, r.Topic, p)
		ch <- gauge(descCompactLastOut, float64(cv.LastPassBytesOut), id, r.Topic, p)
		ch <- gauge(descCompactLastSeconds, cv.LastPassDuration.Seconds(), id, r.Topic, p)
	}
}
