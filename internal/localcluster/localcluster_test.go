package localcluster

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestSampleOf reads this process's CPU time and resident memory the way
// bench cluster reads its servers'.
func TestSampleOf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	deadline := time.Now().Add(5 * time.Second)
	s := SampleOf(os.Getpid())
	for s.CPU == 0 && time.Now().Before(deadline) { // burn a little CPU until a clock tick is counted
		for i := 0; i < 1e6; i++ {
			_ = strings.Repeat("x", i%3)
		}
		s = SampleOf(os.Getpid())
	}
	if s.CPU <= 0 || s.RSSBytes <= 0 {
		t.Fatalf("SampleOf(self) = %+v: want positive CPU time and RSS", s)
	}
}

// FreePorts gives distinct ports in its range that can be listened on, and
// Peers names them as strand serve --peers wants.
func TestFreePortsAndPeers(t *testing.T) {
	ports, err := FreePorts(4)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < PortMin || p >= PortMin+PortSpan || seen[p] {
			t.Fatalf("ports %v: out of range or repeated", ports)
		}
		seen[p] = true
	}
	addrs := Addrs(ports[:2])
	if got, want := Peers(addrs), "1="+addrs[0]+",2="+addrs[1]; got != want {
		t.Fatalf("Peers = %q, want %q", got, want)
	}
}
