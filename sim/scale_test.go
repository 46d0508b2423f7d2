package sim

import (
	"testing"
	"time"
)

// BenchmarkScale runs the scale scenario (1 000 nodes, 100 000 ranges, one simulated hour) once per
// iteration and reports the wall time per simulated hour and the decisions per second. Run it alone:
//
//	go test ./sim -run '^$' -bench Scale -benchtime 1x -cpuprofile /tmp/sim.prof
func BenchmarkScale(b *testing.B) {
	sc, _ := Lookup("scale")
	for i := 0; i < b.N; i++ {
		res, err := Run(sc, Options{Seed: 1, OnlyPolicyOn: true, Wall: time.Now})
		if err != nil {
			b.Fatal(err)
		}
		s := res.Report.Sim
		b.ReportMetric(s.WallS, "wall-s")
		b.ReportMetric(s.DecisionsPerSec, "decisions/s")
		b.ReportMetric(float64(s.Snapshots), "snapshots")
	}
}
