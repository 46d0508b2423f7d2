package policy

import (
	"fmt"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

// DrainConfig configures the drain policy.
type DrainConfig struct {
	// MaxPerRound bounds the leadership transfers proposed per round. Default 32.
	MaxPerRound int
}

func (c DrainConfig) withDefaults() DrainConfig {
	if c.MaxPerRound <= 0 {
		c.MaxPerRound = 32
	}
	return c
}

// Drain moves every leadership off a draining (or decommissioning) node, to the voter of each range on
// the active node with the fewest leaderships. The node keeps its replicas. It is stateless: the drain
// flag lives in the model, so a drain resumes wherever the autopilot runs next. A node that is not live
// is left alone: its ranges elect new leaders by themselves.
type Drain struct{ cfg DrainConfig }

// NewDrain returns the drain policy.
func NewDrain(cfg DrainConfig) *Drain { return &Drain{cfg: cfg.withDefaults()} }

// Name implements Policy.
func (p *Drain) Name() string { return NameDrain }

// Propose implements Policy.
func (p *Drain) Propose(c *model.Cluster, pending []*operator.Operator) []*operator.Operator {
	v := newView(c, pending)
	defer v.release()
	var out []*operator.Operator
	for _, n := range c.Nodes {
		if !(n.Draining || n.Decommissioning) || n.Decommissioned || !n.Live {
			continue
		}
		why := "draining"
		if n.Decommissioning {
			why = "decommissioning"
		}
		// A system range (the meta range: the autopilot runs where it is led) moves last, once
		// the node leads no other range that is moving or can move: moving it stops this
		// autopilot, and operators still running would end "stopped" with their outcome
		// unrecorded. A user range no active voter can take (replicate or decommission must act
		// first) does not hold the autopilot on a draining node.
		leadsUser := false
		for r := range c.LedBy(n.ID) {
			if r.Leader == n.ID && !r.System && (v.busy[r.ID] || v.leaderTarget(r, n.ID) != 0) {
				leadsUser = true
				break
			}
		}
		for r := range c.LedBy(n.ID) {
			if len(out) >= p.cfg.MaxPerRound {
				return out
			}
			if r.Leader != n.ID || v.busy[r.ID] || (r.System && leadsUser) {
				continue
			}
			to := v.leaderTarget(r, n.ID)
			if to == 0 {
				continue // no other voter on an active node; replicate or decommission must act first
			}
			left := v.at(n.ID).leaders
			op := operator.NewTransferLeader(NameDrain, c.Now, r, to,
				fmt.Sprintf("n%d is %s (%d leaderships left): move r%d's leadership to n%d (%d leaderships)",
					n.ID, why, left, r.ID, to, v.at(to).leaders))
			op.PredictedBenefit = operator.Benefit{Metric: operator.MetricNodeLeaders, From: n.ID,
				Before: float64(left), Delta: -1}
			v.add(op)
			out = append(out, op)
		}
	}
	return out
}
