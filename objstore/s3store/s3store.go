// Package s3store is an objstore.Store on an S3-compatible bucket (AWS S3,
// MinIO, SeaweedFS, Ceph RGW, R2, GCS's XML API), through minio-go: a
// small, well-kept client that speaks only S3's API, signs v4, streams
// multipart uploads from a reader of known size and retries transient
// failures itself (the AWS SDK brings a far larger dependency tree for the
// same five calls; gocloud.dev/blob adds a portability layer over it that
// Strand's own Store interface already is).
//
// Puts are whole: a single PUT, or for large objects a multipart upload
// that S3 shows only once completed, so a crash or a failed part leaves
// the old object or none. Errors map to objstore kinds by S3's error
// codes: NoSuchKey → KindNotFound, NoSuchBucket → KindNoBucket,
// AccessDenied and the credential errors → KindDenied, InvalidRange →
// KindRange (an offset exactly at the end reads as no bytes, as in the
// contract), everything else (5xx, SlowDown, connection errors, timeouts)
// → KindUnavailable.
package s3store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/strandlog/strand/objstore"
)

// Config names a bucket and how to reach it.
type Config struct {
	// Endpoint is the server's URL: http://127.0.0.1:8333 or
	// https://s3.eu-west-1.amazonaws.com. Its scheme decides TLS.
	Endpoint string
	// Bucket is the bucket's name; it must exist.
	Bucket string
	// Region is the bucket's region; empty lets the client ask.
	Region string
	// AccessKey and SecretKey are the static credentials; both empty
	// takes them from the environment (AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY, or MINIO_ROOT_USER/PASSWORD).
	AccessKey, SecretKey string
	// PathStyle addresses the bucket as a path (/bucket/key), which
	// self-hosted servers need; false lets the client choose.
	PathStyle bool
}

// Store is an S3 bucket as an objstore.Store. It is safe for concurrent
// use.
type Store struct {
	client *minio.Client
	bucket string
}

// Open connects to cfg's bucket and checks it exists and the credentials
// may read it, so a wrong name, endpoint or key fails at start with what
// to fix, not at the first upload.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, objstore.Errorf("open", cfg.Endpoint, objstore.KindInvalid,
			fmt.Errorf("endpoint %q is not an http:// or https:// URL with a host", cfg.Endpoint))
	}
	if err := s3utils.CheckValidBucketNameStrict(cfg.Bucket); err != nil {
		return nil, objstore.Errorf("open", cfg.Bucket, objstore.KindInvalid, fmt.Errorf("bucket name %q: %w", cfg.Bucket, err))
	}
	var creds *credentials.Credentials
	if cfg.AccessKey != "" || cfg.SecretKey != "" {
		creds = credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, "")
	} else {
		creds = credentials.NewChainCredentials([]credentials.Provider{&credentials.EnvAWS{}, &credentials.EnvMinio{}})
	}
	client, err := newClient(u, cfg, creds)
	if err != nil {
		return nil, objstore.Errorf("open", cfg.Endpoint, objstore.KindInvalid, err)
	}
	s := &Store{client: client, bucket: cfg.Bucket}
	ok, err := client.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		err = s.fail("open", cfg.Bucket, err)
		switch objstore.KindOf(err) {
		case objstore.KindDenied:
			err = fmt.Errorf("%w (check the access key and secret, and that the bucket's policy lets them list it)", err)
		case objstore.KindUnavailable:
			err = fmt.Errorf("%w (is %s the S3 endpoint, and is it up?)", err, cfg.Endpoint)
		}
		return nil, err
	}
	if !ok {
		return nil, objstore.Errorf("open", cfg.Bucket, objstore.KindNoBucket,
			fmt.Errorf("bucket %q does not exist at %s: create it first", cfg.Bucket, cfg.Endpoint))
	}
	return s, nil
}

// Put uploads size bytes of r under key; a reader that does not hold
// exactly size bytes fails the upload and stores nothing.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := objstore.ValidKey("put", key); err != nil {
		return err
	}
	if size < 0 {
		return objstore.Errorf("put", key, objstore.KindInvalid, fmt.Errorf("size %d", size))
	}
	body := &exact{r: r, left: size}
	_, err := s.client.PutObject(ctx, s.bucket, key, body, size, minio.PutObjectOptions{
		ContentType:    "application/octet-stream",
		SendContentMd5: true,
	})
	if body.err != nil {
		return objstore.Errorf("put", key, objstore.KindInvalid, body.err)
	}
	if err != nil {
		return s.fail("put", key, err)
	}
	return nil
}

// exact passes size bytes of r and fails when r holds fewer or more, so a
// mismatched body is refused here rather than sent short.
type exact struct {
	r    io.Reader
	left int64
	err  error
}

func (e *exact) Read(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	if e.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	switch {
	case err == io.EOF && e.left > 0:
		e.err = fmt.Errorf("reader ended %d bytes short of its size", e.left)
		return n, e.err
	case err != nil && err != io.EOF:
		return n, err
	case e.left == 0:
		// Look for a byte past the size before the client sends the
		// body's last bytes, so the upload fails rather than completes.
		var one [1]byte
		if m, _ := io.ReadFull(e.r, one[:]); m > 0 {
			e.err = errors.New("reader holds more bytes than its size")
			return 0, e.err
		}
	}
	return n, nil
}

// Get reads up to n bytes (n < 0: to the end) of key's object from off.
func (s *Store) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := objstore.ValidKey("get", key); err != nil {
		return nil, err
	}
	if err := objstore.ValidRange(key, off, n); err != nil {
		return nil, err
	}
	if n == 0 || off > 0 {
		// S3 answers InvalidRange for a range at or past the end, and a
		// zero-length range cannot be asked: cut it against the size.
		obj, err := s.Stat(ctx, key)
		if err != nil {
			return nil, objstore.Errorf("get", key, objstore.KindOf(err), errors.Unwrap(err))
		}
		start, end, err := objstore.CutRange(key, obj.Size, off, n)
		if err != nil {
			return nil, err
		}
		if start == end {
			return []byte{}, nil
		}
		off, n = start, end-start
	}
	opts := minio.GetObjectOptions{}
	if off > 0 || n > 0 {
		end := int64(0) // to the end
		if n > 0 {
			end = off + n - 1
		}
		if err := opts.SetRange(off, end); err != nil {
			return nil, objstore.Errorf("get", key, objstore.KindInvalid, err)
		}
	}
	obj, err := s.client.GetObject(ctx, s.bucket, key, opts)
	if err != nil {
		return nil, s.fail("get", key, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		return nil, s.fail("get", key, err)
	}
	return b, nil
}

// Stat answers key's object and its size.
func (s *Store) Stat(ctx context.Context, key string) (objstore.Object, error) {
	if err := objstore.ValidKey("stat", key); err != nil {
		return objstore.Object{}, err
	}
	info, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return objstore.Object{}, s.fail("stat", key, err)
	}
	return objstore.Object{Key: key, Size: info.Size}, nil
}

// List answers the objects whose keys begin with prefix, sorted by key.
func (s *Store) List(ctx context.Context, prefix string) ([]objstore.Object, error) {
	if err := objstore.ValidPrefix(prefix); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the listing goroutine if we stop early
	var out []objstore.Object
	for info := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if info.Err != nil {
			return nil, s.fail("list", prefix, info.Err)
		}
		out = append(out, objstore.Object{Key: info.Key, Size: info.Size})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Delete removes key's object; a missing object is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := objstore.ValidKey("delete", key); err != nil {
		return err
	}
	if err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		if objstore.KindOf(s.fail("delete", key, err)) == objstore.KindNotFound {
			return nil
		}
		return s.fail("delete", key, err)
	}
	return nil
}

// fail maps a minio-go error to an objstore.Error by S3's error code.
func (s *Store) fail(op, key string, err error) error {
	kind := objstore.KindUnavailable
	switch minio.ToErrorResponse(err).Code {
	case "NoSuchKey", "NotFound":
		kind = objstore.KindNotFound
	case "NoSuchBucket":
		kind = objstore.KindNoBucket
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "AllAccessDisabled":
		kind = objstore.KindDenied
	case "InvalidRange":
		kind = objstore.KindRange
	case "InvalidArgument", "InvalidBucketName", "KeyTooLongError", "InvalidObjectName", "EntityTooLarge", "BadDigest", "IncompleteBody":
		kind = objstore.KindInvalid
	}
	return objstore.Errorf(op, key, kind, err)
}

var _ objstore.Store = (*Store)(nil)

// newClient builds the minio-go client for cfg at u with creds.
func newClient(u *url.URL, cfg Config, creds *credentials.Credentials) (*minio.Client, error) {
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	return minio.New(u.Host, &minio.Options{
		Creds:        creds,
		Secure:       u.Scheme == "https",
		Region:       cfg.Region,
		BucketLookup: lookup,
	})
}
