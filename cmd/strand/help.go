package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/pflag"
)

// command describes one command or subcommand for help: the top-level
// usage, `strand CMD --help` and `strand help CMD` all print from this one
// table, so a synopsis cannot drift between them.
type command struct {
	name    string // "topic create"
	args    string // positional arguments and flags, after the name
	summary string // one line
	example string
}

// commands lists every command in the order the top-level help shows them.
var commands = []command{
	{"dev", "[--nodes 3] [--base-port 9092] [--data-dir DIR] [--tls]",
		"run a local cluster in this process, Kafka on base-port.., Strand on base-port+100.., console and metrics on base-port+200 (Ctrl-C stops it)",
		"strand dev --nodes 3"},
	{"serve", "--id N --peers 1=HOST:PORT,2=HOST:PORT,... --data-dir DIR [--kafka-listen HOST:PORT] [--admin-listen HOST:PORT] [--tls-cert F --tls-key F --tls-ca F] [--sasl-enabled] [--authorization --super-users User:admin]",
		"run one node of a cluster",
		"strand serve --id 1 --data-dir /var/lib/strand --peers 1=node1:9192,2=node2:9192,3=node3:9192 --kafka-listen 0.0.0.0:9092"},
	{"topic create", "NAME [-p PARTITIONS] [-r REPLICATION-FACTOR] [-c KEY=VALUE]...",
		"create a topic",
		"strand topic create hello --partitions 3"},
	{"topic list", "[--internal] [--format text|json]", "print every topic's name (internal __ topics with --internal)",
		"strand topic list --format json"},
	{"topic describe", "NAME [--format text|json]", "print a topic's settings and its partitions' leaders and offsets",
		"strand topic describe hello"},
	{"topic alter", "NAME [-c KEY=VALUE]... [--delete-config KEY]...",
		"change a topic's configuration (retention.ms, retention.bytes, segment.bytes, segment.ms)",
		"strand topic alter hello --config retention.ms=60000"},
	{"topic add-partitions", "NAME (-p TOTAL | -n COUNT) [--validate-only]",
		"add partitions to a topic (never removes any; keyed records of later writes may map to new partitions)",
		"strand topic add-partitions hello --partitions 6"},
	{"topic delete-records", "NAME --partition P --before OFFSET",
		"delete a partition's records below OFFSET (-1: all); the log start moves there",
		"strand topic delete-records hello --partition 0 --before 100"},
	{"topic delete", "NAME", "delete a topic and all its records", "strand topic delete hello"},
	{"topic recover", "NAME --from-bucket [--tier-dir DIR | --s3-endpoint URL --s3-bucket B ...]",
		"rebuild a tiered topic the cluster lost from the object store: same name, partitions, configs and offsets (a new topic id), printing the offsets recovered per partition; records acknowledged but not yet uploaded are lost",
		"strand topic recover orders --from-bucket --tier-dir /var/lib/strand-bucket"},
	{"partition move", "TOPIC/PARTITION (--replicas ID,ID,... | --cancel) [--no-wait] [--allow-rf-change]",
		"move a partition's replicas to other nodes (learners catch up, then one joint raft change); waits and prints progress; refuses to change the replica count without --allow-rf-change",
		"strand partition move hello/0 --replicas 1,4,5"},
	{"produce", "TOPIC [-K SEP] [-k KEY | --key-file F] [-H KEY=VALUE]... [-Z] [-D DELIM] [--value-file F]... [-p PARTITION] [--acks all|1|0] [--transactional-id ID]",
		"send each line of stdin (or each -D-delimited record, byte for byte) as one record, or each --value-file whole",
		"printf 'alice:hi\\nbob:\\n' | strand produce hello -K : -H source=cli -Z   # bob's empty value is a null (tombstone)\n" +
			"  strand produce hello --value-file photo.jpg --key-file photo.id     # one record: the file's bytes\n" +
			"  printf 'a\\r\\nb\\r\\n' | strand produce hello -D '\\r\\n'                 # CRLF input; without -D the \\r is kept\n" +
			"  printf 'debit\\ncredit\\n' | strand produce ledger --transactional-id transfer-42   # both records or neither"},
	{"consume", "TOPIC [-o START] [-o e@TIME] [-p PARTITION] [-e] [-f FORMAT | -J] [-Z] [-D DELIM] [-K DELIM] [-c N] [-g GROUP [--instance-id ID] [--exec CMD [--max-attempts N] [--retry-backoff D] [--dlq-topic T] [--retry-topic T]]]",
		"print a topic's records (until Ctrl-C, with -e until the end, or until the end -o names); with -g, share them among a group; with --exec, run a command per record and dead-letter what keeps failing",
		"strand consume hello -o -10 -e                        # the last 10 records of each partition\n" +
			"  strand consume hello -o s@1764590400000 -o e@1764594000000   # records in that hour (Unix ms, kcat)\n" +
			"  strand consume hello -o @-1h -J                        # the last hour as kcat -J JSON, then follow\n" +
			"  strand consume hello -e -f '%p/%o %k=%v [%h]\\n' -Z      # partition/offset key=value [headers], null as NULL\n" +
			"  strand consume hello --group readers\n" +
			"  strand consume hello --group loaders --exec 'jq -e .id >/dev/null' -e   # what is not JSON with an id goes to hello.dlq"},
	{"group list", "[--format text|json]", "print every consumer group, its state and member count", "strand group list"},
	{"group describe", "GROUP [--isolation read_uncommitted|read_committed] [--format text|json]",
		"print a group's members and, per partition, committed offset, lag in records and time, and retention headroom; lag runs to the high-water mark, or with --isolation read_committed to the last stable offset (an open transaction's first record), where read_committed consumers stop",
		"strand group describe readers\n  strand group describe loaders --isolation read_committed   # lag as read_committed consumers see it"},
	{"group reset", "GROUP -t TOPIC (--to-earliest|--to-latest|--to-offset N|--to-datetime RFC3339|--shift-by N) [--execute]",
		"plan (and with --execute apply) new committed offsets for a group without members: replay or skip",
		"strand group reset readers -t hello --to-datetime 2026-11-30T18:00:00Z --execute"},
	{"group delete", "GROUP", "delete a group without members and its committed offsets", "strand group delete readers"},
	{"dlq describe", "TOPIC [--format text|json]",
		"print a dead-letter topic's letters grouped by source partition and error, with how many were redriven",
		"strand dlq describe hello.dlq"},
	{"dlq redrive", "TOPIC [--to SOURCE] [--filter-error TEXT]",
		"write dead letters back to their source topic (or --to) and record them, so running it again writes nothing twice",
		"strand dlq redrive hello.dlq --filter-error timeout"},
	{"cluster", "[--internal] [--format text|json]",
		"print nodes (membership state, up or down as the metadata leader sees it, metadata role), topics, partitions, leaders and high-water marks",
		"strand cluster --format json"},
	{"cluster health", "[--format text|json]",
		"say what is wrong, one line per problem (nodes down, full disks, partitions under-replicated or without a leader), or healthy; exit 1 when unhealthy",
		"strand cluster health || echo 'cluster needs attention'"},
	{"cluster rebalance", "[--dry-run] [--internal] [--format text|json]", "spread replicas and preferred leaders evenly over the active nodes, rack-aware (--dry-run prints the plan; moves of internal __ topics are counted, listed with --internal)",
		"strand cluster rebalance --dry-run"},
	{"cluster leaders", "[--balance]", "list partitions not led by their preferred replica; --balance hands leadership back to it",
		"strand cluster leaders --balance"},
	{"cluster wait", "[--timeout 30s]", "wait until the cluster answers these credentials, has a metadata leader and every partition a leader (exit 1 on timeout)",
		"strand serve --id 1 --data-dir /tmp/s1 --listen 127.0.0.1:9192 & strand cluster wait"},
	{"node add", "--id N --address HOST:PORT [--rack R]", "register a new node; then start it with strand serve --join",
		"strand node add --id 4 --address node4:9192"},
	{"node list", "[--format text|json]", "print every node: address, rack, membership state, metadata role, replica and preferred-leader counts",
		"strand node list --format json"},
	{"node decommission", "ID [--dry-run] [--internal] [--format text|json]", "move every replica off a node, then remove it from the cluster (--dry-run prints the moves; internal __ topics' moves are counted, listed with --internal)",
		"strand node decommission 1 --dry-run"},
	{"bench produce", "[--duration 10s] [--record-bytes 1024]", "measure producer throughput and latency",
		"strand bench produce --duration 10s"},
	{"bench consume", "[--count N]", "measure consumer throughput (reads what bench produce wrote)",
		"strand bench consume"},
	{"bench e2e", "[--rate 5000]", "measure producer-to-consumer latency at a steady rate",
		"strand bench e2e --rate 5000"},
	{"bench cluster", "[--binary PATH] [--phases produce,consume,e2e,many,fanout] [--duration 10s]",
		"start 3 local servers, run every bench and print one table with the servers' CPU and memory",
		"strand bench cluster --binary /tmp/strand-old --phases produce,e2e --duration 5s"},
	{"bench readers", "[--groups N] [--topic T]", "tail a topic with N independent consumers (the fan-out phase's readers; counts from a stdin line to stdin's end)",
		"strand bench readers --groups 100 --topic bench-fanout"},
	{"user create", "NAME (--password-stdin | --password P) [--mechanism SCRAM-SHA-256|SCRAM-SHA-512]",
		"create a SASL/SCRAM user (the password is salted here and never sent)",
		"echo 's3cret' | strand user create alice --password-stdin --sasl-user admin"},
	{"user delete", "NAME", "delete a user", "strand user delete alice"},
	{"user list", "[--format text|json]", "print users and their mechanisms (never credentials)", "strand user list"},
	{"acl add", "(--allow-principal P | --deny-principal P) --operation OP (--topic T | --group G | --cluster | --transactional-id ID) [--resource-pattern-type literal|prefixed] [--host IP]",
		"add ACL bindings (deny wins; nodes check them with --authorization)",
		"strand acl add --allow-principal User:alice --operation write --topic orders"},
	{"acl list", "[--principal P] [--resource NAME] [--format text|json]", "print ACL bindings", "strand acl list --principal User:alice"},
	{"acl remove", "(--allow-principal P | --deny-principal P) --operation OP (--topic T | --group G | --cluster | --transactional-id ID)",
		"remove ACL bindings (named exactly as added)", "strand acl remove --allow-principal User:alice --operation write --topic orders"},
	{"quota set", "PRINCIPAL [--produce-bytes-per-sec N] [--fetch-bytes-per-sec N]",
		"set a principal's byte rates per node (0: unlimited; both 0 removes the quota)",
		"strand quota set User:alice --produce-bytes-per-sec 1048576"},
	{"quota list", "[--format text|json]", "print quotas", "strand quota list --format json"},
	{"txn list", "[--state S,...] [--format text|json]", "print every transactional id the coordinators hold, its producer id and state",
		"strand txn list --state Ongoing"},
	{"txn describe", "ID [--format text|json]", "print a transactional id's state, producer id and epoch, timeout, and the partitions and groups of its open transaction",
		"strand txn describe orders-etl"},
	{"txn abort", "ID [--format text|json]",
		"abort a transactional id's open (hanging) transaction: its coordinator fences the producer and writes abort markers to every partition of it, so read_committed readers move on (needs ALTER on the cluster or WRITE on the id)",
		"strand txn abort orders-etl"},
	{"txn producers", "TOPIC [--partition N] [--format text|json]",
		"print the producers each partition's leader remembers (Kafka's DescribeProducers): id, epoch, last sequence and write, and where an open transaction began, the one holding the partition's last stable offset back (needs READ on the topic)",
		"strand txn producers orders --partition 0"},
	{"profile create", "NAME [-b HOST:PORT,...] [--tls-ca F] [--sasl-user U ...]",
		"save the client flags given as a named profile (in ~/.config/strand/config.yaml, or $STRAND_CONFIG_FILE) and switch to it",
		"strand profile create prod -b node1:9192,node2:9192 --tls-ca ca.pem --sasl-user admin"},
	{"profile use", "NAME", "make NAME the current profile: client commands take their unset flags from it", "strand profile use prod"},
	{"profile list", "[--format text|json]", "print the profiles, the current one marked * (passwords hidden)", "strand profile list"},
	{"profile delete", "NAME", "delete a profile", "strand profile delete prod"},
	{"completion", "bash|zsh|fish", "print a shell completion script for strand's commands and flags",
		"source <(strand completion bash)"},
	{"version", "", "print strand's version, commit and Go version", "strand version"},
	{"help", "[COMMAND [SUBCOMMAND]]", "print help for a command", "strand help topic create"},
}

// commandGroups are the commands that take a subcommand.
var commandGroups = map[string]string{
	"topic":     "create, list, describe, alter and delete topics; add partitions; delete old records",
	"bench":     "measure a running cluster",
	"group":     "list, describe, reset and delete consumer groups",
	"dlq":       "inspect dead-letter topics (what consume --exec gave up on) and redrive them",
	"user":      "create, delete and list SASL/SCRAM users",
	"acl":       "add, list and remove ACL bindings",
	"quota":     "set and list per-principal byte rates",
	"txn":       "list, describe and abort transactional ids' transactions (what Kafka clients' and Strand's transactions hold); show partitions' producers",
	"node":      "list, add and decommission nodes",
	"partition": "move partitions between nodes",
	"profile":   "named sets of client flags (brokers, TLS, SASL): create, use, list and delete them",
}

// lookupCommand finds name ("topic create") in commands.
func lookupCommand(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// topUsage is the top-level help.
func topUsage() string {
	var b strings.Builder
	b.WriteString("strand: a replicated log.\n\nUsage:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  strand %s\n", strings.TrimSpace(c.name+" "+c.args))
		fmt.Fprintf(&b, "      %s\n", c.summary)
	}
	b.WriteString(`
Client commands talk to -b/--brokers (default 127.0.0.1:9192, where 'strand dev' listens);
client flags may also come before the command: strand -b HOST:PORT topic list.
Every flag is also an environment variable STRAND_<FLAG> (--brokers: STRAND_BROKERS).
A client flag's value comes from the command line, else STRAND_<FLAG>, else the profile
(--profile NAME, else STRAND_PROFILE, else the current one: see strand profile), else its default.
'strand CMD --help' or 'strand help CMD' describes a command and its flags.
`)
	return b.String()
}

// groupUsage is the help of `strand topic` or `strand bench`.
func groupUsage(group string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "strand %s: %s\n\nUsage:\n", group, commandGroups[group])
	var example string
	for _, c := range commands {
		if sub, ok := strings.CutPrefix(c.name, group+" "); ok {
			fmt.Fprintf(&b, "  strand %s %s\n      %s\n", group, strings.TrimSpace(sub+" "+c.args), c.summary)
			if example == "" {
				example = c.example
			}
		}
	}
	fmt.Fprintf(&b, "\nExample:\n  %s\n\n'strand %s SUBCOMMAND --help' lists a subcommand's flags.\n", example, group)
	return b.String()
}

// commandUsage is the help of one command: synopsis, summary, example and
// its flags.
func commandUsage(name string, fs *pflag.FlagSet) string {
	var b strings.Builder
	c, ok := lookupCommand(name)
	if !ok {
		c = command{name: name}
	}
	fmt.Fprintf(&b, "strand %s: %s\n\nUsage:\n  strand %s [flags]\n", c.name, c.summary, strings.TrimSpace(c.name+" "+c.args))
	if c.example != "" {
		fmt.Fprintf(&b, "\nExample:\n  %s\n", c.example)
	}
	if fs != nil && fs.HasFlags() {
		fmt.Fprintf(&b, "\nFlags:\n%s", fs.FlagUsages())
		b.WriteString("\nEvery flag can also be set as STRAND_<FLAG> (e.g. --brokers: STRAND_BROKERS).\n")
	}
	return b.String()
}

// helpShown is returned by parseFlags for -h and --help: run prints text
// to stdout and exits 0.
type helpShown struct{ text string }

func (h *helpShown) Error() string { return "help requested" }

// version is set at build time: go build -ldflags "-X main.version=v1.2.3".
var version = ""

// commit is set at build time (make build: -X main.commit=...); empty, the
// build info's vcs.revision is used.
var commit = ""

// versionText is what `strand version` prints: the version (from -ldflags,
// else the module version from the build info), the commit when the
// binary was built from a git checkout, and the Go version.
func versionText() string {
	v, rev, modified := version, commit, false
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if rev == "" {
					rev = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	switch {
	case rev == "":
		rev = "unknown"
	case modified:
		rev += " (modified)"
	}
	return fmt.Sprintf("strand %s\ncommit %s\n%s %s/%s\n", v, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// cmdVersion prints versionText.
func cmdVersion(args []string, stdout io.Writer) error {
	fs := newFlags("version")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("version takes no arguments")
	}
	_, err := io.WriteString(stdout, versionText())
	return err
}
