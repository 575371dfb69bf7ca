package node

import "time"

// TierView is a replica's two tiers as `strand topic describe` and
// /metrics show them (issue 27's "Visible"): only for a partition of a
// topic with remote.storage.enable=true on a node with an object store.
//
//   - LocalBytes: the replica's raft log on disk (what local.retention.*
//     bounds); RemoteBytes and RemoteSegments: the objects the replicated
//     manifest lists (as this replica applied it); RemoteStart and
//     RemoteEnd: the remote log [RemoteStart, RemoteEnd), both -1 while
//     nothing was ever uploaded.
//   - UploadLagBytes: the bytes of the raft log segments holding records
//     not yet remote (from the one holding RemoteEnd, or the log start,
//     through the active segment: a segment is uploaded once sealed and
//     stable, so this never falls below the active segment's size);
//     UploadLagSeconds: the age, by its append time on the leader's clock,
//     of the oldest record not yet remote (0 when every record is).
//   - The counters are this replica's since its node opened it: remote
//     reads started and the batch bytes they served, remote reads that
//     failed, uploads put and their bytes, and uploads that failed (a
//     failed Put or read, retried after a backoff).
type TierView struct {
	Tiered                      bool
	LocalBytes                  int64
	RemoteBytes                 int64
	RemoteSegments              int
	RemoteStart, RemoteEnd      int64
	UploadLagBytes              int64
	UploadLagSeconds            float64
	RemoteReads, RemoteReadErrs uint64
	RemoteReadBytes             uint64
	Uploads, UploadErrs         uint64
	UploadedBytes               uint64
}

// tierCounts are a replica's tier counters (TierView).
type tierCounts struct {
	reads, readErrs, readBytes   uint64
	uploads, uploadErrs, upBytes uint64
}

// tierView is g's TierView; the zero view (Tiered false) when g's topic
// is not tiered here.
func (c *Core) tierView(g *group) TierView {
	if !c.tiered(g) {
		return TierView{}
	}
	n := g.tier.counts
	v := TierView{Tiered: true, LocalBytes: g.log.SizeBytes(), RemoteStart: -1, RemoteEnd: -1,
		RemoteReads: n.reads, RemoteReadErrs: n.readErrs, RemoteReadBytes: n.readBytes,
		Uploads: n.uploads, UploadErrs: n.uploadErrs, UploadedBytes: n.upBytes}
	m := g.part.Tier()
	from := g.part.LogStartOffset()
	if m.Active() {
		v.RemoteBytes, v.RemoteSegments = m.Bytes(), len(m.Segments())
		v.RemoteStart, v.RemoteEnd = m.Start(), m.Next()
		from = max(from, m.Next())
	}
	if from >= g.part.HighWatermark() {
		return v
	}
	if locs, err := g.part.AppendLocations(nil, from, 1); err == nil && len(locs) > 0 {
		first := locs[0]
		now := c.cfg.Clock.Realtime().UnixMilli()
		v.UploadLagSeconds = (time.Duration(max(0, now-first.AppendTimeMs)) * time.Millisecond).Seconds()
		g.ret.segs = g.log.Segments(g.ret.segs[:0])
		for _, s := range g.ret.segs {
			if s.Last >= first.RaftIndex {
				v.UploadLagBytes += s.Bytes
			}
		}
	}
	return v
}
