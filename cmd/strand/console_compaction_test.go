package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// The console of `strand dev` (compacted topics' gate open) lists a
// compacted topic's partitions under its table once a pass has run: the
// dirty ratio with the bytes on either side, the generation done with its
// time and cleaned-to offset, and the last pass's bytes read and written
// and its time, as describe prints them (issue 24, "the console shows
// them").
func TestConsoleCompactionInBrowser(t *testing.T) {
	skipShort(t)
	chromium := chromiumPath(t)
	port, admin, _ := startDev(t, 1)
	env := []string{"STRAND_BROKERS=127.0.0.1:" + strconv.Itoa(port+devNativePortOffset)}
	runCLI(t, env, "", "topic", "create", "users", "--partitions", "1", "--replication-factor", "1",
		"--config", "cleanup.policy=compact")
	runCLI(t, env, "alice:v1\nbob:v1\nalice:v2\n", "produce", "users", "-K", ":")
	url := "http://" + admin + "/"
	// Small batches: a pass compacts only below the leader's checkpoint,
	// written every 1024 raft entries.
	waitFor(t, "a compaction in /api/topics", 60*time.Second, func() error {
		runCLI(t, env, "", "bench", "produce", "--topic", "users", "--partitions", "1", "--replication-factor", "1",
			"--keys", "50", "--count", "1500", "--record-bytes", "100", "--batch-bytes", "200", "--linger", "0")
		return compactionGeneration(url, "users")
	})
	want := regexp.MustCompile(`<li data-compaction="users/0">partition 0 compaction: dirty ratio [01]\.\d\d \(dirty [^,]+, clean [^)]+\); ` +
		`generation [1-9]\d* at 20\d\d-[^ ]+Z, cleaned to offset [1-9][\d,]*; ` +
		`last pass read [1-9][\d.]* [KMG]?i?B, wrote [1-9][\d.]* [KMG]?i?B in \d[\d.]* (ms|s|min)`)
	// While a next pass is under way the record holds only its decision's
	// time, and the line names the generation done without one: render
	// again until no pass runs (the writes ended with the loop above).
	var dom string
	for range 10 {
		if dom = runChromium(t, chromium, url, "--dump-dom"); want.MatchString(dom) {
			return
		}
		time.Sleep(time.Second)
	}
	t.Errorf("rendered console lacks %s\nDOM:\n%s", want, dom)
}

// compactionGeneration is nil once /api/topics shows a compaction done on
// topic's partition 0.
func compactionGeneration(url, topic string) error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url + "api/topics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Topics []struct {
			Name       string `json:"name"`
			Partitions []struct {
				Compaction *struct {
					Generation uint64 `json:"generation"`
				} `json:"compaction"`
			} `json:"partitions"`
		} `json:"topics"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return err
	}
	for _, tp := range body.Topics {
		if tp.Name == topic && len(tp.Partitions) > 0 && tp.Partitions[0].Compaction != nil && tp.Partitions[0].Compaction.Generation > 0 {
			return nil
		}
	}
	return fmt.Errorf("no compaction of %s yet: %+v", topic, body.Topics)
}
