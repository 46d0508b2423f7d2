package policy

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
	"github.com/shoaldb/shoal/plan/replicaplan"
)

// ReadReplicasConfig configures read_replicas.
type ReadReplicasConfig struct {
	// MaxPerRound bounds the learners added or removed per round (snapshots cost). Default 2.
	MaxPerRound int
	// MinReads: a range whose popularity (reads, decayed) is below it gets no read replica. Default 100.
	MinReads float64
	// WarmUp is how long after it starts the policy only keeps the learners it finds (its popularity
	// figures start empty, and a new autopilot must not remove the read replicas of the last). Default 30s.
	WarmUp time.Duration
}

func (c ReadReplicasConfig) withDefaults() ReadReplicasConfig {
	if c.MaxPerRound <= 0 {
		c.MaxPerRound = 2
	}
	if c.MinReads <= 0 {
		c.MinReads = 100
	}
	if c.WarmUp <= 0 {
		c.WarmUp = 30 * time.Second
	}
	return c
}

// ReadReplicas places read replicas (learners, which serve client.ReplicaRead and bounded-staleness
// reads) where the reads are: Getafix (thesis chapter 4). Each round a range's popularity halves and
// adds the round's reads (eq. 4.1); ModifiedBestFit (plan/replicaplan) packs the popularities onto
// the active nodes at the optimal makespan with the fewest replicas, and the Hungarian mapping puts
// the plan's logical nodes on the physical ones where most of those replicas already are. A range
// gets a learner on each planned node that holds none of its replicas, and loses a learner it placed
// on a node the plan no longer names (coldest first). The voters are the floor: they are never
// added or removed here. It manages every learner of a range no operator works on, and those are
// what replicate must leave alone (Keeps).
type ReadReplicas struct {
	cfg     ReadReplicasConfig
	pop     map[uint64]float64
	last    time.Time
	started time.Time
	kept    map[uint64]map[uint64]bool // range → nodes of its read replicas
}

// NewReadReplicas returns the read_replicas policy.
func NewReadReplicas(cfg ReadReplicasConfig) *ReadReplicas {
	return &ReadReplicas{cfg: cfg.withDefaults(), pop: map[uint64]float64{}, kept: map[uint64]map[uint64]bool{}}
}

// Name implements Policy.
func (p *ReadReplicas) Name() string { return NameReadReplicas }

// Keeps reports whether the learner of rangeID on node is a read replica this policy keeps.
func (p *ReadReplicas) Keeps(rangeID, node uint64) bool { return p.kept[rangeID][node] }

// Propose implements Policy.
func (p *ReadReplicas) Propose(c *model.Cluster, pending []*operator.Operator) []*operator.Operator {
	now := c.Now
	if p.started.IsZero() {
		p.started = now
	}
	dt := 1.0
	if !p.last.IsZero() {
		dt = max(now.Sub(p.last).Seconds(), 0)
	}
	p.last = now
	ranges := c.UserRanges()
	live := map[uint64]bool{}
	for _, r := range ranges {
		live[r.ID] = true
		p.pop[r.ID] = replicaplan.Decay(p.pop[r.ID], (r.ReadQPS+r.ReplicaReadQPS)*dt)
	}
	for id := range p.pop {
		if !live[id] {
			delete(p.pop, id)
			delete(p.kept, id)
		}
	}
	v := newView(c, pending)
	defer v.release()
	// Every learner of an idle range is a read replica it manages: an earlier autopilot's, one a
	// split gave a new range, one an interrupted move left. The plan below keeps or removes it.
	for _, r := range ranges {
		if !v.busy[r.ID] {
			for _, id := range r.Learners() {
				p.keep(r.ID, id)
			}
		}
	}
	if now.Sub(p.started) < p.cfg.WarmUp {
		return nil // too early to judge popularity
	}
	var nodes []uint64
	for _, n := range c.Nodes {
		if n.Active() {
			nodes = append(nodes, n.ID)
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	want := p.plan(ranges, nodes)
	var ops []*operator.Operator
	// Coldest first for removals, hottest first for additions.
	order := slices.Clone(ranges)
	slices.SortStableFunc(order, func(a, b *model.Range) int { return cmp.Compare(p.pop[b.ID], p.pop[a.ID]) })
	for _, r := range order {
		if len(ops) >= p.cfg.MaxPerRound {
			break
		}
		if v.busy[r.ID] {
			continue
		}
		for _, n := range want[r.ID] {
			if !r.HasReplica(n) {
				op := operator.NewAddLearner(NameReadReplicas, now, r, n,
					fmt.Sprintf("r%d is read %.0f/s (popularity %.0f): a read replica on n%d", r.ID, r.ReadQPS+r.ReplicaReadQPS, p.pop[r.ID], n))
				op.PredictedBenefit = operator.Benefit{Metric: operator.MetricRangeReplicas, Range: r.ID, Before: float64(len(r.Replicas)), Delta: 1}
				ops = append(ops, op)
				p.keep(r.ID, n)
				break
			}
		}
	}
	for i := len(order) - 1; i >= 0 && len(ops) < p.cfg.MaxPerRound; i-- {
		r := order[i]
		if v.busy[r.ID] {
			continue
		}
		for _, n := range r.Learners() {
			if !p.kept[r.ID][n] || slices.Contains(want[r.ID], n) {
				continue
			}
			op := operator.NewRemoveReplica(NameReadReplicas, now, c, r, n, 0,
				fmt.Sprintf("r%d is read %.0f/s (popularity %.0f): its read replica on n%d is not needed", r.ID, r.ReadQPS+r.ReplicaReadQPS, p.pop[r.ID], n))
			op.PredictedBenefit = operator.Benefit{Metric: operator.MetricRangeReplicas, Range: r.ID, Before: float64(len(r.Replicas)), Delta: -1}
			ops = append(ops, op)
			delete(p.kept[r.ID], n)
			break
		}
	}
	return ops
}

func (p *ReadReplicas) keep(rangeID, node uint64) {
	if p.kept[rangeID] == nil {
		p.kept[rangeID] = map[uint64]bool{}
	}
	p.kept[rangeID][node] = true
}

// plan returns, for each range popular enough, the active nodes ModifiedBestFit places it on
// beyond its voters (the nodes that would serve its reads).
func (p *ReadReplicas) plan(ranges []*model.Range, nodes []uint64) map[uint64][]uint64 {
	var segs []replicaplan.Segment
	for _, r := range ranges {
		if pop := p.pop[r.ID]; pop >= p.cfg.MinReads {
			segs = append(segs, replicaplan.Segment{ID: r.ID, Count: int(math.Round(pop))})
		}
	}
	if len(segs) == 0 {
		return nil
	}
	plan, err := replicaplan.ModifiedBestFit(segs, len(nodes), nil)
	if err != nil {
		return nil
	}
	hot := map[uint64]*model.Range{}
	for _, r := range ranges {
		hot[r.ID] = r
	}
	current := make([][]uint64, len(nodes))
	for i, n := range nodes {
		for _, s := range segs {
			if hot[s.ID].HasReplica(n) {
				current[i] = append(current[i], s.ID)
			}
		}
	}
	to, _, err := replicaplan.MapToNodes(plan, current)
	if err != nil {
		return nil
	}
	want := map[uint64][]uint64{}
	for l, bin := range plan.Bins {
		n := nodes[to[l]]
		for id := range bin {
			if r := hot[id]; r != nil && !slices.Contains(r.Voters(), n) {
				want[id] = append(want[id], n)
			}
		}
	}
	for id := range want {
		slices.Sort(want[id])
	}
	return want
}
