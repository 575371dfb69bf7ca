package main

import (
	"testing"

	"github.com/spf13/pflag"
)

// --compaction-bytes-per-sec reaches node.Config.CompactionBytesPerSec
// (0 when absent: unlimited), and a negative one is refused.
func TestCompactionBytesPerSecFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int64
		bad  bool
	}{
		{nil, 0, false},
		{[]string{"--compaction-bytes-per-sec", "1048576"}, 1 << 20, false},
		{[]string{"--compaction-bytes-per-sec=-1"}, 0, true},
	} {
		var n nodeFlags
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		n.register(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		cfg, err := n.coreConfig(1, nil)
		if (err != nil) != tc.bad || cfg.CompactionBytesPerSec != tc.want {
			t.Errorf("%v: config %d, err %v; want %d (refused: %v)", tc.args, cfg.CompactionBytesPerSec, err, tc.want, tc.bad)
		}
	}
}
