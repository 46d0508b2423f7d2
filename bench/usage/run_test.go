package usage

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestShortRun trains and validates at a small scale, with heartbeats four times a second so that
// its probes are short: a model comes out, the fit of the least held-out error (the at-idle fit's
// idle usage the idle probe's), and every workload gets a check at every rate — the read-only ones
// on the store as the training left it and again compacted — predicted from the nodes' heartbeats.
func TestShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	t.Parallel() // beside TestBalanceShortRun: both mostly wait on paced clients and emulated disks
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	o := Options{Records: 2000, Hits: []float64{1}, Levels: []float64{0.5}, Steps: 1, Probe: time.Second,
		Heartbeat: 250 * time.Millisecond, Clients: 4, ValidateRates: []float64{50, 100}, ValidateWarm: time.Second}
	start := time.Now()
	rep, err := Run(ctx, t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ran in %v", time.Since(start))
	if len(rep.Fits) != 3 || rep.Fits[0].Name != "at-idle" || rep.Fits[0].Model.Idle != rep.Probes[0].Usage/3 {
		t.Fatalf("fits %+v, idle probe %.3f", rep.Fits, rep.Probes[0].Usage)
	}
	// Two read probes and the idle one are too few for the by-kind fit's read stage (5, and one
	// more left out): it says so and is not chosen.
	if f := rep.Fits[2]; f.Name != "by-kind" || f.Error == "" || rep.Chosen == f.Name {
		t.Errorf("by-kind fit %+v from 3 read samples, chosen %s", f, rep.Chosen)
	}
	for _, f := range rep.Fits[:2] {
		if f.Name == rep.Chosen && f.Model != rep.Model {
			t.Errorf("chosen %s: model %+v, its fit %+v", rep.Chosen, rep.Model, f.Model)
		}
		if f.CVMAE <= 0 || f.CVWorst < f.CVMAE || f.Accuracy == nil {
			t.Errorf("fit %s: held-out error %.3f (worst %.3f), accuracy %v", f.Name, f.CVMAE, f.CVWorst, f.Accuracy)
		}
		for _, g := range rep.Fits[:2] {
			if f.Name == rep.Chosen && g.CVMAE*(1+fitTie) < f.CVMAE {
				t.Errorf("chosen %s (held-out error %.3f), %s's is less by more than a tie (%.3f)", f.Name, f.CVMAE, g.Name, g.CVMAE)
			}
		}
	}
	if rep.Model.Samples != len(rep.Probes) {
		t.Errorf("model %+v from %d probes", rep.Model, len(rep.Probes))
	}
	for _, p := range rep.Probes {
		if len(p.IndexFilterBytes) != 3 {
			t.Errorf("%s probe: index and filter bytes %v, want every node's", p.Kind, p.IndexFilterBytes)
		}
	}
	if nc := rep.NoCompaction; nc == nil || nc.Name != rep.Chosen || nc.Model.Compact != 0 || nc.Accuracy == nil {
		t.Errorf("the written fit without its compaction term: %+v", nc)
	}
	acc := rep.Accuracy
	if acc == nil || len(acc.Checks) != 20 || acc.Reads.Checks != 8 || acc.ReadsCompacted.Checks != 8 || acc.All.Checks != 20 {
		t.Fatalf("accuracy %+v", acc)
	}
	for _, c := range acc.Checks {
		if c.Achieved <= 0 || c.Measured <= 0 || c.Predicted <= 0 || c.PredictedAtCompaction <= 0 || c.Saturated != (c.Achieved < 0.9*c.Offered) {
			t.Errorf("check %+v", c)
		}
		if at := rep.Model.PredictAt(c.Load, c.PredictedHit, c.PredictedCompaction) + 2*rep.Model.Idle; math.Abs(at-c.Predicted) > 1e-6*c.Predicted {
			t.Errorf("check %s: predicted %.4f, the model at its load and predicted hit ratio %.4f", c.Workload, c.Predicted, at)
		}
		for _, h := range []float64{c.PredictedHit, c.PredictedHitLRU, c.PredictedHitWholeRoom} {
			if h < 0 || h > 1 {
				t.Errorf("check %+v: a predicted hit ratio out of [0, 1]", c)
			}
		}
	}
	t.Logf("model (%s) %+v; reads %+v; compacted %+v; all %+v", rep.Chosen, rep.Model, acc.Reads, acc.ReadsCompacted, acc.All)
}

func TestChooseFitPrefersTheConstrainedFitOnATie(t *testing.T) {
	for _, tc := range []struct {
		name string
		fits []Candidate
		want string
	}{
		{"free wins by far", []Candidate{{Name: "at-idle", CVMAE: 0.10}, {Name: "free", CVMAE: 0.05}, {Name: "by-kind", CVMAE: 0.08}}, "free"},
		{"free and by-kind tie", []Candidate{{Name: "at-idle", CVMAE: 0.10}, {Name: "free", CVMAE: 0.050}, {Name: "by-kind", CVMAE: 0.051}}, "by-kind"},
		{"all tie", []Candidate{{Name: "at-idle", CVMAE: 0.052}, {Name: "free", CVMAE: 0.050}, {Name: "by-kind", CVMAE: 0.051}}, "at-idle"},
		{"by-kind cannot fit", []Candidate{{Name: "at-idle", CVMAE: 0.10}, {Name: "free", CVMAE: 0.05}, {Name: "by-kind", Error: "too few"}}, "free"},
	} {
		if got := tc.fits[chooseFit(tc.fits)].Name; got != tc.want {
			t.Errorf("%s: chose %s, want %s", tc.name, got, tc.want)
		}
	}
}
