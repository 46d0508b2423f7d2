package prefetch

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func mustMake(t *testing.T, in *Instance, s Strategy) (Schedule, Result) {
	t.Helper()
	sc, err := Make(in, s, Options{})
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	res, err := Evaluate(in, &sc)
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return sc, res
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*max(1, math.Abs(b)) }

// oneNode is a window of one-second slots on one node, so sizes read as bytes and rates as bytes per slot.
func oneNode(horizon int, bw []float64, cache float64, spans []Span, jobs ...Job) *Instance {
	return &Instance{Slot: time.Second, Horizon: horizon, Nodes: []Node{{Bandwidth: bw, Cache: cache}}, Spans: spans, Jobs: jobs}
}

// Hand-made windows whose best whole-copy schedule is known: a prefetch at a constant rate from the
// earliest slot to the first run is the lowest peak any schedule reaching it can have when nothing else
// is read, and the LP may also spread the bytes over the first run's own slots.
func TestKnownPeaks(t *testing.T) {
	a := Span{ID: "a", Size: 600}
	b := Span{ID: "b", Size: 300}
	job := func(name, span string, start, dur, deadline int) Job {
		return Job{Name: name, Span: span, Start: start, Duration: dur, Deadline: deadline}
	}
	for _, tc := range []struct {
		name    string
		in      *Instance
		want    map[Strategy]float64 // peaks
		bytes   map[Strategy]float64
		bound   float64
		onTime  map[Strategy]int
		reject  bool // the planner turns every job away and the LP has no solution
		prefetc int  // prefetches the planner plans
	}{
		{name: "one run: prefetch over the 6 slots before it",
			in:    oneNode(8, nil, 1000, []Span{a}, job("x", "a", 6, 1, 1)),
			want:  map[Strategy]float64{Planner: 100, DemandReads: 600, DemandPaging: 600},
			bytes: map[Strategy]float64{Planner: 600, DemandReads: 600, DemandPaging: 600},
			bound: 600.0 / 7, prefetc: 1},
		{name: "two runs read one span at once: one copy serves both",
			in:    oneNode(8, nil, 1000, []Span{a}, job("x", "a", 6, 1, 1), job("y", "a", 6, 1, 2)),
			want:  map[Strategy]float64{Planner: 100, DemandReads: 1200, DemandPaging: 1200},
			bytes: map[Strategy]float64{Planner: 600, DemandReads: 1200, DemandPaging: 1200},
			bound: 600.0 / 7, prefetc: 1},
		{name: "a later run of the same copy hits demand paging's cache; the prefetch goes on as the first run follows it",
			in:    oneNode(8, nil, 1000, []Span{a}, job("x", "a", 4, 1, 4), job("y", "a", 6, 1, 1)),
			want:  map[Strategy]float64{Planner: 100, DemandReads: 600, DemandPaging: 600},
			bytes: map[Strategy]float64{Planner: 600, DemandReads: 1200, DemandPaging: 600},
			bound: 600.0 / 7, prefetc: 1},
		{name: "two spans prefetched side by side",
			in:    oneNode(8, nil, 1000, []Span{a, b}, job("x", "a", 6, 1, 1), job("y", "b", 6, 1, 1)),
			want:  map[Strategy]float64{Planner: 150, DemandReads: 900, DemandPaging: 900},
			bound: 900.0 / 7, prefetc: 2},
		{name: "an earlier copy holds the cache until slot 3: the prefetch starts there",
			in: &Instance{Slot: time.Second, Horizon: 8, Nodes: []Node{{Cache: 1000, Held: []float64{1000, 1000, 1000}}},
				Spans: []Span{a}, Jobs: []Job{job("x", "a", 6, 1, 1)}},
			want:  map[Strategy]float64{Planner: 200, DemandReads: 600, DemandPaging: 600},
			bytes: map[Strategy]float64{Planner: 600, DemandReads: 600, DemandPaging: 600},
			bound: 600.0 / 4, prefetc: 1},
		{name: "no cache: nothing is prefetched; the LP may hold half the span",
			in:    oneNode(8, nil, 300, []Span{a}, job("x", "a", 6, 1, 1)),
			want:  map[Strategy]float64{Planner: 600, DemandReads: 600, DemandPaging: 600},
			bound: 300},
		{name: "a budget below the prefetch rate turns the job away",
			in:     oneNode(8, []float64{50}, 1000, []Span{a}, job("x", "a", 6, 1, 2)),
			onTime: map[Strategy]int{Planner: 0, DemandReads: 0, DemandPaging: 0},
			reject: true},
		{name: "a budget the prefetch fits, followed by its run in the slot of slack",
			in:     oneNode(8, []float64{120}, 1000, []Span{a}, job("x", "a", 6, 1, 2)),
			want:   map[Strategy]float64{Planner: 600.0 / 7, DemandReads: 120},
			onTime: map[Strategy]int{Planner: 1, DemandReads: 0, DemandPaging: 0},
			bound:  600.0 / 8, prefetc: 1},
		{name: "a budget the read fits only slowed to its deadline",
			in:     oneNode(8, []float64{0, 0, 0, 0, 0, 0, 300}, 1000, []Span{a}, job("x", "a", 6, 1, 2)),
			want:   map[Strategy]float64{Planner: 300, DemandReads: 300},
			onTime: map[Strategy]int{Planner: 1, DemandReads: 1},
			bound:  300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, s := range Strategies {
				sc, res := mustMake(t, tc.in, s)
				if w, ok := tc.want[s]; ok && !near(res.Peak, w) {
					t.Errorf("%s: peak %v, want %v", s, res.Peak, w)
				}
				if w, ok := tc.bytes[s]; ok && !near(res.DiskBytes, w) {
					t.Errorf("%s: %v bytes from disk, want %v", s, res.DiskBytes, w)
				}
				if w, ok := tc.onTime[s]; ok && res.OnTime != w {
					t.Errorf("%s: %d runs on time, want %d", s, res.OnTime, w)
				}
				if s == Planner {
					if got := len(sc.Prefetches()); got != tc.prefetc {
						t.Errorf("planner: %d prefetches, want %d: %+v", got, tc.prefetc, sc.Transfers)
					}
					if admitted := sc.Verdicts[0].Admitted; admitted == tc.reject {
						t.Errorf("planner: job admitted %v, want %v (%s)", admitted, !tc.reject, sc.Verdicts[0].Reason)
					}
				}
			}
			lb, err := LowerBound(tc.in, Options{}, nil)
			if tc.reject {
				if !errors.Is(err, ErrInfeasible) {
					t.Errorf("lower bound %v (%v), want ErrInfeasible", lb, err)
				}
				return
			}
			if err != nil || !near(lb, tc.bound) {
				t.Errorf("lower bound %v (%v), want %v", lb, err, tc.bound)
			}
		})
	}
}

// randomInstance is a small window with tight bandwidth and cache budgets and spans shared by jobs.
func randomInstance(rng *rand.Rand) *Instance {
	in := &Instance{Slot: time.Second, Horizon: 12 + rng.IntN(13)}
	nodes := 1 + rng.IntN(3)
	for n := 0; n < nodes; n++ {
		bw := make([]float64, in.Horizon)
		for t := range bw {
			bw[t] = 100 + 900*rng.Float64()
		}
		in.Nodes = append(in.Nodes, Node{Bandwidth: bw, Cache: 2000 * rng.Float64()})
	}
	spans := 2 + rng.IntN(5)
	for s := 0; s < spans; s++ {
		in.Spans = append(in.Spans, Span{ID: fmt.Sprint("s", s), Node: rng.IntN(nodes), Size: 100 + float64(rng.IntN(900))})
	}
	jobs := 2 + rng.IntN(7)
	for j := 0; j < jobs; j++ {
		dur := 1 + rng.IntN(3)
		period := 0
		if rng.IntN(2) == 0 {
			period = 4 + rng.IntN(5)
		}
		in.Jobs = append(in.Jobs, Job{Name: fmt.Sprint("j", j), Span: in.Spans[rng.IntN(spans)].ID,
			Start: rng.IntN(in.Horizon / 2), Duration: dur, Deadline: dur + rng.IntN(4), Period: period})
	}
	// Half the nodes have earlier copies, freeing their room over the first slots (drawn last, so
	// the rest of each instance is as it was without them).
	for n := range in.Nodes {
		if rng.IntN(2) == 0 {
			continue
		}
		held := in.Nodes[n].Cache * rng.Float64()
		for range rng.IntN(in.Horizon) {
			in.Nodes[n].Held = append(in.Nodes[n].Held, held)
			held *= rng.Float64()
		}
	}
	return in
}

// An admitted job always makes its deadline, and the planner never plans above a node's bandwidth or
// cache budget; a job is admitted exactly when all its runs are.
func TestAdmissionHolds(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	admitted, rejected := 0, 0
	for k := 0; k < 300; k++ {
		in := randomInstance(rng)
		sc, res := mustMake(t, in, Planner)
		if res.OnTime != res.Admitted {
			t.Fatalf("instance %d: %d runs admitted, %d on time: %+v", k, res.Admitted, res.OnTime, in)
		}
		if res.Overload > 1e-6 || res.CacheOverflow > 1e-6 {
			t.Fatalf("instance %d: %v bytes/s over a bandwidth budget, %v bytes over a cache budget", k, res.Overload, res.CacheOverflow)
		}
		for j, v := range sc.Verdicts {
			for r, run := range sc.Runs {
				if run.Job == j && sc.Serves[r].Admitted != v.Admitted {
					t.Fatalf("instance %d: job %s admitted %v, its run %d %v", k, v.Job, v.Admitted, r, sc.Serves[r].Admitted)
				}
			}
			if v.Admitted {
				admitted++
			} else {
				rejected++
				if v.Reason == "" {
					t.Fatalf("instance %d: job %s rejected without a reason", k, v.Job)
				}
			}
		}
	}
	if admitted == 0 || rejected == 0 {
		t.Fatalf("the instances admit %d jobs and reject %d: both should occur", admitted, rejected)
	}
	t.Logf("%d jobs admitted, %d rejected over 300 instances", admitted, rejected)
}

// The LP bound for the runs a strategy serves on time is at most that strategy's peak.
func TestLowerBoundBelowEveryPeak(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for k := 0; k < 30; k++ {
		in := randomInstance(rng)
		for _, s := range Strategies {
			_, res := mustMake(t, in, s)
			if res.CacheOverflow > 0 {
				t.Fatalf("instance %d: %s overflows a cache by %v", k, s, res.CacheOverflow)
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

// The chapter's comparison on generated trace-like mixes: the medium load (every strategy on time)
// compares peaks and bytes, a cache sweep shows where prefetching stops paying, and a high load (disks
// 80 times slower) compares the jobs on time.
func TestTraceMix(t *testing.T) {
	type mix struct {
		share float64
		seeds uint64
	}
	mixes := []mix{{1, 3}}
	if !testing.Short() && !raceEnabled {
		mixes = []mix{{1, 8}, {0.5, 3}, {2, 3}}
	}
	for _, m := range mixes {
		share := m.share
		for seed := uint64(1); seed <= m.seeds; seed++ {
			cfg := DefaultMix(seed)
			cfg.CacheShare = share
			in, err := Mix(cfg)
			if err != nil {
				t.Fatal(err)
			}
			res := map[Strategy]Result{}
			for _, s := range Strategies {
				_, res[s] = mustMake(t, &in, s)
				if res[s].OnTime != res[s].Runs {
					t.Errorf("share %v seed %d: %s: %d of %d runs on time at medium load", share, seed, s, res[s].OnTime, res[s].Runs)
				}
			}
			lb, err := LowerBound(&in, Options{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			pl, dr, dp := res[Planner], res[DemandReads], res[DemandPaging]
			t.Logf("cache %.1f× seed %d: peak MB/s planner %.2f, demand reads %.2f (%.1f×), demand paging %.2f (%.1f×), LP %.2f (planner %.2f×, reads %.1f×, paging %.1f×); GB read %.1f / %.1f / %.1f (planner −%.0f%% vs reads)",
				share, seed, pl.Peak/1e6, dr.Peak/1e6, dr.Peak/pl.Peak, dp.Peak/1e6, dp.Peak/pl.Peak, lb/1e6, pl.Peak/lb, dr.Peak/lb, dp.Peak/lb,
				pl.DiskBytes/1e9, dr.DiskBytes/1e9, dp.DiskBytes/1e9, 100*(1-pl.DiskBytes/dr.DiskBytes))
			for _, s := range Strategies {
				if res[s].Peak < lb*(1-1e-6) {
					t.Errorf("share %v seed %d: %s peak %v below the LP bound %v", share, seed, s, res[s].Peak, lb)
				}
			}
			if share >= 1 && (pl.Peak >= dr.Peak || pl.Peak >= dp.Peak || pl.DiskBytes > dp.DiskBytes) {
				t.Errorf("share %v seed %d: with cache for the jobs' spans the planner should beat both baselines: %+v %+v %+v", share, seed, pl, dr, dp)
			}
		}
	}
	for seed := uint64(1); seed <= 3; seed++ {
		cfg := DefaultMix(seed)
		cfg.Bandwidth /= 80
		in, err := Mix(cfg)
		if err != nil {
			t.Fatal(err)
		}
		res := map[Strategy]Result{}
		for _, s := range Strategies {
			_, res[s] = mustMake(t, &in, s)
		}
		pl, dr, dp := res[Planner], res[DemandReads], res[DemandPaging]
		t.Logf("high load seed %d: jobs on time planner %d, demand reads %d, demand paging %d of %d (runs %d / %d / %d of %d)",
			seed, pl.JobsOnTime, dr.JobsOnTime, dp.JobsOnTime, pl.Jobs, pl.OnTime, dr.OnTime, dp.OnTime, pl.Runs)
		if pl.JobsOnTime < dp.JobsOnTime || pl.JobsOnTime < dr.JobsOnTime || pl.OnTime != pl.Admitted {
			t.Errorf("high load seed %d: the planner has %d jobs on time (%d of %d admitted runs), demand paging %d, demand reads %d",
				seed, pl.JobsOnTime, pl.OnTime, pl.Admitted, dp.JobsOnTime, dr.JobsOnTime)
		}
	}
}

func TestValidate(t *testing.T) {
	good := func() *Instance {
		return oneNode(8, nil, 10, []Span{{ID: "a", Size: 10}}, Job{Name: "x", Span: "a", Start: 1, Deadline: 2})
	}
	for _, tc := range []struct {
		name   string
		break_ func(*Instance)
	}{
		{"unknown span", func(in *Instance) { in.Jobs[0].Span = "b" }},
		{"span on a missing node", func(in *Instance) { in.Spans[0].Node = 3 }},
		{"duration over the deadline", func(in *Instance) { in.Jobs[0].Duration = 3 }},
		{"empty span", func(in *Instance) { in.Spans[0].Size = 0 }},
		{"no slot", func(in *Instance) { in.Slot = 0 }},
		{"negative budget", func(in *Instance) { in.Nodes[0].Bandwidth = []float64{-1} }},
		{"negative bytes held", func(in *Instance) { in.Nodes[0].Held = []float64{-1} }},
		{"more held than the cache", func(in *Instance) { in.Nodes[0].Held = []float64{11} }},
		{"held rising", func(in *Instance) { in.Nodes[0].Held = []float64{1, 2} }},
	} {
		in := good()
		if err := in.Validate(); err != nil {
			t.Fatalf("the good instance: %v", err)
		}
		tc.break_(in)
		if _, err := Make(in, Planner, Options{}); err == nil {
			t.Errorf("%s: planned", tc.name)
		}
	}
}
