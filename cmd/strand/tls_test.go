package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strandlog/strand/node/server"
)

// devTLSFlagsRe finds the client flags strand dev --tls prints.
var devTLSFlagsRe = regexp.MustCompile(`--tls-ca (\S+) --tls-cert (\S+) --tls-key (\S+)`)

// strand dev --tls serves every listener over TLS and prints how to use
// it: the banner's commands (with its --tls-* flags) create, produce and
// consume; the printed kcat line lists the cluster over SSL, and kcat
// produces and consumes over SSL; a plaintext CLI is told the node
// requires TLS, a CLI without the CA is told to give it.
func TestDevTLS(t *testing.T) {
	skipShort(t)
	port := freeConsecutivePorts(t, 3)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "dev.log")
	dev := startProc(t, logPath, nil, "dev", "--tls", "--base-port", strconv.Itoa(port))
	defer dev.kill()
	var banner string
	waitFor(t, "ready banner", 30*time.Second, func() error {
		b, _ := os.ReadFile(logPath)
		banner = string(b)
		if !strings.Contains(banner, "Press Ctrl-C") {
			return fmt.Errorf("no complete banner yet:\n%s", banner)
		}
		return nil
	})
	m := devTLSFlagsRe.FindStringSubmatch(banner)
	if m == nil || !strings.Contains(banner, "TLS is on") || !strings.Contains(banner, "-X security.protocol=SSL") {
		t.Fatalf("banner lacks the TLS flags or the kcat line:\n%s", banner)
	}
	native := "127.0.0.1:" + strconv.Itoa(port+devNativePortOffset)
	env := []string{"STRAND_BROKERS=" + native, "STRAND_TLS_CA=" + m[1], "STRAND_TLS_CERT=" + m[2], "STRAND_TLS_KEY=" + m[3]}
	runCLI(t, env, "", "topic", "create", "hello", "--partitions", "3", "--replication-factor", "3")
	runCLI(t, env, "first\nsecond\nthird\n", "produce", "hello")
	got := strings.Fields(runCLI(t, env, "", "consume", "hello", "--from", "earliest", "--until-end"))
	sort.Strings(got)
	if want := []string{"first", "second", "third"}; !slices.Equal(got, want) {
		t.Fatalf("consumed %q, want %q", got, want)
	}

	_, errOut, err := runCLIResult(t, nil, "", "cluster", "--brokers", native)
	if err == nil || !strings.Contains(errOut, native+" requires TLS: connect with TLS") {
		t.Errorf("plaintext CLI on a TLS node: %v %q", err, errOut)
	}
	_, errOut, err = runCLIResult(t, nil, "", "cluster", "--brokers", native, "--tls")
	if err == nil || !strings.Contains(errOut, "--tls-ca") {
		t.Errorf("CLI without the CA: %v %q", err, errOut)
	}

	t.Run("kcat", func(t *testing.T) {
		kcat, err := exec.LookPath("kcat")
		if err != nil {
			if os.Getenv("CI") != "" {
				t.Fatal("kcat is not installed, and CI must run this test")
			}
			t.Skip("kcat is not installed (apt-get install kcat); .ci/run installs it")
		}
		line := regexp.MustCompile(`kcat (-b \S+ -X security\.protocol=SSL .*) -L`).FindStringSubmatch(banner)
		if line == nil {
			t.Fatalf("no kcat line in the banner:\n%s", banner)
		}
		ssl := strings.Fields(line[1])
		run := func(stdin string, args ...string) string {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, kcat, append(slices.Clone(ssl), args...)...)
			cmd.Stdin = strings.NewReader(stdin)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return string(out)
		}
		if meta := run("", "-L"); !strings.Contains(meta, "3 brokers:") || !strings.Contains(meta, `topic "hello" with 3 partitions`) {
			t.Fatalf("kcat -L over SSL:\n%s", meta)
		}
		run("k:over-ssl\n", "-P", "-t", "hello", "-K:", "-p", "0")
		out := run("", "-C", "-t", "hello", "-p", "0", "-o", "beginning", "-e", "-q", "-f", `%k=%s\n`)
		if !strings.Contains(out, "k=over-ssl") {
			t.Fatalf("kcat -C over SSL did not read back the record:\n%s", out)
		}
	})
}

// servedSerial dials addr over TLS trusting caPEM and returns the serial
// of the node's certificate, or an error while it does not answer.
func servedSerial(addr string, caPEM []byte) (string, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	nc, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool})
	if err != nil {
		return "", err
	}
	defer nc.Close()
	return nc.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// strand serve reloads its TLS files on SIGHUP without a restart: a new
// certificate is served after the signal, and a bad file then keeps the
// certificate in use (logged) while the node keeps serving clients.
func TestServeReloadsTLSOnSIGHUP(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	ca, err := server.NewDevCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile, _ := ca.WriteCA(dir)
	certFile, keyFile, err := ca.IssueFiles(dir, "node-1", "node-1", 1, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePorts(t, 1)[0])
	logPath := filepath.Join(dir, "serve.log")
	srv := startProc(t, logPath, nil, "serve", "--id", "1", "--data-dir", filepath.Join(dir, "data"), "--listen", addr,
		"--tls-cert", certFile, "--tls-key", keyFile, "--tls-ca", caFile)
	defer srv.kill()
	var first string
	waitFor(t, "TLS listener", 30*time.Second, func() (err error) {
		first, err = servedSerial(addr, ca.PEM)
		return err
	})

	if _, _, err := ca.IssueFiles(dir, "node-1", "node-1", 1, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	srv.cmd.Process.Signal(syscall.SIGHUP)
	var second string
	waitFor(t, "the new certificate", 10*time.Second, func() error {
		s, err := servedSerial(addr, ca.PEM)
		if err != nil || s == first {
			return fmt.Errorf("serial %s (first %s): %v", s, first, err)
		}
		second = s
		return nil
	})

	if err := os.WriteFile(certFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "the failed reload's log line", 10*time.Second, func() error {
		if b, _ := os.ReadFile(logPath); !strings.Contains(string(b), "TLS reload failed; keeping the certificate in use") {
			return fmt.Errorf("not logged yet:\n%s", b)
		}
		return nil
	})
	if s, err := servedSerial(addr, ca.PEM); err != nil || s != second {
		t.Fatalf("after a bad reload the node serves %s (%v), want the kept %s", s, err, second)
	}
	env := []string{"STRAND_BROKERS=" + addr, "STRAND_TLS_CA=" + caFile}
	runCLI(t, env, "", "cluster")
	if err := srv.stop(syscall.SIGTERM, 20*time.Second); err != nil {
		t.Errorf("serve after SIGTERM: %v", err)
	}
}

// runMain runs the command line in this process and returns the exit
// code and output.
func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// serve refuses half a TLS configuration at once, as a usage error.
func TestServeRefusesPartialTLSFlags(t *testing.T) {
	code, _, errOut := runMain(t, "serve", "--id", "1", "--data-dir", t.TempDir(), "--tls-cert", "x.crt")
	if code != 2 || !strings.Contains(errOut, "TLS needs all of --tls-cert, --tls-key and --tls-ca") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runMain(t, "serve", "--id", "1", "--data-dir", t.TempDir(), "--tls-client-auth", "maybe")
	if code != 2 || !strings.Contains(errOut, "--tls-client-auth") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}
