package simnet

import (
	"fmt"
	"slices"
	"strings"
)

// Coverage counts how often each named fault kind fired and each rare code
// event happened (a truncation, a checkpoint restore, a leader change, a
// ListOffsets answered), over one run or, merged, over a sample of seeds.
// A sample in which an expected name stayed at zero did not test what it
// claims to, and Missing names them.
//
// Names are free-form ("fault/crash", "event/truncation"); output is
// sorted by name, so it never depends on map order. Not safe for
// concurrent use (the world is one goroutine).
type Coverage struct {
	counts map[string]int64
}

// NewCoverage returns an empty Coverage that lists names (with count 0)
// until they happen.
func NewCoverage(names ...string) *Coverage {
	c := &Coverage{counts: make(map[string]int64, len(names))}
	c.Declare(names...)
	return c
}

// Declare lists names with count 0 unless already counted, so the table
// shows what never happened.
func (c *Coverage) Declare(names ...string) {
	for _, name := range names {
		if _, ok := c.counts[name]; !ok {
			c.counts[name] = 0
		}
	}
}

// Add counts n happenings of name (n may be 0: it declares name).
func (c *Coverage) Add(name string, n int64) {
	if n < 0 {
		panic(fmt.Sprintf("simnet: coverage %s: negative count %d", name, n))
	}
	c.counts[name] += n
}

// Inc counts one happening of name.
func (c *Coverage) Inc(name string) { c.counts[name]++ }

// Count returns how often name happened.
func (c *Coverage) Count(name string) int64 { return c.counts[name] }

// Merge adds every count of o into c.
func (c *Coverage) Merge(o *Coverage) {
	for name, n := range o.counts {
		c.counts[name] += n
	}
}

// Names returns every name counted or declared, sorted.
func (c *Coverage) Names() []string {
	names := make([]string, 0, len(c.counts))
	for name := range c.counts {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Missing returns the names of expected that stayed at zero, sorted.
func (c *Coverage) Missing(expected []string) []string {
	var out []string
	for _, name := range expected {
		if c.counts[name] == 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Line renders the counts on one line: "name=count ..." sorted by name.
func (c *Coverage) Line() string {
	var b strings.Builder
	for i, name := range c.Names() {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", name, c.counts[name])
	}
	return b.String()
}

// Table renders the counts as aligned "name  count" rows sorted by name,
// each row prefixed with prefix; zeros are marked so they stand out.
func (c *Coverage) Table(prefix string) string {
	names := c.Names()
	width := 0
	for _, name := range names {
		width = max(width, len(name))
	}
	var b strings.Builder
	for _, name := range names {
		n := c.counts[name]
		mark := ""
		if n == 0 {
			mark = "  <- never"
		}
		fmt.Fprintf(&b, "%s%-*s %8d%s\n", prefix, width, name, n, mark)
	}
	return b.String()
}

// newRunCoverage returns a run's coverage with the names every run lists.
func newRunCoverage() *Coverage {
	return NewCoverage("audit/promises", "audit/produce-acks", "audit/broken")
}
