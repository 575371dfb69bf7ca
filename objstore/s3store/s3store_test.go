package s3store

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/strandlog/strand/objstore"
	"github.com/strandlog/strand/objstore/storetest"
)

// testConfig is the S3 server the tests run against: STRAND_S3_ENDPOINT
// (http://127.0.0.1:PORT), STRAND_S3_ACCESS_KEY, STRAND_S3_SECRET_KEY.
// `make test` starts one (scripts/s3server) and sets them; without them the
// test is skipped, and CI fails if it was skipped (STRAND_S3_REQUIRED).
func testConfig(t *testing.T) Config {
	t.Helper()
	ep := os.Getenv("STRAND_S3_ENDPOINT")
	if ep == "" {
		if os.Getenv("STRAND_S3_REQUIRED") != "" {
			t.Fatal("STRAND_S3_REQUIRED is set but STRAND_S3_ENDPOINT is not: the S3 server did not start")
		}
		t.Skip("no S3 server: set STRAND_S3_ENDPOINT (make test starts one)")
	}
	if !strings.HasPrefix(ep, "http://127.0.0.1:") {
		t.Fatalf("STRAND_S3_ENDPOINT %q: tests talk only to 127.0.0.1", ep)
	}
	return Config{Endpoint: ep, AccessKey: os.Getenv("STRAND_S3_ACCESS_KEY"), SecretKey: os.Getenv("STRAND_S3_SECRET_KEY"), PathStyle: true, Region: "us-east-1"}
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
	_, err := Open(context.Background(), Config{Endpoint: "http://127.0.0.1:1", Bucket: "b", AccessKey: "a", SecretKey: "s", PathStyle: true, Region: "us-east-1"})
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
