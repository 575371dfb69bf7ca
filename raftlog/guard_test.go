package raftlog_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// allowedImports are the only packages raftlog's code may import: no os,
// time, net, math/rand, sync or unsafe, so it stays deterministic and reaches
// storage only through Disk.
var allowedImports = map[string]bool{
	"encoding/binary": true, "errors": true, "fmt": true, "hash/crc32": true, "io": true,
	"math": true, "math/bits": true, "path": true, "sort": true, "strconv": true, "strings": true,
	"go.etcd.io/raft/v3": true, "go.etcd.io/raft/v3/raftpb": true, "google.golang.org/protobuf/proto": true,
}

// TestDeterminismGuard fails when raftlog's non-test code imports a package outside the allowlist or starts a goroutine.
func TestDeterminismGuard(t *testing.T) {
	files, err := filepath.Glob("*.go")
	must(t, err)
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		must(t, err)
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !allowedImports[p] {
				t.Errorf("%s imports %s, outside the determinism allowlist", name, p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok {
				t.Errorf("%s: go statement at %s", name, fset.Position(g.Pos()))
			}
			return true
		})
	}
}
