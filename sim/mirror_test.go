package sim

import (
	"testing"

	"github.com/shoaldb/shoal/bench/scenario/shape"
)

// TestMirroredScenariosFollowTheirShapes: a scenario bench/scenario also runs takes its size, load
// and schedule from the shared shape, whatever the simulator adds.
func TestMirroredScenariosFollowTheirShapes(t *testing.T) {
	for _, sh := range []shape.Shape{shape.NodeKill, shape.Decommission, shape.Compaction, shape.Join} {
		sc, ok := Lookup(sh.Name)
		if !ok {
			t.Fatalf("no simulated scenario %s", sh.Name)
		}
		if sc.Nodes != sh.Nodes || sc.Ranges != sh.Ranges() || sc.RecordsPerRange != int64(sh.Records/sh.Ranges()) ||
			sc.ReadFraction != sh.ReadFraction || sc.Duration != sh.Duration || sc.Warmup != sh.Warmup {
			t.Errorf("%s: simulated %d nodes, %d ranges of %d records, reads %v, %v (warm-up %v); shape %+v",
				sh.Name, sc.Nodes, sc.Ranges, sc.RecordsPerRange, sc.ReadFraction, sc.Duration, sc.Warmup, sh)
		}
		var want []shape.Event
		for _, e := range sh.Events {
			if e.Do != shape.Gather && e.Do != shape.BalanceLeaders {
				want = append(want, e)
			}
		}
		if len(sc.Events) != len(want) {
			t.Fatalf("%s: events %+v, want %+v", sh.Name, sc.Events, want)
		}
		for i, e := range sc.Events {
			if e.At != want[i].At || e.Do != want[i].Do {
				t.Errorf("%s: event %d %+v, want %+v", sh.Name, i, e, want[i])
			}
		}
		if sh.Threads > 0 && sc.Params != nil {
			p := DefaultParams()
			sc.Params(&p)
			if p.Host == nil || p.Host.Threads != sh.Threads || p.Host.IOPS != float64(sh.Disk().IOPS) {
				t.Errorf("%s: host %+v, want %d threads on %d-IOPS disks", sh.Name, p.Host, sh.Threads, sh.Disk().IOPS)
			}
		}
	}
}
