package linearroad

import (
	"context"
	"testing"
	"time"
)

// TestRunMechanics runs the three arms briefly on three in-process nodes, a fourth joining 1 s into
// the measured window: every report acknowledged exactly once (the checker) and toll notifications
// measured in each arm; most state accesses remote when unaligned; all local with the controller,
// which splits ranges over its threshold (lowered to 25 events/s a range and 64 sampled events: a
// loaded host under -race sent about 50 a range, 300 over six ranges); placed tasks lose their
// locality once the new node leads a range of the span.
func TestRunMechanics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nodes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, name := range []string{"unaligned", "placed", "controller"} {
		arm, err := ParseArm(name)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Run(ctx, Config{Arm: arm, Vehicles: 600, Segments: 12, Warmup: time.Second, Duration: 8 * time.Second,
			JoinAt: time.Second, AlignEvents: 25, AlignSamples: 64, AlignFor: time.Second, AlignLatency: time.Microsecond, AlignSaturated: 2, Senders: 4, Dir: t.TempDir(), Log: t.Logf})
		if err != nil {
			t.Fatal(name, err)
		}
		t.Logf("%+v", r)
		if r.Events == 0 || r.Tolls == 0 || r.TollP99Ms <= 0 {
			t.Fatalf("%s: nothing measured: %+v", name, r)
		}
		if !r.Check.OK || r.Check.Acknowledged < uint64(r.Events) {
			t.Errorf("%s: exactly-once check: %+v", name, r.Check)
		}
		if len(r.Timeline) < 6 {
			t.Errorf("%s: %d one-second bins in 8 s", name, len(r.Timeline))
		}
		switch name {
		case "unaligned":
			if r.LocalShare > 0.6 {
				t.Errorf("unaligned: %.3f of state accesses local, want about 1/3", r.LocalShare)
			}
		case "placed":
			// Judged on the measured window's bins: a leadership that reaches the new node after the
			// last bin (a loaded host) takes no access away from the placement.
			led := 0
			for _, b := range r.Timeline {
				led = max(led, b.NewNodeLeads)
			}
			if led > 0 && r.LocalShareAfterJoin >= 1 {
				t.Errorf("placed: the new node led %d ranges in the window, yet every state access after the join was local", led)
			}
		case "controller":
			if r.LocalShare != 1 {
				t.Errorf("controller: %.3f of state accesses local, want 1", r.LocalShare)
			}
			if r.Splits == 0 || r.RangesAtEnd <= r.Ranges {
				t.Errorf("controller: %d splits, %d ranges at the end of %d, want the span split", r.Splits, r.RangesAtEnd, r.Ranges)
			}
		}
	}
}
