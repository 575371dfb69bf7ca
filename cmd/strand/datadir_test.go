package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A second `strand serve` on a data directory in use exits non-zero at
// once, naming the holder's pid, instead of writing beside it and
// corrupting the raft logs; after kill -9 of the holder, a new start takes
// the directory without any manual unlock.
func TestServeRefusesDataDirInUse(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 1)
	dataDir := filepath.Join(c.dir, "data-1")
	other := "127.0.0.1:" + strconv.Itoa(freePorts(t, 1)[0])
	start := time.Now()
	_, stderr, err := runCLIResult(t, nil, "", "serve", "--id", "1", "--listen", other,
		"--peers", "1="+other, "--data-dir", dataDir)
	if err == nil {
		t.Fatalf("second serve on %s exited 0; stderr:\n%s", dataDir, stderr)
	}
	holder := fmt.Sprintf("in use by process %d", c.procs[0].cmd.Process.Pid)
	if !strings.Contains(stderr, holder) {
		t.Fatalf("second serve: %v; stderr does not say %q:\n%s", err, holder, stderr)
	}
	t.Logf("second serve refused after %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(stderr))

	c.procs[0].kill()
	c.start(0)
	waitFor(t, "restart after kill -9", 30*time.Second, func() error { return clusterReady(c.addrs, 1) })
}
