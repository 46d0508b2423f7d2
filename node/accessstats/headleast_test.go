package accessstats

import (
	"math"
	"testing"
)

// TestHeadLeastLargeMeans: the least count of a head slot ends for a region sampled hundreds of
// times a block (e^−mean underflows there), lies above the mean when the region has many blocks, and agrees with the plain Poisson
// recurrence where that one does not underflow.
func TestHeadLeastLargeMeans(t *testing.T) {
	recurrence := func(mean, blocks float64) float64 {
		pmf, tail := math.Exp(-mean), 1.0
		for k := 0.0; ; k++ {
			if k >= headCount && blocks*tail < 1 {
				return k
			}
			tail -= pmf
			pmf *= mean / (k + 1)
			if tail <= 0 {
				return math.Max(k+1, headCount)
			}
		}
	}
	for _, mean := range []float64{0, 0.01, 0.5, 1, 3, 10, 40, 100} {
		for _, blocks := range []float64{1, 7, 64, 1000} {
			if got, want := headLeast(mean, blocks), recurrence(mean, blocks); got != want {
				t.Errorf("headLeast(%v, %v) = %v, the recurrence gives %v", mean, blocks, got, want)
			}
		}
	}
	for _, mean := range []float64{745, 750, 2000, 1e5} {
		if got := headLeast(mean, 1); got < headCount || got > mean+40*math.Sqrt(mean)+headCount+1 {
			t.Errorf("headLeast(%v, 1) = %v: want at least %d, within the mean's tail", mean, got, headCount)
		}
		// With many blocks, a head slot stands above what the mean gives any of them by chance.
		if got := headLeast(mean, 64); got <= mean || got > mean+40*math.Sqrt(mean)+headCount+1 {
			t.Errorf("headLeast(%v, 64) = %v: want above the mean, within its tail", mean, got)
		}
	}
}
