//go:build !simbugs

package simnet

import (
	"fmt"

	"github.com/strandlog/strand/node"
)

// BugNames lists the planted bugs this build can plant: none. Build with
// -tags simbugs (make sim BUG=...) to plant one.
var BugNames []string

// ParseBug checks a planted bug's name: without the simbugs tag only ""
// (none) is valid.
func ParseBug(name string) (string, error) {
	if name != "" {
		return "", fmt.Errorf("simnet: planted bug %q needs a build with -tags simbugs", name)
	}
	return "", nil
}

// plantBug does nothing: production builds have no bug to plant.
func plantBug(*node.Config, string) {}
