package policy

import (
	"fmt"
	"math"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

// RebalanceConfig configures rebalance. Imbalance is (max − min) / mean over the active nodes; for each
// dimension rebalancing starts above High and, once started, continues until below Low (hysteresis).
type RebalanceConfig struct {
	QPSHigh, QPSLow         float64 // served load (leaderships weighted by QPS). Default 0.25, 0.10.
	ReplicaHigh, ReplicaLow float64 // replica counts. Default 0.10, 0.05.
	BytesHigh, BytesLow     float64 // bytes stored. Default 0.20, 0.10.
	LeaderHigh, LeaderLow   float64 // leadership counts. Default 0.10, 0.05.
	// MinQPSGap and MinBytesGap: smaller differences between two nodes are noise. Defaults 100 ops/s
	// and 64 MiB. Counts need a gap of 2 (one move changes it by 2).
	MinQPSGap   float64
	MinBytesGap uint64
	// MaxPerRound bounds the operators proposed per round, over all dimensions. Default 4.
	MaxPerRound int
	// QPSSmoothing is the time constant of the average the served-load dimension balances (a range's
	// QPS in the model is one heartbeat's). Default 20 s.
	QPSSmoothing time.Duration
	// LoadCooldown: a range whose leadership rebalance moved for load, or another policy placed, does
	// not move for load within it. Default 2 min.
	LoadCooldown time.Duration
}

func (c RebalanceConfig) withDefaults() RebalanceConfig {
	def := func(v *float64, d float64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.QPSHigh, 0.25)
	def(&c.QPSLow, 0.10)
	def(&c.ReplicaHigh, 0.10)
	def(&c.ReplicaLow, 0.05)
	def(&c.BytesHigh, 0.20)
	def(&c.BytesLow, 0.10)
	def(&c.LeaderHigh, 0.10)
	def(&c.LeaderLow, 0.05)
	def(&c.MinQPSGap, 100)
	if c.MinBytesGap == 0 {
		c.MinBytesGap = 64 << 20
	}
	if c.MaxPerRound <= 0 {
		c.MaxPerRound = 4
	}
	if c.QPSSmoothing <= 0 {
		c.QPSSmoothing = 20 * time.Second
	}
	if c.LoadCooldown <= 0 {
		c.LoadCooldown = 2 * time.Minute
	}
	return c
}

// Rebalance is a scheduler: it evens out, across active nodes, the load they serve (by moving
// leaderships of busy ranges), then replica counts and bytes (by moving replicas), then leadership
// counts (by moving leaderships of quiet ranges).
//
// It does not thrash: a dimension starts rebalancing only above its High imbalance and stops below its
// Low one; every move strictly narrows the gap between its two nodes (so a move can never be undone by
// the next); leadership-count moves may not widen the served-load gap; served load is smoothed over
// time, a range moved for load rests for a cooldown, and a node with a saturated disk takes no load
// (see loadMemory); and it plans with the influence of pending operators, so it does not fix the same
// imbalance twice. System ranges stay where they are.
type Rebalance struct {
	cfg     RebalanceConfig
	maxDisk float64
	active  map[string]bool
	load    *loadMemory
	// yieldLoad, when it says so, leaves the load dimensions (served QPS and leadership counts) to
	// usage_balance, which places leaderships by predicted usage (Default sets it).
	yieldLoad func() bool
}

// NewRebalance returns the rebalance policy.
func NewRebalance(cfg RebalanceConfig, maxDiskUse float64) *Rebalance {
	cfg = cfg.withDefaults()
	return &Rebalance{cfg: cfg, maxDisk: withDefaultDiskUse(maxDiskUse), active: map[string]bool{},
		load: newLoadMemory(cfg.QPSSmoothing, cfg.LoadCooldown)}
}

// Name implements Policy.
func (p *Rebalance) Name() string { return NameRebalance }

type dimension struct {
	name      string
	high, low float64
	minGap    float64
	value     func(*nodeLoad) float64
	format    func(float64) string
	plan      func(p *Rebalance, v *view, d *dimension, nodes []*model.Node) *operator.Operator
}

func (p *Rebalance) dimensions() []*dimension {
	count := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	return []*dimension{
		{name: "qps", high: p.cfg.QPSHigh, low: p.cfg.QPSLow, minGap: p.cfg.MinQPSGap,
			value: func(l *nodeLoad) float64 { return l.qps }, format: fmtQPS, plan: (*Rebalance).planQPS},
		{name: "replicas", high: p.cfg.ReplicaHigh, low: p.cfg.ReplicaLow, minGap: 2,
			value: func(l *nodeLoad) float64 { return float64(l.replicas) }, format: count, plan: (*Rebalance).planReplicas},
		{name: "bytes", high: p.cfg.BytesHigh, low: p.cfg.BytesLow, minGap: float64(p.cfg.MinBytesGap),
			value:  func(l *nodeLoad) float64 { return l.bytes },
			format: func(v float64) string { return model.FormatBytes(uint64(math.Max(v, 0))) }, plan: (*Rebalance).planBytes},
		{name: "leaders", high: p.cfg.LeaderHigh, low: p.cfg.LeaderLow, minGap: 2,
			value: func(l *nodeLoad) float64 { return float64(l.leaders) }, format: count, plan: (*Rebalance).planLeaders},
	}
}

// spread returns the imbalance of d over nodes, and the nodes holding the most and the least.
func (d *dimension) spread(v *view, nodes []*model.Node) (imbalance, gap float64, hi, lo *model.Node) {
	var sum float64
	for _, n := range nodes {
		x := d.value(v.at(n.ID))
		sum += x
		if hi == nil || x > d.value(v.at(hi.ID)) {
			hi = n
		}
		if lo == nil || x < d.value(v.at(lo.ID)) {
			lo = n
		}
	}
	mean := sum / float64(len(nodes))
	gap = d.value(v.at(hi.ID)) - d.value(v.at(lo.ID))
	if mean <= 0 {
		return 0, gap, hi, lo
	}
	return gap / mean, gap, hi, lo
}

// Propose implements Policy.
func (p *Rebalance) Propose(c *model.Cluster, pending []*operator.Operator) []*operator.Operator {
	p.load.update(c)
	p.load.restPlaced(pending, c.Now)
	for _, n := range c.Nodes {
		if n.Joining() {
			return nil // incremental_join owns the placement while a node joins
		}
	}
	for _, op := range pending {
		if op.Policy == NameJoin {
			return nil // a join is starting (its record is not in the model yet) or finishing
		}
	}
	v := newView(c, pending)
	defer v.release()
	nodes := v.active()
	if len(nodes) < 2 {
		clear(p.active)
		return nil
	}
	p.load.smoothView(v, nodes)
	var out []*operator.Operator
	for _, d := range p.dimensions() {
		if (d.name == "qps" || d.name == "leaders") && p.yieldLoad != nil && p.yieldLoad() {
			continue
		}
		for len(out) < p.cfg.MaxPerRound {
			imb, gap, _, _ := d.spread(v, nodes)
			switch {
			case !p.active[d.name] && imb > d.high && gap >= d.minGap:
				p.active[d.name] = true
			case p.active[d.name] && (imb < d.low || gap < d.minGap):
				p.active[d.name] = false
			}
			if !p.active[d.name] {
				break
			}
			op := d.plan(p, v, d, nodes)
			if op == nil {
				break
			}
			op.Priority = operator.PriorityLow
			v.add(op)
			out = append(out, op)
		}
	}
	return out
}

// why explains a move of dimension d from hi to lo.
func (p *Rebalance) why(v *view, d *dimension, nodes []*model.Node, from, to uint64) string {
	imb, _, _, _ := d.spread(v, nodes)
	return fmt.Sprintf("%s imbalance %s (n%d %s, n%d %s; acts above %s, stops below %s)", d.name, pct(imb),
		from, d.format(d.value(v.at(from))), to, d.format(d.value(v.at(to))), pct(d.high), pct(d.low))
}

// byValue returns nodes sorted by d's value, ascending.
func byValue(v *view, d *dimension, nodes []*model.Node) []*model.Node {
	return sortedNodes(nodes, func(a, b *model.Node) bool {
		x, y := d.value(v.at(a.ID)), d.value(v.at(b.ID))
		if x != y {
			return x < y
		}
		return a.ID < b.ID
	})
}

// planQPS moves the leadership of one of the busiest node's ranges to the least busy node, choosing the
// range whose load best evens the two out; if the least busy node has no replica of any candidate, the
// replica moves along with the leadership.
func (p *Rebalance) planQPS(v *view, d *dimension, nodes []*model.Node) *operator.Operator {
	asc := byValue(v, d, nodes)
	from := asc[len(asc)-1]
	// The busiest node's candidates, once: scanning every range for every target is quadratic in a
	// large cluster.
	led := v.candidatesIn(v.c.LedBy(from.ID), func(r *model.Range) bool {
		return r.Leader == from.ID && p.load.qps(r) > 0 && p.load.settled(r)
	})
	margin := p.qpsMargin(v, nodes, d)
	for _, to := range asc[:len(asc)-1] {
		gap := v.at(from.ID).qps - v.at(to.ID).qps
		if gap < d.minGap {
			break
		}
		if to.Busy() || saturated(from, to) {
			continue // never hand load to a node with a heavy background task or a saturated disk
		}
		var transfer, move *model.Range
		for _, r := range led {
			// The target after the move must stay lighter than from was by the margin: a range
			// worth nearly the whole gap only swaps which node is the busiest, and a later round
			// would send it back.
			q := p.load.qps(r)
			if q > gap-margin {
				continue
			}
			better := func(cur *model.Range) bool {
				return cur == nil || math.Abs(gap-2*q) < math.Abs(gap-2*p.load.qps(cur))
			}
			switch {
			case v.c.LeadsOutsideZone(r, from.ID, to.ID):
				continue // lease_preference keeps it in its zone
			case r.IsVoter(to.ID):
				if better(transfer) {
					transfer = r
				}
			case !r.HasReplica(to.ID) && !to.DiskFull(p.maxDisk) && !narrowsZones(v.c, r, from.ID, to.ID):
				if better(move) {
					move = r
				}
			}
		}
		if transfer == nil && move == nil {
			continue // why is a pass over every node: only for the target chosen
		}
		return p.loadMove(v, d, nodes, from, to, gap, transfer, move)
	}
	return nil
}

// qpsMargin is how far below its source's load a load move must leave its target: the dimension's
// Low tolerance of the mean, at least its minimum gap.
func (p *Rebalance) qpsMargin(v *view, nodes []*model.Node, d *dimension) float64 {
	var sum float64
	for _, n := range nodes {
		sum += v.at(n.ID).qps
	}
	return math.Max(d.minGap, d.low*sum/float64(len(nodes)))
}

// loadMove is planQPS's operator: the transfer when there is one, else the move; both remembered so
// the range rests for the cooldown.
func (p *Rebalance) loadMove(v *view, d *dimension, nodes []*model.Node, from, to *model.Node, gap float64,
	transfer, move *model.Range) *operator.Operator {
	why := p.why(v, d, nodes, from.ID, to.ID)
	var op *operator.Operator
	r := transfer
	if r != nil {
		op = operator.NewTransferLeader(NameRebalance, v.c.Now, r, to.ID,
			fmt.Sprintf("%s: move r%d's leadership (%s) to n%d", why, r.ID, fmtQPS(p.load.qps(r)), to.ID))
	} else {
		r = move
		op = operator.NewMoveReplica(NameRebalance, v.c.Now, v.c, r, from.ID, to.ID,
			fmt.Sprintf("%s: move r%d (%s) with its leadership to n%d", why, r.ID, fmtQPS(p.load.qps(r)), to.ID))
	}
	op.PredictedBenefit = operator.Benefit{Metric: operator.MetricQPSGap, From: from.ID, To: to.ID, Before: gap,
		Delta: -2 * p.load.qps(r)}
	p.load.smoothInfluence(op, r)
	p.load.moved(r.ID, v.c.Now)
	return op
}

// planReplicas moves the smallest suitable replica from the node with the most replicas to the one with
// the fewest.
func (p *Rebalance) planReplicas(v *view, d *dimension, nodes []*model.Node) *operator.Operator {
	asc := byValue(v, d, nodes)
	from := asc[len(asc)-1]
	held := v.candidatesIn(v.c.RangesOf(from.ID), func(r *model.Range) bool { return r.IsVoter(from.ID) })
	for _, to := range asc[:len(asc)-1] {
		gap := v.at(from.ID).replicas - v.at(to.ID).replicas
		if gap < 2 || to.DiskFull(p.maxDisk) {
			continue
		}
		var best *model.Range
		for _, r := range held {
			if r.HasReplica(to.ID) || narrowsZones(v.c, r, from.ID, to.ID) {
				continue
			}
			if best == nil || r.Bytes < best.Bytes || (r.Bytes == best.Bytes && r.QPS() < best.QPS()) {
				best = r
			}
		}
		if best == nil {
			continue
		}
		op := operator.NewMoveReplica(NameRebalance, v.c.Now, v.c, best, from.ID, to.ID,
			fmt.Sprintf("%s: move r%d (%s) to n%d", p.why(v, d, nodes, from.ID, to.ID), best.ID,
				model.FormatBytes(best.Bytes), to.ID))
		op.PredictedBenefit = operator.Benefit{Metric: operator.MetricReplicaGap, From: from.ID, To: to.ID,
			Before: float64(gap), Delta: -2}
		return op
	}
	return nil
}

// planBytes moves, from the node storing the most to the one storing the least, the replica whose size
// best evens them out, as long as that does not unbalance replica counts.
func (p *Rebalance) planBytes(v *view, d *dimension, nodes []*model.Node) *operator.Operator {
	asc := byValue(v, d, nodes)
	from := asc[len(asc)-1]
	held := v.candidatesIn(v.c.RangesOf(from.ID), func(r *model.Range) bool { return r.IsVoter(from.ID) && r.Bytes > 0 })
	for _, to := range asc[:len(asc)-1] {
		lf, lt := v.at(from.ID), v.at(to.ID)
		gap := lf.bytes - lt.bytes
		countGap := lf.replicas - lt.replicas
		if gap < d.minGap || to.DiskFull(p.maxDisk) || abs(countGap-2) > max(abs(countGap), 1) {
			continue
		}
		var best *model.Range
		for _, r := range held {
			b := float64(r.Bytes)
			if r.HasReplica(to.ID) || b >= gap || narrowsZones(v.c, r, from.ID, to.ID) {
				continue
			}
			if best == nil || math.Abs(gap-2*b) < math.Abs(gap-2*float64(best.Bytes)) {
				best = r
			}
		}
		if best == nil {
			continue
		}
		op := operator.NewMoveReplica(NameRebalance, v.c.Now, v.c, best, from.ID, to.ID,
			fmt.Sprintf("%s: move r%d (%s) to n%d", p.why(v, d, nodes, from.ID, to.ID), best.ID,
				model.FormatBytes(best.Bytes), to.ID))
		op.PredictedBenefit = operator.Benefit{Metric: operator.MetricBytesGap, From: from.ID, To: to.ID,
			Before: gap, Delta: -2 * float64(best.Bytes)}
		return op
	}
	return nil
}

// planLeaders moves the leadership of the quietest suitable range from the node with the most
// leaderships to the one with the fewest, without widening the served-load gap between them beyond the
// QPS dimension's tolerance.
func (p *Rebalance) planLeaders(v *view, d *dimension, nodes []*model.Node) *operator.Operator {
	var meanQPS float64
	for _, n := range nodes {
		meanQPS += v.at(n.ID).qps
	}
	meanQPS /= float64(len(nodes))
	asc := byValue(v, d, nodes)
	from := asc[len(asc)-1]
	for _, to := range asc[:len(asc)-1] {
		gap := v.at(from.ID).leaders - v.at(to.ID).leaders
		if gap < 2 || to.Busy() || saturated(from, to) {
			continue
		}
		qf, qt := v.at(from.ID).qps, v.at(to.ID).qps
		tolerance := math.Max(math.Abs(qf-qt), math.Max(p.cfg.QPSLow*meanQPS, p.cfg.MinQPSGap))
		var best *model.Range
		for r := range v.c.LedBy(from.ID) {
			q := p.load.qps(r)
			if r.Leader != from.ID || !r.IsVoter(to.ID) || r.System || v.busy[r.ID] || !p.load.settled(r) ||
				math.Abs((qf-q)-(qt+q)) > tolerance || v.c.LeadsOutsideZone(r, from.ID, to.ID) {
				continue
			}
			if best == nil || q < p.load.qps(best) {
				best = r
			}
		}
		if best == nil {
			continue
		}
		op := operator.NewTransferLeader(NameRebalance, v.c.Now, best, to.ID,
			fmt.Sprintf("%s: move r%d's leadership (%s) to n%d", p.why(v, d, nodes, from.ID, to.ID), best.ID,
				fmtQPS(p.load.qps(best)), to.ID))
		op.PredictedBenefit = operator.Benefit{Metric: operator.MetricLeaderGap, From: from.ID, To: to.ID,
			Before: float64(gap), Delta: -2}
		p.load.smoothInfluence(op, best)
		p.load.moved(best.ID, v.c.Now)
		return op
	}
	return nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// narrowsZones reports whether moving r's replica from one node to another would leave r in fewer
// zones (localities): the target's zone holds another of its replicas and the source's does not.
func narrowsZones(c *model.Cluster, r *model.Range, from, to uint64) bool {
	fn, tn := c.Node(from), c.Node(to)
	if fn == nil || tn == nil || fn.Zone() == tn.Zone() {
		return false
	}
	for _, rep := range r.Replicas {
		if n := c.Node(rep.Node); rep.Node != from && n != nil && n.Zone() == tn.Zone() {
			return true
		}
	}
	return false
}
