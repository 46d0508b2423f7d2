package policy

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

// NameMaskCompaction is the switch of compaction masking (docs/design/compaction-end-masking.md).
const NameMaskCompaction = "mask_compaction"

// MaskConfig configures the mask_compaction policy.
type MaskConfig struct {
	// MinBytes is the input size from which a running compaction is masked (default 8 MiB): smaller
	// ones rewrite too little of the hot data to cost the clients a visible miss burst.
	MinBytes uint64
	// MinAge is how long a compaction must have run before its ranges move (default 2 s): most end
	// sooner than a transfer takes, and moving for them would only add two transfers.
	MinAge time.Duration
	// ReturnAfter is how long after the compaction ended the leadership goes back to its node
	// (default 5 s): the node, now a follower, replays the new leader's reads into its cold tables
	// meanwhile, and the transfer back waits for its warmth as every autopilot transfer does.
	ReturnAfter time.Duration
	// GiveUpAfter forgets a leadership that could not go back (its node stayed busy, dead or
	// compacting) after this long (default 10 min); rebalancing then owns the leader counts.
	GiveUpAfter time.Duration
	// MaxShare bounds the share of the node's leaderships one compaction may move (default 0.5): a
	// compaction whose span holds more is left alone (one leadership may always move). Moving all of a node's leaderships for each
	// of its compactions piles its load on the others; on session 22's disk-bound nodes that made
	// their seconds break the SLO 13 % of the time instead of 2 % (docs/bench-join.md).
	MaxShare float64
	// MaxPerRound bounds the transfers proposed per round (default 16).
	MaxPerRound int
}

func (c MaskConfig) withDefaults() MaskConfig {
	if c.MinBytes == 0 {
		c.MinBytes = 8 << 20
	}
	if c.MinAge == 0 {
		c.MinAge = 2 * time.Second
	}
	if c.ReturnAfter == 0 {
		c.ReturnAfter = 5 * time.Second
	}
	if c.GiveUpAfter == 0 {
		c.GiveUpAfter = 10 * time.Minute
	}
	if c.MaxShare <= 0 {
		c.MaxShare = 0.5
	}
	if c.MaxPerRound <= 0 {
		c.MaxPerRound = 16
	}
	return c
}

// MaskCompaction moves a range's leadership away from a node while an automatic compaction rewrites
// the range's data there, and gives it back a few seconds after the compaction ends. A compaction's
// outputs are new tables with nothing in the block cache: when it ends, the reads of the key span it
// rewrote miss until the clients load them again, and on a disk-bound node those misses queue behind
// the node's other reads (docs/bench-join.md, session 21: 55 % of the seconds just after an old
// node's compaction ended broke the SLO, 3 % of the others). The follower that leads meanwhile is
// warm, because read hints replay the leader's reads on it; once the compaction is over, the node
// replays the new leader's reads in turn, and the transfer back waits for its warmth.
//
// Unlike shed_leadership, which empties a node before a heavy task (chapter 3 of the Papaioannou
// thesis), this policy moves only the ranges in the compaction's key span (model.Task.Ranges), so a
// node that compacts most of the time still leads the rest. A node is not a target for a range its
// own big compaction is rewriting. The meta range stays where it is (see Shed).
//
// State: each moved leadership's home node and when the home's compaction of it was first seen over.
// It lives in the autopilot; if the autopilot moves, leaderships not yet given back stay where they
// are (a rebalance's business then). While it holds them, rebalance counts them at home and leaves
// them alone (Holder), so it neither fills the gap a hold leaves nor undoes the give-back.
type MaskCompaction struct {
	cfg   MaskConfig
	homes map[uint64]*maskedRange // range → where its leadership belongs
	noted map[string]bool
	notes []Note
}

type maskedRange struct {
	home     uint64
	movedAt  time.Time
	overSeen time.Time // when the home was first seen not compacting the range (zero: still is)
}

// NewMaskCompaction returns the mask_compaction policy.
func NewMaskCompaction(cfg MaskConfig) *MaskCompaction {
	return &MaskCompaction{cfg: cfg.withDefaults(), homes: map[uint64]*maskedRange{}, noted: map[string]bool{}}
}

// Name implements Policy.
func (p *MaskCompaction) Name() string { return NameMaskCompaction }

// Held implements Holder: the leaderships moved away from their home node and not yet given back.
func (p *MaskCompaction) Held() map[uint64]uint64 {
	out := make(map[uint64]uint64, len(p.homes))
	for id, m := range p.homes {
		out[id] = m.home
	}
	return out
}

// TakeNotes implements Noter.
func (p *MaskCompaction) TakeNotes() []Note {
	out := p.notes
	p.notes = nil
	return out
}

// bigCompaction returns node n's running compaction of range id with at least MinBytes of input,
// or nil.
func (p *MaskCompaction) bigCompaction(n *model.Node, id uint64) *model.Task {
	for i := range n.Tasks {
		t := &n.Tasks[i]
		if t.Kind != "compaction" || !t.Running || t.Bytes < p.cfg.MinBytes {
			continue
		}
		for _, r := range t.Ranges {
			if r == id {
				return t
			}
		}
	}
	return nil
}

// Propose implements Policy.
func (p *MaskCompaction) Propose(c *model.Cluster, pending []*operator.Operator) []*operator.Operator {
	v := newView(c, pending)
	var out []*operator.Operator
	seen := map[string]bool{}
	for _, n := range c.Nodes {
		if !n.Live || !n.Active() {
			continue
		}
		led := map[uint64]bool{}
		for _, r := range c.Ranges {
			if r.Leader == n.ID && !r.System {
				led[r.ID] = true
			}
		}
		away := 0 // leaderships this policy holds away from n: they count against MaxShare too
		for id, m := range p.homes {
			if r := c.Range(id); m.home == n.ID && r != nil && r.Leader != n.ID {
				away++
			}
		}
		for i := range n.Tasks {
			t := &n.Tasks[i]
			if t.Kind != "compaction" || !t.Running || t.Bytes < p.cfg.MinBytes || c.Now.Sub(t.Since) < p.cfg.MinAge {
				continue
			}
			inSpan := 0
			for _, id := range t.Ranges {
				if led[id] {
					inSpan++
				}
			}
			if away+inSpan > 1 && float64(away+inSpan) > p.cfg.MaxShare*float64(len(led)+away) {
				p.noteOnce(seen, fmt.Sprintf("%d/%d/wide", n.ID, t.ID), Note{What: fmt.Sprintf("keep n%d's leaderships", n.ID),
					Status: StatusRanAnyway, Why: fmt.Sprintf("n%d's compaction (%s, %s) rewrites the data of %d of the %d ranges it leads, over the %.0f %% "+
						"that may move (%d already led elsewhere): moving them would pile its load on the other nodes", n.ID, taskName(t),
						model.FormatBytes(t.Bytes), inSpan, len(led), 100*p.cfg.MaxShare, away)})
				continue
			}
			for _, id := range t.Ranges {
				r := c.Range(id)
				if r == nil || r.System || r.Leader != n.ID || v.busy[id] || len(out) >= p.cfg.MaxPerRound {
					continue
				}
				to, why := p.target(v, r, n.ID)
				if to == 0 {
					p.note(seen, n, t, r, why)
					continue
				}
				op := operator.NewTransferLeader(NameMaskCompaction, c.Now, r, to,
					fmt.Sprintf("n%d has compacted %s of r%d's data for %s (%s): its new tables will be cold when it ends; lead on n%d meanwhile, %s",
						n.ID, model.FormatBytes(t.Bytes), r.ID, roundDur(c.Now.Sub(t.Since)), taskName(t), to, why))
				op.PredictedBenefit = operator.Benefit{Metric: operator.MetricNodeLeaders, From: n.ID, To: to,
					Before: float64(v.leadersOf(n.ID)), Delta: -1}
				v.add(op)
				out = append(out, op)
				away++
				// A range moved again from its home starts afresh; one moved on from a node that
				// only held it keeps its home (giveBack forgets it once the leader is home).
				if m := p.homes[id]; m == nil || m.home == n.ID {
					p.homes[id] = &maskedRange{home: n.ID, movedAt: c.Now}
				}
			}
		}
	}
	for k := range p.noted {
		if !seen[k] {
			delete(p.noted, k)
		}
	}
	return append(out, p.giveBack(c, v, p.cfg.MaxPerRound-len(out))...)
}

// target picks the voter of r, other than from, to lead while from compacts: live, active, not
// busy with a heavy task and not compacting r itself; the fewest leaderships, then the lowest ID.
func (p *MaskCompaction) target(v *view, r *model.Range, from uint64) (uint64, string) {
	nodes, states := idleVoters(v, r, from, func(n *model.Node) string {
		if p.bigCompaction(n, r.ID) != nil {
			return fmt.Sprintf("compacting r%d too", r.ID)
		}
		return ""
	})
	cands := make([]uint64, len(nodes))
	for i, n := range nodes {
		cands[i] = n.ID
	}
	if len(cands) == 0 {
		if len(states) == 0 {
			return 0, "no other voter"
		}
		return 0, "no voter to lead meanwhile: " + strings.Join(states, ", ")
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if a, b := v.leadersOf(cands[i]), v.leadersOf(cands[j]); a != b {
			return a < b
		}
		return cands[i] < cands[j]
	})
	desc := make([]string, 0, len(cands))
	for _, id := range cands {
		desc = append(desc, fmt.Sprintf("n%d leads %d", id, v.leadersOf(id)))
	}
	return cands[0], "fewest leaderships (" + strings.Join(append(desc, states...), "; ") + ")"
}

// giveBack returns each moved leadership to its home ReturnAfter after the home's compaction of the
// range is over.
func (p *MaskCompaction) giveBack(c *model.Cluster, v *view, budget int) []*operator.Operator {
	ids := make([]uint64, 0, len(p.homes))
	for id := range p.homes {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var out []*operator.Operator
	for _, id := range ids {
		m := p.homes[id]
		r := c.Range(id)
		if v.busy[id] {
			continue // an operator is moving it (perhaps this round's): judge once it is done
		}
		if r == nil || !r.IsVoter(m.home) || r.Leader == m.home || c.Now.Sub(m.movedAt) > p.cfg.GiveUpAfter {
			delete(p.homes, id) // merged away, moved off the node, back home, or given up
			continue
		}
		h := c.Node(m.home)
		if h == nil || !h.Live || !h.Active() || h.Busy() || p.bigCompaction(h, id) != nil {
			m.overSeen = time.Time{}
			continue
		}
		if m.overSeen.IsZero() {
			m.overSeen = c.Now
		}
		if c.Now.Sub(m.overSeen) < p.cfg.ReturnAfter || r.Leader == 0 || len(out) >= budget {
			continue
		}
		op := operator.NewTransferLeader(NameMaskCompaction, c.Now, r, m.home,
			fmt.Sprintf("n%d's compaction of r%d's data ended %s ago: give the leadership back from n%d once n%d is warm",
				m.home, id, roundDur(c.Now.Sub(m.overSeen)), r.Leader, m.home))
		op.PredictedBenefit = operator.Benefit{Metric: operator.MetricNodeLeaders, From: r.Leader, To: m.home,
			Before: float64(v.leadersOf(r.Leader)), Delta: -1}
		v.add(op)
		out = append(out, op)
	}
	return out
}

// note records, once per situation, that a compacting node keeps a leadership.
func (p *MaskCompaction) note(seen map[string]bool, n *model.Node, t *model.Task, r *model.Range, why string) {
	p.noteOnce(seen, fmt.Sprintf("%d/%d/%d", n.ID, t.ID, r.ID), Note{What: fmt.Sprintf("keep r%d's leadership on n%d", r.ID, n.ID),
		Status: StatusRanAnyway, Why: fmt.Sprintf("n%d compacts %s of r%d's data (%s): %s", n.ID, model.FormatBytes(t.Bytes), r.ID, taskName(t), why)})
}

// noteOnce adds nt unless the situation key was noted already; seen collects this round's keys.
func (p *MaskCompaction) noteOnce(seen map[string]bool, key string, nt Note) {
	seen[key] = true
	if p.noted[key] {
		return
	}
	p.noted[key] = true
	p.notes = append(p.notes, nt)
}
