package hotspot

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// A node is hot only at ≥ 80 % and ≥ 1.3× the mean, for three samples in a row; a uniformly busy
// cluster has no hot node.
func TestDetector(t *testing.T) {
	var d Detector
	skewed := map[uint64]float64{1: 0.95, 2: 0.4, 3: 0.5, 4: 0.45, 5: 0.5}
	uniform := map[uint64]float64{1: 0.9, 2: 0.85, 3: 0.9, 4: 0.88, 5: 0.9}
	for i, want := range [][]uint64{nil, nil, {1}, {1}} {
		if got := d.Observe(skewed); !slices.Equal(got, want) {
			t.Fatalf("sample %d: %v, want %v", i, got, want)
		}
	}
	if got := d.Observe(uniform); got != nil {
		t.Fatalf("uniformly busy: %v, want none", got)
	}
	if got := d.Observe(skewed); got != nil {
		t.Fatalf("after a break the streak starts again: %v", got)
	}
}

func TestPenalty(t *testing.T) {
	if got := Penalty([]float64{5, 12, 30, 9}, 10); got != 22 {
		t.Fatalf("penalty %v, want 2 + 20", got)
	}
}

// Penalties measured on hot spots of 2, 5, 15 and 60 s (the durations): without the offload
// the penalty grows 100 per second; with it, a fixed 500 of disturbance and 20 per second. The
// crossing is at 6.25 s: short hot spots are left alone, long ones offloaded.
func TestFitAndAct(t *testing.T) {
	var pts []Point
	for _, d := range []float64{2, 5, 15, 60} {
		pts = append(pts, Point{DurationS: d, On: 500 + 20*d, Off: 100 * d})
	}
	b, err := Fit(pts)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(b.CrossS-6.25) > 1e-9 {
		t.Fatalf("crossing %v, want 6.25 s (%+v)", b.CrossS, b)
	}
	for d, want := range map[float64]bool{2: false, 5: false, 15: true, 60: true} {
		if b.Act(d) != want {
			t.Errorf("act on %v s: %v, want %v", d, !want, want)
		}
	}
	// Offloading never pays when it does not slow the penalty's growth.
	never, _ := Fit([]Point{{DurationS: 1, On: 200, Off: 100}, {DurationS: 10, On: 1100, Off: 1000}})
	if !math.IsInf(never.CrossS, 1) || never.Act(1000) {
		t.Fatalf("crossing %v: want never", never.CrossS)
	}
	// Nor when neither way crossed the SLO: both lines at zero save nothing at any duration.
	zero, _ := Fit([]Point{{DurationS: 5, On: 0, Off: 0}, {DurationS: 15, On: 0, Off: 0}})
	if !math.IsInf(zero.CrossS, 1) || zero.Act(60) {
		t.Fatalf("both lines at zero: crossing %v, want never", zero.CrossS)
	}
	// A fixed saving at the same growth pays from the start.
	always, _ := Fit([]Point{{DurationS: 5, On: 50, Off: 100}, {DurationS: 15, On: 150, Off: 200}})
	if always.CrossS != 0 || !always.Act(1) {
		t.Fatalf("a fixed saving: crossing %v, want 0", always.CrossS)
	}
	if _, err := Fit(pts[:1]); !errors.Is(err, ErrTooFew) {
		t.Fatalf("one point: %v", err)
	}
}

func TestPredictDuration(t *testing.T) {
	past := []float64{2, 3, 20, 40, 60}
	for _, tc := range []struct{ age, want float64 }{{1, 20}, {10, 40}, {50, 60}, {70, 140}} {
		if got := PredictDuration(tc.age, past); got != tc.want {
			t.Errorf("age %v: %v, want %v", tc.age, got, tc.want)
		}
	}
}

// A fit uses at most MaxFitPoints measurements, the latest two of each kind among them: a workload
// whose penalties changed is fitted from what it does now.
func TestFitUsesTheLatestPoints(t *testing.T) {
	nan := math.NaN()
	old := []Point{{DurationS: 1, On: 9000, Off: nan}, {DurationS: 3, On: 9000, Off: nan}}
	pts := append(old,
		Point{DurationS: 2, On: nan, Off: 200}, Point{DurationS: 10, On: nan, Off: 1000},
		Point{DurationS: 4, On: 580, Off: nan}, Point{DurationS: 20, On: 900, Off: nan},
		Point{DurationS: 30, On: nan, Off: 3000})
	b, err := Fit(pts)
	if err != nil {
		t.Fatal(err)
	}
	if b.Points != MaxFitPoints || math.Abs(b.OffB-100) > 1e-9 || math.Abs(b.OnB-20) > 1e-9 {
		t.Fatalf("fit %+v: want 5 points, 100/s without, 20/s with", b)
	}
	if math.Abs(b.CrossS-6.25) > 1e-9 {
		t.Fatalf("crossing %v, want 500/80 = 6.25 s", b.CrossS)
	}
}

func TestHot(t *testing.T) {
	d := Detector{Sustain: 2}
	u := map[uint64]float64{1: 0.9, 2: 0.2, 3: 0.2}
	d.Observe(u)
	if d.Hot(1) {
		t.Fatal("hot after one sample")
	}
	d.Observe(u)
	if !d.Hot(1) || d.Hot(2) {
		t.Fatal("n1 should be hot after two samples, n2 never")
	}
}
