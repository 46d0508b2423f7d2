package scenario

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// series builds a one-second series from per-second ops counts (second i+1 covers (i, i+1]).
func series(ops ...int64) []Point {
	out := make([]Point, len(ops))
	for i, o := range ops {
		out[i] = Point{T: float64(i + 1), Ops: o, P99Ms: 1}
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// A change at t=5 that halves the throughput for 3 s: the steady state is the seconds before it
// after the warm-up, the worst second is 50 %, and the throughput is back to 95 % 3 s after the
// change; the nodes' seconds name the old and the new leader and their hit ratios.
func TestAnalyzeReadHintsAfterAChange(t *testing.T) {
	rr := RunReport{Series: series(100, 1000, 1000, 1000, 1000, 500, 500, 600, 990, 1000, 1000, 1000),
		Events: []EventMark{{T: 0, Label: string(Gather)}, {T: 5, Label: string(MoveLeaders), What: "move leaders 6 ranges n1->n2"}}}
	for i := range rr.Series {
		s, leader := i+1, uint64(1)
		if s > 5 {
			leader = 2
		}
		for id := uint64(1); id <= 2; id++ {
			ns := NodeSecond{Node: id, Hits: 90, Misses: 10, Applied: 50}
			if id == leader {
				ns.Leaders, ns.Recorded, ns.BytesSent, ns.Applied = 6, 1000, 20000, 0
				if s == 6 {
					ns.Hits, ns.Misses = 60, 40 // the new leader's first second: colder
				}
			}
			rr.Series[i].Nodes = append(rr.Series[i].Nodes, ns)
		}
	}
	got := analyzeReadHints(rr, 1, nil)
	if got.ChangeT != 5 || got.SteadyThroughput != 1000 || got.WorstSecond != 0.5 {
		t.Fatalf("change %v, steady %v, worst %v: want 5, 1000, 0.5", got.ChangeT, got.SteadyThroughput, got.WorstSecond)
	}
	if got.TimeTo95S == nil || *got.TimeTo95S != 3 {
		t.Fatalf("time to 95 %% %v, want 3 s (the window of seconds 9–11 averages 997)", got.TimeTo95S)
	}
	if got.OldLeader != 1 || got.NewLeader != 2 {
		t.Fatalf("leaders n%d -> n%d, want n1 -> n2", got.OldLeader, got.NewLeader)
	}
	if r := got.NewLeaderHitRatioFirst1s; r == nil || !near(*r, 0.6) {
		t.Fatalf("new leader's first-second hit ratio %v, want 0.6", r)
	}
	if r := got.OldLeaderHitRatio; r == nil || !near(*r, 0.9) {
		t.Fatalf("old leader's hit ratio %v, want 0.9", r)
	}
	if r := got.HitRatioRecoveryS; r == nil || *r != 1 {
		t.Fatalf("hit ratio back after %v, want 1 s (the new leader's second second matches the old one's)", r)
	}
	if got.RecordedPerSec != 1000 || got.HintBytesPerSec != 20000 || got.BytesPerRead != 20 || got.AppliedPerSec != 50 {
		t.Fatalf("recorded %v/s, %v B/s, %v B/read, applied %v/s: want 1000, 20000, 20, 50", got.RecordedPerSec,
			got.HintBytesPerSec, got.BytesPerRead, got.AppliedPerSec)
	}
	if got.TimeToP99S == nil || *got.TimeToP99S != 0 || got.P99First1sRatio != 1 {
		t.Fatalf("p99 back after %v, first-second ratio %v: want 0 and 1", got.TimeToP99S, got.P99First1sRatio)
	}
}

// A run that never gets back to 95 % reports no time, not a made-up one.
func TestAnalyzeReadHintsNeverRecovers(t *testing.T) {
	got := analyzeReadHints(RunReport{Series: series(1000, 1000, 1000, 400, 500, 600, 700, 800),
		Events: []EventMark{{T: 3, Label: string(MoveLeaders)}}}, 0, nil)
	if got.TimeTo95S != nil {
		t.Fatalf("time to 95 %% %v, want none", *got.TimeTo95S)
	}
}

// read-hints-overhead's schedule (resolve) through the analysis: hints cost 2 % while the throughput
// drifts up by 1 op/s per second; every window is measured from 5 s after its switch, and the pairs'
// mean is the cost with the drift cancelled over each two pairs.
func TestTogglesABBA(t *testing.T) {
	sc, _ := Lookup("read-hints-overhead")
	sc, err := resolve(sc, Options{Dir: "d", Out: "o", TogglePairs: 8, ToggleWindow: 12 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const warm, win, pairs = 20, 12, 8
	if sc.Duration != (warm+2*pairs*win)*time.Second || sc.Toggle.Pairs != pairs || sc.Toggle.Skip != 5*time.Second {
		t.Fatalf("duration %v, toggle %+v", sc.Duration, sc.Toggle)
	}
	var evs []EventMark
	for _, e := range sc.Events {
		evs = append(evs, EventMark{T: e.At.Seconds(), Label: string(e.Do)})
	}
	ops := make([]int64, int(sc.Duration.Seconds()))
	on := true
	for i := range ops {
		for _, e := range evs[1:] {
			if e.T <= float64(i)+0.5 { // second i+1 covers (i, i+1]
				on = e.Label == string(PolicyOn)
			}
		}
		v := 1000 + float64(i)
		if on {
			v *= 0.98
		}
		ops[i] = int64(math.Round(v))
	}
	got := analyzeReadHints(RunReport{Series: series(ops...), Events: evs}, warm, sc.Toggle)
	if len(got.ToggleWindows) != 2*pairs {
		t.Fatalf("%d windows, want %d", len(got.ToggleWindows), 2*pairs)
	}
	if w := got.ToggleWindows[0]; !w.On || w.FromS != warm+5 || w.ToS != warm+win {
		t.Fatalf("first window %+v: want on, from %d to %d s", w, warm+5, warm+win)
	}
	c := got.Paired
	if c == nil || c.Pairs != pairs || c.Order != "abba" || got.PairedLowSteal.Pairs != pairs {
		t.Fatalf("paired %+v: want %d ABBA pairs", c, pairs)
	}
	if math.Abs(c.Mean-0.02) > 0.001 || c.CILow > 0.02 || c.CIHigh < 0.02 {
		t.Fatalf("cost %v, CI [%v, %v]: want about 0.02, inside the interval", c.Mean, c.CILow, c.CIHigh)
	}
	// A short run keeps the schedule's shape: one pair at least, windows filling the run.
	short, _ := Lookup("read-hints-overhead")
	if short, err = resolve(short, Options{Dir: "d", Out: "o", Duration: 20 * time.Second}); err != nil || short.Toggle.Pairs != 1 ||
		(short.Warmup+2*short.Toggle.Window-20*time.Second).Abs() > time.Millisecond {
		t.Fatalf("20-s run: %v, toggle %+v, warm-up %v", err, short.Toggle, short.Warmup)
	}
}

// The hit-ratio plots are drawn for a run with a change.
func TestPlotReadHints(t *testing.T) {
	r := 0.9
	rr := RunReport{Series: series(1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000),
		ReadHints: &ReadHintsRun{ChangeT: 5, Change: "move leaders", NewLeader: 2, OldLeaderHitRatio: &r}}
	for i := range rr.Series {
		rr.Series[i].Nodes = []NodeSecond{{Node: 2, Hits: 900, Misses: 100}}
	}
	out := t.TempDir()
	files, err := plotReadHints(&Report{Scenario: "x", Runs: []RunReport{rr}}, out)
	if err != nil || len(files) != 2 {
		t.Fatalf("plots %v: %v", files, err)
	}
	for _, f := range files {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s not written: %v", f, err)
		}
	}
}
