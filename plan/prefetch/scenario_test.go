package prefetch

import (
	"fmt"
	"testing"
	"time"
)

// scenarioWindow is a window node/jobs planned in `shoal bench scan-jobs` with 6 spans and 12 jobs
// (Zipf 1.2, seed 1), 2.25 s after the first runs were due: 3 nodes, 6 spans of 6 000 rows of 1 KiB
// (span s on node s mod 3), 12 jobs every 15 s reading at 6 MiB/s (2 slots of 0.5 s) with nine tenths of their
// deadlines, 10 MiB/s of disk left by the foreground and 24 MiB of cache per node. The plan the
// scenario reported from this window had 3.30 times the LP bound's peak: on node 1, span 1's runs at
// slots 26 and 29 need two copies, and the second could be read only in the 3 slots before its run
// (or its run's own 3), at 4 MiB/s, where the LP spreads it over all 6.
func scenarioWindow() *Instance {
	in := &Instance{Slot: 500 * time.Millisecond, Horizon: 60}
	for n := 0; n < 3; n++ {
		in.Nodes = append(in.Nodes, Node{Bandwidth: []float64{10 << 20}, Cache: 24 << 20})
	}
	for s := 0; s < 6; s++ {
		in.Spans = append(in.Spans, Span{ID: fmt.Sprint("s", s), Node: s % 3, Size: 6000 * (1024 + 21)})
	}
	for _, j := range []struct {
		name                  string
		span, start, deadline int
	}{
		{"job01", 4, 25, 3}, {"job02", 2, 25, 3}, {"job04", 2, 25, 3}, {"job06", 0, 25, 3}, {"job09", 4, 25, 3},
		{"job11", 0, 25, 4}, {"job07", 3, 26, 3}, {"job00", 1, 26, 3}, {"job10", 2, 26, 3}, {"job08", 5, 26, 4},
		{"job05", 3, 27, 3}, {"job03", 1, 29, 3},
	} {
		in.Jobs = append(in.Jobs, Job{Name: j.name, Span: fmt.Sprint("s", j.span), Start: j.start, Duration: 2, Deadline: j.deadline, Period: 30})
	}
	return in
}

// The planner keeps the scenario's window within twice the slot-by-slot LP bound, every run on time;
// the default bound (blocks of slots) is a relaxation of that LP, so never above it.
func TestScenarioWindow(t *testing.T) {
	in := scenarioWindow()
	_, res := mustMake(t, in, Planner)
	if res.OnTime != res.Runs {
		t.Fatalf("%d of %d runs on time", res.OnTime, res.Runs)
	}
	exact, err := LowerBound(in, Options{BoundRows: 1000}, res.RunOnTime)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := LowerBound(in, Options{}, res.RunOnTime)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("peak %.2f MiB/s (node %d, slot %d), LP bound %.2f MiB/s slot by slot (%.2f×), %.2f MiB/s over blocks",
		res.Peak/(1<<20), res.PeakNode, res.PeakSlot, exact/(1<<20), res.Peak/exact, blocks/(1<<20))
	if blocks > exact*(1+1e-6) {
		t.Errorf("the bound over blocks %v is above the slot-by-slot bound %v", blocks, exact)
	}
	if res.Peak > 2*exact {
		t.Errorf("peak %.0f bytes/s is %.2f× the LP bound %.0f", res.Peak, res.Peak/exact, exact)
	}
}
