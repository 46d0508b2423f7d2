package policy

import (
	"fmt"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

// MergeConfig configures merge.
type MergeConfig struct {
	// MaxBytes: both ranges must be smaller. Default 16 MiB.
	MaxBytes uint64
	// MaxQPS: "nearly idle" — each range, and the pair together, below this load. Default 50 ops/s
	// (2 % of the default load-split threshold, so a merged range is far from being split again).
	MaxQPS float64
	// IdleFor is how long both ranges must have been small and nearly idle. Default 5 min.
	IdleFor time.Duration
	// AfterLoadSplit is how long a boundary created by load_split is left alone. Default 30 min.
	AfterLoadSplit time.Duration
	// MaxPerRound bounds the operators proposed per round. Default 4.
	MaxPerRound int
}

func (c MergeConfig) withDefaults() MergeConfig {
	if c.MaxBytes == 0 {
		c.MaxBytes = 16 << 20
	}
	if c.MaxQPS <= 0 {
		c.MaxQPS = 50
	}
	if c.IdleFor <= 0 {
		c.IdleFor = 5 * time.Minute
	}
	if c.AfterLoadSplit <= 0 {
		c.AfterLoadSplit = 30 * time.Minute
	}
	if c.MaxPerRound <= 0 {
		c.MaxPerRound = 4
	}
	return c
}

// Merge merges adjacent ranges that are both small and nearly idle, and have been for IdleFor. If their
// replicas are on different nodes it first moves the right range's replicas next to the left's, one
// per round. Guards against split/merge ping-pong: it never merges at a boundary load_split created
// within AfterLoadSplit, it needs IdleFor of observation (so a freshly started autopilot, which has no
// split memory, waits too), and its idle threshold is far below the split threshold.
type Merge struct {
	cfg       MergeConfig
	splits    *SplitMemory
	coldSince map[uint64]time.Time
	seen      *model.Cluster // the last snapshot coldSince was brought up to date with
}

// NewMerge returns the merge policy consulting splits (may be nil) for recent load splits.
func NewMerge(cfg MergeConfig, splits *SplitMemory) *Merge {
	if splits == nil {
		splits = NewSplitMemory()
	}
	return &Merge{cfg: cfg.withDefaults(), splits: splits, coldSince: map[uint64]time.Time{}}
}

// Name implements Policy.
func (p *Merge) Name() string { return NameMerge }

func (p *Merge) cold(r *model.Range) bool {
	return !r.System && !r.Fenced && r.Bytes < p.cfg.MaxBytes && r.QPS() < p.cfg.MaxQPS
}

// Propose implements Policy.
func (p *Merge) Propose(c *model.Cluster, pending []*operator.Operator) []*operator.Operator {
	now := c.Now
	// A range unchanged since the last snapshot seen is as cold as it was: only the changed ones are
	// looked at again, when the model says which they are.
	look := c.UserRanges()
	if changed, ok := c.ChangedSince(p.seen); ok {
		look = make([]*model.Range, 0, len(changed))
		for _, i := range changed {
			if r := c.Ranges[i]; !r.System {
				look = append(look, r)
			}
		}
	}
	p.seen = c
	for _, r := range look {
		if !p.cold(r) {
			if len(p.coldSince) > 0 {
				delete(p.coldSince, r.ID)
			}
		} else if _, ok := p.coldSince[r.ID]; !ok {
			p.coldSince[r.ID] = now
		}
	}
	for id := range p.coldSince {
		if r := c.Range(id); r == nil || r.System {
			delete(p.coldSince, id) // merged away
		}
	}
	p.splits.Forget(now.Add(-p.cfg.AfterLoadSplit))
	if len(p.coldSince) == 0 {
		return nil // no range is idle: nothing to merge
	}

	v := newView(c, pending)
	defer v.release()
	var out []*operator.Operator
	for i, left := range c.UserRanges() {
		if len(out) >= p.cfg.MaxPerRound {
			break
		}
		right := c.RightNeighborAt(i)
		if right == nil || v.busy[left.ID] || v.busy[right.ID] || !p.idleLongEnough(left, now) ||
			!p.idleLongEnough(right, now) || left.QPS()+right.QPS() >= p.cfg.MaxQPS {
			continue
		}
		if at, ok := p.splits.SplitAt(right.StartKey); ok && now.Sub(at) < p.cfg.AfterLoadSplit {
			continue
		}
		idle := fmt.Sprintf("r%d %s and r%d %s are small (%s, %s < %s) and nearly idle (%s together < %s) for %s",
			left.ID, left.Span(), right.ID, right.Span(), model.FormatBytes(left.Bytes), model.FormatBytes(right.Bytes),
			model.FormatBytes(p.cfg.MaxBytes), fmtQPS(left.QPS()+right.QPS()), fmtQPS(p.cfg.MaxQPS),
			roundDur(now.Sub(later(p.coldSince[left.ID], p.coldSince[right.ID]))))
		benefit := operator.Benefit{Metric: operator.MetricSpanRanges, Span: model.FormatSpan(left.StartKey, right.EndKey),
			Before: 2, Delta: -1, Start: left.StartKey, End: right.EndKey}
		var op *operator.Operator
		if operator.SameReplicas(left, right) {
			op, _ = operator.NewMerge(NameMerge, now, left, right, idle+": merge them")
		} else {
			op = p.colocate(v, left, right, idle)
			benefit.Delta = 0
			benefit.Detail = "prepares the merge"
		}
		if op == nil {
			continue
		}
		op.Priority = operator.PriorityLow
		op.PredictedBenefit = benefit
		v.add(op)
		v.busy[right.ID], v.busy[left.ID] = true, true
		out = append(out, op)
	}
	return out
}

func (p *Merge) idleLongEnough(r *model.Range, now time.Time) bool {
	since, ok := p.coldSince[r.ID]
	return ok && now.Sub(since) >= p.cfg.IdleFor
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// colocate moves one of right's voters that left does not have to a node of left's that right lacks.
func (p *Merge) colocate(v *view, left, right *model.Range, why string) *operator.Operator {
	if len(left.Learners()) > 0 || len(right.Learners()) > 0 || len(left.Voters()) != len(right.Voters()) {
		return nil // replicate settles learners and counts first
	}
	var from, to uint64
	for _, id := range right.Voters() {
		if !left.HasReplica(id) {
			from = id
			break
		}
	}
	for _, id := range left.Voters() {
		if n := v.c.Node(id); !right.HasReplica(id) && n != nil && n.Active() {
			to = id
			break
		}
	}
	if from == 0 || to == 0 {
		return nil
	}
	return operator.NewMoveReplica(NameMerge, v.c.Now, v.c, right, from, to,
		fmt.Sprintf("%s: move r%d's replica from n%d to n%d to co-locate it with r%d before merging", why, right.ID, from, to, left.ID))
}
