// Package dirstore is an objstore.Store kept in a directory of the local
// file system: the embedded default, so a single machine (`strand dev`,
// `make run`) can tier with no service, and a shared mount can stand in
// for a bucket.
//
// An object is the file at <root>/<key>. A Put writes a temporary file
// under <root>/.objstore-tmp, fsyncs it, renames it into place and fsyncs
// the directory, so a crash leaves the old object or the new one, never
// part of it. A temporary file left by a crash is never listed and is
// removed by the next Open. The root must exist (it is the bucket): a
// missing root is KindNoBucket, not created, so a mistyped path fails at
// once instead of tiering into a new empty directory.
//
// A directory cannot hold both a file "a" and a directory "a", so the keys
// "a" and "a/b" cannot both exist here (S3 allows it); Strand's key layout
// never asks for both, and a Put that would is refused with KindInvalid.
package dirstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/strandlog/strand/objstore"
)

// tmpDir holds Puts under way; no key may begin with it.
const tmpDir = ".objstore-tmp"

// Store is a directory-backed objstore.Store. It is safe for concurrent
// use: every Put writes its own temporary file, and a rename is atomic.
type Store struct {
	root string
}

// Open answers the Store kept in root, which must be an existing
// directory, and removes temporary files an earlier crash left behind.
func Open(root string) (*Store, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, objstore.Errorf("open", root, objstore.KindInvalid, err)
	}
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, objstore.Errorf("open", root, objstore.KindNoBucket,
			fmt.Errorf("directory %s does not exist: create it, or name an existing one", abs))
	case err != nil:
		return nil, objstore.Errorf("open", root, kindOf(err), err)
	case !st.IsDir():
		return nil, objstore.Errorf("open", root, objstore.KindNoBucket, fmt.Errorf("%s is not a directory", abs))
	}
	if err := os.RemoveAll(filepath.Join(abs, tmpDir)); err != nil {
		return nil, objstore.Errorf("open", root, kindOf(err), err)
	}
	return &Store{root: abs}, nil
}

// Root is the directory the store keeps its objects in.
func (s *Store) Root() string { return s.root }

func (s *Store) check(op, key string) error {
	if err := objstore.ValidKey(op, key); err != nil {
		return err
	}
	if key == tmpDir || strings.HasPrefix(key, tmpDir+"/") {
		return objstore.Errorf(op, key, objstore.KindInvalid, fmt.Errorf("keys under %s are the directory store's own", tmpDir))
	}
	return nil
}

// Put stores size bytes of r under key, atomically and durably. A reader
// that ends before size bytes, or has more, fails the Put and stores
// nothing.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) (err error) {
	if err := s.check("put", key); err != nil {
		return err
	}
	if size < 0 {
		return objstore.Errorf("put", key, objstore.KindInvalid, fmt.Errorf("size %d", size))
	}
	if err := ctx.Err(); err != nil {
		return objstore.Errorf("put", key, objstore.KindUnavailable, err)
	}
	fail := func(err error) error { return objstore.Errorf("put", key, kindOf(err), err) }
	tmps := filepath.Join(s.root, tmpDir)
	if err := os.MkdirAll(tmps, 0o755); err != nil {
		return fail(err)
	}
	f, err := os.CreateTemp(tmps, "put-*")
	if err != nil {
		return fail(err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	n, err := io.Copy(f, io.LimitReader(r, size))
	if err != nil {
		return fail(err)
	}
	if n != size {
		return objstore.Errorf("put", key, objstore.KindInvalid, fmt.Errorf("reader ended after %d of %d bytes", n, size))
	}
	var one [1]byte
	if m, _ := io.ReadFull(r, one[:]); m > 0 {
		return objstore.Errorf("put", key, objstore.KindInvalid, fmt.Errorf("reader holds more than %d bytes", size))
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	dst := s.path(key)
	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
			return objstore.Errorf("put", key, objstore.KindInvalid, fmt.Errorf("a directory store cannot hold a key and keys beneath it: %w", err))
		}
		return fail(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, fs.ErrExist) {
			return objstore.Errorf("put", key, objstore.KindInvalid, fmt.Errorf("a directory store cannot hold a key and keys beneath it: %w", err))
		}
		return fail(err)
	}
	return syncDir(dir, key)
}

func syncDir(dir, key string) error {
	d, err := os.Open(dir)
	if err != nil {
		return objstore.Errorf("put", key, kindOf(err), err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return objstore.Errorf("put", key, kindOf(err), err)
	}
	return nil
}

// Get reads up to n bytes (n < 0: to the end) of key's object from off.
func (s *Store) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := s.check("get", key); err != nil {
		return nil, err
	}
	if err := objstore.ValidRange(key, off, n); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, objstore.Errorf("get", key, objstore.KindUnavailable, err)
	}
	f, err := os.Open(s.path(key))
	if err != nil {
		return nil, objstore.Errorf("get", key, kindOf(err), err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, objstore.Errorf("get", key, kindOf(err), err)
	}
	if st.IsDir() {
		return nil, objstore.Errorf("get", key, objstore.KindNotFound, errors.New("no object (a key prefix)"))
	}
	start, end, err := objstore.CutRange(key, st.Size(), off, n)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, end-start)
	if _, err := f.ReadAt(buf, start); err != nil && !(errors.Is(err, io.EOF) && len(buf) == 0) {
		return nil, objstore.Errorf("get", key, kindOf(err), err)
	}
	return buf, nil
}

// Stat answers key's object and its size.
func (s *Store) Stat(ctx context.Context, key string) (objstore.Object, error) {
	if err := s.check("stat", key); err != nil {
		return objstore.Object{}, err
	}
	if err := ctx.Err(); err != nil {
		return objstore.Object{}, objstore.Errorf("stat", key, objstore.KindUnavailable, err)
	}
	st, err := os.Stat(s.path(key))
	if err != nil {
		return objstore.Object{}, objstore.Errorf("stat", key, kindOf(err), err)
	}
	if st.IsDir() {
		return objstore.Object{}, objstore.Errorf("stat", key, objstore.KindNotFound, errors.New("no object (a key prefix)"))
	}
	return objstore.Object{Key: key, Size: st.Size()}, nil
}

// List answers the objects whose keys begin with prefix, sorted by key.
func (s *Store) List(ctx context.Context, prefix string) ([]objstore.Object, error) {
	if err := objstore.ValidPrefix(prefix); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, objstore.Errorf("list", prefix, objstore.KindUnavailable, err)
	}
	// Walk from the deepest directory the prefix names whole.
	base := ""
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		base = prefix[:i]
	}
	var out []objstore.Object
	err := filepath.WalkDir(filepath.Join(s.root, filepath.FromSlash(base)), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(s.root, path)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			if key == tmpDir {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // deleted while listing
			}
			return err
		}
		out = append(out, objstore.Object{Key: key, Size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, objstore.Errorf("list", prefix, kindOf(err), err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Delete removes key's object; a missing object is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.check("delete", key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return objstore.Errorf("delete", key, objstore.KindUnavailable, err)
	}
	path := s.path(key)
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return nil // a key prefix, no object
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return objstore.Errorf("delete", key, kindOf(err), err)
	}
	return nil
}

func (s *Store) path(key string) string {
	return filepath.Join(s.root, filepath.FromSlash(key))
}

// kindOf maps a file-system error to the Kind a caller acts on.
func kindOf(err error) objstore.Kind {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return objstore.KindNotFound
	case errors.Is(err, fs.ErrPermission):
		return objstore.KindDenied
	default:
		return objstore.KindUnavailable
	}
}

var _ objstore.Store = (*Store)(nil)
