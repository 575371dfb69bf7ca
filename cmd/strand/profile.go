package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// Profiles (rpk profiles, NATS contexts): named sets of client flag values
// (brokers, TLS, SASL, timeout) kept in one YAML file, so a user who works
// with several clusters names one instead of retyping its flags:
//
//	current: prod
//	profiles:
//	  prod:
//	    brokers: node1:9192,node2:9192
//	    tls-ca: /etc/strand/ca.pem
//	    sasl-user: admin
//
// A client flag's value comes from, first to last: the command line, its
// STRAND_<FLAG> environment variable, the profile (--profile NAME, else
// STRAND_PROFILE, else the file's current), the flag's default.

// configFileEnv names the profile file instead of the default path. It is
// not STRAND_CONFIG: that is topic create's --config.
const configFileEnv = "STRAND_CONFIG_FILE"

// profileConfig is the profile file.
type profileConfig struct {
	Current  string                       `yaml:"current,omitempty" json:"current,omitempty"`
	Profiles map[string]map[string]string `yaml:"profiles,omitempty" json:"profiles,omitempty"`
}

// configPath is the profile file's path: $STRAND_CONFIG_FILE, else
// strand/config.yaml in the user's configuration directory
// (~/.config/strand/config.yaml on Linux).
func configPath() (string, error) {
	if p := os.Getenv(configFileEnv); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", userErr(err, "no configuration directory for profiles (%v); set %s to a file path", err, configFileEnv)
	}
	return filepath.Join(dir, "strand", "config.yaml"), nil
}

// loadProfiles reads the profile file; a missing file is an empty one.
func loadProfiles() (profileConfig, string, error) {
	var cfg profileConfig
	path, err := configPath()
	if err != nil {
		return cfg, "", err
	}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return cfg, path, nil
	case err != nil:
		return cfg, path, userErr(err, "profile file %s: %v", path, rootCauseFile(err))
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return cfg, path, userErr(err, "profile file %s is not valid YAML (%v): fix or delete it", path, err)
	}
	return cfg, path, nil
}

// save writes the profile file (0600: it may hold a SASL password).
func (cfg profileConfig) save(path string) error {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return userErr(err, "profile file %s: %v", path, rootCauseFile(err))
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return userErr(err, "profile file %s: %v", path, rootCauseFile(err))
	}
	return os.Rename(tmp, path)
}

// applyProfile fills the flags of fs that neither the command line nor
// the environment set from the selected profile. Only flag sets with
// --profile (the client commands) take profiles. No profile selected and
// no file: nothing happens.
func applyProfile(fs *pflag.FlagSet) error {
	pf := fs.Lookup("profile")
	if pf == nil {
		return nil
	}
	cfg, path, err := loadProfiles()
	if err != nil {
		return err
	}
	name := pf.Value.String()
	if name == "" {
		name = cfg.Current
	}
	if name == "" {
		return nil
	}
	values, ok := cfg.Profiles[name]
	if !ok {
		return usageError("profile %q does not exist in %s ('strand profile list' shows the profiles)", name, path)
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f := fs.Lookup(k)
		if f == nil || f.Changed || k == "profile" {
			continue
		}
		if err := fs.Set(k, values[k]); err != nil {
			return usageError("profile %q in %s: %s: %q: %v", name, path, k, values[k], err)
		}
	}
	return nil
}

// profileSubcommands are the subcommands of `strand profile`.
var profileSubcommands = []string{"create", "use", "list", "delete"}

// cmdProfile runs `strand profile create|use|list|delete`.
func cmdProfile(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError("profile: want a subcommand: %s", strings.Join(profileSubcommands, ", "))
	}
	sub, rest := args[0], args[1:]
	switch {
	case sub == "-h" || sub == "--help" || sub == "help":
		return &helpShown{text: groupUsage("profile")}
	case !slices.Contains(profileSubcommands, sub):
		return usageError("profile: unknown subcommand %q: want %s", sub, strings.Join(profileSubcommands, ", "))
	}
	fset := newFlags("profile " + sub)
	var cf clientFlags
	var format outputFormat
	switch sub {
	case "create":
		cf.registerConnection(fset, 30*time.Second)
	case "list":
		format.register(fset)
	}
	if err := fset.Parse(rest); err != nil { // no environment, no profile: only what is typed is stored
		if errors.Is(err, pflag.ErrHelp) {
			return &helpShown{text: commandUsage("profile "+sub, fset)}
		}
		return usageError("%v", err)
	}
	if err := format.validate(); err != nil {
		return err
	}
	names := fset.Args()
	if (sub == "list") != (len(names) == 0) || len(names) > 1 {
		return usageError("profile %s: want %s", sub, map[bool]string{true: "no argument", false: "one profile name"}[sub == "list"])
	}
	cfg, path, err := loadProfiles()
	if err != nil {
		return err
	}
	if sub == "list" {
		return profileList(stdout, cfg, format)
	}
	return profileChange(stdout, cfg, path, sub, names[0], fset)
}

// profileChange runs create, use and delete, and saves the file.
func profileChange(w io.Writer, cfg profileConfig, path, sub, name string, fset *pflag.FlagSet) error {
	_, exists := cfg.Profiles[name]
	switch {
	case sub == "create" && exists:
		return userErr(nil, "profile %q already exists in %s: delete it first (strand profile delete %s)", name, path, name)
	case sub == "create" && (name == "" || strings.ContainsAny(name, " \t\n")):
		return usageError("profile create: %q: want a name without spaces", name)
	case sub != "create" && !exists:
		return userErr(nil, "profile %q does not exist in %s ('strand profile list' shows the profiles)", name, path)
	}
	switch sub {
	case "create":
		values := map[string]string{}
		fset.Visit(func(f *pflag.Flag) { values[f.Name] = flagText(f) })
		if cfg.Profiles == nil {
			cfg.Profiles = map[string]map[string]string{}
		}
		cfg.Profiles[name], cfg.Current = values, name
	case "use":
		cfg.Current = name
	case "delete":
		delete(cfg.Profiles, name)
		if cfg.Current == name {
			cfg.Current = ""
		}
	}
	if err := cfg.save(path); err != nil {
		return err
	}
	switch sub {
	case "create":
		fmt.Fprintf(w, "created profile %s in %s and switched to it\n", name, path)
	case "use":
		fmt.Fprintf(w, "switched to profile %s\n", name)
	default:
		fmt.Fprintf(w, "deleted profile %s\n", name)
	}
	return nil
}

// flagText is a flag's value as the profile stores it: slices joined by
// commas, the way the command line takes them.
func flagText(f *pflag.Flag) string {
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		return strings.Join(sv.GetSlice(), ",")
	}
	return f.Value.String()
}

// profileList prints the profiles, the current one marked with *.
func profileList(w io.Writer, cfg profileConfig, format outputFormat) error {
	names := make([]string, 0, len(cfg.Profiles))
	for n := range cfg.Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	if format.json() {
		type entry struct {
			Name    string            `json:"name"`
			Current bool              `json:"current"`
			Values  map[string]string `json:"values"`
		}
		out := make([]entry, 0, len(names))
		for _, n := range names {
			out = append(out, entry{Name: n, Current: n == cfg.Current, Values: redacted(cfg.Profiles[n])})
		}
		return writeJSON(w, out)
	}
	if len(names) == 0 {
		fmt.Fprintln(w, "no profiles (strand profile create NAME --brokers HOST:PORT creates one)")
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "CURRENT\tNAME\tBROKERS\tSETTINGS")
	for _, n := range names {
		mark := ""
		if n == cfg.Current {
			mark = "*"
		}
		v := redacted(cfg.Profiles[n])
		brokers := v["brokers"]
		if brokers == "" {
			brokers = "-"
		}
		var settings []string
		for k, val := range v {
			if k != "brokers" {
				settings = append(settings, k+"="+val)
			}
		}
		sort.Strings(settings)
		if len(settings) == 0 {
			settings = []string{"-"}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", mark, n, brokers, strings.Join(settings, " "))
	}
	return tw.Flush()
}

// redacted is a profile's values with its password hidden.
func redacted(values map[string]string) map[string]string {
	out := make(map[string]string, len(values))
	for k, v := range values {
		if k == "sasl-password" {
			v = "(set)"
		}
		out[k] = v
	}
	return out
}
