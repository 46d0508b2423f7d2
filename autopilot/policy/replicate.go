package policy

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

// ReplicateConfig configures the replicate checker.
type ReplicateConfig struct {
	// Factor is the number of voters every range should have. Default 3.
	Factor int
	// DeadAfter is how long a node may be silent before its replicas are replaced. Default 60s
	// (model.DefaultDeadAfter).
	DeadAfter time.Duration
	// MaxPerRound bounds the operators proposed per round. Default 64.
	MaxPerRound int
}

func (c ReplicateConfig) withDefaults() ReplicateConfig {
	if c.Factor <= 0 {
		c.Factor = 3
	}
	if c.DeadAfter <= 0 {
		c.DeadAfter = model.DefaultDeadAfter
	}
	if c.MaxPerRound <= 0 {
		c.MaxPerRound = 64
	}
	return c
}

// Replicate is a checker: it keeps every range at its replication factor. A voter on a node silent for
// longer than DeadAfter (or decommissioned) is replaced by a new replica elsewhere, added as a learner
// and promoted in the same change that removes the lost one. A range short of voters gets one (an
// existing learner is promoted first); a range with too many — typically because a node thought dead
// came back — loses the replica on the busiest node. Learners on dead nodes are removed.
//
// It never changes a range whose live voters are not a quorum: no configuration change could commit.
type Replicate struct {
	cfg     ReplicateConfig
	maxDisk float64
	// keep, if set, names learners that are read replicas (read_replicas), not strays.
	keep func(rangeID, node uint64) bool

	// The last round's fine verdicts by position in Ranges (of snapshot seen), with what they depend
	// on besides the range: the nodes and the lost ones. A range that is the same *model.Range at the
	// same place (a source sharing unchanged ranges between snapshots) is as fine as it was: only the
	// ranges that changed since (ChangedSince) are checked again, not every range's replicas.
	seen      *model.Cluster
	lastFine  []bool
	lastNodes []uint64
	lastLost  []uint64
}

// NewReplicate returns the replicate policy.
func NewReplicate(cfg ReplicateConfig, maxDiskUse float64) *Replicate {
	return &Replicate{cfg: cfg.withDefaults(), maxDisk: withDefaultDiskUse(maxDiskUse)}
}

// Name implements Policy.
func (p *Replicate) Name() string { return NameReplicate }

// Propose implements Policy.
func (p *Replicate) Propose(c *model.Cluster, pending []*operator.Operator) []*operator.Operator {
	v := newView(c, pending)
	defer v.release()
	// The nodes whose replicas count as lost, once per round: most ranges have factor voters on
	// nodes that are all fine, and check has nothing to say about them.
	var lostNodes []uint64
	nodes := make([]uint64, len(c.Nodes))
	for i, n := range c.Nodes {
		nodes[i] = n.ID
		if p.lost(c, n.ID) {
			lostNodes = append(lostNodes, n.ID)
		}
	}
	changed, reuse := c.ChangedSince(p.seen)
	reuse = reuse && len(p.lastFine) == len(c.Ranges) && slices.Equal(nodes, p.lastNodes) && slices.Equal(lostNodes, p.lastLost)
	fine := p.lastFine
	if reuse {
		for _, i := range changed {
			fine[i] = p.fine(c, c.Ranges[i], lostNodes)
		}
	} else {
		fine = make([]bool, len(c.Ranges))
		for i, r := range c.Ranges {
			fine[i] = p.fine(c, r, lostNodes)
		}
	}
	p.seen, p.lastFine, p.lastNodes, p.lastLost = c, fine, nodes, lostNodes
	var out []*operator.Operator
	for i, f := range fine {
		if len(out) >= p.cfg.MaxPerRound {
			break
		}
		if f {
			continue
		}
		r := c.Ranges[i]
		if v.busy[r.ID] {
			continue
		}
		if op := p.check(v, r); op != nil {
			op.Policy = NameReplicate
			v.add(op)
			out = append(out, op)
		}
	}
	return out
}

// fine reports whether r has exactly factor voters, no learner, and none of them lost: check would
// propose nothing.
func (p *Replicate) fine(c *model.Cluster, r *model.Range, lostNodes []uint64) bool {
	if len(r.Replicas) != p.cfg.Factor {
		return false
	}
	for _, rep := range r.Replicas {
		if rep.Learner || c.Node(rep.Node) == nil || contains(lostNodes, rep.Node) {
			return false
		}
	}
	return true
}

func (p *Replicate) lost(c *model.Cluster, node uint64) bool {
	n := c.Node(node)
	return n == nil || n.Dead(c.Now, p.cfg.DeadAfter)
}

func (p *Replicate) lostWhy(c *model.Cluster, node uint64) string {
	n := c.Node(node)
	switch {
	case n == nil:
		return fmt.Sprintf("n%d is not in the cluster", node)
	case n.Decommissioned:
		return fmt.Sprintf("n%d is decommissioned", node)
	}
	return fmt.Sprintf("n%d silent for %s (dead after %s)", node, roundDur(n.SilentFor(c.Now)), p.cfg.DeadAfter)
}

func (p *Replicate) check(v *view, r *model.Range) *operator.Operator {
	c, now, factor := v.c, v.c.Now, p.cfg.Factor
	voters := r.Voters()
	var lost []uint64
	liveVoters := 0
	for _, id := range voters {
		if p.lost(c, id) {
			lost = append(lost, id)
		}
		if n := c.Node(id); n != nil && n.Live {
			liveVoters++
		}
	}
	healthy := len(voters) - len(lost)
	if len(voters) > 0 && healthy < len(voters)/2+1 {
		return nil // no quorum: no configuration change can commit; wait for nodes to come back
	}
	liveBenefit := operator.Benefit{Metric: operator.MetricLiveVoters, Range: r.ID, Before: float64(liveVoters), Delta: 1}
	switch {
	case len(lost) > 0 && len(voters) > factor:
		op := operator.NewRemoveReplica(NameReplicate, now, c, r, lost[0], 0,
			fmt.Sprintf("%s; r%d has %d voters (factor %d): remove the lost one", p.lostWhy(c, lost[0]), r.ID, len(voters), factor))
		op.Priority = operator.PriorityHigh
		op.PredictedBenefit = operator.Benefit{Metric: operator.MetricRangeReplicas, Range: r.ID,
			Before: float64(len(r.Replicas)), Delta: -1}
		return op
	case len(lost) > 0:
		to := v.targetFor(r, p.maxDisk)
		if to == 0 {
			return nil
		}
		op := operator.NewMoveReplica(NameReplicate, now, c, r, lost[0], to,
			fmt.Sprintf("%s: re-replicate r%d on n%d (%d replicas)", p.lostWhy(c, lost[0]), r.ID, to, v.at(to).replicas))
		op.Priority = operator.PriorityHigh
		op.PredictedBenefit = liveBenefit
		return op
	case len(voters) < factor:
		for _, id := range r.Learners() {
			if n := c.Node(id); n != nil && n.Active() {
				op := operator.NewPromoteLearner(NameReplicate, now, r, id,
					fmt.Sprintf("r%d has %d voters (factor %d): promote the learner on n%d", r.ID, len(voters), factor, id))
				op.Priority = operator.PriorityHigh
				op.PredictedBenefit = liveBenefit
				return op
			}
		}
		to := v.targetFor(r, p.maxDisk)
		if to == 0 {
			return nil
		}
		op := operator.NewAddReplica(NameReplicate, now, r, to,
			fmt.Sprintf("r%d has %d voters (factor %d): add one on n%d (%d replicas)", r.ID, len(voters), factor, to, v.at(to).replicas))
		op.Priority = operator.PriorityHigh
		op.PredictedBenefit = liveBenefit
		return op
	case len(voters) > factor:
		victim := p.surplusVictim(v, r)
		newLeader := v.leaderTarget(r, victim)
		if victim == r.Leader && newLeader == 0 {
			return nil
		}
		op := operator.NewRemoveReplica(NameReplicate, now, c, r, victim, newLeader,
			fmt.Sprintf("r%d has %d voters (factor %d): remove the surplus one on n%d (%d replicas)", r.ID, len(voters),
				factor, victim, p.replicasOf(v, victim)))
		op.PredictedBenefit = operator.Benefit{Metric: operator.MetricRangeReplicas, Range: r.ID,
			Before: float64(len(r.Replicas)), Delta: -1}
		return op
	}
	for _, id := range r.Learners() {
		why := ""
		switch {
		case p.lost(c, id):
			why = fmt.Sprintf("%s: remove its learner of r%d", p.lostWhy(c, id), r.ID)
		case p.keep != nil && p.keep(r.ID, id):
			continue // a read replica
		case len(voters) >= factor:
			// No operator works on this range (busy ranges are skipped), so the learner is left over
			// from an interrupted move; the range already has its voters.
			why = fmt.Sprintf("r%d has %d voters (factor %d) and a stray learner on n%d: remove it", r.ID, len(voters), factor, id)
		default:
			continue
		}
		op := operator.NewRemoveReplica(NameReplicate, now, c, r, id, 0, why)
		op.PredictedBenefit = operator.Benefit{Metric: operator.MetricRangeReplicas, Range: r.ID,
			Before: float64(len(r.Replicas)), Delta: -1}
		return op
	}
	return nil
}

// surplusVictim picks the voter to drop from an over-replicated range: one on a node that should not
// hold replicas (not live, draining, decommissioning) first, then — avoiding the leader — the one on the
// node with the most replicas, then the lowest node ID.
func (p *Replicate) surplusVictim(v *view, r *model.Range) uint64 {
	voters := r.Voters()
	rank := func(id uint64) (bad, leader, replicas int) {
		if n := v.c.Node(id); n == nil || !n.Active() {
			bad = 1
		}
		if id == r.Leader {
			leader = 1
		}
		if l := v.at(id); l != nil {
			replicas = l.replicas
		}
		return
	}
	sort.Slice(voters, func(i, j int) bool {
		bi, li, ri := rank(voters[i])
		bj, lj, rj := rank(voters[j])
		switch {
		case bi != bj:
			return bi > bj
		case li != lj:
			return li < lj
		case ri != rj:
			return ri > rj
		}
		return voters[i] < voters[j]
	})
	return voters[0]
}

func (p *Replicate) replicasOf(v *view, id uint64) int {
	if l := v.at(id); l != nil {
		return l.replicas
	}
	return 0
}
