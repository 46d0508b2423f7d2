package policy

import (
	"fmt"
	"sort"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

// DecommissionConfig configures the decommission policy.
type DecommissionConfig struct {
	// MaxPerRound bounds the replica moves proposed per round (the executor's snapshot limits pace them
	// further). Default 16.
	MaxPerRound int
	// Sequential empties a node with the incremental schedule of incremental_join, in reverse: one
	// move in flight per node, hottest range first, each move handing the range's leadership to its
	// receiver. Default() sets it when the join strategy is incremental.
	Sequential bool
}

func (c DecommissionConfig) withDefaults() DecommissionConfig {
	if c.MaxPerRound <= 0 {
		c.MaxPerRound = 16
	}
	return c
}

// Decommission empties decommissioning nodes: each of their replicas moves to the active node with the
// fewest replicas (leadership moves along when the node leads the range); learners are simply removed.
// Once a node holds nothing and no operator is pending for it, Completed lists it and the autopilot
// marks it decommissioned. It is stateless and therefore resumable: the decommissioning flag and the
// replicas live in the model.
type Decommission struct {
	cfg     DecommissionConfig
	maxDisk float64
}

// NewDecommission returns the decommission policy.
func NewDecommission(cfg DecommissionConfig, maxDiskUse float64) *Decommission {
	return &Decommission{cfg: cfg.withDefaults(), maxDisk: withDefaultDiskUse(maxDiskUse)}
}

// Name implements Policy.
func (p *Decommission) Name() string { return NameDecommission }

// Reactive marks a decommission as sequential work (one move after another when Sequential): the
// next move is planned as soon as the previous one has made progress (see Reactive).
func (p *Decommission) Reactive() {}

// Propose implements Policy.
func (p *Decommission) Propose(c *model.Cluster, pending []*operator.Operator) []*operator.Operator {
	v := newView(c, pending)
	defer v.release()
	var out []*operator.Operator
	for _, n := range c.Nodes {
		if !n.Decommissioning || n.Decommissioned {
			continue
		}
		rs := rangesOn(c, n.ID)
		if p.cfg.Sequential {
			if moves, _ := inFlight(pending, n.ID); moves > 0 || anyLearner(rs) {
				continue // one at a time (a learner left by a failed move counts until it is removed)
			}
			sort.SliceStable(rs, func(i, j int) bool { return rs[i].QPS() > rs[j].QPS() })
		}
		proposed := 0
		for _, r := range rs {
			if len(out) >= p.cfg.MaxPerRound || (p.cfg.Sequential && proposed > 0) {
				break
			}
			if v.busy[r.ID] {
				continue
			}
			left := v.at(n.ID).replicas
			var op *operator.Operator
			if rep, _ := r.ReplicaOn(n.ID); rep.Learner {
				op = operator.NewRemoveReplica(NameDecommission, c.Now, c, r, n.ID, 0,
					fmt.Sprintf("n%d is decommissioning (%d replicas left): remove its learner of r%d", n.ID, left, r.ID))
			} else {
				to := v.targetFor(r, p.maxDisk)
				if to == 0 {
					continue // nowhere to go; retried every round
				}
				op = operator.NewMoveReplica(NameDecommission, c.Now, c, r, n.ID, to,
					fmt.Sprintf("n%d is decommissioning (%d replicas left): move its replica of r%d to n%d (%d replicas)",
						n.ID, left, r.ID, to, v.at(to).replicas))
			}
			op.PredictedBenefit = operator.Benefit{Metric: operator.MetricNodeReplicas, From: n.ID,
				Before: float64(left), Delta: -1}
			v.add(op)
			out = append(out, op)
			proposed++
		}
	}
	return out
}

// Completed returns the decommissioning nodes that hold no replica and that no pending operator still
// touches: they can be marked decommissioned.
func (p *Decommission) Completed(c *model.Cluster, pending []*operator.Operator) []uint64 {
	touched := map[uint64]bool{}
	for _, op := range pending {
		for id := range op.Influence {
			touched[id] = true
		}
	}
	var out []uint64
	for _, n := range c.Nodes {
		if n.Decommissioning && !n.Decommissioned && n.Replicas == 0 && !touched[n.ID] {
			out = append(out, n.ID)
		}
	}
	return out
}

func anyLearner(rs []*model.Range) bool {
	for _, r := range rs {
		if len(r.Learners()) > 0 {
			return true
		}
	}
	return false
}
