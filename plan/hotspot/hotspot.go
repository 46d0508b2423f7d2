// Package hotspot decides when offloading a hot node pays: Bekas's reconfiguration manager
// (`bekas-2017-replica-group-reconfigurations-msc.txt`, chapters 3 and 5). A node is in skewed
// overload when its utilization is at least 80 % and at least 1.3× the cluster's mean, sustained;
// a hot spot's cost is the penalty P = Σ max(0, latency − SLO) over its 500 ms samples; and acting
// (a leadership transfer, then moving replicas) pays only when the hot spot outlasts the break-even
// duration, where the penalty with the reconfiguration falls below the penalty without it. The
// thesis measured the break-even offline (≥ 5 s at 95/5 on 8 nodes, ≈ 1.5 s at 50/50); here it is
// fitted online from the hot spots measured so far (at most MaxFitPoints of them).
//
// It is a leaf: it sees utilizations, latency samples and measured penalties. It never reads a
// cluster or moves anything; the hotspot_offload policy turns its verdicts into operators.
package hotspot

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// The skewed-overload thresholds (thesis §3.4).
const (
	MinUtilization = 0.80
	MinSkew        = 1.30
)

// Detector reports nodes in skewed overload for Sustain consecutive samples.
type Detector struct {
	Sustain int // samples in a row (default 3)
	streak  map[uint64]int
}

// Observe takes one sample of every node's utilization (0..1) and returns the nodes in sustained
// skewed overload, in ascending id order.
func (d *Detector) Observe(util map[uint64]float64) []uint64 {
	if d.streak == nil {
		d.streak = map[uint64]int{}
	}
	need := d.Sustain
	if need <= 0 {
		need = 3
	}
	mean := 0.0
	for _, u := range util {
		mean += u
	}
	if len(util) > 0 {
		mean /= float64(len(util))
	}
	var hot []uint64
	for id, u := range util {
		if u >= MinUtilization && u >= MinSkew*mean {
			d.streak[id]++
		} else {
			d.streak[id] = 0
		}
		if d.streak[id] >= need {
			hot = append(hot, id)
		}
	}
	for id := range d.streak {
		if _, ok := util[id]; !ok {
			delete(d.streak, id)
		}
	}
	slices.Sort(hot)
	return hot
}

// Hot reports whether node was in sustained skewed overload at the last Observe.
func (d *Detector) Hot(node uint64) bool {
	need := d.Sustain
	if need <= 0 {
		need = 3
	}
	return d.streak[node] >= need
}

// Penalty is Σ max(0, latency − slo) over samples (each one 500 ms window's latency, in ms).
func Penalty(samples []float64, slo float64) float64 {
	p := 0.0
	for _, l := range samples {
		p += max(0, l-slo)
	}
	return p
}

// Point is one measured hot spot: how long it lasted, and its penalty with the offload (On) or
// without it (Off). A point measured one way only has the other NaN.
type Point struct {
	DurationS float64
	On, Off   float64
}

// Breakeven is the fitted penalties as lines in the hot spot's duration — without acting it grows
// with the duration; acting costs a fixed disturbance and then grows slower — and their crossing.
type Breakeven struct {
	OnA, OnB   float64 // penalty with the offload ≈ OnA + OnB·D
	OffA, OffB float64 // without ≈ OffA + OffB·D
	// CrossS is the duration beyond which acting pays (+Inf: never, 0: always).
	CrossS float64
	Points int
}

// ErrTooFew is returned by Fit with fewer than two measurements of each kind at distinct durations.
var ErrTooFew = errors.New("hotspot: too few measured hot spots to fit a break-even")

// MaxFitPoints bounds the measured hot spots a fit uses: the thesis's controller trained on a
// handful, and a cluster's workload drifts.
const MaxFitPoints = 5

// Fit fits the two penalty lines by least squares and their crossing, from at most MaxFitPoints
// of the latest points: the latest two of each kind, then the latest others.
func Fit(points []Point) (Breakeven, error) {
	var on, off [][2]float64
	take := func(p Point, wantOn, wantOff bool) {
		if wantOn && !math.IsNaN(p.On) {
			on = append(on, [2]float64{p.DurationS, p.On})
		}
		if wantOff && !math.IsNaN(p.Off) {
			off = append(off, [2]float64{p.DurationS, p.Off})
		}
	}
	used := make([]bool, len(points))
	for i := len(points) - 1; i >= 0; i-- {
		p := points[i]
		wantOn, wantOff := !math.IsNaN(p.On) && len(on) < 2, !math.IsNaN(p.Off) && len(off) < 2
		if wantOn || wantOff {
			take(p, wantOn, wantOff)
			used[i] = true
		}
	}
	for i := len(points) - 1; i >= 0 && len(on)+len(off) < MaxFitPoints; i-- {
		if !used[i] {
			take(points[i], true, false)
			take(points[i], false, len(on)+len(off) < MaxFitPoints)
		}
	}
	oa, ob, ok1 := line(on)
	fa, fb, ok2 := line(off)
	if !ok1 || !ok2 {
		return Breakeven{}, fmt.Errorf("%w: %d with the offload, %d without", ErrTooFew, len(on), len(off))
	}
	b := Breakeven{OnA: oa, OnB: ob, OffA: fa, OffB: fb, Points: len(on) + len(off)}
	// Acting pays at D when it saves something there: (fa − oa) + (fb − ob)·D > 0. Equal lines save
	// nothing — hot spots that never crossed the SLO either way fit two lines at zero — so they
	// never pay, as acting still moves leaderships.
	switch {
	case fb-ob > lineTolerance:
		b.CrossS = max(0, (oa-fa)/(fb-ob))
	case fb-ob >= -lineTolerance && fa-oa > lineTolerance:
		b.CrossS = 0
	default:
		b.CrossS = math.Inf(1)
	}
	return b, nil
}

// lineTolerance is how far apart two fitted coefficients must be to differ (a penalty is in
// milliseconds: this is far below one).
const lineTolerance = 1e-6

// line is the least-squares line through pts (false: fewer than two distinct x).
func line(pts [][2]float64) (a, b float64, ok bool) {
	n := float64(len(pts))
	var sx, sy, sxx, sxy float64
	for _, p := range pts {
		sx, sy, sxx, sxy = sx+p[0], sy+p[1], sxx+p[0]*p[0], sxy+p[0]*p[1]
	}
	den := n*sxx - sx*sx
	if len(pts) < 2 || den <= 1e-12 {
		return 0, 0, false
	}
	b = (n*sxy - sx*sy) / den
	return (sy - b*sx) / n, b, true
}

// Act reports whether offloading a hot spot predicted to last predictedS seconds pays.
func (b Breakeven) Act(predictedS float64) bool { return predictedS > b.CrossS }

// PredictDuration is how long a hot spot that has lasted ageS seconds will last in all: the median
// of the past hot spots that lasted longer than it, or twice its age when none did (a hot spot
// expected to last as long again as it has).
func PredictDuration(ageS float64, pastS []float64) float64 {
	var longer []float64
	for _, d := range pastS {
		if d > ageS {
			longer = append(longer, d)
		}
	}
	if len(longer) == 0 {
		return 2 * ageS
	}
	slices.Sort(longer)
	n := len(longer)
	return (longer[(n-1)/2] + longer[n/2]) / 2
}
