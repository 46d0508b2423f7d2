package sim

import (
	"bytes"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/join-real-40s.json is the report.json of one real run, `shoal bench scenario join
// --variants incremental,no-join --duration 40s` (load average 10–13 from other builds on the 2-core
// machine), with the fields calibration does not read (per-node seconds, device counters, scores)
// left out.
const realJoin = "testdata/join-real-40s.json"

// TestCalibrateJoin simulates the real join run's scenario and checks what calibration must hold
// on it: the offered load is the real run's throughput before the join, the join's decisions are the
// same kinds in the same order, and every figure's error is (sim − real) / real.
func TestCalibrateJoin(t *testing.T) {
	cal := calibrated(t, realJoin)
	if cal.RealOn != "incremental" || cal.RealOff != "no-join" {
		t.Fatalf("runs compared: %s / %s, want incremental / no-join", cal.RealOn, cal.RealOff)
	}
	// The real run's seconds after its 3.3-s warm-up up to the join at 10 s.
	if want := (1385.0 + 1607 + 1538 + 1738 + 1805 + 2052 + 1812) / 7; math.Abs(cal.OfferedOpsPerS-want) > 0.01 {
		t.Fatalf("offered %.3f ops/s, want %.3f", cal.OfferedOpsPerS, want)
	}
	byName := map[string]Figure{}
	for _, f := range cal.Figures {
		byName[f.Name] = f
		if f.Real != 0 && math.Abs(f.Error-(f.Sim-f.Real)/f.Real) > 0.001 {
			t.Errorf("%s: error %.4f, want (sim − real) / real = %.4f", f.Name, f.Error, (f.Sim-f.Real)/f.Real)
		}
		if f.Within != (math.Abs(f.Error) <= cal.Tolerance) {
			t.Errorf("%s: within %v with error %.3f and tolerance %.2f", f.Name, f.Within, f.Error, cal.Tolerance)
		}
	}
	for _, name := range []string{"throughput, policy on (ops/s)", "throughput, policy off (ops/s)", "p99 ratio on/off",
		"decisions: move-replica", "join: time to complete (s)", "join: mean interval between moves (s)"} {
		if _, ok := byName[name]; !ok {
			t.Errorf("no figure %q", name)
		}
	}
	if f := byName["decisions: move-replica"]; f.Real != 18 || f.Sim != 18 {
		t.Errorf("moves: real %v, sim %v; want 18 each (the new node's share of 24×3 replicas over 4 nodes)", f.Real, f.Sim)
	}
	if cal.Sequence.FirstDifference != -1 || len(cal.Sequence.Sim) != sequenceLength {
		t.Errorf("decision sequences differ at %d:\nreal %q\nsim  %q", cal.Sequence.FirstDifference, cal.Sequence.Real, cal.Sequence.Sim)
	}
	if len(cal.Bins) != 4 {
		t.Fatalf("%d throughput bins over 3.3–40 s, want 4", len(cal.Bins))
	}
	// The clients are a closed loop bound by the nodes' 250-IOPS disks: a fourth disk and caches
	// over a smaller share of the data each serve more, as the real run did (2.1×).
	if first, last := cal.Bins[0].Sim, cal.Bins[3].Sim; last < 1.5*first {
		t.Errorf("simulated throughput %.0f ops/s before the join, %.0f after it: want the fourth node's capacity", first, last)
	}
	var text bytes.Buffer
	if err := cal.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "identical in kind and order") {
		t.Errorf("text report:\n%s", text.String())
	}
	dir := t.TempDir()
	if err := cal.Write(dir); err != nil {
		t.Fatal(err)
	}
	readFile(t, filepath.Join(dir, "calibration.json"))
}

func TestKindOfAndNoteOf(t *testing.T) {
	for _, tc := range []struct{ op, kind, note string }{
		{"move-replica r2: add-learner n4, promote-voter n4 (remove n2)", "move-replica", ""},
		{"transfer-leader r7 to n4", "transfer-leader", ""},
		{"n4 joining", "note", " (joining)"},
		{"n4 partially joined", "note", " (partially joined)"},
		{"n4 joined", "note", " (joined)"},
		{"mark n3 decommissioned", "note", " (mark decommissioned)"},
	} {
		if k, n := kindOf(tc.op), noteOf(tc.op); k != tc.kind || n != tc.note {
			t.Errorf("%q: kind %q note %q, want %q %q", tc.op, k, n, tc.kind, tc.note)
		}
	}
}

func TestCalibrateRefusesAnUnknownScenario(t *testing.T) {
	real := &RealReport{Scenario: "move", Runs: []RealRun{{PolicyOn: true}}}
	if _, err := Calibrate(real, CalibrateOptions{}); err == nil || !strings.Contains(err.Error(), "no simulated scenario") {
		t.Fatalf("err = %v", err)
	}
}

// The decommission's real runs: testdata/decommission-real.json is the report.json of one real run,
// `shoal bench scenario decommission` (load average 6–9), the one ConfChange and the host's
// parameters were fitted to; decommission-real-2.json another, held out (load average 3.6–7.8,
// recorded after the fit). Both with the per-node seconds and device figures left out.
const (
	realDecommission     = "testdata/decommission-real.json"
	realDecommissionHeld = "testdata/decommission-real-2.json"
)

// TestCalibrateDecommission: from each real run's decision log, the same 24 moves and the note
// marking n3 decommissioned, in the same order, and the moves' mean duration (to the policy's next
// decision) and the decommission's time within the tolerance. Of the throughput, the bin before the
// event (the clients' think time is fitted to it), and the moves cost some: the leader's disk,
// which binds, reads the snapshots it streams through its cache. The bins after the moves are not
// held to the tolerance (docs/design/simulator.md, Calibration).
func TestCalibrateDecommission(t *testing.T) {
	for _, path := range []string{realDecommission, realDecommissionHeld} {
		t.Run(path, func(t *testing.T) { checkDecommissionCalibration(t, path) })
	}
}

func checkDecommissionCalibration(t *testing.T, path string) {
	cal := calibrated(t, path)
	byName := map[string]Figure{}
	for _, f := range cal.Figures {
		byName[f.Name] = f
	}
	if f := byName["decisions: move-replica"]; f.Real != 24 || f.Sim != 24 {
		t.Errorf("moves: real %v, sim %v; want 24 each (n3's replicas)", f.Real, f.Sim)
	}
	for _, name := range []string{"move-replica: mean duration (s)", "decommission: time to finish (s)"} {
		f, ok := byName[name]
		if !ok || !f.Within {
			t.Errorf("%s: %+v, want within %.0f %%", name, f, 100*cal.Tolerance)
		}
	}
	if cal.Sequence.FirstDifference != -1 || len(cal.Sequence.Real) != sequenceLength {
		t.Errorf("decision sequences differ at %d:\nreal %q\nsim  %q", cal.Sequence.FirstDifference, cal.Sequence.Real, cal.Sequence.Sim)
	}
	if len(cal.Bins) != 8 || cal.Bins[0].Error > cal.Tolerance || cal.Bins[0].Error < -cal.Tolerance {
		t.Fatalf("bins %+v: want 8 over 8–80 s, the first (before the event) within the tolerance", cal.Bins)
	}
	for _, b := range cal.Bins[1:4] {
		if b.Sim >= 0.95*cal.Bins[0].Sim {
			t.Errorf("bin %+v during the moves: want below the one before them (%.0f ops/s)", b, cal.Bins[0].Sim)
		}
	}
}

// testdata/node-kill-real.json is the report.json of one real run, `shoal bench scenario node-kill`
// (load average 3–8), the per-node seconds and device figures left out.
const realNodeKill = "testdata/node-kill-real.json"

// TestCalibrateNodeKill: with the failover time fitted (Params.ElectionMin/Max), the policy-on
// run's 10-s throughput bins are within the tolerance and the seconds the kill cost within one of
// the real run's (the series are per second).
func TestCalibrateNodeKill(t *testing.T) {
	cal := calibrated(t, realNodeKill)
	if len(cal.Bins) != 2 {
		t.Fatalf("%d bins over 5–25 s, want 2", len(cal.Bins))
	}
	for _, b := range cal.Bins {
		if math.Abs(b.Error) > cal.Tolerance {
			t.Errorf("bin %+v off by more than %.0f %%", b, 100*cal.Tolerance)
		}
	}
	var found bool
	for _, f := range cal.Figures {
		if f.Name == "kill leader: seconds below half the offered load" {
			found = true
			if math.Abs(f.Sim-f.Real) > 1 {
				t.Errorf("%s: real %v, sim %v; want within a second", f.Name, f.Real, f.Sim)
			}
		}
	}
	if !found {
		t.Errorf("no figure for the killed leader: %+v", cal.Figures)
	}
}

// TestMeanDuration: a succeeded operator lasts from its proposal to its policy's next decision;
// failed ones, other policies' decisions and an operator with no next decision do not count.
func TestMeanDuration(t *testing.T) {
	ds := []dec{
		{at: 0, policy: "decommission", kind: "move-replica", ok: true},
		{at: 0.5, policy: "rebalance", kind: "transfer-leader", ok: true},
		{at: 1.4, policy: "decommission", kind: "move-replica", ok: false},
		{at: 2.0, policy: "decommission", kind: "move-replica", ok: true},
		{at: 3.2, policy: "decommission", kind: "note", ok: true},
		{at: 4.0, policy: "decommission", kind: "move-replica", ok: true},
	}
	if m, n := meanDuration(ds, "move-replica"); n != 2 || math.Abs(m-(1.4+1.2)/2) > 1e-9 {
		t.Fatalf("mean %.3f over %d, want 1.300 over 2", m, n)
	}
	if _, n := meanDuration(ds, "transfer-leader"); n != 0 {
		t.Fatalf("%d transfers timed, want none (no next rebalance decision)", n)
	}
}

// testdata/join-real-paced.json is the report.json of one real run of the paced join, `shoal bench
// scenario join --variants incremental` (closed loop for 30 s, then 60 % of it, 1 925 ops/s,
// offered; the join at 55 s; closed loop again from 110 s), recorded after every fit, the fields
// calibration does not read left out.
const realJoinPaced = "testdata/join-real-paced.json"

// TestCalibratePacedJoin: a paced real run is simulated paced at the rate it offered, so every bin
// between the warm-up and the probe is within the tolerance of the real run, the bins clear of the
// join's moves (55–70 s: its streams take the new node's disk and pollute the senders' caches)
// serve exactly that rate, and the join's decisions are the same kinds in the same order.
func TestCalibratePacedJoin(t *testing.T) {
	cal := calibrated(t, realJoinPaced)
	if cal.Sequence.FirstDifference != -1 {
		t.Errorf("decision sequences differ at %d:\nreal %q\nsim  %q", cal.Sequence.FirstDifference, cal.Sequence.Real, cal.Sequence.Sim)
	}
	paced := 0
	for _, b := range cal.Bins {
		if b.FromS >= 30 && b.ToS <= 100 {
			paced++
			moving := b.ToS > 55 && b.FromS < 70
			if (!moving && math.Abs(b.Sim-1925.24) > 1) || math.Abs(b.Error) > cal.Tolerance {
				t.Errorf("paced bin %+v: want the offered 1 925 ops/s, within the tolerance of the real", b)
			}
		}
	}
	if paced != 7 {
		t.Errorf("%d paced bins in %+v, want 7 (30–100 s)", paced, cal.Bins)
	}
}

// calibrated is the calibration, seed 1, of the real report at path.
func calibrated(t *testing.T, path string) *Calibration {
	t.Helper()
	real, err := ReadRealReport(path)
	if err != nil {
		t.Fatal(err)
	}
	cal, err := Calibrate(real, CalibrateOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return cal
}

// TestCacheBins: a simulated loopback run records each node's cache lookups and disk operations per
// second, the cluster's hit ratio is their sum's, and calibration averages them per node over its
// bins as it does the real run's.
func TestCacheBins(t *testing.T) {
	sc, ok := Lookup("join")
	if !ok {
		t.Fatal("no join scenario")
	}
	res, err := Run(sc, Options{Seed: 1, OnlyPolicyOn: true})
	if err != nil {
		t.Fatal(err)
	}
	series := res.Report.Runs[0].Series
	var sawFourth bool
	for _, p := range series[len(series)/2:] {
		var h, m int64
		for _, n := range p.Nodes {
			if n.Hits < 0 || n.Misses < 0 || n.DiskOps < n.Misses || n.DiskReads != n.Misses {
				t.Fatalf("t=%v n%d: hits %d misses %d disk ops %d", p.T, n.Node, n.Hits, n.Misses, n.DiskOps)
			}
			h, m = h+n.Hits, m+n.Misses
			sawFourth = sawFourth || n.Node == 4 && n.Hits > 0
		}
		if p.HitRatio == nil || math.Abs(*p.HitRatio-float64(h)/float64(h+m)) > 1e-9 {
			t.Fatalf("t=%v: hit ratio %v, want %d of %d", p.T, p.HitRatio, h, h+m)
		}
	}
	if !sawFourth {
		t.Fatal("the joined node never served a read from its cache")
	}
	pts := []Point{{T: 1, Nodes: []NodeSecond{{Node: 2, Misses: 10, DiskOps: 30, DiskReads: 12}}}, {T: 2, Nodes: []NodeSecond{{Node: 2, Misses: 20, DiskOps: 50, DiskReads: 18}}},
		{T: 3, Nodes: []NodeSecond{{Node: 0, Misses: 99}}}}
	if r := nodeRates(pts, 2, 0, 3); r.misses != 10 || r.disk != 80.0/3 || r.reads != 10 {
		t.Fatalf("node 2 over (0, 3]: %+v per s; want 10 misses, 26.67 disk ops, 10 reads (down in the third second)", r)
	}
}
