package main

import (
	"context"
	"strings"
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

// The object store flags open a directory store, refuse a missing
// directory, two stores at once, an S3 store missing its endpoint or
// bucket, half a key pair, an endpoint that is no URL and a negative
// upload budget, each saying what to fix, and name no store when none is
// given.
func TestTierFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args  []string
		store bool
		says  string
	}{
		{nil, false, ""},
		{[]string{"--tier-dir", dir}, true, ""},
		{[]string{"--tier-dir", dir + "/missing"}, false, "does not exist"},
		{[]string{"--tier-dir", dir, "--s3-bucket", "b"}, false, "give one"},
		{[]string{"--s3-bucket", "b"}, false, "--s3-endpoint and --s3-bucket are both needed"},
		{[]string{"--s3-endpoint", "http://127.0.0.1:1", "--s3-bucket", "b", "--s3-access-key", "k"}, false, "go together"},
		{[]string{"--s3-endpoint", "127.0.0.1:1", "--s3-bucket", "bucket"}, false, "not an http:// or https:// URL"},
		{[]string{"--tier-dir", dir, "--tier-upload-bytes-per-sec", "1048576"}, true, ""},
		{[]string{"--tier-dir", dir, "--tier-upload-bytes-per-sec=-1"}, false, "--tier-upload-bytes-per-sec must not be negative"},
	} {
		var tf tierFlags
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		tf.register(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		s, err := tf.open(context.Background())
		if tc.says == "" && err != nil || tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)) {
			t.Errorf("%v: err %v, want one saying %q", tc.args, err, tc.says)
		}
		if (s != nil) != tc.store {
			t.Errorf("%v: store %v, want one: %v", tc.args, s, tc.store)
		}
		if s != nil {
			if err := s.Put(context.Background(), "k", strings.NewReader("v"), 1); err != nil {
				t.Errorf("%v: put: %v", tc.args, err)
			}
		}
	}
}
