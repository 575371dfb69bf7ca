package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/engine/tier"
	"github.com/strandlog/strand/objstore"
)

// `strand topic recover NAME --from-bucket` (issue 27): rebuild a tiered
// topic whose every replica is gone from the object store it was tiered
// to (node/tier_recover.go, engine/tier's "Recovery"). The command reads
// the topic's descriptor from the bucket (names/NAME: its UUID,
// partitions, replication factor, configs), creates the topic with those
// and strand.remote.recovery.from=<UUID>, and waits until the leader of
// every partition restored it from the objects under that UUID; then it
// checks each partition restored the remote log the bucket it was given
// holds (the nodes read their own store: a different one restores
// nothing, which the command reports as an error, not as an empty
// recovery) and prints each partition's recovered offsets. A store that
// does not open fails before anything is created. The topic keeps its name,
// partition count, configuration and every uploaded record at its offset;
// it gets a new topic id and UUID (its objects stay under the old UUID).
// Records acknowledged but not yet uploaded are lost: the bucket never
// had them.

// recoverTimeout is topic recover's default --timeout: each partition's
// leader reads every object of its remote log once.
const recoverTimeout = 10 * time.Minute

// recoverFlags are `strand topic recover`'s flags.
type recoverFlags struct {
	fromBucket bool
	store      tierFlags
}

func (rf *recoverFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&rf.fromBucket, "from-bucket", false,
		"recover from the object store the cluster tiers to (required; name it as strand serve does, with --tier-dir or --s3-*). "+
			"Records acknowledged but not yet uploaded to it are lost")
	rf.store.registerStore(fs)
}

// topicRecover recovers topic name from the bucket (see above).
func topicRecover(ctx context.Context, c *clientlib.Client, w io.Writer, name string, rf recoverFlags) error {
	store, err := rf.store.open(ctx)
	if err != nil {
		return fmt.Errorf("topic recover %s: the object store did not open, nothing was changed: %w", name, err)
	}
	if store == nil {
		return usageError("topic recover --from-bucket: name the object store the cluster tiers to: --tier-dir DIR, or --s3-endpoint and --s3-bucket (as given to strand serve)")
	}
	info, err := c.Metadata(ctx)
	if err != nil {
		return err
	}
	for _, t := range info.Topics {
		if t.Name == name {
			return userErr(nil, "topic %s exists in the cluster; recover only a topic the cluster lost (delete it first to replace it by the bucket's copy)", name)
		}
	}
	d, err := readDescriptor(ctx, store, name)
	if err != nil {
		return err
	}
	if _, ok := metadata.ParseUUID(d.ID); !ok {
		return userErr(nil, "topic %s in the bucket is under %q, not a topic UUID (a static topic's objects): it cannot be recovered", name, d.ID)
	}
	want, err := bucketLogs(ctx, store, d)
	if err != nil {
		return fmt.Errorf("topic recover %s: listing its objects in the bucket, nothing was changed: %w", name, err)
	}
	configs := map[string]string{}
	for _, kv := range d.Configs {
		configs[kv[0]] = kv[1]
	}
	configs[metadata.ConfigRemoteStorageEnable] = "true"
	configs[metadata.ConfigRemoteRecoveryFrom] = d.ID
	if err := c.CreateTopic(ctx, name, d.Partitions, d.ReplicationFactor, configs); err != nil {
		return wrapErr(err, "creating topic %s to recover it (%s, replication factor %d); a cluster without an object store (strand serve --tier-dir or --s3-*) cannot", name,
			plural(int(d.Partitions), "partition"), d.ReplicationFactor)
	}
	fmt.Fprintf(w, "created topic %s: %s, replication factor %d, from the objects under topics/%s/ in the bucket\n",
		name, plural(int(d.Partitions), "partition"), d.ReplicationFactor, d.ID)
	tiers, err := waitRestored(ctx, c, name, d.Partitions)
	if err != nil {
		return err
	}
	var mismatch []string
	for p := range d.Partitions {
		t, w := tiers[p], want[p]
		// Retention may already have moved the start up (old records,
		// time passed since the loss); the end, and a start below the
		// bucket's, say the restore read another bucket.
		if t.RemoteStart < w[0] || t.RemoteEnd != w[1] {
			mismatch = append(mismatch, fmt.Sprintf("partition %d: the cluster restored offsets [%d, %d), the bucket given here holds [%d, %d)",
				p, t.RemoteStart, t.RemoteEnd, w[0], w[1]))
		}
	}
	if len(mismatch) > 0 {
		return fmt.Errorf("topic %s was created, but its nodes did not restore what this bucket holds (%s): the object store strand serve was given (--tier-dir or --s3-*) is not the one named here, or something else writes under topics/%s/. Delete the topic (strand topic delete %s), start the nodes on the store the lost cluster tiered to, and recover again",
			name, strings.Join(mismatch, "; "), d.ID, name)
	}
	for p := range d.Partitions {
		t := tiers[p]
		if t.RemoteEnd <= t.RemoteStart {
			fmt.Fprintf(w, "partition %d: nothing in the bucket; it starts empty at offset %d\n", p, t.RemoteStart)
			continue
		}
		fmt.Fprintf(w, "partition %d: recovered offsets %d to %d (%d offsets, %s in %s)\n", p, t.RemoteStart, t.RemoteEnd-1,
			t.RemoteEnd-t.RemoteStart, formatBytes(t.RemoteBytes), plural(int(t.RemoteSegments), "segment"))
	}
	fmt.Fprintln(w, "records acknowledged but not uploaded before the topic was lost are not recovered")
	return nil
}

// bucketLogs answers, per partition of the topic d describes, the remote
// log [start, end) its leader will restore from the bucket
// (tier.RemoteLog of the partition's listing, as node/tier_recover.go
// takes it), to check the cluster restored from the same bucket.
func bucketLogs(ctx context.Context, store objstore.Store, d tier.Descriptor) (map[int32][2]int64, error) {
	out := make(map[int32][2]int64, d.Partitions)
	for p := range d.Partitions {
		prefix := tier.PartitionPrefix(d.ID, p)
		objs, err := store.List(ctx, prefix+"/")
		if err != nil {
			return nil, err
		}
		var segs []tier.Segment
		var starts []int64
		for _, o := range objs {
			if seg, ok := tier.ParseSegmentKey(prefix, o.Key); ok {
				segs = append(segs, seg)
			} else if start, ok := tier.ParseStartKey(prefix, o.Key); ok {
				starts = append(starts, start)
			}
		}
		chain, start := tier.RemoteLog(segs, starts)
		end := start
		if len(chain) > 0 {
			end = chain[len(chain)-1].End
		}
		out[p] = [2]int64{start, end}
	}
	return out, nil
}

// readDescriptor reads topic name's descriptor from the bucket.
func readDescriptor(ctx context.Context, store objstore.Store, name string) (tier.Descriptor, error) {
	key := tier.DescriptorKey(name)
	b, err := store.Get(ctx, key, 0, -1)
	if objstore.IsNotFound(err) {
		return tier.Descriptor{}, userErr(nil, "no topic %s in the bucket (no object %s): only a topic with remote.storage.enable=true whose leaders uploaded is there; check the name and the bucket", name, key)
	}
	if err != nil {
		return tier.Descriptor{}, fmt.Errorf("reading %s from the bucket: %w", key, err)
	}
	d, err := tier.DecodeDescriptor(b)
	if err != nil {
		return tier.Descriptor{}, fmt.Errorf("%s in the bucket: %w", key, err)
	}
	if d.Name != name {
		return tier.Descriptor{}, fmt.Errorf("%s in the bucket names topic %q", key, d.Name)
	}
	return d, nil
}

// waitRestored polls the partitions' leaders until each reports an active
// remote log (its TIER_RESTORE applied), and answers their tiers.
func waitRestored(ctx context.Context, c *clientlib.Client, name string, partitions int32) (map[int32]clientlib.PartitionTier, error) {
	ps := make([]int32, partitions)
	for i := range ps {
		ps[i] = int32(i)
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		out := map[int32]clientlib.PartitionTier{}
		logs, err := c.DescribePartitionLogs(ctx, name, ps)
		last = err
		for _, l := range logs {
			if l.Err == nil && l.Tier != nil && l.Tier.RemoteStart >= 0 {
				out[l.Partition] = *l.Tier
			} else if l.Err != nil {
				last = fmt.Errorf("partition %d: %w", l.Partition, l.Err)
			}
		}
		if len(out) == int(partitions) {
			return out, nil
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = fmt.Errorf("%d of %d partitions restored", len(out), partitions)
			}
			return nil, fmt.Errorf("topic %s was created but not every partition was restored from the bucket in time (%w); its leaders keep trying: run `strand topic describe %s` to follow (a partition is restored once its tiers line shows a remote log)",
				name, errors.Join(ctx.Err(), last), name)
		case <-tick.C:
		}
	}
}
