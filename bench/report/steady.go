package report

import (
	"fmt"
	"math"
	"slices"
)

// A figure measured against a "steady state" means nothing when that state swings: on a small store
// every flush can trigger a compaction of the whole store on all nodes at once, throughput then
// oscillates with the flush period, and an event lands on whatever phase it lands on. So a series
// checks its own footing before its figures count.

// The bounds of the steady-state checks.
const (
	MaxSteadyCV     = 0.10 // the pre-event window's 1-s throughput: coefficient of variation …
	MaxPeriodic     = 0.10 // … and amplitude of its largest periodic component, both relative to its mean
	MinSteadyPoints = 10   // fewer seconds before the event leave nothing to judge
)

// Verdicts of a check.
const (
	Pass = "pass"
	Fail = "FAIL"
	NA   = "n/a" // nothing to judge (Note says why); not a failure
)

// Check is one validity check: the value it measured against its limit, and its verdict.
type Check struct {
	Name    string  `json:"name"`
	Value   float64 `json:"value"`
	Limit   float64 `json:"limit"`
	Verdict string  `json:"verdict"`
	Note    string  `json:"note,omitempty"`
}

func (c Check) String() string {
	s := fmt.Sprintf("%s %.3g (limit %.3g) %s", c.Name, c.Value, c.Limit, c.Verdict)
	if c.Note != "" {
		s += " (" + c.Note + ")"
	}
	return s
}

// NewCheck is a check that passes when ok.
func NewCheck(name string, v, limit float64, ok bool, note string) Check {
	c := Check{Name: name, Value: v, Limit: limit, Verdict: Fail, Note: note}
	if ok {
		c.Verdict = Pass
	}
	return c
}

// NotApplicable is a check with nothing to judge, and why.
func NotApplicable(name, why string) Check { return Check{Name: name, Verdict: NA, Note: why} }

// Steady is a run's pre-event window (from the warm-up to its first event after it): its 1-s
// throughput's mean, coefficient of variation and largest periodic component (relative amplitude
// and period).
type Steady struct {
	FromS       float64 `json:"from_s"`
	ToS         float64 `json:"to_s"`
	Throughput  float64 `json:"throughput"`
	CV          float64 `json:"cv"`
	PeriodicAmp float64 `json:"periodic_amplitude"`
	PeriodS     float64 `json:"period_s"`
}

// SteadyOf measures the seconds of series that lie wholly within [from, to].
func SteadyOf(series []Point, from, to float64) Steady {
	var ops []float64
	for _, p := range series {
		if p.T-1 >= from && p.T <= to {
			ops = append(ops, float64(p.Ops))
		}
	}
	st := Steady{FromS: from, ToS: to}
	if len(ops) < 2 {
		return st
	}
	mean, sd := MeanSD(ops)
	st.Throughput = mean
	if mean > 0 {
		st.CV = sd / mean
		amp, period := periodic(ops)
		st.PeriodicAmp, st.PeriodS = amp/mean, period
	}
	return st
}

// periodic is the largest sinusoid in xs (one sample a second): its amplitude and period, from a
// least-squares fit of a sine and a cosine at each frequency from one cycle per window to one per
// two seconds, a quarter of the DFT's spacing apart (a Lomb–Scargle periodogram: unlike the DFT's
// bins it finds a period that does not divide the window at its full amplitude).
func periodic(xs []float64) (amp, period float64) {
	n := float64(len(xs))
	mean, _ := MeanSD(xs)
	for i := 4.0; i <= 2*n; i++ {
		f := i / (4 * n)
		var cc, cs, ss, xc, xsn float64
		for t, x := range xs {
			c, s := math.Cos(2*math.Pi*f*float64(t)), math.Sin(2*math.Pi*f*float64(t))
			cc, cs, ss, xc, xsn = cc+c*c, cs+c*s, ss+s*s, xc+(x-mean)*c, xsn+(x-mean)*s
		}
		var a, b float64
		if det := cc*ss - cs*cs; ss > 1e-6*cc && det > 1e-6*cc*ss {
			a, b = (xc*ss-xsn*cs)/det, (xsn*cc-xc*cs)/det
		} else if cc > 0 { // near two seconds the sine (nearly) vanishes at every sample
			a = xc / cc
		}
		if m := math.Hypot(a, b); m > amp {
			amp, period = m, 1/f
		}
	}
	return amp, period
}

// SteadyChecks judges a run's steady state.
func SteadyChecks(st Steady) []Check {
	if n := st.ToS - st.FromS; n < MinSteadyPoints {
		why := fmt.Sprintf("%.0f s before the first event after the warm-up: too short to judge", max(n, 0))
		return []Check{NotApplicable("steady_cv", why), NotApplicable("steady_periodic", why)}
	}
	return []Check{
		NewCheck("steady_cv", st.CV, MaxSteadyCV, st.CV <= MaxSteadyCV, fmt.Sprintf("%.0f-%.0fs, %.0f ops/s", st.FromS, st.ToS, st.Throughput)),
		NewCheck("steady_periodic", st.PeriodicAmp, MaxPeriodic, st.PeriodicAmp <= MaxPeriodic, fmt.Sprintf("period %.1fs", st.PeriodS)),
	}
}

// Spread is a figure over several runs or events: its median, 90th percentile (nearest rank) and
// range.
type Spread struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	P90    float64 `json:"p90"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// SpreadOf is the spread of xs (zero for none).
func SpreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := slices.Sorted(slices.Values(xs))
	return Spread{N: len(xs), Median: Median(xs), P90: s[(len(s)*9)/10], Min: s[0], Max: s[len(s)-1]}
}

// MeanSD is the mean and the sample standard deviation (n − 1) of xs (NaN for none, sd 0 for one).
func MeanSD(xs []float64) (mean, sd float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)-1))
}

// Median is the median of xs (NaN for none).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	return (s[(len(s)-1)/2] + s[len(s)/2]) / 2
}
