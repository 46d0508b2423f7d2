package usage

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestBalanceShortRun runs the balancer experiment at a small scale: both arms start from the
// placement where one node leads only cold ranges, every node as many, and each steps its rate up
// from there, stopping at the first step that misses the SLO.
func TestBalanceShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	o := BalanceOptions{HotRecords: 120, ColdRecords: 600, RangeRates: []float64{5, 10}, SettleRate: 5,
		Settle: 2 * time.Second, Warm: time.Second, Window: 2 * time.Second}
	o.Clients = 4
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
		if len(a.Steps) == 0 || len(a.Steps) > len(o.RangeRates) {
			t.Fatalf("%s: %d steps", a.Name, len(a.Steps))
		}
		for i, st := range a.Steps {
			if !st.Meets && i != len(a.Steps)-1 {
				t.Errorf("%s: step %d missed the SLO and the arm went on", a.Name, i)
			}
		}
		t.Logf("%s: start %v, settled %v, steps %+v, at SLO %.0f ops/s, moves %v", a.Name, a.Start, a.Settled, a.Steps, a.AtSLO, a.Moves)
	}
}
