package prefetch

import (
	"fmt"
	"testing"
	"time"
)

// scenarioWindow is a window node/jobs planned in `shoal bench scan-jobs` with 6 spans and 12 jobs
// (Zipf 1.2, seed 1), 2.25 s after the first runs were due: 3 nodes, 6 spans of 6 000 rows of 1 KiB
// (span s on node s mod 3), 12 jobs every 15 s reading at 6 MiB/s (2 slots of 0.5 s) with nine tenths of their
// deadlines, 10 MiB/s of disk left by the foreground and 24 MiB of cache per node. On node 1, span
// 1's runs at slots 26 and 29 share one copy: as two copies, the second could be read only in the 3
// slots between them (or its run's own 3), at 4 MiB/s, 3.30 times the LP's peak.
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

// scenarioMix is the window node/jobs plans for `shoal bench scan-jobs`'s default mix (36 jobs over 12
// spans, seed 1: span, deadline and first due time in ms) at offset at into a period, as the
// scheduler builds it: 3 nodes, span s on node s mod 3, 6 000 rows of 1 KiB, runs of 2 slots of
// 0.5 s (6 MiB/s) with nine tenths of their deadlines, every 15 s, 12 MiB/s disks less 0.3 MB/s of
// foreground, 48 MiB of copies a node, and a horizon of two periods.
func scenarioMix(at time.Duration) *Instance {
	const slot = 500 * time.Millisecond
	in := &Instance{Slot: slot, Horizon: 60}
	for n := 0; n < 3; n++ {
		in.Nodes = append(in.Nodes, Node{Bandwidth: []float64{12<<20 - 0.3e6}, Cache: 48 << 20})
	}
	for s := 0; s < 12; s++ {
		in.Spans = append(in.Spans, Span{ID: fmt.Sprint("s", s), Node: s % 3, Size: 6000 * (1024 + 21)})
	}
	for k, j := range [][3]int{{9, 2100, 0}, {3, 1800, 0}, {4, 2200, 0}, {0, 1900, 0}, {8, 2100, 0}, {1, 2600, 0},
		{0, 2300, 0}, {6, 2900, 0}, {1, 1500, 0}, {3, 1700, 0}, {11, 1700, 0}, {1, 2200, 0}, {2, 2200, 0}, {10, 2300, 0},
		{1, 1900, 200}, {5, 2000, 300}, {8, 2900, 500}, {2, 2200, 600}, {3, 1900, 600}, {10, 2600, 700}, {0, 1600, 700},
		{5, 2100, 800}, {4, 1900, 800}, {0, 2400, 1000}, {0, 1600, 1100}, {0, 2900, 1200}, {1, 2500, 1400}, {0, 2300, 1500},
		{4, 1800, 1600}, {1, 2400, 1600}, {0, 2800, 1700}, {0, 1700, 1700}, {2, 2900, 1700}, {2, 2000, 1800}, {11, 2700, 1800},
		{4, 2600, 1800}} {
		due := time.Duration(j[2]) * time.Millisecond
		for due < at {
			due += 15 * time.Second
		}
		deadline := max(1, int(time.Duration(j[1])*time.Millisecond*9/10/slot))
		in.Jobs = append(in.Jobs, Job{Name: fmt.Sprint("job", k), Span: fmt.Sprint("s", j[0]), Start: int((due - at) / slot),
			Duration: min(deadline, 2), Deadline: deadline, Period: 30})
	}
	return in
}

// The planner on the scenario's default mix, planned a few seconds after the top of a period (every
// run of the window has a period's slack to be prefetched in): every run on time, within 1.6 times
// the slot-by-slot LP.
func TestScenarioMix(t *testing.T) {
	for _, at := range []time.Duration{3 * time.Second, 7500 * time.Millisecond} {
		in := scenarioMix(at)
		sc, res := mustMake(t, in, Planner)
		exact, err := LowerBound(in, Options{BoundRows: 1000}, res.RunOnTime)
		if err != nil {
			t.Fatal(err)
		}
		mean := res.DiskBytes / (float64(in.Horizon) * in.Slot.Seconds() * float64(len(in.Nodes)))
		t.Logf("at %v: %d of %d runs on time, %d prefetches; peak %.2f MiB/s (node %d, slot %d), LP %.2f (%.2f×), mean %.2f a node",
			at, res.OnTime, res.Runs, len(sc.Prefetches()), res.Peak/(1<<20), res.PeakNode, res.PeakSlot, exact/(1<<20), res.Peak/exact, mean/(1<<20))
		if res.OnTime != res.Runs {
			t.Errorf("at %v: %d of %d runs on time", at, res.OnTime, res.Runs)
		}
		if res.Peak > 1.6*exact {
			t.Errorf("at %v: peak %.0f is %.2f× the LP %.0f", at, res.Peak, res.Peak/exact, exact)
		}
	}
}
