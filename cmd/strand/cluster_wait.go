package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// clusterWaitPoll is how often cluster wait asks again.
const clusterWaitPoll = 100 * time.Millisecond

// cmdClusterWait runs `strand cluster wait`: it returns once the cluster
// at --brokers accepts a connection (with the SASL credentials given, so
// a new cluster's bootstrap administrator exists), has a metadata leader,
// and every partition has a leader; it is what a script runs between
// starting `strand serve … &` and its first command. Until then every
// failure (connection refused, authentication refused, no leader yet) is
// retried; at --timeout it fails with the last one.
func cmdClusterWait(args []string, stdout io.Writer) error {
	fs := newFlags("cluster wait")
	var cf clientFlags
	cf.register(fs, 30*time.Second)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("cluster wait takes no arguments, got %q", fs.Args())
	}
	deadline := time.Now().Add(cf.timeout)
	var last error
	for attempt := 0; attempt < 100000 && time.Now().Before(deadline); attempt++ {
		info, err := clusterWaitOnce(&cf, deadline)
		if err == nil {
			fmt.Fprintf(stdout, "ready: %s, metadata leader %d\n", plural(len(info.Nodes), "node"), info.ControllerID)
			return nil
		}
		last = err
		time.Sleep(min(clusterWaitPoll, time.Until(deadline)))
	}
	return userErr(last, "cluster not ready after %v: %s", cf.timeout, userMessage(last))
}

// clusterWaitOnce asks for the cluster's metadata once and says what is
// still missing.
func clusterWaitOnce(cf *clientFlags, deadline time.Time) (clientlib.ClusterInfo, error) {
	c, err := cf.client(clientlib.MaxRetries(0))
	if err != nil {
		return clientlib.ClusterInfo{}, err
	}
	defer c.Close()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	info, err := c.Metadata(ctx)
	switch {
	case err != nil:
		return info, err
	case info.ControllerID == 0:
		return info, fmt.Errorf("no metadata leader yet")
	}
	for _, t := range info.Topics {
		for _, p := range t.Partitions {
			if p.LeaderID == 0 {
				return info, fmt.Errorf("partition %s/%d has no leader yet", t.Name, p.Partition)
			}
		}
	}
	return info, nil
}
