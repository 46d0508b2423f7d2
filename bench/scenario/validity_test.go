package scenario

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
			st := steadyOf(synthetic(60, 3000, tc.amp, 20, tc.noise), 10, 55)
			cs := steadyChecks(st)
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
	if cs := steadyChecks(steadyOf(synthetic(20, 3000, 0, 20, 0.01), 5, 8)); cs[0].Verdict != NA {
		t.Errorf("a 3-s window was judged: %v", cs)
	}
}

// A task is heavier than the background when its node's disk traffic in the task window is at least
// twice that of the window before it (another node's rise does not count for it); a run whose task
// did not finish fails with why.
func TestTaskChecks(t *testing.T) {
	run := func(before, during int64, node uint64) *RunReport {
		rr := &RunReport{Task: &TaskWindow{StartS: 40, EndS: 60, DurationS: 20, Node: node}}
		for s := 1; s <= 80; s++ {
			b := before
			if s > 40 && s <= 60 {
				b = during
			}
			rr.Series = append(rr.Series, Point{T: float64(s), Nodes: []NodeSecond{{Node: 1, DiskBytes: 1 << 20}, {Node: 2, DiskBytes: b}}})
		}
		return rr
	}
	for _, tc := range []struct {
		name    string
		rr      *RunReport
		verdict string
	}{
		{"heavy", run(2<<20, 9<<20, 2), Pass},
		{"heavy, the node unnamed", run(2<<20, 9<<20, 0), Pass},
		{"as heavy as the background", run(2<<20, 3<<20, 2), Fail},
		{"another node rose", run(2<<20, 9<<20, 1), Fail},
	} {
		cs := taskChecks(tc.rr, 10, true)
		if len(cs) != 2 || cs[0].Verdict != Pass || cs[1].Verdict != tc.verdict {
			t.Errorf("%s: %v, want task_window pass and event_heavier %s", tc.name, cs, tc.verdict)
		}
	}
	unfinished := &RunReport{Task: &TaskWindow{Missing: "the task was still running when the run ended"}}
	if cs := taskChecks(unfinished, 10, true); len(cs) != 1 || cs[0].Verdict != Fail || cs[0].Note == "" {
		t.Errorf("unfinished task: %v", cs)
	}
}

// The runs' steady states must agree within 10 % (each label's median).
func TestAgreementCheck(t *testing.T) {
	run := func(on bool, tput float64) RunReport {
		return RunReport{PolicyOn: on, Validity: &Validity{Steady: Steady{Throughput: tput}}}
	}
	if c := agreementCheck([]RunReport{run(true, 3000), run(false, 3100), run(true, 2000), run(false, 3200), run(true, 3050)}); c.Verdict != Pass {
		t.Errorf("medians 3000 vs 3150: %v", c)
	}
	if c := agreementCheck([]RunReport{run(true, 3000), run(false, 3600)}); c.Verdict != Fail {
		t.Errorf("3000 vs 3600: %v", c)
	}
}
