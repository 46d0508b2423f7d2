package policy

import (
	"fmt"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

// NameLeasePreference is the switch of the lease_preference policy.
const NameLeasePreference = "lease_preference"

// LeasePreferenceConfig configures lease_preference.
type LeasePreferenceConfig struct {
	// MaxPerRound bounds the leaderships moved in one round (default 8): a new preference over a
	// large table moves its leaders over a few rounds rather than in one burst of elections.
	MaxPerRound int
}

func (c LeasePreferenceConfig) withDefaults() LeasePreferenceConfig {
	if c.MaxPerRound <= 0 {
		c.MaxPerRound = 8
	}
	return c
}

// LeasePreference leads each range in the zone an operator asked for (`shoal admin zone-config`,
// model.Cluster.LeadZones): a range led outside its preferred zone, with a voter on an active node
// in that zone free of heavy background work, has its leadership moved to the one of those voters
// leading the fewest ranges. Clients in that zone then reach leaders without crossing zones (Bekas
// §2: a leader placed where its clients are). A range with no voter in the zone stays where it is:
// replica placement, not this policy, decides which zones hold voters. rebalance never moves a
// leadership out of its preferred zone (model.Cluster.LeadsOutsideZone), so the two do not undo
// each other.
type LeasePreference struct {
	cfg LeasePreferenceConfig
}

// NewLeasePreference returns the lease_preference policy.
func NewLeasePreference(cfg LeasePreferenceConfig) *LeasePreference {
	return &LeasePreference{cfg: cfg.withDefaults()}
}

// Name implements Policy.
func (p *LeasePreference) Name() string { return NameLeasePreference }

// Propose implements Policy.
func (p *LeasePreference) Propose(c *model.Cluster, pending []*operator.Operator) []*operator.Operator {
	if len(c.LeadZones) == 0 {
		return nil
	}
	v := newView(c, pending)
	defer v.release()
	var out []*operator.Operator
	for _, r := range c.Ranges {
		if len(out) >= p.cfg.MaxPerRound {
			break
		}
		if r.System || v.busy[r.ID] || r.Leader == 0 {
			continue
		}
		zone := c.LeadZoneOf(r)
		if zone == "" {
			continue
		}
		if ln := c.Node(r.Leader); ln != nil && ln.Zone() == zone {
			continue
		}
		to := p.target(v, r, zone)
		if to == 0 {
			continue
		}
		op := operator.NewTransferLeader(NameLeasePreference, c.Now, r, to,
			fmt.Sprintf("%s is to be led in zone %s, n%d is in zone %s: move %s's leadership to n%d (zone %s, %d leaderships)",
				r.Span(), zone, r.Leader, zoneName(c.Node(r.Leader)), r, to, zone, v.leadersOf(to)))
		op.PredictedBenefit = operator.Benefit{Metric: operator.MetricNodeLeaders, From: r.Leader,
			Before: float64(v.leadersOf(r.Leader)), Delta: -1}
		v.add(op)
		out = append(out, op)
	}
	return out
}

// target is the voter of r in zone, on an active node without heavy background work, that leads
// the fewest ranges (ties: the lower id); 0 if none.
func (p *LeasePreference) target(v *view, r *model.Range, zone string) uint64 {
	var best uint64
	for _, id := range r.Voters() {
		n := v.c.Node(id)
		if id == r.Leader || n == nil || !n.Active() || n.Busy() || n.Zone() != zone {
			continue
		}
		if best == 0 || v.leadersOf(id) < v.leadersOf(best) {
			best = id
		}
	}
	return best
}

// zoneName is the node's zone, "none" when it has no locality or is unknown.
func zoneName(n *model.Node) string {
	if n == nil || n.Zone() == "" {
		return "none"
	}
	return n.Zone()
}
