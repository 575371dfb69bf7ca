package dirstore

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/strandlog/strand/objstore"
	"github.com/strandlog/strand/objstore/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store {
		s, err := Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestMissingRootIsNoBucket(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "nope"))
	if objstore.KindOf(err) != objstore.KindNoBucket {
		t.Fatalf("open of a missing directory: %v", err)
	}
}

// TestCrashLeftoversNeverListed: a temporary file a crash left is not an
// object, and the next Open removes it.
func TestCrashLeftoversNeverListed(t *testing.T) {
	root := t.TempDir()
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(context.Background(), "a", bytes.NewReader([]byte("x")), 1); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(root, tmpDir, "put-123")
	if err := os.WriteFile(leftover, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := s.List(context.Background(), "")
	if err != nil || len(objs) != 1 || objs[0].Key != "a" {
		t.Fatalf("list: %+v %v", objs, err)
	}
	if _, err := Open(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Fatalf("leftover after reopen: %v", err)
	}
	err = s.Put(context.Background(), tmpDir+"/x", bytes.NewReader(nil), 0)
	if objstore.KindOf(err) != objstore.KindInvalid {
		t.Fatalf("put under the temporary directory: %v", err)
	}
}

func TestReadOnlyRootIsDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores directory permissions")
	}
	root := t.TempDir()
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(root, 0o755)
	err = s.Put(context.Background(), "a", bytes.NewReader([]byte("x")), 1)
	if objstore.KindOf(err) != objstore.KindDenied {
		t.Fatalf("put into a read-only directory: %v", err)
	}
}
