package usage

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot/policy"
)

// TestBalanceShortRun runs the balancer experiment at a small scale (room for 256 KiB of blocks, a cold
// tenant of 3 MB): both arms start from the placement where one node leads only cold ranges, every
// node as many, and each steps its rate up from there, stopping at the first step that misses the
// SLO twice in a row. usage_balance moves cold leaderships off the node that led four once their
// predicted usage opens a gap above its start gap. (What rebalance does
// depends on whether that node keeps up: when its QPS falls, rebalance moves leaderships too.)
func TestBalanceShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	t.Parallel() // beside TestShortRun
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	o := BalanceOptions{HotRecords: 120, ColdRecords: 3000, RangeRates: []float64{20, 40}, SettleRate: 100,
		Settle: 30 * time.Second, Warm: time.Second, Window: 2 * time.Second}
	// Room for 256 KiB of blocks beside the two 1-MiB memtables Pebble charges to the cache.
	o.Clients, o.CacheBytes, o.Device.IOPS = 8, 2<<20+256<<10, 400
	rep, err := Balance(ctx, t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Arms) != 2 || rep.Arms[0].Name != "rebalance" || rep.Arms[1].Name != "usage_balance" {
		t.Fatalf("arms %+v", rep.Arms)
	}
	for _, a := range rep.Arms {
		coldOnly := false
		for k, n := range a.Start {
			node := strings.TrimPrefix(k, "cold@")
			if n == 4 && node != k && a.Start["hot@"+node] == 0 {
				coldOnly = true
			}
		}
		if !coldOnly {
			t.Errorf("%s starts from %v: no node leads 4 cold ranges and no hot one", a.Name, a.Start)
		}
		if len(a.Steps) == 0 || len(a.Steps) > 2*len(o.RangeRates) {
			t.Fatalf("%s: %d steps", a.Name, len(a.Steps))
		}
		for i, st := range a.Steps {
			if i > 0 && !st.Meets && !a.Steps[i-1].Meets && a.Steps[i-1].RangeRate == st.RangeRate && i != len(a.Steps)-1 {
				t.Errorf("%s: step %d missed the SLO twice and the arm went on", a.Name, i)
			}
			if i > 0 && !a.Steps[i-1].Meets && st.RangeRate != a.Steps[i-1].RangeRate {
				t.Errorf("%s: step %d missed the SLO once and was not run again", a.Name, i-1)
			}
		}
		indexed := false
		for _, b := range a.SettledIndexFilter {
			indexed = indexed || b > 0
		}
		if !indexed {
			t.Errorf("%s: no node reports index and filter bytes after settling: %v", a.Name, a.SettledIndexFilter)
		}
		t.Logf("%s: start %v, settled %v (predicted %v), steps %+v, at SLO %.0f ops/s, moves %v", a.Name, a.Start, a.Settled, a.SettledPredicted, a.Steps, a.AtSLO, a.Moves)
	}
	mostCold := func(leaders map[string]int) int {
		most := 0
		for k, n := range leaders {
			if strings.HasPrefix(k, "cold@") {
				most = max(most, n)
			}
		}
		return most
	}
	// usage_balance acts only on a predicted gap above its start gap: a starved host serves too few
	// reads to open one, and then it rightly moves nothing. The gap may open late in the settling
	// (the access statistics' window fills first), so the arm's last step is judged, not its settling.
	ub := rep.Arms[1]
	gap := predictedGap(ub.SettledPredicted)
	start := policy.DefaultConfig().UsageBalance.StartGap
	end := ub.Steps[len(ub.Steps)-1].Leaders
	if m := mostCold(end); m >= 4 && gap > start {
		t.Errorf("usage_balance: a node still leads %d cold ranges at the arm's end, with a predicted gap of %.2f after settling (acts above %.2f)", m, gap, start)
	} else if m >= 4 {
		t.Logf("usage_balance: predicted gap %.2f, below its start gap %.2f on this host: no move expected", gap, start)
	}
}

// predictedGap is the gap between the most and the least used node's predicted usage.
func predictedGap(byNode map[string]float64) float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, u := range byNode {
		lo, hi = min(lo, u), max(hi, u)
	}
	return max(0, hi-lo)
}
