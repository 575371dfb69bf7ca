package s3store

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/strandlog/strand/objstore"
	"github.com/strandlog/strand/objstore/storetest"
)

// The S3 server the tests run against: STRAND_S3_ENDPOINT
// (http://127.0.0.1:PORT) with STRAND_S3_ACCESS_KEY and STRAND_S3_SECRET_KEY
// when set; otherwise TestMain starts a real S3 server of its own, Versity's
// S3 gateway (versitygw, posix backend) on 127.0.0.1 over a temporary
// directory, from $STRAND_VERSITYGW or the module's bin/versitygw-* that
// `make test` installs. With neither the tests skip, and fail when
// STRAND_S3_REQUIRED is set (CI sets it).
var server struct {
	endpoint, access, secret string
	why                      string // why there is none
}

func TestMain(m *testing.M) {
	stop := startServer()
	code := m.Run()
	stop()
	os.Exit(code)
}

// startServer fills server and answers how to stop what it started.
func startServer() (stop func()) {
	if ep := os.Getenv("STRAND_S3_ENDPOINT"); ep != "" {
		server.endpoint, server.access, server.secret = ep, os.Getenv("STRAND_S3_ACCESS_KEY"), os.Getenv("STRAND_S3_SECRET_KEY")
		return func() {}
	}
	bin := os.Getenv("STRAND_VERSITYGW")
	if bin == "" {
		found, _ := filepath.Glob("../../bin/versitygw-*")
		if len(found) == 0 {
			server.why = "no S3 server: set STRAND_S3_ENDPOINT or STRAND_VERSITYGW, or run make test (it installs bin/versitygw-*)"
			return func() {}
		}
		bin = found[len(found)-1]
	}
	dir, err := os.MkdirTemp("", "strand-s3-")
	if err != nil {
		server.why = err.Error()
		return func() {}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		server.why = err.Error()
		return func() { os.RemoveAll(dir) }
	}
	addr := l.Addr().String()
	l.Close()
	server.access, server.secret = "strandtest", "strandtest-secret-key"
	cmd := exec.Command(bin, "--access", server.access, "--secret", server.secret, "--port", addr, "posix", dir)
	logf, _ := os.Create(filepath.Join(dir, "..", filepath.Base(dir)+".log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		server.why = fmt.Sprintf("start %s: %v", bin, err)
		return func() { os.RemoveAll(dir) }
	}
	stop = func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.RemoveAll(dir)
		if logf != nil {
			logf.Close()
			os.Remove(logf.Name())
		}
	}
	// Wait (at most 20 s) until it answers HTTP.
	for i := 0; i < 200; i++ {
		if resp, err := http.Get("http://" + addr + "/"); err == nil {
			resp.Body.Close()
			server.endpoint = "http://" + addr
			return stop
		}
		time.Sleep(100 * time.Millisecond)
	}
	server.why = fmt.Sprintf("%s did not answer on %s within 20 s (log: %s)", bin, addr, logf.Name())
	return stop
}

// testConfig is the server's configuration, or skips (fails under
// STRAND_S3_REQUIRED) without one.
func testConfig(t *testing.T) Config {
	t.Helper()
	if server.endpoint == "" {
		if os.Getenv("STRAND_S3_REQUIRED") != "" {
			t.Fatalf("STRAND_S3_REQUIRED is set, but %s", server.why)
		}
		t.Skip(server.why)
	}
	if !strings.HasPrefix(server.endpoint, "http://127.0.0.1:") {
		t.Fatalf("S3 endpoint %q: tests talk only to 127.0.0.1", server.endpoint)
	}
	return Config{Endpoint: server.endpoint, AccessKey: server.access, SecretKey: server.secret, PathStyle: true, Region: "us-east-1"}
}

var buckets atomic.Int64

// newBucket makes an empty bucket for one test and removes it after.
func newBucket(t *testing.T, cfg Config) Config {
	t.Helper()
	cfg.Bucket = fmt.Sprintf("strand-test-%d-%d", os.Getpid(), buckets.Add(1))
	ctx := context.Background()
	admin := adminClient(t, cfg)
	if err := admin.MakeBucket(ctx, cfg.Bucket, minio.MakeBucketOptions{Region: cfg.Region}); err != nil {
		t.Fatalf("make bucket %s: %v", cfg.Bucket, err)
	}
	t.Cleanup(func() {
		for obj := range admin.ListObjects(ctx, cfg.Bucket, minio.ListObjectsOptions{Recursive: true}) {
			if obj.Err == nil {
				admin.RemoveObject(ctx, cfg.Bucket, obj.Key, minio.RemoveObjectOptions{})
			}
		}
		admin.RemoveBucket(ctx, cfg.Bucket)
	})
	return cfg
}

func adminClient(t *testing.T, cfg Config) *minio.Client {
	t.Helper()
	u, err := url.Parse(cfg.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newClient(u, cfg, credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	cfg := testConfig(t)
	storetest.Run(t, func(t *testing.T) objstore.Store {
		s, err := Open(context.Background(), newBucket(t, cfg))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestMissingBucket(t *testing.T) {
	cfg := testConfig(t)
	cfg.Bucket = "strand-no-such-bucket"
	_, err := Open(context.Background(), cfg)
	if objstore.KindOf(err) != objstore.KindNoBucket {
		t.Fatalf("open of a missing bucket: %v", err)
	}
}

func TestBadCredentials(t *testing.T) {
	cfg := newBucket(t, testConfig(t))
	cfg.SecretKey = "wrong-" + cfg.SecretKey
	_, err := Open(context.Background(), cfg)
	if objstore.KindOf(err) != objstore.KindDenied {
		t.Fatalf("open with a wrong secret: %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	_, err := Open(context.Background(), Config{Endpoint: "http://127.0.0.1:1", Bucket: "strand-bucket", AccessKey: "a", SecretKey: "s", PathStyle: true, Region: "us-east-1"})
	if objstore.KindOf(err) != objstore.KindUnavailable {
		t.Fatalf("open of an unreachable endpoint: %v", err)
	}
}

// TestMultipartWhole: an object over minio-go's multipart threshold is
// stored whole and read back in ranges.
func TestMultipartWhole(t *testing.T) {
	s, err := Open(context.Background(), newBucket(t, testConfig(t)))
	if err != nil {
		t.Fatal(err)
	}
	const size = 20 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 31)
	}
	if err := s.Put(context.Background(), "big", strings.NewReader(string(data)), size); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(context.Background(), "big", size-100, 200)
	if err != nil || string(got) != string(data[size-100:]) {
		t.Fatalf("tail range: %d bytes, %v", len(got), err)
	}
}

func TestInvalidBucketName(t *testing.T) {
	cfg := testConfig(t)
	cfg.Bucket = "b"
	_, err := Open(context.Background(), cfg)
	if objstore.KindOf(err) != objstore.KindInvalid {
		t.Fatalf("open of a bucket named %q: %v", cfg.Bucket, err)
	}
}
