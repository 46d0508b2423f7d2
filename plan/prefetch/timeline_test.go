package prefetch

import (
	"math/rand/v2"
	"testing"
)

// Hand-made windows for the node's whole timeline: a base load left by earlier plans, and a copy
// placed early in the greedy order whose prefetch sits under a peak the later ones build.
func TestTimeline(t *testing.T) {
	a := Span{ID: "a", Size: 600}
	b := Span{ID: "b", Size: 600}
	for _, tc := range []struct {
		name         string
		in           *Instance
		peak, bound  float64
		start, end   map[string]int // by span: the prefetch's slots
		demandReadPk float64
	}{
		{name: "a base load in the first slots: the prefetch starts after it",
			// [0,6) at 100 would peak at 250; [3,6) at 200 peaks at 200. The LP fills up to 150
			// over slots 0-6, but the base alone is 150.
			in: func() *Instance {
				in := oneNode(8, nil, 1000, []Span{a}, Job{Name: "x", Span: "a", Start: 6, Duration: 1, Deadline: 1})
				in.Nodes[0].Base = []float64{150, 150, 150}
				return in
			}(),
			peak: 200, bound: 150, start: map[string]int{"a": 3}, end: map[string]int{"a": 6}, demandReadPk: 600},
		{name: "a base load over the budget: nothing is planned beside it",
			in: func() *Instance {
				in := oneNode(8, []float64{400}, 1000, []Span{a}, Job{Name: "x", Span: "a", Start: 6, Duration: 1, Deadline: 1})
				in.Nodes[0].Base = []float64{500, 500, 500, 500}
				return in
			}(),
			// The prefetch fits only in slots 4-5 (300 each, within the budget); the base sets the peak.
			peak: 500, bound: 500, start: map[string]int{"a": 4}, end: map[string]int{"a": 6}, demandReadPk: 500},
		{name: "the greedy's first copy moved off the peak the second one builds",
			// a (read at 600 a slot) is placed first, over [0,6) at 100; b, due at 3 and read over two
			// slots, can only be prefetched over [0,3), at 200: 300 there. Placed again beside b, a's
			// prefetch moves to [3,6) at 200: peak 200. The LP spreads 1 200 bytes over 7 slots.
			in: oneNode(8, nil, 2000, []Span{a, b}, Job{Name: "x", Span: "a", Start: 6, Duration: 1, Deadline: 1},
				Job{Name: "y", Span: "b", Start: 3, Duration: 2, Deadline: 2}),
			peak: 200, bound: 1200.0 / 7, start: map[string]int{"a": 3, "b": 0}, end: map[string]int{"a": 6, "b": 3}, demandReadPk: 600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, res := mustMake(t, tc.in, Planner)
			if !near(res.Peak, tc.peak) || res.OnTime != res.Runs || res.Overload > 0 {
				t.Errorf("peak %v, want %v; %d of %d runs on time; overload %v", res.Peak, tc.peak, res.OnTime, res.Runs, res.Overload)
			}
			for _, tr := range sc.Prefetches() {
				if tr.Start != tc.start[tr.Span] || tr.End != tc.end[tr.Span] {
					t.Errorf("prefetch of %s over [%d, %d), want [%d, %d)", tr.Span, tr.Start, tr.End, tc.start[tr.Span], tc.end[tr.Span])
				}
			}
			if len(sc.Prefetches()) != len(tc.start) {
				t.Errorf("%d prefetches, want %d: %+v", len(sc.Prefetches()), len(tc.start), sc.Transfers)
			}
			lb, err := LowerBound(tc.in, Options{}, nil)
			if err != nil || !near(lb, tc.bound) {
				t.Errorf("lower bound %v (%v), want %v", lb, err, tc.bound)
			}
			_, dr := mustMake(t, tc.in, DemandReads)
			if !near(dr.Peak, tc.demandReadPk) {
				t.Errorf("demand reads peak %v, want %v (the base load counts)", dr.Peak, tc.demandReadPk)
			}
		})
	}
}

// With base loads on the nodes, the LP bound stays at most every strategy's peak, and an admitted
// job still makes its deadline within the budgets the base leaves.
func TestBaseLoadBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 17))
	for k := 0; k < 60; k++ {
		in := randomInstance(rng)
		for n := range in.Nodes {
			base := make([]float64, rng.IntN(in.Horizon))
			for t := range base {
				base[t] = 400 * rng.Float64()
			}
			in.Nodes[n].Base = base
		}
		for _, s := range Strategies {
			_, res := mustMake(t, in, s)
			if s == Planner && (res.OnTime != res.Admitted || res.Overload > 1e-6 || res.CacheOverflow > 1e-6) {
				t.Fatalf("instance %d: %d runs admitted, %d on time; overload %v, cache overflow %v", k, res.Admitted, res.OnTime, res.Overload, res.CacheOverflow)
			}
			lb, err := LowerBound(in, Options{}, res.RunOnTime)
			if err != nil {
				t.Fatalf("instance %d: %s: bound over its %d on-time runs: %v", k, s, res.OnTime, err)
			}
			if lb > res.Peak*(1+1e-6)+1e-6 {
				t.Fatalf("instance %d: %s: lower bound %v above its peak %v", k, s, lb, res.Peak)
			}
		}
	}
}
