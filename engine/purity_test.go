package engine

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The determinism guard of the repository. The deterministic core (engine/,
// raftlog/ and node/) must reach the world only through values handed in:
// no wall clock, no OS, no network, no global randomness, no goroutines.
// This test parses every non-test Go file of the core and fails on what
// would break replay by seed. It cannot see map iteration order; reviews
// and the simulator's trace hash catch that.

// purityRoot is one tree the guard walks, relative to the repository root.
type purityRoot struct {
	dir string
	// skipDirs are subtrees that are I/O adapters, outside the core.
	skipDirs []string
	// allowImports are imports this tree may use despite the rules.
	allowImports map[string]bool
	// onlyImports, when set, are the only imports the files directly in
	// dir may use (not its subtrees): a stricter allowlist.
	onlyImports map[string]bool
}

// purityRoots lists the deterministic core. node/server is the real
// process (goroutines, sockets, clock) and raftlog/osdisk the real disk; raftlog/memdisk is checked with "os" allowed (for its error values)
// and is otherwise as strict: it takes its *rand.Rand handed in.
var purityRoots = []purityRoot{
	{dir: "engine"},
	{dir: "engine/compact", onlyImports: compactImports},
	{dir: "raftlog", skipDirs: []string{"raftlog/osdisk", "raftlog/memdisk", "raftlog/compacted"}, onlyImports: raftlogImports},
	{dir: "raftlog/compacted", onlyImports: compactedImports},
	{dir: "raftlog/memdisk", allowImports: map[string]bool{"os": true}},
	{dir: "node", skipDirs: []string{"node/server"}},
}

// raftlogImports are the only packages raftlog's own files may import: no
// sync, io/fs or time either, so it stays single-threaded and reaches
// storage only through its Disk.
var raftlogImports = map[string]bool{
	"encoding/binary": true, "errors": true, "fmt": true, "hash/crc32": true, "io": true,
	"math": true, "math/bits": true, "path": true, "sort": true, "strconv": true, "strings": true,
	"go.etcd.io/raft/v3": true, "go.etcd.io/raft/v3/raftpb": true, "google.golang.org/protobuf/proto": true,
}

// compactedImports are the only packages raftlog/compacted may import:
// like raftlog, it reaches storage only through raftlog.Disk.
var compactedImports = map[string]bool{
	"crypto/sha256": true, "encoding/binary": true, "errors": true, "fmt": true, "hash": true, "hash/crc32": true,
	"io": true, "iter": true, "math": true, "path": true, "sort": true, "strconv": true, "strings": true,
	"github.com/strandlog/strand/engine/compact": true, "github.com/strandlog/strand/raftlog": true,
}

// compactImports are the only packages engine/compact may import: a pure
// function of its input, so no time, sync or I/O of any kind either.
var compactImports = map[string]bool{
	"bytes": true, "crypto/sha256": true, "encoding/binary": true, "errors": true, "fmt": true, "hash": true, "hash/crc32": true,
	"iter": true, "math": true, "slices": true, "strconv": true, "strings": true,
	"github.com/strandlog/strand/engine/recordbatch": true,
}

// outsideAllowlist returns the imports of file src that only does not
// list, as "file:line: what" lines.
func outsideAllowlist(filename string, src any, only map[string]bool) ([]string, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, filename, src, parser.ImportsOnly)
	if err != nil {
		return nil, err
	}
	var findings []string
	for _, spec := range file.Imports {
		if path, _ := strconv.Unquote(spec.Path.Value); !only[path] {
			findings = append(findings, fmt.Sprintf("%s: imports %q, outside its allowlist", fset.Position(spec.Pos()), path))
		}
	}
	return findings, nil
}

// forbiddenImport reports whether the core may not import path at all.
func forbiddenImport(path string) bool {
	switch path {
	case "os", "net", "syscall", "math/rand", "crypto/rand", "unsafe", "runtime", "io/ioutil", "plugin":
		return true
	}
	for _, prefix := range []string{"os/", "net/", "runtime/", "golang.org/x/sys/"} {
		if strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}

// forbiddenTime are the time package's functions that read the wall clock
// or start timers.
var forbiddenTime = map[string]bool{
	"Now": true, "Since": true, "Until": true, "After": true, "Tick": true,
	"NewTimer": true, "NewTicker": true, "Sleep": true, "AfterFunc": true,
}

// rateClockMethods are golang.org/x/time/rate's Limiter methods that read
// time.Now themselves; the core calls the ones that take the time (AllowN,
// ReserveN, TokensAt, ...). Without types, any call of these names in a
// file that imports rate counts.
var rateClockMethods = map[string]bool{
	"Allow": true, "Reserve": true, "Wait": true, "WaitN": true, "Tokens": true, "SetLimit": true, "SetBurst": true,
}

// allowedRand are math/rand/v2's names that do not touch the global
// source: the types and the seeded constructors.
var allowedRand = map[string]bool{
	"Rand": true, "Source": true, "PCG": true, "ChaCha8": true, "Zipf": true,
	"New": true, "NewPCG": true, "NewChaCha8": true, "NewZipf": true,
}

// majorVersion matches an import path's /vN suffix.
var majorVersion = regexp.MustCompile(`^v[0-9]+$`)

// importName is the name a file uses for an import.
func importName(spec *ast.ImportSpec, path string) string {
	if spec.Name != nil {
		return spec.Name.Name
	}
	parts := strings.Split(path, "/")
	if len(parts) > 1 && majorVersion.MatchString(parts[len(parts)-1]) {
		return parts[len(parts)-2]
	}
	return parts[len(parts)-1]
}

// checkPurity parses one file and returns its breaches of the rules as
// "file:line: what" lines.
func checkPurity(filename string, src any, allowImports map[string]bool) ([]string, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, filename, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var findings []string
	report := func(pos token.Pos, format string, args ...any) {
		findings = append(findings, fmt.Sprintf("%s: %s", fset.Position(pos), fmt.Sprintf(format, args...)))
	}
	watched := map[string]string{} // local name -> "time" or "math/rand/v2"
	usesRate := false
	for _, spec := range file.Imports {
		path, _ := strconv.Unquote(spec.Path.Value)
		if forbiddenImport(path) && !allowImports[path] {
			report(spec.Pos(), "imports %q", path)
		}
		usesRate = usesRate || path == "golang.org/x/time/rate"
		if path == "time" || path == "math/rand/v2" {
			name := importName(spec, path)
			if name == "." {
				report(spec.Pos(), "dot-imports %q", path)
			}
			watched[name] = path
		}
	}
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			report(n.Pos(), "starts a goroutine")
		case *ast.SelectorExpr:
			if usesRate && rateClockMethods[n.Sel.Name] {
				report(n.Pos(), "calls rate's %s, which reads time.Now", n.Sel.Name)
			}
			x, ok := n.X.(*ast.Ident)
			if !ok {
				break
			}
			switch watched[x.Name] {
			case "time":
				if forbiddenTime[n.Sel.Name] {
					report(n.Pos(), "uses time.%s", n.Sel.Name)
				}
			case "math/rand/v2":
				if !allowedRand[n.Sel.Name] {
					report(n.Pos(), "uses the global random source: rand.%s", n.Sel.Name)
				}
			}
		}
		return true
	})
	return findings, nil
}

// TestDeterminismGuard walks the core's non-test Go files and fails on any
// forbidden import, wall-clock call, global randomness or go statement.
func TestDeterminismGuard(t *testing.T) {
	files := 0
	for _, root := range purityRoots {
		dir := filepath.Join("..", root.dir)
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if path == dir && root.dir != "engine" {
					return fs.SkipDir // a tree not written yet
				}
				return err
			}
			rel := filepath.ToSlash(strings.TrimPrefix(path, ".."+string(filepath.Separator)))
			if d.IsDir() {
				for _, skip := range root.skipDirs {
					if rel == skip {
						return fs.SkipDir
					}
				}
				if d.Name() == "testdata" {
					return fs.SkipDir
				}
				return nil
			}
			name := d.Name()
			if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				return nil
			}
			files++
			findings, err := checkPurity(path, nil, root.allowImports)
			if err != nil {
				return err
			}
			if root.onlyImports != nil && filepath.ToSlash(filepath.Dir(rel)) == root.dir {
				outside, err := outsideAllowlist(path, nil, root.onlyImports)
				if err != nil {
					return err
				}
				findings = append(findings, outside...)
			}
			for _, f := range findings {
				t.Errorf("determinism: %s", f)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("walking %s: %v", dir, err)
		}
	}
	t.Logf("checked %d files", files)
	if files < 5 {
		t.Fatalf("checked only %d files: the guard is not looking where it should", files)
	}
}

// TestDeterminismGuardCatches shows the checker finds each kind of breach
// in a small source, through aliases too, and passes the allowed uses.
func TestDeterminismGuardCatches(t *testing.T) {
	const bad = `package p

import (
	"os"
	clock "time"
	"math/rand/v2"
	crand "crypto/rand"
	"golang.org/x/time/rate"
)

func f(l *rate.Limiter) {
	_ = l.Allow()
	_ = l.AllowN(clock.Time{}, 1)
	_ = clock.Now()
	_ = clock.Since(clock.Time{})
	go f()
	_ = rand.IntN(3)
	_ = os.Getpid()
	_ = crand.Reader
}
`
	findings, err := checkPurity("bad.go", bad, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`imports "os"`, `imports "crypto/rand"`, "uses time.Now", "uses time.Since", "starts a goroutine", "rand.IntN", "rate's Allow"}
	joined := strings.Join(findings, "\n")
	for _, w := range want {
		if !strings.Contains(joined, w) {
			t.Errorf("no finding %q in:\n%s", w, joined)
		}
	}
	if len(findings) != len(want) {
		t.Errorf("%d findings, want %d:\n%s", len(findings), len(want), joined)
	}
	const good = `package p

import (
	"math/rand/v2"
	"time"
)

type clock interface{ Monotonic() time.Duration }

func g(r *rand.Rand, time int) int { return r.IntN(time) }

func h() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

var d = 3 * time.Millisecond
`
	findings, err = checkPurity("good.go", good, nil)
	if err != nil || len(findings) != 0 {
		t.Fatalf("allowed uses flagged: %v %v", findings, err)
	}
	findings, _ = checkPurity("memdisk.go", "package p\nimport \"os\"\nvar _ = os.ErrNotExist\n", map[string]bool{"os": true})
	if len(findings) != 0 {
		t.Fatalf("allowed import flagged: %v", findings)
	}
	findings, _ = outsideAllowlist("log.go", "package p\nimport (\n\"sync\"\n\"io\"\n)\n", raftlogImports)
	if len(findings) != 1 || !strings.Contains(findings[0], `"sync"`) {
		t.Fatalf("raftlog's allowlist: findings %v, want the sync import alone", findings)
	}
}

// corePackages are the deterministic core's packages, by import path.
var corePackages = []string{
	"github.com/strandlog/strand/engine/...",
	"github.com/strandlog/strand/raftlog",
	"github.com/strandlog/strand/raftlog/compacted",
	"github.com/strandlog/strand/node",
}

// TestCoreImportGraph asks the go tool for everything the core's packages
// import, transitively, and fails if an impure package of this module (the
// real process, the real disk, the CLI, the simulator) or the OS, network or
// global-random standard packages are among them: a package boundary proves
// what a file-name rule could only promise.
func TestCoreImportGraph(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH")
	}
	args := append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, corePackages...)
	out, err := exec.Command(goTool, args...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 5 {
		t.Fatalf("go list found only %d packages: %v", len(deps), deps)
	}
	for _, dep := range deps {
		if impureModulePackage(dep) {
			t.Errorf("the deterministic core imports %s", dep)
		}
	}
}

// servicePackages are the node's services above the raft host: they reach
// the node through narrow interfaces and may not import raw raft, so the
// go tool, not a review, shows who may touch it (issue 22).
var servicePackages = []string{
	"github.com/strandlog/strand/node/authz",
	"github.com/strandlog/strand/node/groupsvc",
	"github.com/strandlog/strand/node/txnsvc",
}

// TestServicesDoNotImportRaft fails if a service package reaches
// go.etcd.io/raft, directly or transitively.
func TestServicesDoNotImportRaft(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH")
	}
	for _, pkg := range servicePackages {
		out, err := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, pkg) {
			t.Fatalf("go list %s did not list the package itself: %v", pkg, deps)
		}
		if bad := rawRaftDeps(deps); len(bad) > 0 {
			t.Errorf("%s imports raw raft: %v", pkg, bad)
		}
	}
}

// rawRaftDeps are the etcd raft packages among deps.
func rawRaftDeps(deps []string) []string {
	var out []string
	for _, d := range deps {
		if d == "go.etcd.io/raft/v3" || strings.HasPrefix(d, "go.etcd.io/raft/") {
			out = append(out, d)
		}
	}
	return out
}

// TestRawRaftDepsCatches shows the rule flags raft and its subpackages.
func TestRawRaftDepsCatches(t *testing.T) {
	got := rawRaftDeps([]string{"go.etcd.io/raft/v3", "go.etcd.io/raft/v3/raftpb", "github.com/strandlog/strand/engine/metadata", "go.etcd.io/raftish"})
	if len(got) != 2 {
		t.Fatalf("flagged %v, want raft and raftpb", got)
	}
}

// impureModulePackage reports whether path is one of this module's
// packages that touch the world, which the core must never import.
func impureModulePackage(path string) bool {
	for _, impure := range []string{"/node/server", "/raftlog/osdisk", "/cmd/", "/simnet", "/clientlib"} {
		if strings.Contains(path, "github.com/strandlog/strand"+impure) {
			return true
		}
	}
	return false
}

// TestImpureModulePackageCatches shows the import-graph rule flags the
// runtime, the OS disk and the CLI, and passes the core's own packages.
func TestImpureModulePackageCatches(t *testing.T) {
	for _, bad := range []string{"github.com/strandlog/strand/node/server", "github.com/strandlog/strand/raftlog/osdisk", "github.com/strandlog/strand/cmd/strand"} {
		if !impureModulePackage(bad) {
			t.Errorf("%s not flagged", bad)
		}
	}
	for _, good := range []string{"github.com/strandlog/strand/node", "github.com/strandlog/strand/raftlog/memdisk", "go.etcd.io/raft/v3"} {
		if impureModulePackage(good) {
			t.Errorf("%s flagged", good)
		}
	}
}
