package scenario

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// series builds a one-second series from per-second ops counts (second i+1 covers (i, i+1]).
func series(ops ...int64) []Point {
	out := make([]Point, len(ops))
	for i, o := range ops {
		out[i] = Point{T: float64(i + 1), Ops: o, P99Ms: 1}
	}
	return out
}

// A change at t=5 that halves the throughput for 3 s: the steady state is the seconds before it
// after the warm-up, the worst second is 50 %, and the throughput is back to 95 % 3 s after the
// change; the node samples name the old and the new leader and their hit ratios.
func TestAnalyzeRunAfterAChange(t *testing.T) {
	rr := RunReport{PolicyOn: true,
		Series: series(100, 1000, 1000, 1000, 1000, 500, 500, 600, 990, 1000, 1000, 1000),
		Events: []EventMark{{T: 0, Label: "gather"}, {T: 5, Label: "move leaders", What: "move leaders 6 ranges n1->n2"}}}
	var nodes []NodeSample
	for s := 1; s <= 12; s++ {
		leader := uint64(1)
		if s > 5 {
			leader = 2
		}
		smp := NodeSample{T: float64(s)}
		for id := uint64(1); id <= 2; id++ {
			ns := NodeSecond{Node: id, Alive: true, CacheHits: 90, CacheMisses: 10, Applied: 50}
			if id == leader {
				ns.Leaders, ns.Recorded, ns.BytesSent = 6, 1000, 20000
				if s > 5 && s <= 6 {
					ns.CacheHits, ns.CacheMisses = 60, 40 // the new leader's first second: colder
				}
			}
			smp.Nodes = append(smp.Nodes, ns)
		}
		nodes = append(nodes, smp)
	}
	got := analyzeRun(rr, nodes, 1)
	if got.ChangeT != 5 || got.SteadyThroughput != 1000 || got.WorstSecond != 0.5 {
		t.Fatalf("change %v, steady %v, worst %v: want 5, 1000, 0.5", got.ChangeT, got.SteadyThroughput, got.WorstSecond)
	}
	if got.TimeTo95S == nil || *got.TimeTo95S != 3 {
		t.Fatalf("time to 95 %% %v, want 3 s (the window of seconds 9–11 averages 997)", got.TimeTo95S)
	}
	if got.OldLeader != 1 || got.NewLeader != 2 {
		t.Fatalf("leaders n%d -> n%d, want n1 -> n2", got.OldLeader, got.NewLeader)
	}
	if r := got.NewLeaderHitRatioFirst1s; r == nil || math.Abs(*r-0.6) > 1e-9 {
		t.Fatalf("new leader's first-second hit ratio %v, want 0.6", r)
	}
	if r := got.OldLeaderHitRatio; r == nil || math.Abs(*r-0.9) > 1e-9 {
		t.Fatalf("old leader's hit ratio %v, want 0.9", r)
	}
	if r := got.HitRatioRecoveryS; r == nil || *r != 1 {
		t.Fatalf("hit ratio back after %v, want 1 s (the new leader's second second matches the old one's)", r)
	}
	if got.RecordedPerSec != 1000 || got.HintBytesPerSec != 20000 || got.BytesPerRead != 20 {
		t.Fatalf("recorded %v/s, %v B/s, %v B/read: want 1000, 20000, 20", got.RecordedPerSec, got.HintBytesPerSec, got.BytesPerRead)
	}
}

// A run that never gets back to 95 % reports no time, not a made-up one.
func TestAnalyzeRunNeverRecovers(t *testing.T) {
	rr := RunReport{Series: series(1000, 1000, 1000, 400, 500, 600, 700, 800),
		Events: []EventMark{{T: 3, Label: "move leaders"}}}
	got := analyzeRun(rr, nil, 0)
	if got.TimeTo95S != nil {
		t.Fatalf("time to 95 %% %v, want none", *got.TimeTo95S)
	}
}

// Toggled runs compare the seconds with hints on against those with hints off, leaving out the 3 s
// after each switch.
func TestAnalyzeToggles(t *testing.T) {
	ops := make([]int64, 40)
	for i := range ops {
		ops[i] = 980 // hints on: 2 % less
		if i >= 10 && i < 20 {
			ops[i] = 1000 // hints off from t=10 (counted from t=13 to t=14)
		}
	}
	rr := RunReport{Series: series(ops...), Events: []EventMark{{T: 0, Label: "gather"}, {T: 10, Label: "hints off"}, {T: 17, Label: "hints on"}}}
	got := analyzeRun(rr, nil, 2)
	if got.ToggleOnThroughput != 980 || got.ToggleOffThroughput != 1000 || math.Abs(got.ToggleOverhead-0.02) > 1e-9 {
		t.Fatalf("on %v, off %v, overhead %v: want 980, 1000, 0.02", got.ToggleOnThroughput, got.ToggleOffThroughput, got.ToggleOverhead)
	}
}

// The key chooser: the default is zipfian over every key; uniform spreads evenly; disjoint writes
// only ever touch every fifth key and reads never do; a shift moves the hot keys elsewhere.
func TestKeyChooser(t *testing.T) {
	const records = 1000
	rng := rand.New(rand.NewPCG(1, 2))
	count := func(w Workload, read, shifted bool, n int) map[int]int {
		k := w.chooser(rng, records)
		c := map[int]int{}
		for i := 0; i < n; i++ {
			j := k.next(read, shifted)
			if j < 0 || j >= records {
				t.Fatalf("%+v: key index %d out of range", w, j)
			}
			c[j]++
		}
		return c
	}
	top := func(c map[int]int) (int, int) {
		best := -1
		for j, n := range c {
			if best < 0 || n > c[best] {
				best = j
			}
		}
		return best, c[best]
	}
	zipf := count(Workload{}, true, false, 20000)
	hot, n := top(zipf)
	if n < 2000 {
		t.Fatalf("zipfian: hottest key %d read %d times of 20000, want a skew", hot, n)
	}
	if _, n := top(count(Workload{Keys: Uniform}, true, false, 20000)); n > 60 {
		t.Fatalf("uniform: hottest key read %d times of 20000 over 1000 keys, want about 20", n)
	}
	for _, read := range []bool{true, false} {
		for j := range count(Workload{DisjointWrites: true}, read, false, 5000) {
			if (j%5 == 4) == read {
				t.Fatalf("disjoint: read=%v touched key %d", read, j)
			}
		}
	}
	if shifted, _ := top(count(Workload{}, true, true, 20000)); shifted == hot {
		t.Fatalf("shifted: the hottest key is still %d", hot)
	}
}

// A run with a return of the leaderships: the change is the return, not the first move, and the
// steady state starts 5 s after the last earlier event.
func TestAnalyzeRunReturn(t *testing.T) {
	ops := make([]int64, 40)
	for i := range ops {
		ops[i] = 1000
	}
	one := 3.0
	rr := RunReport{Series: series(ops...), Events: []EventMark{{T: 0, Label: "gather"},
		{T: 10, EndT: 10.5, Label: "move leaders"}, {T: 15, EndT: 15, Label: "working set moves"}, {T: 30, EndT: 30.2, Label: "return leaders", What: "return leaders 6 ranges n2->n1"}}}
	rr.Series[31].ScanMs = &one
	got := analyzeRun(rr, nil, 5)
	if got.ChangeT != 30 || got.SteadyFromS != 20 {
		t.Fatalf("change at %v, steady from %v: want 30 and 20", got.ChangeT, got.SteadyFromS)
	}
	if got.TimeToP99S == nil || *got.TimeToP99S != 0 || got.P99First1sRatio != 1 {
		t.Fatalf("p99 back after %v, first-second ratio %v: want 0 and 1", got.TimeToP99S, got.P99First1sRatio)
	}
	if got.ScanAfterMs == nil || *got.ScanAfterMs != 3 || got.ScanSteadyMs != nil {
		t.Fatalf("scan after %v, steady %v: want 3 ms and none", got.ScanAfterMs, got.ScanSteadyMs)
	}
	if f := got.FirstMove; f == nil || f.ChangeT != 10 || f.SteadyFromS != 5 || len(f.Nodes) != 0 {
		t.Fatalf("first move %+v: want the change at 10 s, steady from 5 s", f)
	}
}

// The new leaders' plot is drawn for runs with a change and skipped without one.
func TestPlotNewLeaderHitRatios(t *testing.T) {
	r := 0.9
	var nodes []NodeSample
	for s := 1; s <= 10; s++ {
		nodes = append(nodes, NodeSample{T: float64(s), Nodes: []NodeSecond{{Node: 2, CacheHits: 900, CacheMisses: 100, HitRatio: &r}}})
	}
	sum := &ReadHintsSummary{Runs: []ReadHintsRun{{HintsOn: true, ChangeT: 5, Change: "move leaders", NewLeader: 2, OldLeaderHitRatio: &r, Nodes: nodes}}}
	file := filepath.Join(t.TempDir(), "p.png")
	if ok, err := plotNewLeaderHitRatios(&Report{Scenario: "x"}, sum, file); err != nil || !ok {
		t.Fatalf("plot: %v %v", ok, err)
	}
	if st, err := os.Stat(file); err != nil || st.Size() == 0 {
		t.Fatalf("no plot written: %v", err)
	}
	sum.Runs[0].ChangeT = 0
	if ok, err := plotNewLeaderHitRatios(&Report{Scenario: "x"}, sum, file); err != nil || ok {
		t.Fatalf("plot without a change: %v %v, want nothing drawn", ok, err)
	}
}
