package policy

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
	"github.com/shoaldb/shoal/plan/profileplan"
)

// A restart's hand-overs: before a node restarts for a profile, node_profiles hands the user ranges
// it leads to voters it chooses, one operator a range, and proposes the SetProfile only once they
// are gone; once the node is up with the profile it gives them back. Left to the node's supervisor,
// the shed went to whichever voter led the least requests a second: a node just restarted and cold,
// or one already carrying another restart's ranges, and the hot range's tenant fell to 59–75 % of its
// level for tens of seconds.

// handingOver is the node whose hand-over is under way (0: none).
func (p *NodeProfiles) handingOver() uint64 {
	for _, id := range slices.Sorted(maps.Keys(p.away)) {
		if p.away[id].asked.IsZero() {
			return id
		}
	}
	return 0
}

// handOver proposes, for node id about to restart, a leadership transfer of each user range it
// still leads that no operator holds, costliest first (handOverTarget). Once it leads none, or
// HandOverWait after the hand-over began (noted: its supervisor then sheds what is left), it
// proposes the node's SetProfile — at once for the meta range's leader (away.supervised).
func (p *NodeProfiles) handOver(c *model.Cluster, v *view, id uint64) []*operator.Operator {
	a, n := p.away[id], c.Node(id)
	if a == nil || n == nil {
		return nil
	}
	var left []*model.Range
	for r := range c.LedBy(id) {
		if !r.System {
			left = append(left, r)
		}
	}
	if len(left) == 0 || a.supervised || c.Now.Sub(a.at) >= p.cfg.HandOverWait || !n.Active() {
		if len(left) > 0 && !a.supervised {
			p.notes = append(p.notes, Note{What: fmt.Sprintf("n%d", id), Status: "hand-over incomplete",
				Why: fmt.Sprintf("n%d still leads %s %s after its hand-over began: restarting it, its supervisor sheds them",
					id, rangeList(left), c.Now.Sub(a.at).Round(time.Second))})
		}
		if op := p.setProfile(c, v, n, a); op != nil {
			v.add(op)
			return []*operator.Operator{op}
		}
		return nil
	}
	cost := map[uint64]float64{}
	for _, r := range left {
		cost[r.ID] = p.costMix(r).Cost()
	}
	slices.SortStableFunc(left, func(x, y *model.Range) int { return cmp.Compare(cost[y.ID], cost[x.ID]) })
	hot := p.hotRanges(c)
	load := p.ledCost(c)
	before, total := operator.ProfileMatched(c)
	var ops []*operator.Operator
	for _, r := range left {
		if v.busy[r.ID] {
			continue
		}
		to, why := p.handOverTarget(c, v, id, r, hot, load)
		if to == 0 {
			continue
		}
		load[to] += cost[r.ID]
		load[id] -= cost[r.ID]
		a.to[r.ID] = to
		op := operator.NewTransferLeader(NameNodeProfiles, c.Now, r, to, fmt.Sprintf(
			"n%d restarts with profile %s: first hand r%d (cost %.0f/s) to n%d, %s", id, a.profile, r.ID, cost[r.ID], to, why))
		op.Priority = operator.PriorityLow
		op.PredictedBenefit = matchedBenefit(c, r, to, before, total)
		v.add(op)
		ops = append(ops, op)
	}
	return ops
}

// handOverTarget is the voter of r (led by node from, about to restart) to lead it meanwhile, and
// why it (0: none fits). A candidate is live, active, idle and not away for a restart. It is warm
// and free (tier 0) when it did not come up from a restart within WarmUp, carries no range another
// restart is to get back (carrying), and is not beside a hot range (besideHot). A hot range goes
// only to a warm and free voter (or waits); another range to the best tier there is: a warming or
// carrying node (1) before one beside a hot range (2), whose tenant is most of the requests. Within
// a tier, the node the plan gives r, else the one leading the least cost (load: what it leads, with
// the hand-overs to it) — for a hot range the one whose disk is the least busy first: the disks
// bound this cluster, and a node leading a scan range costs little by the plan and keeps its disk
// near its budget (the hot range handed beside one ran at a sixth of its level).
func (p *NodeProfiles) handOverTarget(c *model.Cluster, v *view, from uint64, r *model.Range, hot map[uint64]bool, load map[uint64]float64) (uint64, string) {
	best, bestTier := uint64(0), 3
	for _, id := range r.Voters() {
		n := c.Node(id)
		if id == from || n == nil || !n.Active() || n.Busy() || p.away[id] != nil {
			continue
		}
		tier := 0
		switch {
		case p.besideHot(c, v, id, r, hot):
			tier = 2
		case p.warming(c, id) || p.carrying(c, v, id, from):
			tier = 1
		}
		if tier > 0 && hot[r.ID] {
			continue
		}
		switch {
		case best == 0 || tier < bestTier:
		case tier > bestTier, p.leadOn[r.ID] == best:
			continue
		case p.leadOn[r.ID] != id && !lighter(c, id, best, load, hot[r.ID]):
			continue
		}
		best, bestTier = id, tier
	}
	switch {
	case best == 0:
		return 0, ""
	case p.leadOn[r.ID] == best && bestTier == 0:
		return best, "the node the plan gives it"
	case bestTier == 0:
		return best, fmt.Sprintf("the voter leading the least cost (%.0f/s, disk %s busy) among those warm and free of other hand-overs",
			load[best], pct(c.Node(best).DiskBusy))
	}
	return best, fmt.Sprintf("no voter warm and free of other hand-overs: the best left, leading %.0f/s", load[best])
}

// lighter reports whether node a is a lighter target than b: its load (cost) lower, or, for a hot
// range (byDisk), its disk busy less by at least a tenth of its time, else its load lower.
func lighter(c *model.Cluster, a, b uint64, load map[uint64]float64, byDisk bool) bool {
	if da, db := c.Node(a).DiskBusy, c.Node(b).DiskBusy; byDisk && math.Abs(da-db) >= 0.1 {
		return da < db
	}
	return load[a] < load[b]
}

// warming reports whether node came up from a restart for a profile less than WarmUp ago.
func (p *NodeProfiles) warming(c *model.Cluster, node uint64) bool {
	up, ok := p.upAt[node]
	return ok && c.Now.Sub(up) < p.cfg.WarmUp
}

// handed are the ranges a restart (any node away, but except) handed over to node, that node leads
// or is being given (the transfer in flight).
func (p *NodeProfiles) handed(c *model.Cluster, v *view, node, except uint64) []uint64 {
	var out []uint64
	for id, a := range p.away {
		if id == except || !a.back.IsZero() {
			continue
		}
		for rid, to := range a.to {
			r := c.Range(rid)
			if to == node && r != nil && (r.Leader == node || (r.Leader == id && v.busy[rid])) {
				out = append(out, rid)
			}
		}
	}
	return out
}

// carrying reports whether node carries a range another restart than except's handed over and is
// to get back (away.led): that load stays on node until the other node is back.
func (p *NodeProfiles) carrying(c *model.Cluster, v *view, node, except uint64) bool {
	for _, rid := range p.handed(c, v, node, except) {
		for id, a := range p.away {
			if id != except && slices.Contains(a.led, rid) {
				return true
			}
		}
	}
	return false
}

// besideHot reports, for a hot r, whether node leads another hot range or carries any range a
// restart handed over; for any other r, whether node carries a hot range a restart handed over. A
// hand-over's hot range gets a node of its own.
func (p *NodeProfiles) besideHot(c *model.Cluster, v *view, node uint64, r *model.Range, hot map[uint64]bool) bool {
	handed := p.handed(c, v, node, 0)
	if !hot[r.ID] {
		return slices.ContainsFunc(handed, func(id uint64) bool { return hot[id] && id != r.ID })
	}
	for l := range c.LedBy(node) {
		if hot[l.ID] && l.ID != r.ID {
			return true
		}
	}
	return slices.ContainsFunc(handed, func(id uint64) bool { return id != r.ID })
}

// returnLed gives a node restarted for a profile back the ranges it handed over (away.led), once it
// has been up with the profile for ReturnAfter: its cache warmed from their leaders' read hints
// meanwhile, and each transfer waits for its warmth as every autopilot transfer does.
func (p *NodeProfiles) returnLed(c *model.Cluster, v *view) []*operator.Operator {
	before, total := operator.ProfileMatched(c)
	var ops []*operator.Operator
	for _, id := range slices.Sorted(maps.Keys(p.away)) {
		a := p.away[id]
		if a.supervised || a.asked.IsZero() || a.up.IsZero() || !a.back.IsZero() || c.Now.Sub(a.up) < p.cfg.ReturnAfter {
			continue
		}
		for _, rid := range a.led {
			r := c.Range(rid)
			if r == nil || r.Leader == id || !r.IsVoter(id) || v.busy[rid] {
				continue
			}
			op := operator.NewTransferLeader(NameNodeProfiles, c.Now, r, id, fmt.Sprintf(
				"n%d up with profile %s for %s: r%d, handed over for its restart, returns", id, a.profile,
				c.Now.Sub(a.up).Round(time.Second), rid))
			op.Priority = operator.PriorityLow
			op.PredictedBenefit = matchedBenefit(c, r, id, before, total)
			v.add(op)
			ops = append(ops, op)
		}
	}
	return ops
}

// hotRanges are the user ranges whose cost (costMix) is at least HotShare of the user ranges' total.
func (p *NodeProfiles) hotRanges(c *model.Cluster) map[uint64]bool {
	cost := map[uint64]float64{}
	total := 0.0
	for _, r := range c.UserRanges() {
		cost[r.ID] = p.costMix(r).Cost()
		total += cost[r.ID]
	}
	share := p.cfg.HotShare
	if share <= 0 {
		share = 1 / float64(max(1, len(c.Nodes)))
	}
	out := map[uint64]bool{}
	for id, x := range cost {
		if total > 0 && x >= share*total && x >= p.cfg.MinQPS {
			out[id] = true
		}
	}
	return out
}

// ledCost is each node's load as the plan weighs it: the cost of the user ranges it leads.
func (p *NodeProfiles) ledCost(c *model.Cluster) map[uint64]float64 {
	out := map[uint64]float64{}
	for _, r := range c.UserRanges() {
		out[r.Leader] += p.costMix(r).Cost()
	}
	return out
}

// hotBlocked reports whether hot range r may not be led on node to now: to leads a range a restart
// handed over and is to get back (the hot range would share its node with that load). A node just
// up from a restart may take it: holding the range off its planned node for WarmUp kept it beside
// a scan range for a minute at a fifth of its level, and the transfer waits for warmth anyway.
func (p *NodeProfiles) hotBlocked(c *model.Cluster, v *view, r *model.Range, to uint64, hot map[uint64]bool) bool {
	return hot[r.ID] && p.carrying(c, v, to, 0)
}

func rangeList(rs []*model.Range) string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = fmt.Sprintf("r%d", r.ID)
	}
	return strings.Join(ids, ",")
}

// matchedBenefit is the change in profile.matched (before of total) that leading r on node to
// predicts: r's load matched there and not on its leader, or the reverse.
func matchedBenefit(c *model.Cluster, r *model.Range, to uint64, before, total float64) operator.Benefit {
	q, cl := r.QPS()+r.ReplicaReadQPS, profileplan.Classify(operator.MixOf(r))
	delta := 0.0
	if n := c.Node(to); n != nil && string(cl) == n.Profile {
		delta += q
	}
	if n := c.Node(r.Leader); n != nil && string(cl) == n.Profile {
		delta -= q
	}
	return operator.Benefit{Metric: operator.MetricProfileMatched, Range: r.ID, From: r.Leader, To: to,
		Before: fraction(before, total), Delta: fraction(delta, total)}
}
