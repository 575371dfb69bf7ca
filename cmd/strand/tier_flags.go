package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/objstore"
	"github.com/strandlog/strand/objstore/dirstore"
	"github.com/strandlog/strand/objstore/s3store"
)

// tierFlags are serve's object store flags (issue 27): the bucket tiered
// topics (remote.storage.enable=true) upload their sealed segments to, a
// local directory or an S3 bucket. Each is also STRAND_<FLAG>, which keeps
// the secret key off the command line (STRAND_S3_SECRET_KEY).
type tierFlags struct {
	dir                  string
	endpoint, bucket     string
	region               string
	accessKey, secretKey string
	pathStyle            bool
	// uploadRate is node.Config.TierUploadBytesPerSec.
	uploadRate int64
	// unfinished sets node.Config.TieredStorageUnfinished (hidden: tiered
	// storage is not finished; for tests of the parts built).
	unfinished bool
}

// tierOpenTimeout bounds the check of an S3 bucket at start.
const tierOpenTimeout = 30 * time.Second

func (t *tierFlags) register(fs *pflag.FlagSet) {
	t.registerStore(fs)
	fs.Int64Var(&t.uploadRate, "tier-upload-bytes-per-sec", 0,
		"bound the bytes per second this node uploads to the object store, all tiered partitions together; produce and fetch are not slowed (0: unlimited)")
	fs.BoolVar(&t.unfinished, "tiered-storage-unfinished", false, "allow remote.storage.enable=true although tiered storage is unfinished")
	_ = fs.MarkHidden("tiered-storage-unfinished")
}

// registerStore adds the flags naming the object store (serve's, and
// `topic recover`'s, which reads the same bucket).
func (t *tierFlags) registerStore(fs *pflag.FlagSet) {
	fs.StringVar(&t.dir, "tier-dir", "", "object store of tiered topics: an existing directory (every node of the cluster must name the same store; default: none, remote.storage.enable=true refused)")
	fs.StringVar(&t.endpoint, "s3-endpoint", "", "object store of tiered topics: an S3 server's URL, http(s)://HOST[:PORT] (with --s3-bucket)")
	fs.StringVar(&t.bucket, "s3-bucket", "", "the S3 bucket of tiered topics; it must exist")
	fs.StringVar(&t.region, "s3-region", "", "the S3 bucket's region (default: asked of the server)")
	fs.StringVar(&t.accessKey, "s3-access-key", "", "S3 access key (default: AWS_ACCESS_KEY_ID or MINIO_ROOT_USER)")
	fs.StringVar(&t.secretKey, "s3-secret-key", "", "S3 secret key; prefer STRAND_S3_SECRET_KEY (default: AWS_SECRET_ACCESS_KEY or MINIO_ROOT_PASSWORD)")
	fs.BoolVar(&t.pathStyle, "s3-path-style", false, "address the bucket as a path (/BUCKET/KEY), as self-hosted S3 servers need")
}

// s3 reports whether any S3 flag is set.
func (t *tierFlags) s3() bool {
	return t.endpoint != "" || t.bucket != "" || t.region != "" || t.accessKey != "" || t.secretKey != "" || t.pathStyle
}

// open answers the object store the flags name (nil: none), checked: a
// directory that exists, a bucket that exists and the credentials may
// list. A wrong flag fails here, at start, saying what to fix.
func (t *tierFlags) open(ctx context.Context) (objstore.Store, error) {
	switch {
	case t.uploadRate < 0:
		return nil, usageError("--tier-upload-bytes-per-sec must not be negative (0: unlimited)")
	case t.dir != "" && t.s3():
		return nil, usageError("--tier-dir and --s3-* each name an object store: give one")
	case t.dir != "":
		s, err := dirstore.Open(t.dir)
		if err != nil {
			return nil, fmt.Errorf("--tier-dir: %w", err)
		}
		return s, nil
	case t.s3():
		if t.endpoint == "" || t.bucket == "" {
			return nil, usageError("--s3-endpoint and --s3-bucket are both needed for an S3 object store")
		}
		if (t.accessKey == "") != (t.secretKey == "") {
			return nil, usageError("--s3-access-key and --s3-secret-key go together (or set neither: the environment's AWS_* or MINIO_ROOT_* credentials)")
		}
		ctx, cancel := context.WithTimeout(ctx, tierOpenTimeout)
		defer cancel()
		s, err := s3store.Open(ctx, s3store.Config{Endpoint: t.endpoint, Bucket: t.bucket, Region: t.region,
			AccessKey: t.accessKey, SecretKey: t.secretKey, PathStyle: t.pathStyle})
		if err != nil {
			return nil, fmt.Errorf("--s3-bucket %s at %s: %w", t.bucket, t.endpoint, err)
		}
		return s, nil
	}
	return nil, nil
}
