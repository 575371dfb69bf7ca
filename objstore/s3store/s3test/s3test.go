// Package s3test starts the real S3 server tests run the S3 store
// against, for objstore/s3store's tests and cmd/strand's real-process
// tests alike: STRAND_S3_ENDPOINT (http://127.0.0.1:PORT, with
// STRAND_S3_ACCESS_KEY and STRAND_S3_SECRET_KEY) when set; otherwise
// Versity's S3 gateway (versitygw, posix backend) on 127.0.0.1 over a
// temporary directory, from $STRAND_VERSITYGW or the module's
// bin/versitygw-* that `make test-real` installs. With neither, a test
// that needs it skips, and fails when STRAND_S3_REQUIRED is set (CI sets
// it).
package s3test

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
)

// Region is the region tests address the server's buckets in.
const Region = "us-east-1"

// Server is the S3 server a test binary's tests share.
type Server struct {
	// Endpoint is its URL (empty: none, Why says why).
	Endpoint string
	// AccessKey and SecretKey are its credentials.
	AccessKey, SecretKey string
	// Why says why there is no server.
	Why string
	// buckets numbers the buckets NewBucket made.
	buckets atomic.Int64
}

// Start answers the server (see the package comment) and how to stop what
// it started; call it from TestMain.
func Start() (*Server, func()) {
	s := &Server{}
	if ep := os.Getenv("STRAND_S3_ENDPOINT"); ep != "" {
		s.Endpoint, s.AccessKey, s.SecretKey = ep, os.Getenv("STRAND_S3_ACCESS_KEY"), os.Getenv("STRAND_S3_SECRET_KEY")
		return s, func() {}
	}
	bin := os.Getenv("STRAND_VERSITYGW")
	if bin == "" {
		bin = installed()
		if bin == "" {
			s.Why = "no S3 server: set STRAND_S3_ENDPOINT or STRAND_VERSITYGW, or run make test-real (it installs bin/versitygw-*)"
			return s, func() {}
		}
	}
	dir, err := os.MkdirTemp("", "strand-s3-")
	if err != nil {
		s.Why = err.Error()
		return s, func() {}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Why = err.Error()
		return s, func() { os.RemoveAll(dir) }
	}
	addr := l.Addr().String()
	l.Close()
	s.AccessKey, s.SecretKey = "strandtest", "strandtest-secret-key"
	cmd := exec.Command(bin, "--access", s.AccessKey, "--secret", s.SecretKey, "--port", addr, "posix", dir)
	logf, _ := os.Create(filepath.Join(dir, "..", filepath.Base(dir)+".log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		s.Why = fmt.Sprintf("start %s: %v", bin, err)
		return s, func() { os.RemoveAll(dir) }
	}
	stop := func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.RemoveAll(dir)
		if logf != nil {
			logf.Close()
			os.Remove(logf.Name())
		}
	}
	// Wait (at most 20 s) until it answers HTTP.
	for range 200 {
		if resp, err := http.Get("http://" + addr + "/"); err == nil {
			resp.Body.Close()
			s.Endpoint = "http://" + addr
			return s, stop
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.Why = fmt.Sprintf("%s did not answer on %s within 20 s (log: %s)", bin, addr, logf.Name())
	return s, stop
}

// installed answers the newest bin/versitygw-* of the module the working
// directory is in ("" if none).
func installed() string {
	dir, err := os.Getwd()
	for err == nil {
		if _, serr := os.Stat(filepath.Join(dir, "go.mod")); serr == nil {
			found, _ := filepath.Glob(filepath.Join(dir, "bin", "versitygw-*"))
			if len(found) == 0 {
				return ""
			}
			return found[len(found)-1]
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
	return ""
}

// Require skips t (fails it under STRAND_S3_REQUIRED) when there is no
// server, and fails it when the server is not on 127.0.0.1.
func (s *Server) Require(t testing.TB) {
	t.Helper()
	if s.Endpoint == "" {
		if os.Getenv("STRAND_S3_REQUIRED") != "" {
			t.Fatalf("STRAND_S3_REQUIRED is set, but %s", s.Why)
		}
		t.Skip(s.Why)
	}
	if !strings.HasPrefix(s.Endpoint, "http://127.0.0.1:") {
		t.Fatalf("S3 endpoint %q: tests talk only to 127.0.0.1", s.Endpoint)
	}
}

// Client is an S3 client of the server with its credentials.
func (s *Server) Client(t testing.TB) *minio.Client {
	t.Helper()
	u, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Region: Region, BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// NewBucket makes an empty bucket for one test (Require first), emptied
// and removed after it, and answers its name.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("strand-test-%d-%d", os.Getpid(), s.buckets.Add(1))
	ctx := context.Background()
	admin := s.Client(t)
	if err := admin.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: Region}); err != nil {
		t.Fatalf("make bucket %s: %v", name, err)
	}
	t.Cleanup(func() {
		for obj := range admin.ListObjects(ctx, name, minio.ListObjectsOptions{Recursive: true}) {
			if obj.Err == nil {
				admin.RemoveObject(ctx, name, obj.Key, minio.RemoveObjectOptions{})
			}
		}
		admin.RemoveBucket(ctx, name)
	})
	return name
}
