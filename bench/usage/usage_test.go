package usage

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// A device's busy share is its operations against its IOPS or its bytes against its bandwidth,
// whichever is higher, at most 1.
func TestBusy(t *testing.T) {
	o := emudisk.Options{IOPS: 100, ReadBytesPerSec: 1000, WriteBytesPerSec: 1000}
	a := emudisk.Stats{}
	if u := busy(o, a, emudisk.Stats{ReadOps: 50, ReadBytes: 100}, 1); u != 0.5 {
		t.Fatalf("50 ops of 100: %.2f", u)
	}
	if u := busy(o, a, emudisk.Stats{ReadOps: 10, WriteBytes: 1600}, 2); u != 0.8 {
		t.Fatalf("800 B/s of 1000: %.2f", u)
	}
	if u := busy(o, a, emudisk.Stats{ReadOps: 1000}, 1); u != 1 {
		t.Fatalf("10× the IOPS: %.2f, want 1", u)
	}
}

// A probe's readings together: the cluster's load is their mean.
func TestSumHeard(t *testing.T) {
	st := &pb.NodeStats{BlockCacheCapacity: 4096 * 10, BlockBytes: 4096, Ranges: []*pb.RangeLoad{
		{Leader: true, ReadQps: 100, ScanQps: 10, ScanBlocksQps: 30, WriteQps: 5, HistRates: []float64{1}, HistBlocks: []float64{90}},
		{ReadQps: 70, WriteQps: 7, HistRates: []float64{3}, HistBlocks: []float64{1}},
	}}
	s := sumHeard([]heard{{stats: []*pb.NodeStats{st}}, {stats: []*pb.NodeStats{{}}}})
	if math.Abs(s.load.Reads-45) > 1e-9 {
		t.Fatalf("two readings, one idle: %.1f reads/s, want their mean 45", s.load.Reads)
	}
}

// Ranges belong to the tenant whose prefix starts them.
func TestTenantOf(t *testing.T) {
	for start, want := range map[string]string{"hot/00000000": "hot", "cold/00001000": "cold", "": "", "hotter": ""} {
		if got := tenantOf(&pb.RangeDescriptor{StartKey: []byte(start)}); got != want {
			t.Errorf("%q: %q, want %q", start, got, want)
		}
	}
}

// The pacer hands out rate slots a second.
func TestPacer(t *testing.T) {
	wait := pacer(200)
	start := time.Now()
	for range 41 {
		if err := wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < 190*time.Millisecond || d > 2*time.Second {
		t.Fatalf("41 slots at 200/s took %v, want about 200 ms", d)
	}
}

// The accuracy sums: usage errors in the cluster's units and per node in points, hit ratio errors
// in points, the read-only workloads apart.
func TestSums(t *testing.T) {
	cs := []Check{
		{Workload: "uniform", Measured: 1.0, Predicted: 1.3, PredictedAtHit: 1.1, ObservedHit: 0.5, PredictedHit: 0.45},
		{Workload: "zipfian", Measured: 2.0, Predicted: 1.9, PredictedAtHit: 2.0, ObservedHit: 0.8, PredictedHit: 0.82},
		{Workload: "scan-heavy", Measured: 2.0, Predicted: 3.0, PredictedAtHit: 3.0, ObservedHit: 0.1, PredictedHit: 0.1},
	}
	r := sums(cs, 3, func(c Check) bool { return readOnly[c.Workload] })
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if r.Checks != 2 || !near(r.UsageMAE, 0.2) || !near(r.UsageWorst, 0.3) || r.WorstCheck != "uniform at 0/s" {
		t.Fatalf("reads: %+v", r)
	}
	if !near(r.NodePointsMAE, 100*0.2/3) || !near(r.HitPointsMAE, 3.5) || !near(r.HitPointsWorst, 5) || !near(r.ModelMAE, 0.05) {
		t.Fatalf("reads per node and hit: %+v", r)
	}
	if !near(r.RelativeMAE, (0.3/1+0.1/2)/2) {
		t.Fatalf("relative: %.4f", r.RelativeMAE)
	}
	if a := sums(cs, 3, func(Check) bool { return true }); a.Checks != 3 || !near(a.UsageWorst, 1) || a.WorstCheck != "scan-heavy at 0/s" {
		t.Fatalf("all: %+v", a)
	}
}

// Every node leads as many ranges, the first only cold ones; the cold ones it cannot take spread
// over the others, and the hot ones even out the counts.
func TestLeaderPlan(t *testing.T) {
	for _, c := range []struct {
		hot, cold, nodes int
		firstCold        int
	}{{6, 6, 3, 4}, {6, 3, 3, 3}, {2, 6, 2, 4}, {9, 2, 3, 2}} {
		var tenants []string
		for range c.cold {
			tenants = append(tenants, "cold")
		}
		for range c.hot {
			tenants = append(tenants, "hot")
		}
		plan := leaderPlan(tenants, c.nodes)
		count := make([]int, c.nodes)
		coldOn := make([]int, c.nodes)
		for i, n := range plan {
			count[n]++
			if tenants[i] == "cold" {
				coldOn[n]++
			}
		}
		if slices.Max(count)-slices.Min(count) > 1 {
			t.Errorf("%+v: leaders per node %v, want as many", c, count)
		}
		if coldOn[0] != c.firstCold || coldOn[0] != count[0] && c.cold >= count[0] {
			t.Errorf("%+v: the first node leads %d cold of %d, want %d and only cold", c, coldOn[0], count[0], c.firstCold)
		}
		if slices.Max(coldOn[1:])-slices.Min(coldOn[1:]) > 1 {
			t.Errorf("%+v: cold ranges on the other nodes %v, want spread", c, coldOn[1:])
		}
	}
}
