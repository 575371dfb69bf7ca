package server

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strandlog/strand/node"
)

// Tiered storage's metrics (issue 27), from each replica's node.TierView,
// only for replicas of tiered topics (remote.storage.enable=true on a node
// with an object store): the remote log (bytes, objects, first offset),
// the upload lag (bytes of local segments not yet remote, age of the
// oldest record not yet remote), and the replica's counters since its node
// opened it: remote reads, their bytes and failures, uploads, their bytes
// and failures. The local size is strand_partition_size_bytes.
var (
	descTierRemoteBytes = prometheus.NewDesc("strand_partition_remote_bytes",
		"Bytes of the objects the replica's applied manifest lists (the remote tier).", replicaLabels, nil)
	descTierRemoteSegments = prometheus.NewDesc("strand_partition_remote_segments",
		"Objects (uploaded segments) the replica's applied manifest lists.", replicaLabels, nil)
	descTierRemoteStart = prometheus.NewDesc("strand_partition_remote_log_start_offset",
		"First offset of the remote log (-1: nothing uploaded yet).", replicaLabels, nil)
	descTierLagBytes = prometheus.NewDesc("strand_partition_upload_lag_bytes",
		"Bytes of the replica's local segments holding records not yet remote (the active segment among them).", replicaLabels, nil)
	descTierLagSeconds = prometheus.NewDesc("strand_partition_upload_lag_seconds",
		"Age of the oldest record not yet remote, by its append time (0: every record is remote).", replicaLabels, nil)
	descTierReads = prometheus.NewDesc("strand_partition_remote_reads_total",
		"Remote reads (fetches below the local log served from the bucket) the replica started.", replicaLabels, nil)
	descTierReadBytes = prometheus.NewDesc("strand_partition_remote_read_bytes_total",
		"Batch bytes remote reads served.", replicaLabels, nil)
	descTierReadErrors = prometheus.NewDesc("strand_partition_remote_read_errors_total",
		"Remote reads that failed (the fetch answered a retriable error).", replicaLabels, nil)
	descTierUploads = prometheus.NewDesc("strand_partition_uploads_total",
		"Segments the replica uploaded as leader (each followed by its TIER_ADD proposal).", replicaLabels, nil)
	descTierUploadBytes = prometheus.NewDesc("strand_partition_upload_bytes_total",
		"Bytes of the objects the replica uploaded as leader.", replicaLabels, nil)
	descTierUploadErrors = prometheus.NewDesc("strand_partition_upload_errors_total",
		"Uploads that failed (a local read or a Put; retried after a backoff).", replicaLabels, nil)
)

// collectTier sends the tier metrics of v's tiered replicas.
func collectTier(ch chan<- prometheus.Metric, id string, v node.AdminView) {
	for _, r := range v.Replicas {
		tv := r.Tier
		if !tv.Tiered {
			continue
		}
		p := strconv.Itoa(int(r.Partition))
		ch <- gauge(descTierRemoteBytes, float64(tv.RemoteBytes), id, r.Topic, p)
		ch <- gauge(descTierRemoteSegments, float64(tv.RemoteSegments), id, r.Topic, p)
		ch <- gauge(descTierRemoteStart, float64(tv.RemoteStart), id, r.Topic, p)
		ch <- gauge(descTierLagBytes, float64(tv.UploadLagBytes), id, r.Topic, p)
		ch <- gauge(descTierLagSeconds, tv.UploadLagSeconds, id, r.Topic, p)
		ch <- counter(descTierReads, tv.RemoteReads, id, r.Topic, p)
		ch <- counter(descTierReadBytes, tv.RemoteReadBytes, id, r.Topic, p)
		ch <- counter(descTierReadErrors, tv.RemoteReadErrs, id, r.Topic, p)
		ch <- counter(descTierUploads, tv.Uploads, id, r.Topic, p)
		ch <- counter(descTierUploadBytes, tv.UploadedBytes, id, r.Topic, p)
		ch <- counter(descTierUploadErrors, tv.UploadErrs, id, r.Topic, p)
	}
}
