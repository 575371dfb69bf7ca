package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// The console of `strand dev --nodes 4` shows a partition move in
// progress: the move (4 MiB at a catch-up throttle of 256 KiB/s, so it
// lasts about 16 s) appears in /api/cluster with its leader's progress and
// in the page rendered by headless Chromium as a row with the partition,
// from, to and the percent done; a screenshot goes to the artifact
// directory (console-move.png).
func TestConsoleShowsMoveInBrowser(t *testing.T) {
	skipShort(t)
	chromium := chromiumPath(t)
	port, admin, _ := startDev(t, 4, "--catchup-bytes-per-sec", "262144")
	seed := "127.0.0.1:" + strconv.Itoa(port+devNativePortOffset)
	env := []string{"STRAND_BROKERS=" + seed}
	runCLI(t, env, "", "topic", "create", "mv", "--partitions", "1", "--replication-factor", "3")
	runCLI(t, env, "", "bench", "produce", "--topic", "mv", "--count", "4096", "--record-bytes", "1024")
	replicas := metadataReplicas(t, seed, "mv")
	target := slices.Clone(replicas)
	for id := uint64(1); id <= 4; id++ {
		if !slices.Contains(replicas, id) {
			target = append(target, id)
		}
	}
	runCLI(t, env, "", "partition", "move", "mv/0", "--replicas", joinIDs(target), "--no-wait", "--allow-rf-change") // three replicas to four, on purpose
	url := "http://" + admin + "/"
	waitFor(t, "the move's progress in /api/cluster", 30*time.Second, func() error { return moveShown(url, "mv") })

	dom := runChromium(t, chromium, url, "--dump-dom")
	row := regexp.MustCompile(`<tr class="move"><td>mv/0</td><td>` + joinIDs(replicas) + `</td><td>` + joinIDs(target) +
		`</td><td>node [1-4]</td><td class="move-percent">\d+%</td><td>node \d \d+% \((learner|voter)\)</td></tr>`)
	if !row.MatchString(dom) {
		t.Fatalf("rendered console lacks the move row %s; DOM:\n%s", row, dom)
	}
	shot := filepath.Join(artifactDir(t), "console-move.png")
	runChromium(t, chromium, url, "--screenshot="+shot)
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Fatalf("no screenshot at %s: %v", shot, err)
	}
	t.Logf("console screenshot with a move in progress: %s", shot)
}

// metadataReplicas is partition 0's replica list of topic.
func metadataReplicas(t *testing.T, seed, topic string) []uint64 {
	t.Helper()
	c, err := clientlib.NewClient(clientlib.SeedAddresses(seed))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := c.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := findPartition(info, topic, 0)
	if !ok {
		t.Fatalf("no %s/0 in metadata", topic)
	}
	return p.Replicas
}

// moveShown is nil once /api/cluster lists a move of topic with its
// leader's progress.
func moveShown(url, topic string) error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url + "api/cluster")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Moves []struct {
			Topic   string  `json:"topic"`
			Leader  uint64  `json:"leader"`
			Percent float64 `json:"percent"`
		} `json:"moves"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return err
	}
	for _, m := range body.Moves {
		if m.Topic == topic && m.Leader != 0 && m.Percent >= 0 {
			return nil
		}
	}
	return fmt.Errorf("moves %+v: want one of %s with its leader's progress", body.Moves, topic)
}
