package report

import (
	"math"
	"math/rand/v2"
	"testing"
)

// synthetic is n seconds of throughput around mean: a sinusoid of relative amplitude amp and period
// periodS, plus Gaussian noise of relative sd noise.
func synthetic(n int, mean, amp, periodS, noise float64) []Point {
	rng := rand.New(rand.NewPCG(7, 9))
	out := make([]Point, n)
	for i := range out {
		v := mean * (1 + amp*math.Sin(2*math.Pi*float64(i)/periodS+0.3) + noise*rng.NormFloat64())
		out[i] = Point{T: float64(i + 1), Ops: int64(v)}
	}
	return out
}

// The steady-state checks fail a series that oscillates with a 20-s period — one whose swings are
// too large for its coefficient of variation to pass, and one whose CV passes but whose periodic
// component is over the bound — and pass a flat one with the noise of a good run.
func TestSteadyChecks(t *testing.T) {
	for _, tc := range []struct {
		name          string
		amp, noise    float64
		cvOK, cycleOK bool
	}{
		{"flat", 0, 0.03, true, true},
		{"20-s oscillation", 0.35, 0.03, false, false},
		{"20-s oscillation under the CV bound", 0.12, 0.02, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := SteadyOf(synthetic(60, 3000, tc.amp, 20, tc.noise), 10, 55)
			cs := SteadyChecks(st)
			t.Logf("%+v: %v", st, cs)
			if got := cs[0].Verdict == Pass; got != tc.cvOK {
				t.Errorf("CV check %v, want pass=%v", cs[0], tc.cvOK)
			}
			if got := cs[1].Verdict == Pass; got != tc.cycleOK {
				t.Errorf("periodic check %v, want pass=%v", cs[1], tc.cycleOK)
			}
			if tc.amp > 0 && (math.Abs(st.PeriodS-20) > 2 || math.Abs(st.PeriodicAmp-tc.amp) > 0.03) {
				t.Errorf("found period %.1fs amplitude %.3f, want 20s and %.2f", st.PeriodS, st.PeriodicAmp, tc.amp)
			}
		})
	}
	if cs := SteadyChecks(SteadyOf(synthetic(20, 3000, 0, 20, 0.01), 5, 8)); cs[0].Verdict != NA {
		t.Errorf("a 3-s window was judged: %v", cs)
	}
}
