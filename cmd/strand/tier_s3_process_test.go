package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/objstore/s3store/s3test"
)

// s3Server is the real S3 server of the tests that tier to S3, started at
// the first one's need (s3test.Start) and stopped by TestMain.
var s3Server struct {
	once sync.Once
	srv  *s3test.Server
	stop func()
}

// s3Bucket answers the S3 server (skipping t without one, failing it under
// STRAND_S3_REQUIRED) and a new empty bucket on it.
func s3Bucket(t *testing.T) (*s3test.Server, string) {
	t.Helper()
	s3Server.once.Do(func() { s3Server.srv, s3Server.stop = s3test.Start() })
	s3Server.srv.Require(t)
	return s3Server.srv, s3Server.srv.NewBucket(t)
}

// stopS3Server stops the S3 server if a test started it.
func stopS3Server() {
	if s3Server.stop != nil {
		s3Server.stop()
	}
}

// TestTopicRecoverFromS3: recovery against a real S3 server (versitygw on
// 127.0.0.1). Three real nodes tier a topic to an S3 bucket (serve's
// --s3-* flags, as STRAND_S3_*) past its local retention, until every
// record of the test's is remote; all three data directories are wiped, a
// fresh cluster starts on the same bucket, and `strand topic recover
// --from-bucket` with the --s3-* flags (the environment's unset) restores
// the topic: every record produced reads back with its offset and value.
func TestTopicRecoverFromS3(t *testing.T) {
	srv, bucket := s3Bucket(t)
	store := map[string]string{"STRAND_S3_ENDPOINT": srv.Endpoint, "STRAND_S3_BUCKET": bucket, "STRAND_S3_REGION": s3test.Region,
		"STRAND_S3_ACCESS_KEY": srv.AccessKey, "STRAND_S3_SECRET_KEY": srv.SecretKey, "STRAND_S3_PATH_STYLE": "true"}
	c, env := startTieredClusterOn(t, store)
	const n = 300
	value := func(i int64) string { return fmt.Sprintf("s3-record-%04d-%s", i, strings.Repeat("x", 40)) }
	produce := func(from, to int64) {
		var lines strings.Builder
		for i := from; i < to; i++ {
			fmt.Fprintln(&lines, value(i))
		}
		runCLI(t, env, lines.String(), "produce", "tiered", "-p", "0")
	}
	// The test's records, then two more produces so that the segment
	// holding the last of them seals and is uploaded (the records past n
	// may stay local, and be lost: they are not the test's).
	produce(0, n)
	produce(n, n+100)
	produce(n+100, n+200)
	var remoteEnd int64
	waitFor(t, "every record of the test's remote", 60*time.Second, func() error {
		start, end, err := remoteLog(t, env, "tiered")
		if err == nil && (start != 0 || end < n) {
			err = fmt.Errorf("remote log [%d, %d), want [0, %d) at least", start, end, n)
		}
		remoteEnd = end
		return err
	})
	wipeAndRestart(t, c)
	for k := range store {
		os.Unsetenv(k) // t.Setenv restores them; the nodes have their own copy
	}
	out := runCLI(t, env, "", "topic", "recover", "tiered", "--from-bucket", "--s3-endpoint", srv.Endpoint, "--s3-bucket", bucket,
		"--s3-region", s3test.Region, "--s3-access-key", srv.AccessKey, "--s3-secret-key", srv.SecretKey, "--s3-path-style")
	t.Logf("strand topic recover tiered --from-bucket --s3-*:\n%s", out)
	m := regexp.MustCompile(`(?m)^partition 0: recovered offsets 0 to (\d+) `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("recover does not print partition 0's recovered offsets from 0:\n%s", out)
	}
	if last, _ := strconv.ParseInt(m[1], 10, 64); last+1 < remoteEnd {
		t.Fatalf("recovered offsets 0 to %d; [0, %d) were remote before the wipe", last, remoteEnd)
	}
	got := strings.Split(strings.TrimSpace(runCLI(t, env, "", "consume", "tiered", "-o", "beginning", "-e", "-f", `%o %s\n`)), "\n")
	if int64(len(got)) < remoteEnd {
		t.Fatalf("read back %d records from offset 0; [0, %d) were remote", len(got), remoteEnd)
	}
	for i, line := range got {
		if want := fmt.Sprintf("%d %s", i, value(int64(i))); line != want {
			t.Fatalf("record %d: %q, want %q", i, line, want)
		}
	}
}

// TestTopicRecoverBadBucket: `topic recover` given a bucket it cannot use
// (a wrong secret, an endpoint nobody answers, a bucket that does not
// exist, a directory that does not exist) fails saying what to check and
// that nothing was changed, and creates no topic.
func TestTopicRecoverBadBucket(t *testing.T) {
	srv, bucket := s3Bucket(t)
	c := startCluster(t, 1)
	env := []string{"STRAND_BROKERS=" + strings.Join(c.addrs, ",")}
	s3 := func(endpoint, bucket, secret string) []string {
		return []string{"--s3-endpoint", endpoint, "--s3-bucket", bucket, "--s3-region", s3test.Region,
			"--s3-access-key", srv.AccessKey, "--s3-secret-key", secret, "--s3-path-style"}
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"wrong secret", s3(srv.Endpoint, bucket, "wrong-"+srv.SecretKey), "check the access key and secret"},
		{"unreachable", s3("http://127.0.0.1:1", bucket, srv.SecretKey), "is http://127.0.0.1:1 the S3 endpoint, and is it up?"},
		{"no bucket", s3(srv.Endpoint, "strand-no-such-bucket", srv.SecretKey), `bucket "strand-no-such-bucket" does not exist`},
		{"no directory", []string{"--tier-dir", filepath.Join(t.TempDir(), "missing")}, "--tier-dir"},
	} {
		_, errOut, err := runCLIResult(t, env, "", append([]string{"topic", "recover", "lost", "--from-bucket"}, tc.args...)...)
		if err == nil || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "nothing was changed") {
			t.Errorf("%s: %v\n%s\nwant an error saying %q and that nothing was changed", tc.name, err, errOut, tc.want)
		}
	}
	if out := runCLI(t, env, "", "topic", "list"); strings.Contains(out, "lost") {
		t.Fatalf("a refused recover created the topic:\n%s", out)
	}
}
