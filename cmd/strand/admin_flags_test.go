package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An --admin-listen that is not HOST:PORT is a usage error (exit 2) naming
// the flag, found before serve opens its data directory or dev starts a
// node.
func TestAdminListenRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	for _, args := range [][]string{
		{"serve", "--id", "1", "--data-dir", dir, "--admin-listen", "9644"},
		{"dev", "--admin-listen", "localhost"},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, strings.NewReader(""), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--admin-listen") {
			t.Errorf("strand %v: exit %d, stderr %q; want 2 naming --admin-listen", args, code, errOut.String())
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("serve created its data directory before refusing the flag: %v", err)
	}
}
