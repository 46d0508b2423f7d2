package sim

import (
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/autopilot/operator"
	"github.com/shoaldb/shoal/autopilot/policy"
)

// shrunkUsageSLO is the usage-slo scenario on 6 nodes with a fifth of its ranges, at a steady rate
// for steady (two ramp steps after it, so that the run ends).
func shrunkUsageSLO(t *testing.T, steady time.Duration) Scenario {
	t.Helper()
	sc, ok := Lookup("usage-slo")
	if !ok {
		t.Fatal("no usage-slo scenario")
	}
	sc.Nodes = 6
	sc.Tenants = []Tenant{{Name: "hot", Ranges: 18, RecordsPerRange: 2000, Ops: 0.5},
		{Name: "cold", Ranges: 18, RecordsPerRange: 100_000, Ops: 0.5}}
	m := *sc.Ramp
	m.Settle, m.SettleOps, m.Rates = steady, 150*36, []float64{150 * 36, 200 * 36}
	sc.Ramp = &m
	return sc
}

// TestAccessStatisticsReachThePolicy: in the usage-slo scenario every node reports its cache and
// a busy disk, every led user range its access statistics — a block-access histogram whose blocks
// are the range's and whose rates sum to its reads, and hits that the cold tenant's ranges miss
// more than the hot's — as a real node's heartbeat carries them to usage_balance.
func TestAccessStatisticsReachThePolicy(t *testing.T) {
	sc := resolve(shrunkUsageSLO(t, time.Minute), Options{})
	p := DefaultParams()
	sc.Params(&p)
	dist, err := newDist(sc, sc.records())
	if err != nil {
		t.Fatal(err)
	}
	r, err := newRun(sc, p, dist, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	r.c.heartbeat(nil)
	r.loop.RunUntil(epoch.Add(40 * time.Second))
	snap := r.c.Snapshot()
	for _, n := range snap.Nodes {
		if n.CacheBlocks() != p.Host.CacheBytes/p.Host.BlockBytes || n.DiskBusy <= 0 || n.DiskBusy > 1 {
			t.Errorf("n%d: cache %.0f blocks, disk busy %.3f", n.ID, n.CacheBlocks(), n.DiskBusy)
		}
	}
	var hot, cold []float64 // hit ratios
	for _, rg := range snap.Ranges {
		if rg.System {
			continue
		}
		a := rg.Access
		if a == nil || len(a.Hist) == 0 || a.MeasuredReads == 0 {
			t.Fatalf("r%d reports no access statistics: %+v", rg.ID, a)
		}
		var blocks, rate float64
		for _, b := range a.Hist {
			blocks += b.Blocks
			rate += b.Rate * b.Blocks
		}
		cr := r.c.ranges[rg.ID]
		if want := float64((cr.hi - cr.lo + 12) / 13); blocks != want || rate < 0.99*rg.ReadQPS || rate > 1.01*rg.ReadQPS {
			t.Errorf("r%d: histogram of %.0f blocks (want %.0f) at %.1f reads/s (served %.1f)", rg.ID, blocks, want, rate, rg.ReadQPS)
		}
		h, _ := a.HitRatio()
		if cr.hi-cr.lo == 2000 {
			hot = append(hot, h)
		} else {
			cold = append(cold, h)
		}
	}
	if len(hot) == 0 || len(cold) == 0 || mean(hot) < 0.9 || mean(cold) > 0.5 {
		t.Errorf("hit ratios: hot tenant %.2f, cold %.2f (want the hot one cached, the cold one missing)", mean(hot), mean(cold))
	}
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / max(1, float64(len(xs)))
}

// TestUsageBalanceActsWithoutPingPong: from the scattered placement, usage_balance (on, with
// rebalance) moves leaderships until the cold tenant is spread within one range a node, and over
// a steady 20 minutes — past its 10-minute cooldown — it moves none back to a node it took one
// from, and nothing in the last 10 minutes.
func TestUsageBalanceActsWithoutPingPong(t *testing.T) {
	if testing.Short() {
		t.Skip("20 simulated minutes")
	}
	sc := shrunkUsageSLO(t, 20*time.Minute)
	res, err := Run(sc, Options{Seed: 1, OnlyPolicyOn: true})
	if err != nil {
		t.Fatal(err)
	}
	run := res.Report.Runs[0]
	if st := run.Steps[0]; st.LeadMost[1]-st.LeadFewest[1] > 1 {
		t.Errorf("cold ranges led by a node after the steady run: %d..%d, want within one", st.LeadFewest[1], st.LeadMost[1])
	}
	left := map[uint64]map[uint64]bool{} // range → nodes usage_balance took its leadership from
	moves := 0
	for _, d := range res.Decisions[0] {
		if d.Policy != policy.NameUsageBalance || d.Kind == "note" {
			continue
		}
		if d.Status != decisions.StatusSucceeded {
			continue
		}
		moves++
		if d.Time.After(epoch.Add(10 * time.Minute)) {
			t.Errorf("a move after 10 steady minutes: %s %s", d.Time.Format("15:04:05"), d.Operator)
		}
		if d.Kind != operator.KindTransferLeader && d.Kind != operator.KindMoveReplica {
			t.Errorf("unexpected %s", d.Kind)
		}
		from, to := d.Predicted.From, d.Predicted.To
		if left[d.Range][to] {
			t.Errorf("r%d's leadership went back to n%d: %s", d.Range, to, d.Operator)
		}
		if left[d.Range] == nil {
			left[d.Range] = map[uint64]bool{}
		}
		left[d.Range][from] = true
	}
	if moves == 0 {
		t.Fatalf("usage_balance moved nothing; decisions:\n%s", dump(res.Decisions[0]))
	}
	t.Logf("%d usage_balance moves; cold ranges a node %d..%d; at the SLO %+v", moves, run.Steps[0].LeadFewest[1],
		run.Steps[0].LeadMost[1], *run.AtSLO)
}
