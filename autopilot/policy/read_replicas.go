package policy

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/shoaldb/shoal/autopilot/executor"
	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
	"github.com/shoaldb/shoal/plan/replicaplan"
)

// ReadReplicasConfig configures read_replicas.
type ReadReplicasConfig struct {
	// MaxPerRound bounds the learners added or removed per round (snapshots cost). Default 2.
	MaxPerRound int
	// MinReads: a range whose popularity (reads per second, decayed: twice a steady rate) is below
	// it gets no read replica, and below half of it loses those it has. Default 100.
	MinReads float64
	// WarmUp is how long after it starts the policy only keeps the learners it finds (its popularity
	// figures start empty, and a new autopilot must not remove the read replicas of the last). Default 30s.
	WarmUp time.Duration
	// Imbalance is γ: a node may serve up to (1+γ) times its share of the reads before a range read
	// there gets a read replica elsewhere (eq. 4.2's cap). Default 0.2, the thesis's.
	Imbalance float64
	// MaxSnapshotsPerNode is the executor's bound on snapshots in flight per node (sender or
	// receiver): the policy proposes no more than the slots free. Default the executor's.
	MaxSnapshotsPerNode int
	// EqualCapacity gives every node the same room, instead of rooms in proportion to each node's
	// measured read capacity (Capacity-Aware ModifiedBestFit, §4.4.4).
	EqualCapacity bool
	// ReliefBusy is the share of time a node's disk must be busy before relief gives a range read
	// there beyond the node's room a learner elsewhere. Below it the node serves those reads at
	// leisure: they come fast (from its block cache, or as its leaderships' reads, which need no read
	// index), which is why the routing sends them there, and a learner elsewhere would answer slower
	// and take few of them. Default 0.5.
	ReliefBusy float64
	// SaturatedBusy is the share of time past which a node's disk counts as saturated: the reads the
	// node serves are then capped by its disk and understate what is asked of it (the rest waits in
	// its queue), so relief acts on it while it serves more than the mean node, however near its
	// room, provided some node's disk is below ReliefBusy to take a learner. Default 0.9.
	SaturatedBusy float64
	// Round is how long the reads of one popularity round are counted (the autopilot's rounds are
	// shorter: the reads of those within one round add up). The policy plans once a round. Default
	// 5s, the thesis's (§4.4.1): long enough that a round's reads are not noise.
	Round time.Duration
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
	if c.Imbalance <= 0 {
		c.Imbalance = 0.2
	}
	if c.Round <= 0 {
		c.Round = 5 * time.Second
	}
	if c.ReliefBusy <= 0 {
		c.ReliefBusy = 0.5
	}
	if c.SaturatedBusy <= 0 {
		c.SaturatedBusy = 0.9
	}
	if c.MaxSnapshotsPerNode <= 0 {
		c.MaxSnapshotsPerNode = executor.DefaultMaxSnapshotsPerNode
	}
	return c
}

// ReadReplicas places read replicas (learners, which serve client.ReplicaRead and bounded-staleness
// reads) where the reads are: Getafix (thesis chapter 4). Each round (Round, 5 s) a range's
// popularity halves and adds the round's reads per second (eq. 4.1), and the policy plans. The replicas a range has, voters and learners, are pre-placed:
// the routing spreads its reads over them by load, so they take its reads first, as far as each
// node's room allows — (1+γ) times its share of all the reads, in proportion to its measured read
// capacity (reads per second of disk busy time, §4.4.4), ModifiedBestFitPlaced in
// plan/replicaplan — and only the reads left over get new learners, packed by ModifiedBestFit onto
// the nodes with room. Nodes are ranked by the reads their heartbeats say they serve, least first,
// so that ties go to the least loaded; ranges too cold (or cooling) for a learner take their
// replicas' rooms first. A learner goes once its range is cold (below MinReads/2), or below half the
// popularity it had when the learner came if the replicas left then take all reads within rooms of
// γ/2 (a band, so that a learner is not removed for the load that added it). The voters
// are the floor: never added or removed here. It proposes no more snapshots than the executor has
// slots for. It manages every learner of a range no operator works on, and those are what replicate
// must leave alone (Keeps).
type ReadReplicas struct {
	cfg     ReadReplicasConfig
	pop     map[uint64]float64
	rate    map[uint64]float64 // the last round's reads per second
	reads   map[uint64]float64 // reads counted so far in this round
	last    time.Time          // the last model seen
	round   time.Time          // when this round began
	started time.Time
	kept    map[uint64]map[uint64]float64 // range → nodes of its read replicas → its popularity when they came
	// capacity is each node's read capacity as measured (reads per second of its disk's busy time),
	// a moving average over rounds.
	capacity map[uint64]float64
}

// NewReadReplicas returns the read_replicas policy.
func NewReadReplicas(cfg ReadReplicasConfig) *ReadReplicas {
	return &ReadReplicas{cfg: cfg.withDefaults(), pop: map[uint64]float64{}, rate: map[uint64]float64{},
		reads: map[uint64]float64{}, kept: map[uint64]map[uint64]float64{}, capacity: map[uint64]float64{}}
}

// Name implements Policy.
func (p *ReadReplicas) Name() string { return NameReadReplicas }

// Keeps reports whether the learner of rangeID on node is a read replica this policy keeps.
func (p *ReadReplicas) Keeps(rangeID, node uint64) bool {
	_, ok := p.kept[rangeID][node]
	return ok
}

// Propose implements Policy.
func (p *ReadReplicas) Propose(c *model.Cluster, pending []*operator.Operator) []*operator.Operator {
	now := c.Now
	if p.started.IsZero() {
		p.started = now
	}
	if !p.last.IsZero() && !now.After(p.last) {
		return nil // the same model again: no time has passed
	}
	dt := 0.0 // the first model begins the first round
	if !p.last.IsZero() {
		dt = now.Sub(p.last).Seconds()
	}
	p.last = now
	if p.round.IsZero() {
		p.round = now
	}
	ranges := c.UserRanges()
	for _, r := range ranges {
		p.reads[r.ID] += (r.ReadQPS + r.ReplicaReadQPS) * dt
	}
	p.measureCapacity(c)
	v := newView(c, pending)
	defer v.release()
	// Every learner of an idle range is a read replica it manages: an earlier autopilot's, one a
	// split gave a new range, one an interrupted move left. The plan keeps or removes it.
	for _, r := range ranges {
		if !v.busy[r.ID] {
			for _, id := range r.Learners() {
				if !p.Keeps(r.ID, id) {
					p.keep(r.ID, id, p.pop[r.ID])
				}
			}
		}
	}
	elapsed := now.Sub(p.round)
	if elapsed < p.cfg.Round {
		return nil // the round goes on
	}
	p.endRound(ranges, elapsed.Seconds())
	p.round = now
	if now.Sub(p.started) < p.cfg.WarmUp {
		// Too early to judge popularity: what the learners found now came with is unknown.
		for id, nodes := range p.kept {
			for n := range nodes {
				nodes[n] = p.pop[id]
			}
		}
		return nil
	}
	nodes := rankedNodes(c)
	if len(nodes) == 0 {
		return nil
	}
	free := p.snapshotSlots(c, pending)
	ops, added := p.additions(c, v, ranges, nodes, free)
	relief := p.relief(c, v, nodes, free, p.cfg.MaxPerRound-added)
	ops = append(ops, relief...)
	return append(ops, p.removals(c, v, ranges, nodes, free, p.cfg.MaxPerRound-added-len(relief))...)
}

// endRound folds a round's reads into each range's popularity (eq. 4.1, in reads per second: a
// range read at a steady rate x settles at 2x whatever the rounds' length) and forgets ranges gone.
func (p *ReadReplicas) endRound(ranges []*model.Range, secs float64) {
	live := map[uint64]bool{}
	for _, r := range ranges {
		live[r.ID] = true
		p.rate[r.ID] = p.reads[r.ID] / secs
		p.pop[r.ID] = replicaplan.Decay(p.pop[r.ID], p.rate[r.ID])
	}
	clear(p.reads)
	for id := range p.pop {
		if !live[id] {
			delete(p.pop, id)
			delete(p.rate, id)
			delete(p.kept, id)
		}
	}
}

func (p *ReadReplicas) keep(rangeID, node uint64, pop float64) {
	if p.kept[rangeID] == nil {
		p.kept[rangeID] = map[uint64]float64{}
	}
	p.kept[rangeID][node] = pop
}

// rankedNodes are the active nodes, the least read first (ties: the lower id): the order of the
// plan's bins, so that its ties go to the least loaded node.
func rankedNodes(c *model.Cluster) []uint64 {
	loads := NodeReads(c)
	var nodes []uint64
	for _, n := range c.Nodes {
		if n.Active() {
			nodes = append(nodes, n.ID)
		}
	}
	slices.SortStableFunc(nodes, func(a, b uint64) int {
		return cmp.Or(cmp.Compare(loads[a], loads[b]), cmp.Compare(a, b))
	})
	return nodes
}

// NodeReads is the reads per second each node serves, at every replica it holds: its heartbeat's
// figure (model.Node.ReadQPS) when any node reports one, else estimated from the ranges — a range's
// leader serves its ReadQPS, and its other replicas share its ReplicaReadQPS evenly.
func NodeReads(c *model.Cluster) map[uint64]float64 {
	out := map[uint64]float64{}
	reported := false
	for _, n := range c.Nodes {
		out[n.ID] = n.ReadQPS
		reported = reported || n.ReadQPS > 0
	}
	if reported {
		return out
	}
	for _, r := range c.Ranges {
		out[r.Leader] += r.ReadQPS
		if k := len(r.Replicas) - 1; k > 0 && r.ReplicaReadQPS > 0 {
			for _, rep := range r.Replicas {
				if rep.Node != r.Leader {
					out[rep.Node] += r.ReplicaReadQPS / float64(k)
				}
			}
		}
	}
	return out
}

// Capacity samples need enough reads and a busy enough disk to mean something.
const (
	capacityMinReads = 10
	capacityMinBusy  = 0.05
	capacityAlpha    = 0.3
)

// measureCapacity updates each node's read capacity from its heartbeat: the reads it served per
// second of its disk's busy time (§4.4.4 estimates it from the CPU time queries took; reads here
// miss the cache and wait on the disk). A node whose disk also serves compactions or snapshots
// shows as smaller, as Getafix's stragglers do.
func (p *ReadReplicas) measureCapacity(c *model.Cluster) {
	for _, n := range c.Nodes {
		if n.ReadQPS < capacityMinReads || n.DiskBusy < capacityMinBusy {
			continue
		}
		sample := n.ReadQPS / n.DiskBusy
		if old, ok := p.capacity[n.ID]; ok {
			sample = old + capacityAlpha*(sample-old)
		}
		p.capacity[n.ID] = sample
	}
}

// capacities are the ranked nodes' capacities for Rooms: nil (equal) when EqualCapacity is set or
// no node has a figure; a node without one counts as the best measured (an idle node is presumed
// able, as the routing presumes an unknown replica fast).
func (p *ReadReplicas) capacities(nodes []uint64) []float64 {
	if p.cfg.EqualCapacity {
		return nil
	}
	best := 0.0
	for _, n := range nodes {
		best = max(best, p.capacity[n])
	}
	if best == 0 {
		return nil
	}
	out := make([]float64, len(nodes))
	for i, n := range nodes {
		out[i] = best
		if c, ok := p.capacity[n]; ok {
			out[i] = c
		}
	}
	return out
}

// snapshotSlots is, per node, how many more snapshots the executor would let it send or receive:
// its bound less the add-learner steps still to run in pending operators (the receiving node and
// the range's leader, which sends).
func (p *ReadReplicas) snapshotSlots(c *model.Cluster, pending []*operator.Operator) map[uint64]int {
	free := map[uint64]int{}
	for _, n := range c.Nodes {
		free[n.ID] = p.cfg.MaxSnapshotsPerNode
	}
	for _, op := range pending {
		for _, s := range op.Steps[min(op.StepsDone(), len(op.Steps)):] {
			if al, ok := s.(operator.AddLearner); ok {
				free[al.Node]--
				if r := c.Range(op.RangeID); r != nil && r.Leader != 0 && r.Leader != al.Node {
					free[r.Leader]--
				}
			}
		}
	}
	return free
}

// takeSlot reserves a snapshot slot on the learner's node and on r's leader (the sender), if both
// have one.
func takeSlot(free map[uint64]int, r *model.Range, to uint64) bool {
	if free[to] <= 0 || (r.Leader != 0 && r.Leader != to && free[r.Leader] <= 0) {
		return false
	}
	free[to]--
	if r.Leader != 0 && r.Leader != to {
		free[r.Leader]--
	}
	return true
}

// plan is ModifiedBestFitPlaced over every range's popularity on the ranked nodes with rooms of
// (1+gamma) times their share, each range's replicas on them pre-placed except those skip names.
// It returns the plan, the rooms, and each node's bin.
func (p *ReadReplicas) plan(ranges []*model.Range, nodes []uint64, gamma float64, skip func(rangeID, node uint64) bool) (replicaplan.Placed, []int, map[uint64]int, error) {
	bin := make(map[uint64]int, len(nodes))
	for i, n := range nodes {
		bin[n] = i
	}
	segs := make([]replicaplan.Segment, 0, len(ranges))
	placed := make(map[uint64][]int, len(ranges))
	total := 0
	for _, r := range ranges {
		count := int(math.Round(p.weight(r)))
		if count <= 0 {
			continue
		}
		segs = append(segs, replicaplan.Segment{ID: r.ID, Count: count})
		total += count
		for _, rep := range r.Replicas {
			if b, ok := bin[rep.Node]; ok && (skip == nil || !skip(r.ID, rep.Node)) {
				placed[r.ID] = append(placed[r.ID], b)
			}
		}
	}
	rooms, err := replicaplan.Rooms(total, len(nodes), p.capacities(nodes), gamma)
	if err != nil {
		return replicaplan.Placed{}, nil, nil, err
	}
	// Ranges that would get no learner (too cold, or cooling) take their replicas' rooms first, so
	// that what is left over falls on the ranges a learner would be added to.
	fixed := map[uint64]bool{}
	for _, r := range ranges {
		if p.weight(r) < p.cfg.MinReads || p.cooling(r) {
			fixed[r.ID] = true
		}
	}
	pl, err := replicaplan.ModifiedBestFitPlaced(segs, rooms, placed, fixed)
	return pl, rooms, bin, err
}

// additions proposes learners for each range, hottest first (by weight), whose reads the plan cannot
// fit on its replicas within the rooms: on each of the plan's nodes for it, if snapshot slots are
// free there and on its leader, at most MaxPerRound in all.
func (p *ReadReplicas) additions(c *model.Cluster, v *view, ranges []*model.Range, nodes []uint64, free map[uint64]int) ([]*operator.Operator, int) {
	pl, rooms, bin, err := p.plan(ranges, nodes, p.cfg.Imbalance, nil)
	if err != nil || pl.Created() == 0 {
		return nil, 0
	}
	order := slices.Clone(ranges)
	slices.SortStableFunc(order, func(a, b *model.Range) int { return cmp.Compare(p.weight(b), p.weight(a)) })
	var ops []*operator.Operator
	added := 0
	for _, r := range order {
		if added >= p.cfg.MaxPerRound {
			break
		}
		if v.busy[r.ID] || p.weight(r) < p.cfg.MinReads || p.cooling(r) {
			continue
		}
		held := 0
		for _, rep := range r.Replicas {
			if b, ok := bin[rep.Node]; ok {
				held += pl.Bins[b][r.ID]
			}
		}
		// Every learner the plan names for the range at once (a hot set that moved needs them now),
		// as far as MaxPerRound and the snapshot slots allow: one operator, its steps one after the
		// other (the executor runs one operator a range).
		var steps []operator.Step
		var parts []string
		for b, n := range nodes { // least read first
			if added+len(steps) >= p.cfg.MaxPerRound {
				break
			}
			if !pl.New[b][r.ID] || r.HasReplica(n) || !takeSlot(free, r, n) {
				continue
			}
			steps = append(steps, operator.AddLearner{Node: n})
			parts = append(parts, fmt.Sprintf("n%d the next %d within a room of %d", n, pl.Bins[b][r.ID], rooms[b]))
		}
		if len(steps) == 0 {
			continue
		}
		op := operator.New(operator.KindAddLearner, NameReadReplicas, c.Now, r, fmt.Sprintf(
			"r%d is read %.0f/s (%s): its %d replicas take %d within rooms (γ %.0f %%), %s on %s (+%s each; planned makespan %d)",
			r.ID, p.rate[r.ID], p.popText(r), len(r.Replicas), held, 100*p.cfg.Imbalance, readReplicas(len(steps)),
			strings.Join(parts, ", "), model.FormatBytes(r.Bytes), pl.Makespan()), steps...)
		op.PredictedBenefit = operator.Benefit{Metric: operator.MetricRangeReplicas, Range: r.ID, Before: float64(len(r.Replicas)), Delta: float64(len(steps))}
		ops = append(ops, op)
		for _, st := range steps {
			p.keep(r.ID, st.(operator.AddLearner).Node, p.weight(r))
		}
		added += len(steps)
		v.busy[r.ID] = true // relief below adds no other learner this round
	}
	return ops, added
}

// readReplicas says "a read replica" or "n read replicas".
func readReplicas(n int) string {
	if n == 1 {
		return "a read replica"
	}
	return fmt.Sprintf("%d read replicas", n)
}

// relief proposes, for each node whose heartbeats show more reads than its room — (1+γ) times its
// capacity's share of all reads — and a disk busy ReliefBusy of the time at least, or a saturated
// disk (SaturatedBusy) and more reads than the mean node while another node's disk has room, a
// learner elsewhere for the range it serves most of (hottest node first, one a node a round, at
// most budget): the plan assumes the routing spreads a range's reads over its replicas as the rooms
// allow, and where it does not (clients that do not route by load, one that splits evenly) the reads
// a node actually serves say so. A saturated disk caps what its node serves, so that the reads it
// is asked for and cannot serve show in neither the plan nor the rooms: the load that remains is its
// disk's. The learner goes to the least read node without a replica of the range, with snapshot
// slots free (for a saturated node: one whose disk is below ReliefBusy).
func (p *ReadReplicas) relief(c *model.Cluster, v *view, nodes []uint64, free map[uint64]int, budget int) []*operator.Operator {
	if budget <= 0 {
		return nil
	}
	hot, loads := p.overloaded(c, nodes)
	var ops []*operator.Operator
	for _, h := range hot {
		if len(ops) >= budget {
			break
		}
		r, share := p.heaviestOn(c, v, h.node)
		if r == nil {
			continue
		}
		for _, n := range nodes { // least read first
			if r.HasReplica(n) || (h.saturated && !p.spare(c, n)) || !takeSlot(free, r, n) {
				continue
			}
			why := fmt.Sprintf("n%d serves %.0f reads/s, %.0f beyond its room", h.node, loads[h.node], h.excess)
			if h.saturated {
				why = fmt.Sprintf("n%d's disk is saturated (busy %.0f %%) serving %.0f reads/s, above the mean %.0f, n%d's busy %.0f %%",
					h.node, 100*c.Node(h.node).DiskBusy, loads[h.node], h.mean, n, 100*c.Node(n).DiskBusy)
			}
			op := operator.NewAddLearner(NameReadReplicas, c.Now, r, n, fmt.Sprintf(
				"%s; r%d is read %.0f/s there (of %.0f/s): a read replica on n%d (+%s)",
				why, r.ID, share, p.rate[r.ID], n, model.FormatBytes(r.Bytes)))
			op.PredictedBenefit = operator.Benefit{Metric: operator.MetricRangeReplicas, Range: r.ID, Before: float64(len(r.Replicas)), Delta: 1}
			ops = append(ops, op)
			p.keep(r.ID, n, p.weight(r))
			v.busy[r.ID] = true
			break
		}
	}
	return ops
}

// overNode is a node relief acts on: its reads beyond its room (negative for a saturated node
// within it), and whether it acts because the node's disk is saturated.
type overNode struct {
	node      uint64
	excess    float64
	mean      float64
	saturated bool
}

// overloaded lists the nodes relief acts on, the furthest beyond its room first, and every node's
// reads.
func (p *ReadReplicas) overloaded(c *model.Cluster, nodes []uint64) ([]overNode, map[uint64]float64) {
	loads := NodeReads(c)
	caps := p.capacities(nodes)
	total, capSum := 0.0, 0.0
	for i, n := range nodes {
		total += loads[n]
		capSum += 1
		if caps != nil {
			capSum += caps[i] - 1
		}
	}
	if total <= 0 {
		return nil, loads
	}
	spare := slices.ContainsFunc(nodes, func(n uint64) bool { return p.spare(c, n) })
	var hot []overNode
	for i, n := range nodes {
		share := 1.0 / float64(len(nodes))
		if caps != nil {
			share = caps[i] / capSum
		}
		nd := c.Node(n)
		if nd == nil || nd.DiskBusy < p.cfg.ReliefBusy {
			continue // its disk serves them at leisure (ReliefBusy)
		}
		room := (1 + p.cfg.Imbalance) * total * share
		mean := total / float64(len(nodes))
		switch {
		case loads[n] > room+p.cfg.MinReads/2: // past the room by a popularity of MinReads: not for a few reads
			hot = append(hot, overNode{node: n, excess: loads[n] - room, mean: mean})
		case nd.DiskBusy >= p.cfg.SaturatedBusy && loads[n] > mean && spare:
			hot = append(hot, overNode{node: n, excess: loads[n] - room, mean: mean, saturated: true})
		}
	}
	slices.SortStableFunc(hot, func(a, b overNode) int { return cmp.Compare(b.excess, a.excess) })
	return hot, loads
}

// spare reports whether node n's disk is busy less than ReliefBusy: room for a saturated node's reads.
func (p *ReadReplicas) spare(c *model.Cluster, n uint64) bool {
	nd := c.Node(n)
	return nd != nil && nd.Active() && nd.DiskBusy < p.cfg.ReliefBusy
}

// heaviestOn is the idle range, popular enough for a learner, of which node serves the most reads
// (its leader's ReadQPS, or an even part of the other replicas' ReplicaReadQPS), and that figure.
func (p *ReadReplicas) heaviestOn(c *model.Cluster, v *view, node uint64) (*model.Range, float64) {
	var best *model.Range
	most := 0.0
	for r := range c.RangesOf(node) {
		if r.System || v.busy[r.ID] || p.weight(r) < p.cfg.MinReads || p.cooling(r) {
			continue
		}
		share := r.ReadQPS
		if r.Leader != node {
			share = 0
			if k := len(r.Replicas) - 1; k > 0 {
				share = r.ReplicaReadQPS / float64(k)
			}
		}
		if share > most {
			best, most = r, share
		}
	}
	return best, most
}

// weight is the popularity range r counts at in the plan and against MinReads: its popularity, or
// what the round's reads would settle at (twice the rate) where that is more — a range newly hot
// counts at its reads now, not after the rounds eq. 4.1 takes to catch up — and the latter alone for
// a cooling range, whose popularity stands for reads that went elsewhere and would fill its
// replicas' rooms with them. Removals judge by the popularity (slow to fall: a learner is not
// removed for a round's dip).
func (p *ReadReplicas) weight(r *model.Range) float64 {
	now := 2 * p.rate[r.ID]
	if p.cooling(r) {
		return now
	}
	return max(p.pop[r.ID], now)
}

// popText is r's popularity for a reason, with the weight the plan counts it at where that differs.
func (p *ReadReplicas) popText(r *model.Range) string {
	if w := p.weight(r); math.Round(w) != math.Round(p.pop[r.ID]) {
		return fmt.Sprintf("popularity %.0f, counted at %.0f as read now", p.pop[r.ID], w)
	}
	return fmt.Sprintf("popularity %.0f", p.pop[r.ID])
}

// cooling reports whether r's reads this round fell below half of what its popularity stands for
// (a steady rate x gives a popularity of 2x): its popularity lags a hot set that moved away, and a
// learner added now would serve little.
func (p *ReadReplicas) cooling(r *model.Range) bool {
	return p.rate[r.ID] < p.pop[r.ID]/4
}

// cold reports whether range id's popularity fell below half of MinReads: its learners go whatever
// the plan (half, so that a range near MinReads does not gain and lose one by turns).
func (p *ReadReplicas) cold(id uint64) bool { return p.pop[id] < p.cfg.MinReads/2 }

// removals proposes removing read replicas of ranges that cooled, coldest first, one a range a
// round, at most budget: every learner of a cold range, and a learner of a range below half the
// popularity it had when the learner came if the plan without such learners (rooms of γ/2, a band
// below the additions' γ) needs no new replica anywhere: with one needed, which range's replica
// the plan names is arbitrary where ranges share nodes, and removing one here would add one there.
func (p *ReadReplicas) removals(c *model.Cluster, v *view, ranges []*model.Range, nodes []uint64, free map[uint64]int, budget int) []*operator.Operator {
	if budget <= 0 {
		return nil
	}
	type key struct{ r, n uint64 }
	cooled := map[key]bool{}
	warm := false // a cooled learner of a range still above MinReads: the plan decides
	for _, r := range ranges {
		if v.busy[r.ID] {
			continue
		}
		for _, n := range r.Learners() {
			if at, ok := p.kept[r.ID][n]; ok && (p.cold(r.ID) || p.pop[r.ID] < at/2) {
				cooled[key{r.ID, n}] = true
				warm = warm || !p.cold(r.ID)
			}
		}
	}
	if len(cooled) == 0 {
		return nil
	}
	needed := false // the plan without the cooled learners still wants new replicas
	if warm {
		pl, _, _, err := p.plan(ranges, nodes, p.cfg.Imbalance/2, func(r, n uint64) bool { return cooled[key{r, n}] })
		if err != nil {
			return nil
		}
		needed = pl.Created() > 0
	}
	order := slices.Clone(ranges)
	slices.SortStableFunc(order, func(a, b *model.Range) int { return cmp.Compare(p.pop[a.ID], p.pop[b.ID]) })
	var ops []*operator.Operator
	for _, r := range order {
		if len(ops) >= budget {
			break
		}
		for _, n := range r.Learners() {
			if !cooled[key{r.ID, n}] || (!p.cold(r.ID) && needed) {
				continue
			}
			op := operator.NewRemoveReplica(NameReadReplicas, c.Now, c, r, n, 0, fmt.Sprintf(
				"r%d is read %.0f/s (popularity %.0f, %.0f when the learner came): its read replica on n%d is not needed (−%s)",
				r.ID, p.rate[r.ID], p.pop[r.ID], p.kept[r.ID][n], n, model.FormatBytes(r.Bytes)))
			op.PredictedBenefit = operator.Benefit{Metric: operator.MetricRangeReplicas, Range: r.ID, Before: float64(len(r.Replicas)), Delta: -1}
			ops = append(ops, op)
			delete(p.kept[r.ID], n)
			break
		}
	}
	return ops
}
