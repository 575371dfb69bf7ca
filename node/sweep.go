package node

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
)

// sweepWhenReplayed runs sweepUnplaced once the metadata group has applied
// as far as its log reached at Open (sweepAt): from then on its state is
// at least as new as any the node acted on before it stopped, since raft
// applies only entries durable in the local log. Earlier, a replica placed
// by a later entry would look unplaced: at Open the state is a
// checkpoint's, and the durable commit index may trail entries the node
// had already applied (it learns a commit with the entries, and applies
// them before the hard state that records it is synced). Entries of the
// old tail that never commit only delay the sweep until the log passes
// that index.
func (c *Core) sweepWhenReplayed() error {
	if c.sweepAt == 0 || c.meta.appliedRaft < c.sweepAt {
		return nil
	}
	c.sweepAt = 0
	return c.sweepUnplaced()
}

// sweepUnplaced finishes the removals a crash interrupted. A node removes
// a replica (reconcile → stopGroup) when it applies the metadata entry
// that moved the replica away or deleted its topic; the entry is durable,
// and its commit known, before it is applied, so a node that stops in
// between replays a metadata state that no longer places the replica
// here, never opens it, and would keep its files forever. Every replica
// directory under p/ that the replayed state does not place here
// is therefore removed as stopGroup would have removed it (its raft term
// read first, for the tombstone's vote floor); a tombstoned directory's
// leftover files (a crash amid stopGroup's removals) go too. A directory
// whose name is not one managedDir makes is left alone.
func (c *Core) sweepUnplaced() error {
	placed := make(map[string]bool) // lookup only
	for _, ref := range c.meta.meta.HostedPartitions(uint64(c.cfg.ID)) {
		placed[managedDir(ref.Topic, ref.TopicID, ref.Partition)] = true
	}
	topics, err := c.cfg.Disk.ListDirs("p")
	if err != nil {
		return fmt.Errorf("node: list replica directories: %w", err)
	}
	for _, name := range topics {
		topic, topicID, ok := parseTopicDir(name)
		if !ok {
			continue
		}
		parts, err := c.cfg.Disk.ListDirs("p/" + name)
		if err != nil {
			return fmt.Errorf("node: list replica directories: %w", err)
		}
		for _, part := range parts {
			p, err := strconv.ParseInt(part, 10, 32)
			if err != nil || strconv.FormatInt(p, 10) != part || p < 0 {
				continue
			}
			if dir := managedDir(topic, topicID, int32(p)); !placed[dir] {
				c.sweepReplica(TopicPartition{Topic: topic, Partition: int32(p)}, topicID, dir)
			}
		}
	}
	return nil
}

// sweepReplica removes the unplaced replica directory dir.
func (c *Core) sweepReplica(tp TopicPartition, topicID uint64, dir string) {
	logs := c.log.with(groupAttrs(tp, false)...)
	if deletedHere(c.cfg, dir) {
		// The tombstone listed may sit in the page cache only (a kill
		// inside markDeleted, before its SyncDir): durable before any file
		// goes, as removeReplica orders it, or a power loss after the
		// removals leaves the replica empty with no record of its delete
		// (TestSweepMakesTheTombstoneDurableFirst).
		if err := durable(c.cfg.Disk, dir, deletedName); err != nil {
			logs.log(slog.LevelWarn, "make a replica's tombstone durable; its files stay", slog.String("dir", dir), slog.Any("err", err))
			return
		}
		c.removeReplicaFiles(dir, logs)
		return
	}
	names, err := c.cfg.Disk.List(dir + "/log")
	if err != nil || len(names) == 0 {
		// No log: no term to remember, nothing a vote could rest on.
		if err := markDeleted(c.cfg, dir, c.meta.meta.Version(), 0); err == nil {
			c.removeReplicaFiles(dir, logs)
		}
		return
	}
	logs.log(slog.LevelInfo, "removing a replica this node no longer hosts (its removal was interrupted)", slog.String("dir", dir))
	g, err := c.openGroup(PartitionSpec{TopicPartition: tp}, dir, topicID)
	if err != nil {
		// Unreadable: its term is unknown, so a later placement here
		// rebuilds it by probing its peers (deletedBefore).
		logs.log(slog.LevelWarn, "open an unplaced replica to remove it", slog.String("dir", dir), slog.Any("err", err))
		if err := markDeleted(c.cfg, dir, c.meta.meta.Version(), 0); err == nil {
			c.removeReplicaFiles(dir, logs)
		}
		return
	}
	c.removeReplica(g)
}

// parseTopicDir splits a replica's topic directory name, topic@id.
func parseTopicDir(name string) (topic string, topicID uint64, ok bool) {
	i := strings.LastIndexByte(name, '@')
	if i <= 0 {
		return "", 0, false
	}
	id, err := strconv.ParseUint(name[i+1:], 10, 64)
	if err != nil || id == 0 {
		return "", 0, false
	}
	return name[:i], id, true
}
