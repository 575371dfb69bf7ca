package s3store

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/strandlog/strand/objstore"
	"github.com/strandlog/strand/objstore/s3store/s3test"
	"github.com/strandlog/strand/objstore/storetest"
)

// server is the real S3 server the tests run against (s3test: versitygw
// on 127.0.0.1, or STRAND_S3_ENDPOINT).
var server *s3test.Server

func TestMain(m *testing.M) {
	s, stop := s3test.Start()
	server = s
	code := m.Run()
	stop()
	os.Exit(code)
}

// testConfig is the server's configuration, or skips (fails under
// STRAND_S3_REQUIRED) without one.
func testConfig(t *testing.T) Config {
	t.Helper()
	server.Require(t)
	return Config{Endpoint: server.Endpoint, AccessKey: server.AccessKey, SecretKey: server.SecretKey, PathStyle: true, Region: s3test.Region}
}

// newBucket makes an empty bucket for one test and removes it after.
func newBucket(t *testing.T, cfg Config) Config {
	t.Helper()
	cfg.Bucket = server.NewBucket(t)
	return cfg
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
