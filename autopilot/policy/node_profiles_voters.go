package policy

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
	"github.com/shoaldb/shoal/plan/profileplan"
)

// voterMove proposes at most one replica move that takes a voter of a range with writes (class
// write or read/write) off a node planned for a profile that suits writes less — the read profile's
// last (profileplan.VoterMove) — to a node that suits them better and holds none. Under Raft each
// voter syncs and compacts its range's writes: every node of the experiment spent 40–65 of its 150
// disk operations a second on the writing tenants whatever it led, and the read nodes' point reads
// queued behind them. It runs between restarts only: no node restarting or away, none back for
// less than Settle (Propose's hold). The ranks are the planned profiles, so the moves need no
// restart and come before them: the plan is matched to the current leaders, and most of the
// ranges its read nodes are to lead they lead already. Neither the leader's voter nor the planned
// leader's moves. The ranges with the most writes go first; a move that has not taken its voter
// off is retried only after moveWait (RetryAfter, doubling while the range's moves keep failing);
// none reads its snapshot off the node leading a hot range.
func (p *NodeProfiles) voterMove(c *model.Cluster, v *view, restarting map[uint64]bool) *operator.Operator {
	if p.cfg.KeepVoters || len(restarting) != 0 {
		return nil
	}
	hot, held := p.hotLeaders(c), p.writeVoters(c)
	for _, r := range p.withWrites(c, v) {
		if h := hot[r.Leader]; h != 0 && h != r.ID {
			continue
		}
		var voters []uint64
		for _, id := range r.Voters() {
			if id != r.Leader {
				voters = append(voters, id)
			}
		}
		from, to, ok := profileplan.VoterMove(p.classes[r.ID], p.leadOn[r.ID], voters, p.voterCandidates(c, r, held), p.plannedProfile)
		if !ok {
			continue
		}
		p.votersOff[r.ID] = from
		p.noteMove(r.ID, c.Now) // place's replica move of it waits as after its own: the same snapshot
		op := operator.NewMoveReplica(NameNodeProfiles, c.Now, c, r, from, to, fmt.Sprintf(
			"r%d is %s (%.0f writes/s): each voter syncs and compacts its writes; move its voter from n%d (profile %s) to n%d (profile %s)",
			r.ID, p.classes[r.ID], r.WriteQPS, from, p.profile[from], to, p.profile[to]))
		op.Priority = operator.PriorityLow
		before, _, _ := operator.Measure(operator.Benefit{Metric: operator.MetricVoterWrites, From: from}, c)
		op.PredictedBenefit = operator.Benefit{Metric: operator.MetricVoterWrites, From: from, Before: before, Delta: -r.WriteQPS}
		return op
	}
	return nil
}

// withWrites are the planned ranges of a class that takes writes that voterMove may move: led by
// a live node (the move runs from the leader), not under another operator, not within moveWait
// of a voter move that has not taken its voter off; most writes first.
func (p *NodeProfiles) withWrites(c *model.Cluster, v *view) []*model.Range {
	var out []*model.Range
	for id, cl := range p.classes {
		r := c.Range(id)
		if r == nil || !profileplan.TakesWrites(cl) || v.busy[id] {
			continue
		}
		if n := c.Node(r.Leader); n == nil || !n.Live {
			continue
		}
		if off, ok := p.votersOff[id]; ok && r.IsVoter(off) && c.Now.Sub(p.moved[id].at) < p.moveWait(p.moved[id]) {
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *model.Range) int {
		if x := cmp.Compare(b.WriteQPS, a.WriteQPS); x != 0 {
			return x
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}

// writeVoters counts, per node, the voters of planned ranges of a class that takes writes.
func (p *NodeProfiles) writeVoters(c *model.Cluster) map[uint64]int {
	held := map[uint64]int{}
	for id, cl := range p.classes {
		if w := c.Range(id); w != nil && profileplan.TakesWrites(cl) {
			for _, n := range w.Voters() {
				held[n]++
			}
		}
	}
	return held
}

// voterCandidates are the nodes that may take a voter of r: in the plan, live, active, idle, holding
// no replica of it; those holding the fewest voters of ranges with writes (held) first.
func (p *NodeProfiles) voterCandidates(c *model.Cluster, r *model.Range, held map[uint64]int) []uint64 {
	var out []uint64
	for _, n := range c.Nodes {
		if _, planned := p.profile[n.ID]; !planned || !n.Live || !n.Active() || n.Busy() || r.HasReplica(n.ID) {
			continue
		}
		out = append(out, n.ID)
	}
	slices.SortFunc(out, func(a, b uint64) int {
		if x := cmp.Compare(held[a], held[b]); x != 0 {
			return x
		}
		return cmp.Compare(a, b)
	})
	return out
}

// plannedProfile is the profile the plan gives node (Default for a node outside it).
func (p *NodeProfiles) plannedProfile(node uint64) profileplan.Class {
	if pr, ok := p.profile[node]; ok {
		return pr
	}
	return profileplan.Default
}
