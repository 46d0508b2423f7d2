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
	"github.com/shoaldb/shoal/stopper"
)

// BalanceOptions configures the balancer experiment: two tenants whose ranges differ in cache
// behaviour — "hot" reads a few thousand records that fit every cache, "cold" reads uniformly over
// records far larger than a cache (every read a likely miss) — every range offered the same reads
// per second and every node leading as many ranges, the first only cold ones: by QPS and counts the
// cluster is balanced (rebalance leaves it so), by usage the first node carries most of the misses.
// Each arm starts from that placement, settles at SettleRate, then steps the offered rate up until
// a step misses the SLO twice in a row; its throughput at the SLO is its last step that met it. Arm 1 is rebalance
// alone (usage_balance off), arm 2 usage_balance on. Zero fields take the training's defaults or
// the ones below.
type BalanceOptions struct {
	Options
	HotRecords, ColdRecords int // defaults 2 000 and 30 000
	// HotRanges and ColdRanges per tenant (defaults 6 and 6); the nodes lead
	// (HotRanges+ColdRanges)/Nodes each, the first only cold ones.
	HotRanges, ColdRanges int
	// RangeRates are the reads per second offered to every range at each step, ascending (default
	// 30, 45, 60, 80, 100, 130, 160, 200, 250); SettleRate the rate each arm settles at (default 60), by
	// Clients paced clients per tenant.
	RangeRates []float64
	SettleRate float64
	// Settle is each arm's run at SettleRate before its steps (default 45 s); each step runs Warm
	// (default 5 s) before its measured Window (default 15 s).
	Settle, Warm, Window time.Duration
	// The SLO: each tenant's p99 at most SLOP99 (default 100 ms) and at least SLOServed of its
	// offered reads served (default 0.95).
	SLOP99    time.Duration
	SLOServed float64
}

// Step is one offered rate's measured window.
type Step struct {
	RangeRate float64 `json:"range_rate"`
	Offered   float64 `json:"offered_ops"`
	// Ops per second and p99 latency (ms) per tenant.
	HotOps  float64 `json:"hot_ops"`
	ColdOps float64 `json:"cold_ops"`
	HotP99  float64 `json:"hot_p99_ms"`
	ColdP99 float64 `json:"cold_p99_ms"`
	Errors  int64   `json:"errors"`
	Meets   bool    `json:"meets_slo"`
	// Leaders of each tenant's ranges by node ("hot@n2": 3), and each node's predicted usage from
	// its heartbeat, at the end of the window.
	Leaders   map[string]int     `json:"leaders"`
	Predicted map[string]float64 `json:"predicted_usage"`
	// IndexFilter is each node's bytes of index and filter blocks from its heartbeat, which its
	// prediction and usage_balance leave out of its cache's room for data blocks.
	IndexFilter map[string]uint64 `json:"index_filter_bytes"`
}

// Arm is one arm: its starting placement, its steps, and the policies' decisions during it.
type Arm struct {
	Name    string         `json:"name"`
	Start   map[string]int `json:"start_leaders"`
	Settled map[string]int `json:"settled_leaders"`
	// SettledPredicted is each node's predicted usage from its heartbeat at the end of the settling.
	SettledPredicted   map[string]float64 `json:"settled_predicted_usage"`
	SettledIndexFilter map[string]uint64  `json:"settled_index_filter_bytes"`
	Steps              []Step             `json:"steps"`
	// AtSLO is the reads per second served at the highest step that met the SLO (0: none did), at
	// AtSLORate a range.
	AtSLO     float64 `json:"ops_at_slo"`
	AtSLORate float64 `json:"range_rate_at_slo"`
	// Moves are the decisions logged during the arm ("policy: operator — reason").
	Moves []string `json:"moves"`
}

// BalanceReport is the experiment's outcome.
type BalanceReport struct {
	SLO  string `json:"slo"`
	Arms []Arm  `json:"arms"`
	// Gain is usage_balance's throughput at the SLO over rebalance's, less 1 (0 when rebalance met
	// it at no step).
	Gain float64 `json:"gain_at_slo"`
}

func (o *BalanceOptions) defaults() {
	o.Options = o.Options.Defaults()
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.HotRecords, 2000)
	def(&o.ColdRecords, 30000)
	def(&o.HotRanges, 6)
	def(&o.ColdRanges, 6)
	if len(o.RangeRates) == 0 {
		o.RangeRates = []float64{30, 45, 60, 80, 100, 130, 160, 200, 250}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur(&o.Settle, 45*time.Second)
	defDur(&o.Warm, 5*time.Second)
	defDur(&o.Window, 15*time.Second)
	defDur(&o.SLOP99, 100*time.Millisecond)
	if o.SettleRate <= 0 {
		o.SettleRate = 60
	}
	if o.SLOServed <= 0 {
		o.SLOServed = 0.95
	}
}

// Balance runs the balancer experiment in dir.
func Balance(ctx context.Context, dir string, o BalanceOptions) (*BalanceReport, error) {
	o.defaults()
	e, err := start(ctx, dir, o.Options)
	if err != nil {
		return nil, err
	}
	defer e.stop()
	if err := e.twoTenants(ctx, o); err != nil {
		return nil, err
	}
	rep := &BalanceReport{SLO: fmt.Sprintf("p99 of each tenant ≤ %v and ≥ %.0f %% of its offered reads served", o.SLOP99, 100*o.SLOServed)}
	for _, arm := range []struct {
		name string
		on   bool
	}{{"rebalance", false}, {"usage_balance", true}} {
		a, err := e.arm(ctx, o, arm.name, arm.on)
		rep.Arms = append(rep.Arms, a)
		if err != nil {
			return rep, err
		}
	}
	if off, on := rep.Arms[0], rep.Arms[1]; off.AtSLO > 0 {
		rep.Gain = on.AtSLO/off.AtSLO - 1
	}
	return rep, nil
}

// arm places the leaders as the experiment starts them, switches usage_balance on or off
// (rebalance on), settles and steps the rate up until a step misses the SLO twice in a row.
func (e *env) arm(ctx context.Context, o BalanceOptions, name string, usageOn bool) (Arm, error) {
	a := Arm{Name: name}
	if err := e.placeLeaders(ctx, o); err != nil {
		return a, err
	}
	var err error
	if a.Start, _, _, err = e.placement(ctx); err != nil {
		return a, err
	}
	last := e.lastDecision(ctx)
	if err := e.cl.SetPolicy(ctx, policy.NameUsageBalance, usageOn); err != nil {
		return a, err
	}
	if err := e.cl.SetPolicy(ctx, policy.NameRebalance, true); err != nil {
		return a, err
	}
	o.Progress(fmt.Sprintf("%s: leaders %v; settling %s at %.0f reads/s a range", name, a.Start, o.Settle, o.SettleRate))
	if _, err := e.tenantsRun(ctx, o, o.SettleRate, 0, o.Settle); err != nil {
		return a, err
	}
	if a.Settled, a.SettledPredicted, a.SettledIndexFilter, err = e.placement(ctx); err != nil {
		return a, err
	}
	// A step that misses is run once more (a window of a shared machine can miss by a pause that
	// is not the placement's); the arm stops when a step misses twice in a row.
	for _, rate := range o.RangeRates {
		var st Step
		for try := 0; try < 2 && !st.Meets; try++ {
			if st, err = e.tenantsRun(ctx, o, rate, o.Warm, o.Window); err != nil {
				return a, err
			}
			a.Steps = append(a.Steps, st)
			o.Progress(fmt.Sprintf("%s at %.0f reads/s a range: hot %.0f ops/s (p99 %.1f ms), cold %.0f ops/s (p99 %.1f ms), errors %d, SLO met %v, leaders %v, predicted %v",
				name, rate, st.HotOps, st.HotP99, st.ColdOps, st.ColdP99, st.Errors, st.Meets, st.Leaders, st.Predicted))
		}
		if !st.Meets {
			break
		}
		a.AtSLO, a.AtSLORate = st.HotOps+st.ColdOps, rate
	}
	a.Moves = e.decisionsAfter(ctx, last)
	return a, nil
}

// tenantsRun offers both tenants rate reads per second a range for warm and then window; the
// window is measured (nothing is when it is the settling run: window only, no warm).
func (e *env) tenantsRun(ctx context.Context, o BalanceOptions, rate float64, warm, window time.Duration) (Step, error) {
	hot := func(rng *rand.Rand) error {
		_, _, err := e.cl.Get(ctx, tenantKey("hot", rng.IntN(o.HotRecords)))
		return err
	}
	cold := func(rng *rand.Rand) error {
		_, _, err := e.cl.Get(ctx, tenantKey("cold", rng.IntN(o.ColdRecords)))
		return err
	}
	pool := func(rate float64, op func(*rand.Rand) error, seed uint64) *benchutil.Clients {
		return benchutil.StartPacedClients(ctx, o.Clients, pacer(rate), func(w int) func(context.Context) error {
			rng := rand.New(rand.NewPCG(uint64(w), seed))
			return func(context.Context) error { return op(rng) }
		})
	}
	st := Step{RangeRate: rate, Offered: rate * float64(o.HotRanges+o.ColdRanges)}
	hc, cc := pool(rate*float64(o.HotRanges), hot, 17), pool(rate*float64(o.ColdRanges), cold, 18)
	defer hc.Stop()
	defer cc.Stop()
	if err := stopper.SleepContext(ctx, warm); err != nil {
		return st, err
	}
	hc.Phase()
	cc.Phase()
	if err := stopper.SleepContext(ctx, window); err != nil {
		return st, err
	}
	hh, he := hc.Phase()
	ch, ce := cc.Phase()
	secs := window.Seconds()
	st.HotOps, st.ColdOps = float64(hh.TotalCount())/secs, float64(ch.TotalCount())/secs
	st.HotP99, st.ColdP99 = float64(hh.ValueAtQuantile(99))/1000, float64(ch.ValueAtQuantile(99))/1000
	st.Errors = he + ce
	slo := float64(o.SLOP99) / float64(time.Millisecond)
	st.Meets = st.HotP99 <= slo && st.ColdP99 <= slo &&
		st.HotOps >= o.SLOServed*rate*float64(o.HotRanges) && st.ColdOps >= o.SLOServed*rate*float64(o.ColdRanges)
	var err error
	st.Leaders, st.Predicted, st.IndexFilter, err = e.placement(ctx)
	return st, err
}

// lastDecision is the id of the decision log's newest entry (0: none, or the log is unreadable).
func (e *env) lastDecision(ctx context.Context) uint64 {
	ds, _, err := e.cl.Decisions(ctx)
	if err != nil || len(ds) == 0 {
		return 0
	}
	return ds[len(ds)-1].ID
}

// decisionsAfter lists the decisions logged after id as "policy: operator — reason".
func (e *env) decisionsAfter(ctx context.Context, id uint64) []string {
	ds, _, err := e.cl.Decisions(ctx)
	if err != nil {
		return []string{"decision log unreadable: " + err.Error()}
	}
	out := []string{}
	for _, d := range ds {
		if d.ID > id {
			out = append(out, d.Policy+": "+d.Operator+" — "+d.Reason)
		}
	}
	return out
}

func tenantKey(t string, i int) []byte { return fmt.Appendf(nil, "%s/%08d", t, i) }

// twoTenants splits each tenant into its ranges and loads it, compacted; the arms place the
// leaders (placeLeaders). Merges, load splits and shed_leadership stay off throughout: the arms
// compare two placements of the same ranges.
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
	return nil
}

// placeLeaders leads the ranges as each arm starts: rebalance and usage_balance off, the first
// node leading only cold ranges (leaderPlan), every node as many.
func (e *env) placeLeaders(ctx context.Context, o BalanceOptions) error {
	for _, p := range []string{policy.NameRebalance, policy.NameUsageBalance} {
		if err := e.cl.SetPolicy(ctx, p, false); err != nil {
			return fmt.Errorf("switch %s off: %w", p, err)
		}
	}
	rs, err := e.cl.UserRanges(ctx)
	if err != nil {
		return err
	}
	ids := make([]uint64, 0, len(e.c.Nodes()))
	for _, n := range e.c.Nodes() {
		ids = append(ids, n.KV.NodeID())
	}
	var tenants []string
	var ranges []*pb.RangeStatus
	for _, r := range rs {
		if t := tenantOf(r.GetDesc()); t != "" {
			tenants = append(tenants, t)
			ranges = append(ranges, r)
		}
	}
	want := map[uint64]uint64{}
	for i, n := range leaderPlan(tenants, len(ids)) {
		r := ranges[i]
		want[r.GetDesc().GetRangeId()] = ids[n]
		if to := ids[n]; r.GetLeaderNodeId() != to {
			if err := e.cl.TransferLeader(ctx, r.GetDesc().GetRangeId(), to); err != nil {
				return fmt.Errorf("lead r%d from n%d: %w", r.GetDesc().GetRangeId(), to, err)
			}
		}
	}
	// A transfer returns before every node's view has it: wait until the ranges list shows the plan
	// (the arm reports the leaders it starts from either way).
	_ = benchutil.WaitFor(ctx, 20*time.Second, func() bool {
		rs, err := e.cl.UserRanges(ctx)
		if err != nil {
			return false
		}
		for _, r := range rs {
			if to, ok := want[r.GetDesc().GetRangeId()]; ok && r.GetLeaderNodeId() != to {
				return false
			}
		}
		return true
	})
	return nil
}

// leaderPlan is the node (an index) that leads each range of tenants (each "hot" or "cold"): every
// node leads as many (the ceiling of their mean), the first node only cold ones, the cold ones it
// cannot take spread over the others first, then the hot ones on the nodes with the fewest.
func leaderPlan(tenants []string, nodes int) []int {
	per := (len(tenants) + nodes - 1) / nodes
	out := make([]int, len(tenants))
	count := make([]int, nodes)
	next := 1 % nodes
	for i, t := range tenants {
		if t != "cold" {
			continue
		}
		if count[0] < per {
			out[i] = 0
		} else {
			out[i] = next
			next = 1 + next%max(nodes-1, 1)
		}
		count[out[i]]++
	}
	for i, t := range tenants {
		if t == "cold" {
			continue
		}
		best := -1
		for n := range nodes {
			if count[n] < per && (best < 0 || count[n] < count[best]) {
				best = n
			}
		}
		if best < 0 {
			best = nodes - 1
		}
		out[i] = best
		count[best]++
	}
	return out
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

// placement is how many ranges of each tenant each node leads, and each node's predicted usage and
// index and filter bytes.
func (e *env) placement(ctx context.Context) (map[string]int, map[string]float64, map[string]uint64, error) {
	rs, err := e.cl.UserRanges(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	leaders := map[string]int{}
	for _, r := range rs {
		if t := tenantOf(r.GetDesc()); t != "" {
			leaders[fmt.Sprintf("%s@n%d", t, r.GetLeaderNodeId())]++
		}
	}
	ns, err := e.cl.Nodes(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	pred, index := map[string]float64{}, map[string]uint64{}
	for _, n := range ns {
		id := fmt.Sprintf("n%d", n.GetDesc().GetNodeId())
		pred[id], index[id] = n.GetStats().GetPredictedUsage(), n.GetStats().GetIndexFilterBytes()
	}
	return leaders, pred, index, nil
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
