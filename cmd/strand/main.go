// Command strand runs Strand nodes and talks to a Strand cluster.
//
//	strand serve --id 1 --listen 127.0.0.1:9092 --peers 1=...,2=...,3=... --data-dir DIR
//	strand dev                      # a local 3-node cluster in one process on :9092-9094
//	strand topic create NAME --partitions N [--replication-factor R] [--config k=v]
//	strand topic list | describe NAME | delete NAME
//	strand produce TOPIC            # lines from stdin
//	strand consume TOPIC [--from earliest|latest|OFFSET|TIME] [--until-end]
//	strand cluster                  # nodes, partitions, leaders, high-water marks
//	strand bench produce|consume|e2e
//
// Every flag can also be set through an environment variable STRAND_<FLAG>
// (upper case, dashes as underscores: --data-dir is STRAND_DATA_DIR); a flag
// on the command line wins. Client commands default to --brokers
// 127.0.0.1:9092, where `strand dev` listens, so a new user needs no flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/clientlib"
)

// usage is the top-level help.
const usage = `strand: a replicated log.

Usage:
  strand serve --id N --peers 1=HOST:PORT,2=... --data-dir DIR   run one node
  strand dev [--nodes 3] [--base-port 9092] [--data-dir DIR]      a local cluster in one process
  strand topic create NAME --partitions N [--replication-factor R] [--config k=v]
  strand topic list
  strand topic describe NAME
  strand topic delete NAME
  strand produce TOPIC [--key-separator SEP] [--acks all|1|0]     lines from stdin
  strand consume TOPIC [--from earliest|latest|OFFSET|RFC3339] [--format '%v\n'] [--until-end]
  strand cluster                                                  nodes, partitions, leaders
  strand bench produce|consume|e2e [flags]                        measure a running cluster

Every flag is also an environment variable STRAND_<FLAG> (--data-dir: STRAND_DATA_DIR).
Client commands talk to --brokers (default 127.0.0.1:9092). 'strand CMD --help' lists a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run dispatches a command line and returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		io.WriteString(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "serve":
		err = cmdServe(rest, stderr)
	case "dev":
		err = cmdDev(rest, stdout, stderr)
	case "topic":
		err = cmdTopic(rest, stdout)
	case "produce":
		err = cmdProduce(rest, stdin, stdout, stderr)
	case "consume":
		err = cmdConsume(rest, stdout)
	case "cluster":
		err = cmdCluster(rest, stdout)
	case "bench":
		err = cmdBench(rest, stdout)
	default:
		err = usageError("unknown command %q", cmd)
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case isUsageError(err):
		fmt.Fprintf(stderr, "strand %s: %v\n(see 'strand --help')\n", cmd, err)
		return 2
	}
	fmt.Fprintf(stderr, "strand %s: %v\n", cmd, err)
	return 1
}

// errUsage marks a command-line mistake (exit code 2).
type errUsage struct{ msg string }

func (e *errUsage) Error() string { return e.msg }

func usageError(format string, args ...any) error {
	return &errUsage{msg: fmt.Sprintf(format, args...)}
}

func isUsageError(err error) bool {
	var u *errUsage
	return errors.As(err, &u)
}

// newFlags returns a flag set for one command.
func newFlags(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("strand "+name, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage of strand %s:\n%s\nEvery flag can also be set as STRAND_<FLAG> (e.g. --data-dir: STRAND_DATA_DIR).\n",
			name, fs.FlagUsages())
	}
	return fs
}

// parseFlags parses args, then fills every flag not given on the command
// line from its STRAND_<FLAG> environment variable.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return usageError("%v", err)
	}
	var envErr error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || envErr != nil {
			return
		}
		name := envName(f.Name)
		if v, ok := os.LookupEnv(name); ok {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = usageError("%s=%q: %v", name, v, err)
			}
		}
	})
	return envErr
}

// envName is the environment variable of a flag: --data-dir is STRAND_DATA_DIR.
func envName(flag string) string {
	return "STRAND_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// clientFlags are the flags every client command shares.
type clientFlags struct {
	brokers []string
	timeout time.Duration
}

func (c *clientFlags) register(fs *pflag.FlagSet, timeout time.Duration) {
	fs.StringSliceVar(&c.brokers, "brokers", []string{"127.0.0.1:9092"}, "cluster addresses to bootstrap from (comma separated)")
	fs.DurationVar(&c.timeout, "timeout", timeout, "give up on the cluster after this long")
}

// client connects to the cluster the flags name.
func (c *clientFlags) client(opts ...clientlib.Opt) (*clientlib.Client, error) {
	base := []clientlib.Opt{clientlib.SeedAddresses(c.brokers...), clientlib.ClientID("strand-cli"),
		clientlib.DialTimeout(2 * time.Second)}
	return clientlib.NewClient(append(base, opts...)...)
}

// signalContext is cancelled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
