package usage

import (
	"context"
	"testing"
	"time"
)

// TestShortRun trains and validates at a small scale: a model comes out with the idle usage the
// idle probe measured, and every workload gets a check at every rate, predicted from the nodes'
// heartbeats.
func TestShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	o := Options{Records: 2000, Hits: []float64{1}, Levels: []float64{0.5}, Steps: 1, Probe: 2500 * time.Millisecond,
		Clients: 4, ValidateRates: []float64{50, 100}, ValidateWarm: 2 * time.Second}
	rep, err := Run(ctx, t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Model.Samples != len(rep.Probes) || rep.Model.Idle != rep.Probes[0].Usage/3 {
		t.Errorf("model %+v from %d probes, idle probe %.3f", rep.Model, len(rep.Probes), rep.Probes[0].Usage)
	}
	acc := rep.Accuracy
	if acc == nil || len(acc.Checks) != 12 || acc.Reads.Checks != 8 || acc.All.Checks != 12 {
		t.Fatalf("accuracy %+v", acc)
	}
	for _, c := range acc.Checks {
		if c.Achieved <= 0 || c.Measured <= 0 || c.Predicted <= 0 || c.PredictedHit < 0 || c.PredictedHit > 1 {
			t.Errorf("check %+v", c)
		}
	}
	t.Logf("model %+v; reads %+v; all %+v", rep.Model, acc.Reads, acc.All)
}
