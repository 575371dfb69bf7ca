package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// runIn runs a command line in this process and returns its exit code,
// stdout and stderr.
func runIn(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// Client flags given before the command move after it, values and all;
// anything else (a command's own flag, --help, --version) stops the move.
func TestHoistGlobalFlags(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"-b h:1 topic list", "topic list -b h:1"},
		{"--brokers=h:1 --timeout 3s topic describe t", "topic describe t --brokers=h:1 --timeout 3s"},
		{"-bh:1 --tls --sasl-user u consume t -e", "consume t -e -bh:1 --tls --sasl-user u"},
		{"--profile prod group list", "group list --profile prod"},
		{"-b h:1 produce t -- -x", "produce t -b h:1 -- -x"},
		{"topic list -b h:1", "topic list -b h:1"},
		{"--help", "--help"},
		{"--version", "--version"},
		{"--data-dir d serve", "--data-dir d serve"},
		{"-b h:1", "-b h:1"},
	} {
		if got := strings.Join(hoistGlobalFlags(strings.Fields(tc.in)), " "); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

// `strand -b ADDR topic list` reaches topic list with the address: it used
// to print the top-level usage and exit 2.
func TestGlobalFlagsBeforeCommand(t *testing.T) {
	t.Setenv(configFileEnv, filepath.Join(t.TempDir(), "none.yaml"))
	code, out, errOut := runIn(t, "-b", "127.0.0.1:1", "topic", "list")
	if code != 1 || out != "" || !strings.Contains(errOut, "cannot reach the cluster at 127.0.0.1:1") {
		t.Fatalf("strand -b 127.0.0.1:1 topic list: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := runIn(t, "-b", "127.0.0.1:1"); code != 2 || !strings.Contains(errOut, "Usage:") {
		t.Fatalf("flags without a command: exit %d, stderr %q", code, errOut)
	}
}

// unreachable runs `strand topic list` with extra args and returns the
// address its error names (every address here refuses connections).
func unreachable(t *testing.T, args ...string) string {
	t.Helper()
	code, _, errOut := runIn(t, append([]string{"topic", "list"}, args...)...)
	_, addr, ok := strings.Cut(errOut, "cannot reach the cluster at ")
	if code != 1 || !ok {
		t.Fatalf("topic list %v: exit %d, stderr %q", args, code, errOut)
	}
	addr, _, _ = strings.Cut(addr, ": ")
	return addr
}

// Profiles store the client flags given to `profile create`, and a client
// command takes its unset flags from the selected one: flag > STRAND_<FLAG>
// > profile (--profile, else STRAND_PROFILE, else current) > default.
func TestProfiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "strand", "config.yaml")
	t.Setenv(configFileEnv, path)
	if code, out, _ := runIn(t, "profile", "list"); code != 0 || !strings.HasPrefix(out, "no profiles") {
		t.Fatalf("empty list: %d %q", code, out)
	}
	if code, out, errOut := runIn(t, "profile", "create", "one", "-b", "127.0.0.1:1", "--sasl-user", "u", "--sasl-password", "pw"); code != 0 ||
		out != "created profile one in "+path+" and switched to it\n" {
		t.Fatalf("create: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := runIn(t, "profile", "create", "two", "--brokers", "127.0.0.1:2"); code != 0 {
		t.Fatalf("create two: %s", errOut)
	}
	if code, _, errOut := runIn(t, "profile", "create", "two", "--brokers", "127.0.0.1:2"); code != 1 || !strings.Contains(errOut, "already exists") {
		t.Fatalf("create twice: %d %q", code, errOut)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("profile file: %v %v, want mode 0600", info, err)
	}
	if got := unreachable(t); got != "127.0.0.1:2" {
		t.Errorf("current profile two: %s", got)
	}
	if got := unreachable(t, "--profile", "one"); got != "127.0.0.1:1" {
		t.Errorf("--profile one: %s", got)
	}
	t.Setenv("STRAND_PROFILE", "one")
	if got := unreachable(t); got != "127.0.0.1:1" {
		t.Errorf("STRAND_PROFILE=one: %s", got)
	}
	if got := unreachable(t, "--profile", "two"); got != "127.0.0.1:2" {
		t.Errorf("--profile two over STRAND_PROFILE: %s", got)
	}
	t.Setenv("STRAND_BROKERS", "127.0.0.1:3")
	if got := unreachable(t); got != "127.0.0.1:3" {
		t.Errorf("STRAND_BROKERS over the profile: %s", got)
	}
	if got := unreachable(t, "-b", "127.0.0.1:4"); got != "127.0.0.1:4" {
		t.Errorf("--brokers over STRAND_BROKERS: %s", got)
	}
	os.Unsetenv("STRAND_BROKERS")
	os.Unsetenv("STRAND_PROFILE")

	code, out, _ := runIn(t, "profile", "list", "--format", "json")
	var list []struct {
		Name    string
		Current bool
		Values  map[string]string
	}
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list) != 2 {
		t.Fatalf("list json: %d %v %q", code, err, out)
	}
	if list[0].Name != "one" || list[0].Current || list[0].Values["sasl-password"] != "(set)" || list[0].Values["sasl-user"] != "u" ||
		list[1].Name != "two" || !list[1].Current || list[1].Values["brokers"] != "127.0.0.1:2" {
		t.Errorf("list json: %+v", list)
	}
	if code, out, _ := runIn(t, "profile", "list"); code != 0 || strings.Contains(out, "pw") || !strings.Contains(out, "\n*        two   127.0.0.1:2  -\n") {
		t.Errorf("list: %q", out)
	}
	if code, out, _ := runIn(t, "profile", "use", "one"); code != 0 || out != "switched to profile one\n" || unreachable(t) != "127.0.0.1:1" {
		t.Errorf("use one: %d %q", code, out)
	}
	if code, _, errOut := runIn(t, "topic", "list", "--profile", "nosuch"); code != 2 || !strings.Contains(errOut, `profile "nosuch" does not exist`) {
		t.Errorf("unknown profile: %d %q", code, errOut)
	}
	if code, out, _ := runIn(t, "profile", "delete", "one"); code != 0 || out != "deleted profile one\n" {
		t.Errorf("delete: %d %q", code, out)
	}
	if got := unreachable(t, "--brokers", "127.0.0.1:5"); got != "127.0.0.1:5" {
		t.Errorf("after deleting the current profile: %s", got)
	}
	if code, _, errOut := runIn(t, "profile", "use", "one"); code != 1 || !strings.Contains(errOut, "does not exist") {
		t.Errorf("use deleted: %d %q", code, errOut)
	}
}

// A malformed profile file is one clear error naming the file.
func TestProfileFileMalformed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("profiles: [oops\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(configFileEnv, path)
	code, _, errOut := runIn(t, "topic", "list")
	if code != 1 || !strings.Contains(errOut, "profile file "+path+" is not valid YAML") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// --format takes text or json only.
func TestFormatFlagRefused(t *testing.T) {
	for _, args := range [][]string{{"topic", "list"}, {"group", "describe", "g"}, {"node", "list"}, {"user", "list"}, {"quota", "list"},
		{"acl", "list"}, {"profile", "list"}} {
		code, _, errOut := runIn(t, append(args, "--format", "yaml", "--brokers", "127.0.0.1:1")...)
		if args[0] == "profile" {
			code, _, errOut = runIn(t, append(args, "--format", "yaml")...)
		}
		if code != 2 || !strings.Contains(errOut, `--format "yaml": want text or json`) {
			t.Errorf("strand %v --format yaml: exit %d, stderr %q", args, code, errOut)
		}
	}
	code, _, errOut := runIn(t, "cluster", "rebalance", "--format", "json", "--brokers", "127.0.0.1:1")
	if code != 2 || !strings.Contains(errOut, "add --dry-run") {
		t.Errorf("rebalance --format json without --dry-run: exit %d, stderr %q", code, errOut)
	}
}

// The new commands answer --help with a synopsis and an example.
func TestHelpForAdminCommands(t *testing.T) {
	for _, name := range []string{"profile create", "profile use", "profile list", "profile delete", "completion", "node list",
		"topic list", "partition move", "txn producers"} {
		checkHelp(t, append(strings.Fields(name), "--help"), []string{"Usage:\n  strand " + name, "Example:\n  "})
	}
	checkHelp(t, []string{"profile", "--help"}, []string{"strand profile create NAME", "Example:"})
}

// The completion scripts come from the command table and each command's
// flags; bash, given `strand topic cr<TAB>`, offers create, and flags of
// the command on the line.
func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		code, out, errOut := runIn(t, "completion", shell)
		if code != 0 || !strings.Contains(out, "allow-rf-change") || !strings.Contains(out, "profile") {
			t.Fatalf("completion %s: exit %d, stderr %q, script:\n%s", shell, code, errOut, out)
		}
	}
	if code, _, errOut := runIn(t, "completion", "tcsh"); code != 2 || !strings.Contains(errOut, "want bash, zsh or fish") {
		t.Errorf("completion tcsh: %d %q", code, errOut)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to run the script")
	}
	_, script, _ := runIn(t, "completion", "bash")
	for _, tc := range []struct {
		line string
		want []string
		not  []string
	}{
		{"strand to", []string{"topic"}, nil},
		{"strand topic ", []string{"create", "list", "describe", "delete"}, []string{"--brokers"}},
		{"strand topic list --", []string{"--internal", "--format", "--brokers", "--profile"}, []string{"--partitions"}},
		{"strand -b h:1 partition move --al", []string{"--allow-rf-change"}, nil},
		{"strand -b h : 1 --timeout 5s topic ", []string{"create", "list"}, nil}, // bash splits HOST:PORT at the colon
		{"strand cluster ", []string{"rebalance", "leaders", "--brokers"}, nil},
		{"strand completion ", []string{"bash", "zsh", "fish"}, nil},
		{"strand profile ", []string{"create", "use", "list", "delete"}, nil},
	} {
		words := strings.Fields(tc.line)
		if strings.HasSuffix(tc.line, " ") {
			words = append(words, "")
		}
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		prog := script + "\nCOMP_WORDS=(" + strings.Join(quoted, " ") + ")\nCOMP_CWORD=" + strconv.Itoa(len(words)-1) +
			"\n_strand\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
		out, err := exec.Command(bash, "--norc", "--noprofile", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", tc.line, err, out)
		}
		got := strings.Fields(string(out))
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q: offers %v, lacks %s", tc.line, got, w)
			}
		}
		for _, w := range tc.not {
			if slices.Contains(got, w) {
				t.Errorf("%q: offers %v, including %s", tc.line, got, w)
			}
		}
	}
}
