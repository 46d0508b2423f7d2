package usage

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/pb"
)

// BalanceOptions configures the balancer experiment: two tenants whose ranges differ in cache
// behaviour — "hot" reads a few thousand records that fit every cache, "cold" reads uniformly over
// records far larger than a cache — every range offered the same reads per second, so that QPS and
// leadership counts are even while every cold range is led by one node; then rebalance alone
// (usage_balance off), then usage_balance on, each measured after it settled. Zero fields take the
// training's defaults or the ones below.
type BalanceOptions struct {
	Options
	HotRecords, ColdRecords int // defaults 2 000 and 30 000
	// HotRanges and ColdRanges per tenant (defaults 6 and 3); the nodes lead
	// (HotRanges+ColdRanges)/Nodes each, the first every cold range.
	HotRanges, ColdRanges int
	// RangeRate is the reads per second offered to every range (default 150), by Clients paced
	// clients per tenant.
	RangeRate      float64
	Settle, Window time.Duration
}

// Arm is one arm's measured window.
type Arm struct {
	Name string `json:"name"`
	// Ops per second and p99 latency (ms) per tenant, and the leaders of each tenant's ranges by node.
	HotOps  float64        `json:"hot_ops"`
	ColdOps float64        `json:"cold_ops"`
	HotP99  float64        `json:"hot_p99_ms"`
	ColdP99 float64        `json:"cold_p99_ms"`
	Errors  int64          `json:"errors"`
	Leaders map[string]int `json:"leaders"` // "hot@n2": ranges of the tenant led by the node
	// Predicted is each node's predicted usage from its heartbeat at the end of the window.
	Predicted map[string]float64 `json:"predicted_usage"`
}

// BalanceReport is the experiment's outcome.
type BalanceReport struct {
	Arms []Arm `json:"arms"`
	// ColdGain is usage_balance's throughput of the cold tenant over rebalance's, TotalGain the same
	// for both tenants' operations.
	ColdGain  float64 `json:"cold_gain"`
	TotalGain float64 `json:"total_gain"`
	Decisions int     `json:"usage_balance_decisions"`
}

// Balance runs the balancer experiment in dir.
func Balance(ctx context.Context, dir string, o BalanceOptions) (*BalanceReport, error) {
	o.Options = o.Options.Defaults()
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.HotRecords, 2000)
	def(&o.ColdRecords, 30000)
	def(&o.HotRanges, 6)
	def(&o.ColdRanges, 3)
	if o.RangeRate <= 0 {
		o.RangeRate = 150
	}
	if o.Settle <= 0 {
		o.Settle = time.Minute
	}
	if o.Window <= 0 {
		o.Window = 30 * time.Second
	}
	e, err := start(ctx, dir, o.Options)
	if err != nil {
		return nil, err
	}
	defer e.stop()
	if err := e.twoTenants(ctx, o); err != nil {
		return nil, err
	}
	hot := func(rng *rand.Rand) error {
		_, _, err := e.cl.Get(ctx, tenantKey("hot", rng.IntN(o.HotRecords)))
		return err
	}
	cold := func(rng *rand.Rand) error {
		_, _, err := e.cl.Get(ctx, tenantKey("cold", rng.IntN(o.ColdRecords)))
		return err
	}
	pool := func(rate float64, op func(*rand.Rand) error) *benchutil.Clients {
		return benchutil.StartPacedClients(ctx, o.Clients, pacer(rate), func(w int) func(context.Context) error {
			rng := rand.New(rand.NewPCG(uint64(w), 17))
			return func(context.Context) error { return op(rng) }
		})
	}
	hc, cc := pool(o.RangeRate*float64(o.HotRanges), hot), pool(o.RangeRate*float64(o.ColdRanges), cold)
	defer hc.Stop()
	defer cc.Stop()
	rep := &BalanceReport{}
	for _, arm := range []struct {
		name string
		on   bool
	}{{"rebalance", false}, {"usage_balance", true}} {
		if err := e.cl.SetPolicy(ctx, policy.NameUsageBalance, arm.on); err != nil {
			return rep, err
		}
		o.Progress(fmt.Sprintf("%s: settling %s", arm.name, o.Settle))
		if err := sleep(ctx, o.Settle); err != nil {
			return rep, err
		}
		hc.Phase()
		cc.Phase()
		o.Progress(fmt.Sprintf("%s: measuring %s", arm.name, o.Window))
		if err := sleep(ctx, o.Window); err != nil {
			return rep, err
		}
		hh, he := hc.Phase()
		ch, ce := cc.Phase()
		a := Arm{Name: arm.name, HotOps: float64(hh.TotalCount()) / o.Window.Seconds(), ColdOps: float64(ch.TotalCount()) / o.Window.Seconds(),
			HotP99: float64(hh.ValueAtQuantile(99)) / 1000, ColdP99: float64(ch.ValueAtQuantile(99)) / 1000, Errors: he + ce}
		if a.Leaders, a.Predicted, err = e.placement(ctx); err != nil {
			return rep, err
		}
		o.Progress(fmt.Sprintf("%s: hot %.0f ops/s (p99 %.1f ms), cold %.0f ops/s (p99 %.1f ms), leaders %v, predicted %v",
			arm.name, a.HotOps, a.HotP99, a.ColdOps, a.ColdP99, a.Leaders, a.Predicted))
		rep.Arms = append(rep.Arms, a)
	}
	off, on := rep.Arms[0], rep.Arms[1]
	if off.ColdOps > 0 {
		rep.ColdGain = on.ColdOps/off.ColdOps - 1
	}
	if t := off.HotOps + off.ColdOps; t > 0 {
		rep.TotalGain = (on.HotOps+on.ColdOps)/t - 1
	}
	if ds, _, err := e.cl.Decisions(ctx); err == nil {
		for _, d := range ds {
			if d.Policy == policy.NameUsageBalance {
				rep.Decisions++
			}
		}
	}
	return rep, nil
}

func tenantKey(t string, i int) []byte { return fmt.Appendf(nil, "%s/%08d", t, i) }

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// twoTenants loads both tenants, splits each into Ranges ranges, and leads every cold range from
// the first node and the hot ones from the others: by QPS the first node is the idlest, by usage
// the busiest.
func (e *env) twoTenants(ctx context.Context, o BalanceOptions) error {
	if err := benchutil.WaitFor(ctx, 2*time.Minute, func() bool { return benchutil.FullyReplicated(ctx, e.cl, min(o.Nodes, 3)) }); err != nil {
		return fmt.Errorf("replication: %w", err)
	}
	for _, p := range []string{policy.NameMerge, policy.NameLoadSplit, policy.NameShed, policy.NameRebalance} {
		if err := e.cl.SetPolicy(ctx, p, false); err != nil {
			return fmt.Errorf("switch %s off: %w", p, err)
		}
	}
	for _, t := range []struct {
		name   string
		n      int
		ranges int
	}{{"hot", o.HotRecords, o.HotRanges}, {"cold", o.ColdRecords, o.ColdRanges}} {
		for r := 0; r < t.ranges; r++ {
			if _, _, err := e.cl.Split(ctx, tenantKey(t.name, r*t.n/t.ranges)); err != nil {
				return fmt.Errorf("split %s: %w", t.name, err)
			}
		}
	}
	for _, n := range e.c.Nodes() {
		n.Eng.SetDeviceUnthrottled(true)
	}
	for _, t := range []struct {
		name string
		n    int
	}{{"hot", o.HotRecords}, {"cold", o.ColdRecords}} {
		o.Progress(fmt.Sprintf("loading %d %s records", t.n, t.name))
		if _, err := (benchutil.Load{Records: t.n, Batch: 100, Writers: 4, Key: func(i int) []byte { return tenantKey(t.name, i) },
			Values: benchutil.RandomValues(o.ValueBytes, 3)}).Run(ctx, e.cl); err != nil {
			return err
		}
	}
	for _, n := range e.c.Nodes() {
		if err := n.Eng.CompactAll(ctx); err != nil {
			return err
		}
		n.Eng.SetDeviceUnthrottled(false)
	}
	rs, err := e.cl.UserRanges(ctx)
	if err != nil {
		return err
	}
	ids := make([]uint64, 0, len(e.c.Nodes()))
	for _, n := range e.c.Nodes() {
		ids = append(ids, n.KV.NodeID())
	}
	// The first node leads every cold range; the hot ones fill the others up to the same count.
	hotTurn := 0
	for _, r := range rs {
		to := ids[0]
		if tenantOf(r.GetDesc()) == "hot" {
			to = ids[1+hotTurn%(len(ids)-1)]
			hotTurn++
		} else if tenantOf(r.GetDesc()) == "" {
			continue
		}
		if r.GetLeaderNodeId() != to {
			if err := e.cl.TransferLeader(ctx, r.GetDesc().GetRangeId(), to); err != nil {
				return fmt.Errorf("lead r%d from n%d: %w", r.GetDesc().GetRangeId(), to, err)
			}
		}
	}
	// rebalance is the baseline: on from here, as in a cluster where nobody tuned it.
	return e.cl.SetPolicy(ctx, policy.NameRebalance, true)
}

// tenantOf is the tenant whose keys a range holds ("" for neither): ranges start at the tenants'
// split keys.
func tenantOf(d *pb.RangeDescriptor) string {
	for _, t := range []string{"hot", "cold"} {
		if bytes.HasPrefix(d.GetStartKey(), []byte(t+"/")) {
			return t
		}
	}
	return ""
}

// placement is how many ranges of each tenant each node leads, and each node's predicted usage.
func (e *env) placement(ctx context.Context) (map[string]int, map[string]float64, error) {
	rs, err := e.cl.UserRanges(ctx)
	if err != nil {
		return nil, nil, err
	}
	leaders := map[string]int{}
	for _, r := range rs {
		if t := tenantOf(r.GetDesc()); t != "" {
			leaders[fmt.Sprintf("%s@n%d", t, r.GetLeaderNodeId())]++
		}
	}
	ns, err := e.cl.Nodes(ctx)
	if err != nil {
		return nil, nil, err
	}
	pred := map[string]float64{}
	for _, n := range ns {
		pred[fmt.Sprintf("n%d", n.GetDesc().GetNodeId())] = n.GetStats().GetPredictedUsage()
	}
	return leaders, pred, nil
}

// pacer is a schedule of rate operations a second shared by a pool's clients: each waits for the
// next slot (a client that falls behind does not make up for it later by a burst beyond a second).
func pacer(rate float64) func(context.Context) error {
	var mu sync.Mutex
	next := time.Now()
	step := time.Duration(float64(time.Second) / rate)
	return func(ctx context.Context) error {
		mu.Lock()
		now := time.Now()
		if next.Before(now.Add(-time.Second)) {
			next = now.Add(-time.Second)
		}
		at := next
		next = next.Add(step)
		mu.Unlock()
		if d := time.Until(at); d > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
			}
		}
		return nil
	}
}
