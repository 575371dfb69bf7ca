//go:build invariants

package engine

import (
	"strings"
	"testing"
)

// With the invariants tag, a partition whose state breaks an invariant
// panics on the next Apply instead of serving wrong offsets.
func TestInvariantsBuildPanicsOnBrokenState(t *testing.T) {
	p := NewPartition()
	p.Apply(1, EncodeProduceEntry(nil, 1, 0, NoProducer, batchOf(t, 2, 1000)))
	p.logStartOffset = p.nextOffset + 1 // corrupt: log start past the high-water mark
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), "invariant broken") {
			t.Fatalf("Apply on a broken partition: recovered %v, want an invariant panic", r)
		}
	}()
	p.Apply(2, EncodeProduceEntry(nil, 1, 0, NoProducer, batchOf(t, 2, 1000)))
}
