package osdisk

import (
	"io"
	"reflect"
	"testing"
)

// TestDiskOnOS shows files are created with their directory, read back, truncated, listed sorted and removed.
func TestDiskOnOS(t *testing.T) {
	d, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if names, err := d.List("log"); err != nil || len(names) != 0 {
		t.Fatalf("missing dir lists %v %v", names, err)
	}
	for _, name := range []string{"log/b", "log/a"} {
		f, err := d.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("hello"), 2); err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(4); err != nil {
			t.Fatal(err)
		}
		if size, err := f.Size(); err != nil || size != 4 {
			t.Fatalf("size %d %v", size, err)
		}
		buf := make([]byte, 6)
		if n, err := f.ReadAt(buf, 0); n != 4 || err != io.EOF || string(buf[2:4]) != "he" {
			t.Fatalf("read %d %v %q", n, err, buf)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.SyncDir("log"); err != nil {
		t.Fatal(err)
	}
	if names, _ := d.List("log"); !reflect.DeepEqual(names, []string{"a", "b"}) {
		t.Fatalf("list %v", names)
	}
	if err := d.Remove("log/a"); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove("log/a"); err == nil {
		t.Fatal("removing a missing file worked")
	}
}
