package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/node/server"
	"github.com/strandlog/strand/proto/strandpb"
)

// Security commands (issue 13): `strand user`, `strand acl`, `strand
// quota`, the serve flags that turn SASL and ACLs on, and the client
// flags that authenticate.

// securityFlags are serve's security flags.
type securityFlags struct {
	sasl          bool
	authorization bool
	superUsers    []string
	bootUser      string
	bootPassword  string
}

func (s *securityFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&s.sasl, "sasl-enabled", false, "require SASL/SCRAM (SCRAM-SHA-256 or -512) on the client and Kafka listeners")
	fs.BoolVar(&s.authorization, "authorization", false, "check ACLs on every request (off: everything is allowed)")
	fs.StringSliceVar(&s.superUsers, "super-users", nil, "principals the ACLs do not restrict, e.g. User:admin")
	fs.StringVar(&s.bootUser, "sasl-bootstrap-user", "", "create this user (a super user) when missing: the first administrator")
	fs.StringVar(&s.bootPassword, "sasl-bootstrap-password", "", "its password (better: STRAND_SASL_BOOTSTRAP_PASSWORD)")
}

// apply validates the flags and sets them on cfg.
func (s *securityFlags) apply(cfg *server.Config) error {
	if (s.bootUser == "") != (s.bootPassword == "") {
		return usageError("--sasl-bootstrap-user and --sasl-bootstrap-password go together")
	}
	if s.bootUser != "" && !s.sasl {
		return usageError("--sasl-bootstrap-user needs --sasl-enabled")
	}
	for _, p := range s.superUsers {
		if !strings.HasPrefix(p, "User:") || len(p) == len("User:") {
			return usageError("--super-users %q: want User:NAME", p)
		}
		cfg.Core.SuperUsers = append(cfg.Core.SuperUsers, node.Principal(p))
	}
	cfg.Core.Authorization = s.authorization
	cfg.SASL, cfg.SASLBootstrapUser, cfg.SASLBootstrapPassword = s.sasl, s.bootUser, s.bootPassword
	return nil
}

// saslClientFlags are the client commands' authentication flags.
type saslClientFlags struct {
	mechanism, user, password string
}

func (s *saslClientFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&s.mechanism, "sasl-mechanism", "SCRAM-SHA-256", "SCRAM-SHA-256 or SCRAM-SHA-512")
	fs.StringVar(&s.user, "sasl-user", "", "authenticate as this user (nodes started with --sasl-enabled)")
	fs.StringVar(&s.password, "sasl-password", "", "its password (better: STRAND_SASL_PASSWORD)")
}

// opts is the client option for the flags; none without --sasl-user.
func (s *saslClientFlags) opts() []clientlib.Opt {
	if s.user == "" {
		return nil
	}
	return []clientlib.Opt{clientlib.SASL(s.mechanism, s.user, s.password)}
}

var (
	userSubcommands  = []string{"create", "delete", "list"}
	aclSubcommands   = []string{"add", "list", "remove"}
	quotaSubcommands = []string{"set", "list"}
)

// securityCommand parses a security command's subcommand and flags and
// connects; run gets the client and the positional arguments.
func securityCommand(group string, subs []string, args []string, register func(sub string, fs *pflag.FlagSet),
	run func(ctx context.Context, c *clientlib.Client, sub string, names []string) error) error {
	if len(args) == 0 {
		return usageError("%s: want a subcommand: %s", group, strings.Join(subs, ", "))
	}
	sub, rest := args[0], args[1:]
	switch {
	case sub == "-h" || sub == "--help" || sub == "help":
		return &helpShown{text: groupUsage(group)}
	case !slices.Contains(subs, sub):
		return usageError("%s: unknown subcommand %q: want %s", group, sub, strings.Join(subs, ", "))
	}
	fs := newFlags(group + " " + sub)
	var cf clientFlags
	cf.register(fs, 30*time.Second)
	register(sub, fs)
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	if f := fs.Lookup("format"); f != nil { // refused before connecting
		if err := (&outputFormat{value: f.Value.String()}).validate(); err != nil {
			return err
		}
	}
	return cf.run(func(ctx context.Context, c *clientlib.Client) error { return run(ctx, c, sub, fs.Args()) })
}

// cmdUser runs `strand user create|delete|list`.
func cmdUser(args []string, stdin io.Reader, stdout io.Writer) error {
	var password, mechanism string
	var fromStdin bool
	var format outputFormat
	return securityCommand("user", userSubcommands, args, func(sub string, fs *pflag.FlagSet) {
		if sub == "list" {
			format.register(fs)
		}
		if sub == "create" {
			fs.StringVar(&password, "password", "", "the user's password (better: --password-stdin)")
			fs.BoolVar(&fromStdin, "password-stdin", false, "read the password from the first line of stdin")
			fs.StringVar(&mechanism, "mechanism", "", "SCRAM-SHA-256 or SCRAM-SHA-512 (default: both)")
		}
	}, func(ctx context.Context, c *clientlib.Client, sub string, names []string) error {
		if (sub == "list") != (len(names) == 0) || len(names) > 1 {
			return usageError("user %s: want %s", sub, map[bool]string{true: "no argument", false: "one user name"}[sub == "list"])
		}
		if err := format.validate(); err != nil {
			return err
		}
		switch sub {
		case "list":
			return userList(ctx, c, stdout, format)
		case "delete":
			if err := c.DeleteUser(ctx, names[0]); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "deleted user %s\n", names[0])
			return nil
		}
		return userCreate(ctx, c, stdin, stdout, names[0], password, fromStdin, mechanism)
	})
}

// userCreate salts the password here and stores the credential.
func userCreate(ctx context.Context, c *clientlib.Client, stdin io.Reader, stdout io.Writer, name, password string, fromStdin bool, mechanism string) error {
	if fromStdin == (password != "") {
		return usageError("user create: give exactly one of --password-stdin and --password")
	}
	if fromStdin {
		line, err := bufio.NewReader(io.LimitReader(stdin, 4096)).ReadString('\n')
		if err != nil && err != io.EOF {
			return err
		}
		password = strings.TrimRight(line, "\r\n")
		if password == "" {
			return usageError("user create: an empty password on stdin")
		}
	}
	mechs := []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}
	if mechanism != "" {
		mechs = []string{mechanism}
	}
	for _, m := range mechs {
		if err := c.CreateUser(ctx, name, password, m); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "created user %s (%s); principal User:%s\n", name, strings.Join(mechs, ", "), name)
	return nil
}

// userList prints users and their mechanisms.
func userList(ctx context.Context, c *clientlib.Client, stdout io.Writer, format outputFormat) error {
	users, err := c.ListUsers(ctx)
	if err != nil {
		return err
	}
	if format.json() {
		type userEntry struct {
			Name       string   `json:"name"`
			Mechanisms []string `json:"mechanisms"`
		}
		out := make([]userEntry, 0, len(users))
		for _, u := range users {
			out = append(out, userEntry{Name: u.Name, Mechanisms: u.Mechanisms})
		}
		return writeJSON(stdout, out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tMECHANISMS")
	for _, u := range users {
		fmt.Fprintf(tw, "%s\t%s\n", u.Name, strings.Join(u.Mechanisms, ","))
	}
	return tw.Flush()
}

// aclFlags are kafka-acls-like flags naming bindings.
type aclFlags struct {
	allow, deny      []string
	operations       []string
	topic, group     string
	txnID            string
	cluster          bool
	patternType      string
	host             string
	principal        string // list filter
	resourceNameOnly string
	format           outputFormat
}

func (a *aclFlags) register(sub string, fs *pflag.FlagSet) {
	if sub == "list" {
		fs.StringVar(&a.principal, "principal", "", "only this principal's bindings")
		fs.StringVar(&a.resourceNameOnly, "resource", "", "only bindings on this resource name")
		a.format.register(fs)
		return
	}
	fs.StringSliceVar(&a.allow, "allow-principal", nil, "allow these principals (User:NAME, User:*)")
	fs.StringSliceVar(&a.deny, "deny-principal", nil, "deny these principals (deny wins over allow)")
	fs.StringSliceVar(&a.operations, "operation", nil, "read, write, create, delete, describe, alter, describe-configs, alter-configs or all")
	fs.StringVar(&a.topic, "topic", "", "the topic (or prefix, or * for every topic)")
	fs.StringVar(&a.group, "group", "", "the consumer group (or prefix, or *)")
	fs.BoolVar(&a.cluster, "cluster", false, "the cluster (create topics, manage users, ACLs and quotas)")
	fs.StringVar(&a.txnID, "transactional-id", "", "the transactional id (or prefix, or *): WRITE runs transactions with it, DESCRIBE finds and describes them")
	fs.StringVar(&a.patternType, "resource-pattern-type", "literal", "literal or prefixed")
	fs.StringVar(&a.host, "host", "*", "the client IP the binding applies to")
}

// bindings builds the bindings the flags name.
func (a *aclFlags) bindings() ([]*strandpb.AclBinding, error) {
	var rtype, name string
	n := 0
	if a.topic != "" {
		rtype, name, n = "topic", a.topic, n+1
	}
	if a.group != "" {
		rtype, name, n = "group", a.group, n+1
	}
	if a.cluster {
		rtype, name, n = "cluster", "kafka-cluster", n+1
	}
	if a.txnID != "" {
		rtype, name, n = "transactional-id", a.txnID, n+1
	}
	if n != 1 {
		return nil, usageError("name exactly one resource: --topic, --group, --cluster or --transactional-id")
	}
	if len(a.allow)+len(a.deny) == 0 || len(a.operations) == 0 {
		return nil, usageError("want --allow-principal or --deny-principal, and --operation")
	}
	var out []*strandpb.AclBinding
	for perm, principals := range map[string][]string{"allow": a.allow, "deny": a.deny} {
		for _, p := range principals {
			for _, op := range a.operations {
				out = append(out, &strandpb.AclBinding{Principal: p, ResourceType: rtype, ResourceName: name,
					PatternType: strings.ToLower(a.patternType), Operation: strings.ToLower(op), Permission: perm, Host: a.host})
			}
		}
	}
	slices.SortFunc(out, func(x, y *strandpb.AclBinding) int { return strings.Compare(x.String(), y.String()) })
	return out, nil
}

// cmdACL runs `strand acl add|list|remove`.
func cmdACL(args []string, stdout io.Writer) error {
	var af aclFlags
	return securityCommand("acl", aclSubcommands, args, af.register, func(ctx context.Context, c *clientlib.Client, sub string, names []string) error {
		if len(names) != 0 {
			return usageError("acl %s takes no arguments, got %q", sub, names)
		}
		if sub == "list" {
			if err := af.format.validate(); err != nil {
				return err
			}
			return aclList(ctx, c, stdout, af.principal, af.resourceNameOnly, af.format)
		}
		bs, err := af.bindings()
		if err != nil {
			return err
		}
		var added, removed int
		if sub == "add" {
			added, _, err = c.AlterACLs(ctx, bs, nil)
		} else {
			_, removed, err = c.AlterACLs(ctx, nil, bs)
		}
		if err != nil {
			return err
		}
		if sub == "add" {
			fmt.Fprintf(stdout, "%s added\n", plural(int(added), "binding"))
		} else {
			fmt.Fprintf(stdout, "%s removed\n", plural(int(removed), "binding"))
		}
		return nil
	})
}

// aclList prints the bindings and quotas.
func aclList(ctx context.Context, c *clientlib.Client, stdout io.Writer, principal, resource string, format outputFormat) error {
	d, err := c.DescribeACLs(ctx, principal, resource)
	if err != nil {
		return err
	}
	if format.json() {
		type bindingEntry struct {
			Principal    string `json:"principal"`
			Permission   string `json:"permission"`
			Operation    string `json:"operation"`
			ResourceType string `json:"resource_type"`
			ResourceName string `json:"resource_name"`
			PatternType  string `json:"pattern_type"`
			Host         string `json:"host"`
		}
		out := make([]bindingEntry, 0, len(d.GetBindings()))
		for _, b := range d.GetBindings() {
			out = append(out, bindingEntry{Principal: b.GetPrincipal(), Permission: b.GetPermission(), Operation: b.GetOperation(),
				ResourceType: b.GetResourceType(), ResourceName: b.GetResourceName(), PatternType: b.GetPatternType(), Host: b.GetHost()})
		}
		return writeJSON(stdout, out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PRINCIPAL\tPERMISSION\tOPERATION\tRESOURCE\tNAME\tPATTERN\tHOST")
	for _, b := range d.GetBindings() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.GetPrincipal(), b.GetPermission(), b.GetOperation(), b.GetResourceType(),
			b.GetResourceName(), b.GetPatternType(), b.GetHost())
	}
	return tw.Flush()
}

// cmdQuota runs `strand quota set PRINCIPAL --produce-bytes-per-sec N
// --fetch-bytes-per-sec N` and `strand quota list`.
func cmdQuota(args []string, stdout io.Writer) error {
	var produce, fetch int64
	var format outputFormat
	return securityCommand("quota", quotaSubcommands, args, func(sub string, fs *pflag.FlagSet) {
		if sub == "list" {
			format.register(fs)
		}
		if sub == "set" {
			fs.Int64Var(&produce, "produce-bytes-per-sec", 0, "produce bytes per second per node (0: unlimited)")
			fs.Int64Var(&fetch, "fetch-bytes-per-sec", 0, "fetch bytes per second per node (0: unlimited)")
		}
	}, func(ctx context.Context, c *clientlib.Client, sub string, names []string) error {
		if sub == "list" {
			if err := format.validate(); err != nil {
				return err
			}
			return quotaList(ctx, c, stdout, format)
		}
		if len(names) != 1 || produce < 0 || fetch < 0 {
			return usageError("quota set: want one principal (User:NAME) and rates >= 0")
		}
		if err := c.SetQuota(ctx, names[0], produce, fetch); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "quota of %s: produce %d B/s, fetch %d B/s per node (0: unlimited)\n", names[0], produce, fetch)
		return nil
	})
}

// quotaList prints the quotas, as a table or JSON.
func quotaList(ctx context.Context, c *clientlib.Client, stdout io.Writer, format outputFormat) error {
	d, err := c.DescribeACLs(ctx, "", "")
	if err != nil {
		return err
	}
	if format.json() {
		type quotaEntry struct {
			Principal          string `json:"principal"`
			ProduceBytesPerSec int64  `json:"produce_bytes_per_sec"`
			FetchBytesPerSec   int64  `json:"fetch_bytes_per_sec"`
		}
		out := make([]quotaEntry, 0, len(d.GetQuotas()))
		for _, q := range d.GetQuotas() {
			out = append(out, quotaEntry{Principal: q.GetPrincipal(), ProduceBytesPerSec: q.GetProduceBytesPerSec(), FetchBytesPerSec: q.GetFetchBytesPerSec()})
		}
		return writeJSON(stdout, out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PRINCIPAL\tPRODUCE_BYTES_PER_SEC\tFETCH_BYTES_PER_SEC")
	for _, q := range d.GetQuotas() {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", q.GetPrincipal(), q.GetProduceBytesPerSec(), q.GetFetchBytesPerSec())
	}
	return tw.Flush()
}
