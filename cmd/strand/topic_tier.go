package main

import (
	"fmt"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/metadata"
)

// Tiered topics in `strand topic describe` (issue 27): per partition the
// leader's local and remote size, the remote log's offsets and the upload
// lag, and what local.retention.* means on the topic.

// tierJSON is partitionJSON's two tiers (clientlib's PartitionTier;
// remote_start and remote_end are -1 while nothing was uploaded).
type tierJSON struct {
	LocalBytes       int64 `json:"local_bytes"`
	RemoteBytes      int64 `json:"remote_bytes"`
	RemoteSegments   int32 `json:"remote_segments"`
	RemoteStart      int64 `json:"remote_start"`
	RemoteEnd        int64 `json:"remote_end"`
	UploadLagBytes   int64 `json:"upload_lag_bytes"`
	UploadLagSeconds int64 `json:"upload_lag_seconds"`
}

// tierToJSON is pt as JSON; nil for nil.
func tierToJSON(pt *clientlib.PartitionTier) *tierJSON {
	if pt == nil {
		return nil
	}
	return &tierJSON{LocalBytes: pt.LocalBytes, RemoteBytes: pt.RemoteBytes, RemoteSegments: pt.RemoteSegments,
		RemoteStart: pt.RemoteStart, RemoteEnd: pt.RemoteEnd, UploadLagBytes: pt.UploadLagBytes,
		UploadLagSeconds: int64(pt.UploadLag / time.Second)}
}

// formatTier is one partition's two tiers in a line: local size, remote
// size in segments and the remote log's first offset, and what is not
// remote yet.
func formatTier(pt clientlib.PartitionTier) string {
	remote := "remote: nothing uploaded yet"
	if pt.RemoteStart >= 0 {
		remote = fmt.Sprintf("remote %s in %d segments, offsets %d to %d (remote log start %d)",
			formatBytes(pt.RemoteBytes), pt.RemoteSegments, pt.RemoteStart, pt.RemoteEnd-1, pt.RemoteStart)
		if pt.RemoteEnd <= pt.RemoteStart {
			remote = fmt.Sprintf("remote %s in %d segments, empty from offset %d", formatBytes(pt.RemoteBytes), pt.RemoteSegments, pt.RemoteStart)
		}
	}
	return fmt.Sprintf("local %s; %s; upload lag %s, oldest record not remote %s old",
		formatBytes(pt.LocalBytes), remote, formatBytes(pt.UploadLagBytes), pt.UploadLag.Truncate(time.Second))
}

// configNote is what describe and alter print beside a configuration
// value: a value stored but not acted on, and what local.retention.*
// means given the topic's remote.storage.enable (configs: the topic's
// whole configuration).
func configNote(key, value string, configs map[string]string) string {
	if n := metadata.LocalRetentionNote(key, value, configs[metadata.ConfigRemoteStorageEnable] == "true"); n != "" {
		return "  (" + n + ")"
	}
	if !metadata.Enforced(key, value) {
		return "  (not enforced yet)"
	}
	return ""
}
