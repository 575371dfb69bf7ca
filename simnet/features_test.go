package simnet

import "testing"

// The feature draw spreads over neighbouring seeds: among seeds 1-200
// every feature and every topology shows up in at least a tenth of them,
// and a seed draws the same features twice.
func TestDrawFeaturesSpreads(t *testing.T) {
	counts := map[string]int{} // lookup only
	for seed := uint64(1); seed <= 200; seed++ {
		o := DrawFeatures(Standard(seed, Mixed))
		if featuresString(o) != featuresString(DrawFeatures(Standard(seed, Mixed))) {
			t.Fatalf("seed %d draws %q, then %q", seed, featuresString(o), featuresString(DrawFeatures(Standard(seed, Mixed))))
		}
		for _, name := range featureNames(o) {
			counts[name]++
		}
	}
	for _, name := range []string{"groups", "moves", "joins", "moves+joins", "groups+membership", "wal", "kafka", "nodes-5"} {
		if counts[name] < 200/10 {
			t.Errorf("feature %s in %d of 200 seeds", name, counts[name])
		}
	}
	t.Logf("features over seeds 1-200: %v", counts)
}
