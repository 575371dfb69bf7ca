package main

import (
	"encoding/json"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

// outputFormat is the --format flag of list and describe commands: text
// for people (the default), json for scripts (one JSON document on
// stdout, as rpk's --format json and kcat's -J).
type outputFormat struct{ value string }

func (f *outputFormat) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.value, "format", "text", "output format: text or json")
}

// validate refuses a format other than text and json.
func (f *outputFormat) validate() error {
	switch strings.ToLower(f.value) {
	case "", "text", "json":
		return nil
	}
	return usageError("--format %q: want text or json", f.value)
}

// json reports whether the output is JSON.
func (f *outputFormat) json() bool { return strings.EqualFold(f.value, "json") }

// writeJSON prints v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// isInternalTopic reports whether a topic is one of Strand's own
// (__strand_offsets, and any name starting with "__"): list commands and
// plans leave them out unless --internal.
func isInternalTopic(name string) bool { return strings.HasPrefix(name, "__") }
