package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/clientlib"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run dispatches a command line and returns the exit code: 0 on success
// and for help, 1 when the command failed, 2 for a usage mistake. Every
// error is printed here, once, as "strand: " + userMessage(err).
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		io.WriteString(stderr, topUsage())
		return 2
	}
	args = hoistGlobalFlags(args)
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && args[0] != "-h" && args[0] != "--help" && args[0] != "--version" {
		io.WriteString(stderr, topUsage())
		return 2
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "help", "-h", "--help":
		err = cmdHelp(rest, stdin, stdout, stderr)
	case "version", "--version":
		err = cmdVersion(rest, stdout)
	case "serve":
		err = cmdServe(rest, stderr)
	case "dev":
		err = cmdDev(rest, stdout, stderr)
	case "topic":
		err = cmdTopic(rest, stdout)
	case "produce":
		err = cmdProduce(rest, stdin, stdout, stderr)
	case "consume":
		err = cmdConsume(rest, stdout, stderr)
	case "group":
		err = cmdGroup(rest, stdout)
	case "dlq":
		err = cmdDLQ(rest, stdout, stderr)
	case "txn":
		err = cmdTxn(rest, stdout)
	case "cluster":
		err = cmdCluster(rest, stdout)
	case "node":
		err = cmdNode(rest, stdout)
	case "partition":
		err = cmdPartition(rest, stdout)
	case "bench":
		err = cmdBench(rest, stdout)
	case "user":
		err = cmdUser(rest, stdin, stdout)
	case "acl":
		err = cmdACL(rest, stdout)
	case "quota":
		err = cmdQuota(rest, stdout)
	case "profile":
		err = cmdProfile(rest, stdout)
	case "completion":
		err = cmdCompletion(rest, stdin, stdout, stderr)
	default:
		err = usageError("unknown command %q", cmd)
		cmd = ""
	}
	var help *helpShown
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		io.WriteString(stdout, help.text)
		return 0
	case isUsageError(err):
		fmt.Fprintf(stderr, "strand: %s\nRun '%s' for usage.\n", userMessage(err),
			strings.Join(append([]string{"strand"}, helpTarget(cmd, rest)...), " ")+" --help")
		return 2
	}
	fmt.Fprintf(stderr, "strand: %s\n", userMessage(err))
	return 1
}

// hoistGlobalFlags moves the client flags given before the command
// (`strand -b HOST:PORT topic list`) after it, where the command parses
// them (before a "--", if any): every command then accepts them in either
// place without parsing them itself. It stops at the first word that is
// not a client flag.
func hoistGlobalFlags(args []string) []string {
	global := newFlags("")
	var cf clientFlags
	cf.register(global, 0)
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") && args[i] != "-" && args[i] != "--" {
		name, hasValue := strings.TrimLeft(args[i], "-"), strings.Contains(args[i], "=")
		name, _, _ = strings.Cut(name, "=")
		var f *pflag.Flag
		switch {
		case strings.HasPrefix(args[i], "--"):
			f = global.Lookup(name)
		case len(name) >= 1:
			f = global.ShorthandLookup(name[:1])
			hasValue = hasValue || len(name) > 1
		}
		if f == nil {
			break
		}
		i++
		if !hasValue && f.NoOptDefVal == "" && i < len(args) {
			i++ // the flag's value
		}
	}
	if i == 0 || i == len(args) {
		return args
	}
	flags, rest := args[:i], args[i:]
	end := slices.Index(rest, "--")
	if end < 0 {
		end = len(rest)
	}
	out := make([]string, 0, len(args))
	out = append(out, rest[:end]...)
	out = append(out, flags...)
	return append(out, rest[end:]...)
}

// helpTarget is the command whose help a usage error points at: cmd, with
// its subcommand when it has a valid one.
func helpTarget(cmd string, rest []string) []string {
	if cmd == "" {
		return nil
	}
	if _, group := commandGroups[cmd]; group && len(rest) > 0 {
		if _, ok := lookupCommand(cmd + " " + rest[0]); ok {
			return []string{cmd, rest[0]}
		}
	}
	return []string{cmd}
}

// cmdHelp runs `strand help [CMD [SUB]]`: the named command's --help.
func cmdHelp(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	switch {
	case len(args) == 0:
		return &helpShown{text: topUsage()}
	case args[0] == "help" || args[0] == "-h" || args[0] == "--help":
		c, _ := lookupCommand("help")
		return &helpShown{text: commandUsage(c.name, nil)}
	case len(args) > 2:
		return usageError("help: want at most a command and a subcommand")
	}
	if _, group := commandGroups[args[0]]; !group && len(args) == 2 {
		return usageError("help: %q has no subcommands", args[0])
	}
	if _, ok := lookupCommand(strings.Join(args, " ")); !ok {
		if _, group := commandGroups[args[0]]; !group || len(args) == 2 {
			return usageError("help: unknown command %q", strings.Join(args, " "))
		}
	}
	var out bytes.Buffer
	if code := run(append(append([]string{}, args...), "--help"), stdin, &out, stderr); code != 0 {
		return usageError("help: unknown command %q", strings.Join(args, " "))
	}
	return &helpShown{text: out.String()}
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

// newFlags returns a flag set for command name ("topic create"). It
// prints nothing itself: run prints errors and parseFlags returns help.
func newFlags(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("strand "+name, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args, then fills every flag not given on the command
// line from its STRAND_<FLAG> environment variable, then (client commands)
// every flag still unset from the selected profile (profile.go). -h and
// --help give a *helpShown carrying the command's help.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return &helpShown{text: commandUsage(strings.TrimPrefix(fs.Name(), "strand "), fs)}
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
	if envErr != nil {
		return envErr
	}
	return applyProfile(fs)
}

// flagSet reports whether flag was given on the command line or through
// its environment variable.
func flagSet(fs *pflag.FlagSet, flag string) bool {
	_, env := os.LookupEnv(envName(flag))
	return fs.Changed(flag) || env
}

// envName is the environment variable of a flag: --data-dir is STRAND_DATA_DIR.
func envName(flag string) string {
	return "STRAND_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// clientFlags are the flags every client command shares.
type clientFlags struct {
	brokers []string
	timeout time.Duration
	tls     clientTLSFlags
	sasl    saslClientFlags
}

func (c *clientFlags) register(fs *pflag.FlagSet, timeout time.Duration) {
	c.registerConnection(fs, timeout)
	fs.String("profile", "", "take unset client flags from this profile (default: STRAND_PROFILE, else the current one; see strand profile)")
}

// registerConnection registers the connection flags: brokers, timeout,
// TLS and SASL (what a profile stores).
func (c *clientFlags) registerConnection(fs *pflag.FlagSet, timeout time.Duration) {
	fs.StringSliceVarP(&c.brokers, "brokers", "b", []string{"127.0.0.1:9192"}, "cluster addresses to bootstrap from (comma separated)")
	fs.DurationVar(&c.timeout, "timeout", timeout, "give up on the cluster after this long")
	c.tls.register(fs)
	c.sasl.register(fs)
}

// brokerDialTimeout bounds each connection attempt of reachable.
const brokerDialTimeout = 2 * time.Second

// client connects to the cluster the flags name. It fails at once when no
// broker accepts a connection, rather than retrying until --timeout: a
// user who typed a wrong address, or has no cluster running, learns it
// within seconds.
func (c *clientFlags) client(opts ...clientlib.Opt) (*clientlib.Client, error) {
	tlsOpts, err := c.tlsOpts()
	if err != nil {
		return nil, err
	}
	secOpts := append(tlsOpts, c.sasl.opts()...)
	if err := c.reachable(secOpts); err != nil {
		return nil, err
	}
	base := append([]clientlib.Opt{clientlib.SeedAddresses(c.brokers...), clientlib.ClientID("strand-cli"),
		clientlib.DialTimeout(brokerDialTimeout)}, secOpts...)
	return clientlib.NewClient(append(base, opts...)...)
}

// run connects as the flags say and calls fn with the client and a context
// bounded by --timeout, closing both after.
func (c *clientFlags) run(fn func(ctx context.Context, cl *clientlib.Client) error) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	return fn(ctx, cl)
}

// reachable fails when no broker can be connected to. It asks for
// metadata with one retry only, through the protocol (a bare TCP probe
// would make every node log a connection closed before hello); any answer,
// even an error, means the cluster is there.
func (c *clientFlags) reachable(secOpts []clientlib.Opt) error {
	if len(c.brokers) == 0 {
		return usageError("--brokers: no address given")
	}
	probe, err := clientlib.NewClient(append([]clientlib.Opt{clientlib.SeedAddresses(c.brokers...), clientlib.ClientID("strand-cli"),
		clientlib.DialTimeout(brokerDialTimeout), clientlib.RequestTimeout(brokerDialTimeout), clientlib.MaxRetries(1)}, secOpts...)...)
	if err != nil {
		return err
	}
	defer probe.Close()
	ctx, cancel := context.WithTimeout(context.Background(), min(c.timeout, 2*brokerDialTimeout))
	defer cancel()
	_, err = probe.Metadata(ctx)
	var conn *clientlib.ConnError
	var te *clientlib.TLSError
	switch {
	case errors.As(err, &te):
		return userErr(err, "%s", te.Error())
	case err == nil || !errors.As(err, &conn):
		return nil
	}
	var op *net.OpError
	if !errors.As(err, &op) {
		return userErr(err, "%s", connMessage(strings.Join(c.brokers, ","), conn.Err))
	}
	return userErr(err, "%s", unreachableMessage(strings.Join(c.brokers, ","), conn.Err))
}

// signalContext is cancelled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
