package main

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// Shell completion: `strand completion bash|zsh|fish` prints a script
// generated from the command table (help.go) and from each command's own
// flag set (read off its --help), so a new command or flag completes
// without anyone editing the scripts.

// completionTree is what the scripts complete: the top-level words, each
// group's subcommands and every command's flags, keyed "topic create".
type completionTree struct {
	top     []string
	subs    map[string][]string
	flags   map[string][]string
	summary map[string]string
	// valueFlags are the client flags that take a value (-b, --brokers,
	// --timeout, ...), spelled as typed.
	valueFlags []string
}

// flagPattern finds the long flag names in a command's help.
var flagPattern = regexp.MustCompile(`(?m)^\s+(?:-[A-Za-z], )?--([a-z0-9][a-z0-9-]*)`)

// buildCompletionTree walks the command table, asking every command for its
// --help to learn its flags.
func buildCompletionTree(stdin io.Reader, stderr io.Writer) completionTree {
	t := completionTree{subs: map[string][]string{}, flags: map[string][]string{}, summary: map[string]string{}}
	global := newFlags("")
	var cf clientFlags
	cf.register(global, 0)
	global.VisitAll(func(f *pflag.Flag) {
		if f.NoOptDefVal == "" {
			t.valueFlags = append(t.valueFlags, "--"+f.Name)
			if f.Shorthand != "" {
				t.valueFlags = append(t.valueFlags, "-"+f.Shorthand)
			}
		}
	})
	seen := map[string]bool{}
	for _, c := range commands {
		words := strings.Fields(c.name)
		if !seen[words[0]] {
			seen[words[0]] = true
			t.top = append(t.top, words[0])
			t.summary[words[0]] = c.summary
			if g, ok := commandGroups[words[0]]; ok {
				t.summary[words[0]] = g
			}
		}
		if len(words) == 2 {
			t.subs[words[0]] = append(t.subs[words[0]], words[1])
			t.summary[c.name] = c.summary
		}
		var out bytes.Buffer
		run(append(words, "--help"), stdin, &out, io.Discard)
		flags := []string{"--help"}
		for _, m := range flagPattern.FindAllStringSubmatch(out.String(), -1) {
			flags = append(flags, "--"+m[1])
		}
		sort.Strings(flags)
		t.flags[c.name] = flags
	}
	return t
}

// cmdCompletion runs `strand completion bash|zsh|fish`.
func cmdCompletion(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("completion")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("completion: want one shell: bash, zsh or fish")
	}
	t := buildCompletionTree(stdin, stderr)
	switch fs.Arg(0) {
	case "bash":
		_, err := io.WriteString(stdout, t.bash())
		return err
	case "zsh":
		_, err := io.WriteString(stdout, "#compdef strand\n# strand completion zsh: load with  source <(strand completion zsh)\n"+
			"autoload -U +X bashcompinit && bashcompinit\n"+t.bash())
		return err
	case "fish":
		_, err := io.WriteString(stdout, t.fish())
		return err
	}
	return usageError("completion: unknown shell %q: want bash, zsh or fish", fs.Arg(0))
}

// bash is the bash completion script (zsh runs it through bashcompinit).
func (t completionTree) bash() string {
	var b strings.Builder
	b.WriteString("# strand completion bash: load with  source <(strand completion bash)\n")
	b.WriteString("_strand() {\n  local cur=${COMP_WORDS[COMP_CWORD]} cmd='' sub='' i w\n")
	// A global flag's value is no command: skip it, and the ":" and port
	// bash splits a HOST:PORT into (COMP_WORDBREAKS).
	b.WriteString("  for ((i = 1; i < COMP_CWORD; i++)); do\n    w=${COMP_WORDS[i]}\n    case $w in\n")
	fmt.Fprintf(&b, "      %s)\n", strings.Join(t.valueFlags, "|"))
	b.WriteString("        ((i++)); while [[ ${COMP_WORDS[i+1]} == : ]]; do ((i += 2)); done; continue ;;\n")
	b.WriteString("      -*) continue ;;\n    esac\n")
	b.WriteString("    if [[ -z $cmd ]]; then cmd=$w; elif [[ -z $sub ]]; then sub=$w; fi\n  done\n")
	fmt.Fprintf(&b, "  local words=%q\n", strings.Join(t.top, " "))
	b.WriteString("  case $cmd in\n")
	for _, top := range t.top {
		subs, group := t.subs[top]
		if !group {
			continue
		}
		first := strings.Join(append(append([]string{}, subs...), t.flags[top]...), " ") // `strand cluster` is a command too
		fmt.Fprintf(&b, "    %s)\n      if [[ -z $sub ]]; then words=%q; else case $sub in\n", top, first)
		for _, s := range subs {
			fmt.Fprintf(&b, "        %s) words=%q ;;\n", s, strings.Join(t.flags[top+" "+s], " "))
		}
		b.WriteString("        *) words='' ;;\n      esac; fi ;;\n")
	}
	for _, top := range t.top {
		if _, group := t.subs[top]; group {
			continue
		}
		words := strings.Join(t.flags[top], " ")
		if top == "completion" {
			words = "bash zsh fish " + words
		}
		fmt.Fprintf(&b, "    %s) words=%q ;;\n", top, words)
	}
	b.WriteString("  esac\n")
	b.WriteString("  if [[ -n $cmd && $cur != -* ]]; then\n    local flagsonly=1 x\n")
	b.WriteString("    for x in $words; do [[ $x != -* ]] && flagsonly=0; done\n")
	b.WriteString("    [[ $flagsonly == 1 ]] && { COMPREPLY=(); return; }\n  fi\n")
	b.WriteString("  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n}\ncomplete -o default -F _strand strand\n")
	return b.String()
}

// fish is the fish completion script.
func (t completionTree) fish() string {
	var b strings.Builder
	b.WriteString("# strand completion fish: load with  strand completion fish | source\ncomplete -c strand -f\n")
	for _, top := range t.top {
		fmt.Fprintf(&b, "complete -c strand -n __fish_use_subcommand -a %s -d %s\n", top, fishQuote(t.summary[top]))
	}
	for _, top := range t.top {
		subs, group := t.subs[top]
		cond := "__fish_seen_subcommand_from " + top
		if group {
			notSub := cond + "; and not __fish_seen_subcommand_from " + strings.Join(subs, " ")
			for _, s := range subs {
				fmt.Fprintf(&b, "complete -c strand -n %s -a %s -d %s\n", fishQuote(notSub), s, fishQuote(t.summary[top+" "+s]))
				for _, f := range t.flags[top+" "+s] {
					fmt.Fprintf(&b, "complete -c strand -n %s -l %s\n", fishQuote(cond+"; and __fish_seen_subcommand_from "+s), strings.TrimPrefix(f, "--"))
				}
			}
		}
		if top == "completion" {
			fmt.Fprintf(&b, "complete -c strand -n %s -a 'bash zsh fish'\n", fishQuote(cond))
		}
		for _, f := range t.flags[top] {
			fmt.Fprintf(&b, "complete -c strand -n %s -l %s\n", fishQuote(cond), strings.TrimPrefix(f, "--"))
		}
	}
	return b.String()
}

// fishQuote single-quotes s for fish.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
