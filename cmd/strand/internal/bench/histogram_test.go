package bench

import (
	"testing"
	"time"
)

// The histogram's quantiles are within its 1/64 resolution of the exact
// ones, and never above the maximum recorded.
func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	for i := 1; i <= 100000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, q := range []float64{0.5, 0.99, 0.999} {
		exact := time.Duration(q*100000) * time.Microsecond
		got := h.quantile(q)
		if got < exact || float64(got-exact) > float64(exact)/32 {
			t.Errorf("q%.3f = %v, exact %v", q, got, exact)
		}
	}
	if h.quantile(1) != 100*time.Millisecond {
		t.Errorf("q1 = %v", h.quantile(1))
	}
}
