package memdisk

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"
)

// TestProjectionsShareNothingVisible shows that ProjectCrash's sharing of
// durable bytes is invisible: a disk that is projected again and again and
// one that never is, given the same writes (overwrites, appends past the
// end, truncations, syncs, bit flips), end with the same contents, and
// every projection, written to afterwards, ends as a copy of it made at
// projection time given the same writes.
func TestProjectionsShareNothingVisible(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		names := []string{"d/a", "d/b"}
		shared, plain := New(), New()
		type pair struct{ p, copy *Disk }
		var projections []pair
		write := func(t *rapid.T, x, y *Disk, label string) {
			name := rapid.SampledFrom(names).Draw(t, label+"-file")
			fx, _ := x.Open(name)
			fy, _ := y.Open(name)
			size, _ := fx.Size()
			switch rapid.IntRange(0, 4).Draw(t, label+"-op") {
			case 0, 1:
				off := int64(rapid.IntRange(0, int(size)+4).Draw(t, label+"-off"))
				b := []byte(rapid.StringN(1, 6, -1).Draw(t, label+"-bytes"))
				_, _ = fx.WriteAt(b, off)
				_, _ = fy.WriteAt(b, off)
			case 2:
				to := int64(rapid.IntRange(0, int(size)+4).Draw(t, label+"-size"))
				_ = fx.Truncate(to)
				_ = fy.Truncate(to)
			case 3:
				_ = fx.Sync()
				_ = fy.Sync()
				_ = x.SyncDir("d")
				_ = y.SyncDir("d")
			case 4:
				if size > 0 {
					off := int64(rapid.IntRange(0, int(size)-1).Draw(t, label+"-flip"))
					x.FlipBit(name, off, 1)
					y.FlipBit(name, off, 1)
				}
			}
		}
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch rapid.IntRange(0, 5).Draw(t, "who") {
			case 0:
				p := shared.ProjectCrash("d")
				projections = append(projections, pair{p: p, copy: p.Clone()})
			case 1:
				if len(projections) > 0 {
					pr := projections[rapid.IntRange(0, len(projections)-1).Draw(t, "projection")]
					write(t, pr.p, pr.copy, "projection")
				}
			default:
				write(t, shared, plain, "disk")
			}
		}
		same(t, "disk", shared, plain)
		for i, pr := range projections {
			same(t, "projection "+string(rune('0'+i%10)), pr.p, pr.copy)
		}
	})
}

// same fails unless x and y hold the same current and durable contents.
func same(t *rapid.T, what string, x, y *Disk) {
	for _, name := range []string{"d/a", "d/b"} {
		nx, ny := x.names.files[name], y.names.files[name]
		if (nx == nil) != (ny == nil) {
			t.Fatalf("%s: %s exists in one disk only", what, name)
		}
		if nx == nil {
			continue
		}
		if !bytes.Equal(nx.data, ny.data) || !bytes.Equal(nx.durable, ny.durable) {
			t.Fatalf("%s: %s holds %q (durable %q), want %q (durable %q)", what, name, nx.data, nx.durable, ny.data, ny.durable)
		}
	}
}
