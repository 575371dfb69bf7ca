package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chromiumPath is Debian's headless-capable Chromium (package chromium);
// STRAND_CHROMIUM overrides it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("STRAND_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err != nil {
		msg := fmt.Sprintf("headless Chromium not found at %s (Debian: apt-get install chromium; or set STRAND_CHROMIUM): %v", path, err)
		if os.Getenv("STRAND_REQUIRE_BROWSER") == "1" {
			t.Fatalf("%s; STRAND_REQUIRE_BROWSER=1 forbids skipping", msg)
		}
		t.Skip(msg + "; set STRAND_REQUIRE_BROWSER=1 to fail instead")
	}
	return path
}

// runChromium runs headless Chromium on url with extra flags, giving the
// page's scripts 5 s of virtual time, and returns its stdout.
func runChromium(t *testing.T, bin, url string, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000", "--window-size=1280,1400"}, extra...)
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %s: %v\nstderr:\n%s", strings.Join(extra, " "), err, stderr.String())
	}
	return string(out)
}

// artifactDir is where tests leave files for people: $STRAND_ARTIFACTS
// (CI keeps it), else a temporary directory.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("STRAND_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The console of `strand dev`, opened in headless Chromium, shows the
// topic with its partitions' leaders and a group's lag once its scripts
// ran; a screenshot goes to the artifact directory.
func TestConsoleInBrowser(t *testing.T) {
	skipShort(t)
	chromium := chromiumPath(t)
	port, admin, logPath := startDev(t, 3)
	if b, _ := os.ReadFile(logPath); !strings.Contains(string(b), "console http://"+admin+"/") {
		t.Fatalf("banner does not name the console at %s:\n%s", admin, b)
	}
	env := []string{"STRAND_BROKERS=127.0.0.1:" + strconv.Itoa(port+devNativePortOffset)}
	runCLI(t, env, "", "topic", "create", "clicks", "--partitions", "2", "--replication-factor", "3")
	// Both runs to partition 0: the group commits only what it printed,
	// so records the partitioner put on the other partition would show no
	// lag (as Kafka's tools show none without a committed offset).
	runCLI(t, env, "one\ntwo\nthree\nfour\n", "produce", "clicks", "-p", "0")
	runCLI(t, env, "", "consume", "clicks", "--group", "dashboard", "--from", "earliest", "--until-end")
	runCLI(t, env, "five\nsix\nseven\n", "produce", "clicks", "-p", "0")
	url := "http://" + admin + "/"
	waitFor(t, "group lag in /api/groups", 30*time.Second, func() error { return groupLag(url, "dashboard", 3) })

	dom := runChromium(t, chromium, url, "--dump-dom")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`data-rendered="true"`),
		regexp.MustCompile(`data-topic="clicks"`),
		regexp.MustCompile(`data-partition="clicks/0"><td>0</td><td class="leader">node [1-3]</td>`),
		regexp.MustCompile(`data-partition="clicks/1"><td>1</td><td class="leader">node [1-3]</td>`),
		regexp.MustCompile(`data-group="dashboard"`),
		regexp.MustCompile(`<b class="lag-records">3</b>`),
		regexp.MustCompile(`<svg class="chart"[^>]*>.*<polyline class="records"`),
	} {
		if !want.MatchString(dom) {
			t.Errorf("rendered console lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
	shot := filepath.Join(artifactDir(t), "console.png")
	runChromium(t, chromium, url, "--screenshot="+shot)
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Fatalf("no screenshot at %s: %v", shot, err)
	}
	t.Logf("console screenshot: %s", shot)
}

// startDev starts `strand dev` with nodes nodes, its console on a free
// admin port and extra flags, waits for its ready line and stops it when
// the test ends (printing its output if the test failed). It returns the
// base port, the admin address and the log's path.
func startDev(t *testing.T, nodes int, extra ...string) (port int, admin, logPath string) {
	t.Helper()
	port = freeConsecutivePorts(t, nodes)
	admin = "127.0.0.1:" + strconv.Itoa(freePorts(t, 1)[0])
	logPath = filepath.Join(t.TempDir(), "dev.log")
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"dev", "--nodes", strconv.Itoa(nodes), "--base-port", strconv.Itoa(port),
		"--admin-listen", admin, "--quiet"}, extra...)
	cmd := exec.Command(strandBinary(t), args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		out.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("strand dev output:\n%s", b)
		}
	})
	waitFor(t, "strand dev ready", 30*time.Second, func() error {
		if b, _ := os.ReadFile(logPath); !strings.Contains(string(b), "\nready") {
			return fmt.Errorf("no ready line yet")
		}
		return nil
	})
	return port, admin, logPath
}

// groupLag is nil once /api/groups shows group with lag records.
func groupLag(url, group string, lag int64) error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url + "api/groups")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Groups []struct {
			ID         string `json:"id"`
			LagRecords int64  `json:"lag_records"`
		} `json:"groups"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return err
	}
	for _, g := range body.Groups {
		if g.ID == group && g.LagRecords == lag {
			return nil
		}
	}
	return fmt.Errorf("groups %+v: want %s with lag %d", body.Groups, group, lag)
}
