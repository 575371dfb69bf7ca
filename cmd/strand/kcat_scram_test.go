package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strandlog/strand/node/server"
)

// kcatSCRAM finds kcat and a librdkafka that speaks SCRAM to a strict
// server (≥ 2.6.1: Debian 12's 2.0.2 repeats the client nonce in its final
// message). .ci/run builds one and sets STRAND_KCAT_LIBRARY_PATH; CI must
// run the test, elsewhere it skips saying why.
func kcatSCRAM(t *testing.T) (kcat string, env []string) {
	t.Helper()
	kcat, err := exec.LookPath("kcat")
	lib := os.Getenv("STRAND_KCAT_LIBRARY_PATH")
	switch {
	case err != nil:
		err = errString("kcat is not installed (apt-get install kcat)")
	case lib == "":
		err = errString("STRAND_KCAT_LIBRARY_PATH names no librdkafka >= 2.6.1 (.ci/run builds one)")
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v, and CI must run this test", err)
		}
		t.Skip(err)
	}
	return kcat, append(os.Environ(), "LD_LIBRARY_PATH="+lib)
}

// errString is an error that is its text.
type errString string

func (e errString) Error() string { return string(e) }

// kcat, a librdkafka client, logs in with SASL/SCRAM-SHA-512 over TLS to
// the Kafka listener of a node with TLS, SASL and ACLs on, produces and
// reads back as a user the ACLs allow; with a wrong password it gets
// nothing (issue 13: "kcat and franz-go connect with SASL/SCRAM over TLS").
func TestKcatSCRAMOverTLS(t *testing.T) {
	skipShort(t)
	kcat, kenv := kcatSCRAM(t)
	dir := t.TempDir()
	ca, err := server.NewDevCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile, err := ca.WriteCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := ca.IssueFiles(dir, "node-1", "node-1", 1, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 2)
	native, kafka := "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	p := startProc(t, filepath.Join(dir, "serve.log"), []string{"STRAND_SASL_BOOTSTRAP_PASSWORD=admin-secret"},
		"serve", "--id", "1", "--data-dir", filepath.Join(dir, "data"), "--listen", native, "--kafka-listen", kafka,
		"--tls-cert", certFile, "--tls-key", keyFile, "--tls-ca", caFile,
		"--sasl-enabled", "--authorization", "--sasl-bootstrap-user", "admin")
	defer p.stop(syscall.SIGTERM, 20*time.Second)
	admin := []string{"STRAND_BROKERS=" + native, "STRAND_TLS_CA=" + caFile, "STRAND_SASL_USER=admin", "STRAND_SASL_PASSWORD=admin-secret"}
	waitFor(t, "the bootstrap admin", 30*time.Second, func() error {
		_, errOut, err := runCLIResult(t, admin, "", "topic", "create", "scram", "--partitions", "1", "--replication-factor", "1")
		if err != nil {
			return &cliError{errOut}
		}
		return nil
	})
	runCLI(t, admin, "alice-pw\n", "user", "create", "alice", "--password-stdin")
	runCLI(t, admin, "", "acl", "add", "--allow-principal", "User:alice", "--operation", "write,read", "--topic", "scram")

	run := func(password, stdin string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		base := []string{"-b", kafka, "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + caFile,
			"-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=alice", "-X", "sasl.password=" + password}
		cmd := exec.CommandContext(ctx, kcat, append(base, args...)...)
		cmd.Env, cmd.Stdin = kenv, strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("alice-pw", "k:over-scram-tls\n", "-P", "-t", "scram", "-K:", "-p", "0"); err != nil {
		t.Fatalf("kcat produce: %v\n%s", err, out)
	}
	out, err := run("alice-pw", "", "-C", "-t", "scram", "-p", "0", "-o", "beginning", "-e", "-q", "-f", `%k=%s\n`)
	if err != nil || !strings.Contains(out, "k=over-scram-tls") {
		t.Fatalf("kcat consume: %v\n%s", err, out)
	}
	out, err = run("wrong", "", "-L", "-m", "5")
	if err == nil || !strings.Contains(out, "SASL authentication error") {
		t.Fatalf("kcat with a wrong password: %v\n%s", err, out)
	}
}
