package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
	"github.com/shoaldb/shoal/plan/usage"
)

// NameUsageBalance is the policy that packs ranges by predicted resource usage.
const NameUsageBalance = "usage_balance"

// StatusAsksForNode and StatusNodeNoLongerNeeded are the statuses of usage_balance's notes when a node's
// predicted usage passes AskAbove and balancing cannot bring it below, and when that ends.
const (
	StatusAsksForNode        = "asks for a node"
	StatusNodeNoLongerNeeded = "no longer asks for a node"
)

// UsageBalanceConfig configures usage_balance. Usage is a node's predicted CPU share plus disk busy
// (plan/usage; 1: saturated).
type UsageBalanceConfig struct {
	// Model predicts usage; zero (Version 0): usage.Default.
	Model usage.Model
	// AskAbove: a node whose predicted usage stays above it once no move helps asks for a node.
	// Default 0.8. WithdrawBelow: the ask ends once every node is below it (default AskAbove less
	// 0.1): near saturation the predictions cross AskAbove back and forth from one round to the
	// next, and an orchestrator scaling on the ask would see it come and go.
	AskAbove, WithdrawBelow float64
	// StartGap and StopGap: balancing starts when the gap between the most and the least used
	// node's predicted usage exceeds StartGap and, once started, goes on until it is below StopGap.
	// Defaults 0.20 and 0.10.
	StartGap, StopGap float64
	// MinGain: a move must lower the larger predicted usage of its two nodes by at least this.
	// Default 0.03.
	MinGain float64
	// Cooldown: a range moved is not moved again for this long. Default 10 min.
	Cooldown time.Duration
	// CacheBytes and BlockBytes stand for a node that does not report its cache. Defaults 128 MiB
	// and 4 KiB (the engine's).
	CacheBytes, BlockBytes uint64
}

func (c UsageBalanceConfig) withDefaults() UsageBalanceConfig {
	if c.Model.Version == 0 {
		c.Model = usage.Default
	}
	def := func(v *float64, d float64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.AskAbove, 0.8)
	if c.WithdrawBelow <= 0 || c.WithdrawBelow > c.AskAbove {
		c.WithdrawBelow = c.AskAbove - 0.1
		if c.WithdrawBelow <= 0 {
			c.WithdrawBelow = c.AskAbove / 2
		}
	}
	def(&c.StartGap, 0.20)
	def(&c.StopGap, 0.10)
	def(&c.MinGain, 0.03)
	if c.Cooldown <= 0 {
		c.Cooldown = 10 * time.Minute
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = 128 << 20
	}
	if c.BlockBytes == 0 {
		c.BlockBytes = 4 << 10
	}
	return c
}

// UsageBalance packs ranges by predicted usage (Cruz's thesis ch. 6): a node's usage is predicted
// from the point reads, scanned blocks and writes of the ranges it serves, the reads split by the hit
// ratio Che's approximation predicts for their merged block-access histograms in its cache. When the
// gap between the most and the least used node passes StartGap it moves, from the most used node,
// the range and target (LPT order: the heaviest range alone first) that lower the larger of the two
// nodes' predicted usage most — a leadership to a node holding a voter first, else the replica with
// its leadership — until the gap falls below StopGap. It asks for a node (a note in the decision
// log) when a node stays above AskAbove and no move helps.
//
// It does not ping-pong: the start and stop gaps, a minimum gain per move, a cooldown per range,
// and one move at a time (nothing while one of its operators is pending). Off by default; when on,
// rebalance leaves its served-load dimension to it.
type UsageBalance struct {
	cfg    UsageBalanceConfig
	active bool
	moved  map[uint64]time.Time
	asking bool
	notes  []Note
	// mu guards predicted and asking for Predicted, which a metrics scrape calls while Propose runs.
	mu sync.Mutex
	// predicted is every active node's predicted usage at the last round (Predicted).
	predicted map[uint64]float64
}

// NewUsageBalance returns the usage_balance policy.
func NewUsageBalance(cfg UsageBalanceConfig) *UsageBalance {
	return &UsageBalance{cfg: cfg.withDefaults(), moved: map[uint64]time.Time{}, predicted: map[uint64]float64{}}
}

// Name implements Policy.
func (p *UsageBalance) Name() string { return NameUsageBalance }

// TakeNotes implements Noter: the asks for a node and their end.
func (p *UsageBalance) TakeNotes() []Note {
	n := p.notes
	p.notes = nil
	return n
}

// Predicted is every active node's predicted usage at the last round, and whether the policy asks
// for a node.
func (p *UsageBalance) Predicted() (map[uint64]float64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[uint64]float64, len(p.predicted))
	for k, v := range p.predicted {
		out[k] = v
	}
	return out, p.asking
}

// usageNode is a node's share of the cluster as usage_balance predicts it.
type usageNode struct {
	n      *model.Node
	led    []*model.Range
	writes float64 // writes of every range with a replica on the node (each replica applies them)
	cache  float64 // blocks
	u, hit float64
}

// Propose implements Policy.
func (p *UsageBalance) Propose(c *model.Cluster, pending []*operator.Operator) []*operator.Operator {
	for _, n := range c.Nodes {
		if n.Joining() {
			return nil // incremental_join owns the placement while a node joins
		}
	}
	for _, op := range pending {
		if op.Policy == NameJoin || op.Policy == NameUsageBalance {
			return nil // a join's placement, or our last move not yet in the heartbeats
		}
	}
	for id, at := range p.moved {
		if c.Now.Sub(at) >= p.cfg.Cooldown {
			delete(p.moved, id)
		}
	}
	v := newView(c, pending)
	defer v.release()
	nodes := p.nodes(v)
	p.mu.Lock()
	clear(p.predicted)
	for _, un := range nodes {
		p.predicted[un.n.ID] = un.u
	}
	p.mu.Unlock()
	if len(nodes) < 2 {
		p.active = false
		return nil
	}
	slices.SortStableFunc(nodes, func(a, b *usageNode) int { return cmp.Compare(b.u, a.u) })
	hi, lo := nodes[0], nodes[len(nodes)-1]
	gap := hi.u - lo.u
	switch {
	case !p.active && gap > p.cfg.StartGap:
		p.active = true
	case p.active && gap < p.cfg.StopGap:
		p.active = false
	}
	// One move a round: the next is planned on the usage the heartbeats show after it.
	var out []*operator.Operator
	if p.active {
		if op := p.plan(v, nodes); op != nil {
			out = append(out, op)
		}
	}
	p.ask(nodes, len(out) > 0)
	return out
}

// nodes predicts the usage of every active node from the ranges it serves.
func (p *UsageBalance) nodes(v *view) []*usageNode {
	by := map[uint64]*usageNode{}
	var out []*usageNode
	for _, n := range v.active() {
		cache := n.CacheBlocks()
		if cache == 0 {
			cache = float64(p.cfg.CacheBytes) / float64(p.cfg.BlockBytes)
		}
		un := &usageNode{n: n, cache: cache}
		by[n.ID] = un
		out = append(out, un)
	}
	for _, r := range v.c.Ranges {
		if r.System {
			continue
		}
		for _, rep := range r.Replicas {
			if un := by[rep.Node]; un != nil {
				un.writes += r.WriteQPS
			}
		}
		if un := by[r.Leader]; un != nil {
			un.led = append(un.led, r)
		}
	}
	for _, un := range out {
		un.u, un.hit = p.predict(un.led, un.writes, un.cache)
	}
	return out
}

// uRange is r as plan/usage sees it: its point reads, scanned blocks and block-access histogram. A
// range that reports no histogram reads its blocks uniformly.
func (p *UsageBalance) uRange(r *model.Range) (usage.Load, usage.Histogram) {
	l := usage.Load{Reads: max(r.ReadQPS-r.ScanQPS, 0)}
	var h usage.Histogram
	if a := r.Access; a != nil {
		l.Scans = a.ScanBlocksQPS
		for _, b := range a.Hist {
			h = append(h, usage.Bucket{Rate: b.Rate, Blocks: b.Blocks})
		}
	}
	if len(h) == 0 && l.Reads > 0 {
		blocks := max(float64(r.Bytes)/float64(p.cfg.BlockBytes), 1)
		h = usage.Histogram{{Rate: l.Reads / blocks, Blocks: blocks}}
	}
	return l, h
}

// predict is the usage of a node that leads led, applies writes and has cache blocks.
func (p *UsageBalance) predict(led []*model.Range, writes, cache float64) (u, hit float64) {
	total := usage.Load{Writes: writes}
	hs := make([]usage.Histogram, 0, len(led))
	for _, r := range led {
		l, h := p.uRange(r)
		total.Reads += l.Reads
		total.Scans += l.Scans
		hs = append(hs, h)
	}
	hit = usage.HitRatio(usage.Merge(hs...), cache)
	return p.cfg.Model.Predict(total, hit), hit
}

// solo is r's predicted usage alone on a node with cache blocks (the LPT order).
func (p *UsageBalance) solo(r *model.Range, cache float64) float64 {
	u, _ := p.predict([]*model.Range{r}, r.WriteQPS, cache)
	return u
}

// without is led less r.
func without(led []*model.Range, r *model.Range) []*model.Range {
	out := make([]*model.Range, 0, len(led))
	for _, x := range led {
		if x != r {
			out = append(out, x)
		}
	}
	return out
}

// move is a candidate: r's leadership (or replica, with replica set) from the most used node to to.
type move struct {
	r              *model.Range
	to             *usageNode
	replica        bool
	fromU, toU     float64 // predicted after
	fromHit, toHit float64
	gain           float64
}

// plan picks the best move off the most used node, leaderships first.
func (p *UsageBalance) plan(v *view, nodes []*usageNode) *operator.Operator {
	hi := nodes[0]
	cands := v.candidatesIn(slices.Values(hi.led), func(r *model.Range) bool {
		_, cooling := p.moved[r.ID]
		return !cooling && r.Leader == hi.n.ID
	})
	slices.SortStableFunc(cands, func(a, b *model.Range) int {
		return cmp.Compare(p.solo(b, hi.cache), p.solo(a, hi.cache))
	})
	for _, replica := range []bool{false, true} {
		var best *move
		for _, r := range cands {
			for _, to := range nodes[1:] {
				m := p.try(v, hi, to, r, replica)
				if m != nil && m.gain >= p.cfg.MinGain && (best == nil || m.gain > best.gain) {
					best = m
				}
			}
		}
		if best != nil {
			return p.operator(v, nodes, hi, best)
		}
	}
	return nil
}

// try predicts moving r's leadership (replica: its replica too) from hi to to; nil if not allowed.
func (p *UsageBalance) try(v *view, hi, to *usageNode, r *model.Range, replica bool) *move {
	if to.n.Busy() {
		return nil // never hand load to a node with a heavy background task
	}
	fromW, toW := hi.writes, to.writes
	if replica {
		if r.HasReplica(to.n.ID) || to.n.DiskFull(DefaultMaxDiskUse) || narrowsZones(v.c, r, hi.n.ID, to.n.ID) {
			return nil
		}
		fromW, toW = fromW-r.WriteQPS, toW+r.WriteQPS
	} else if !r.IsVoter(to.n.ID) {
		return nil
	}
	m := &move{r: r, to: to, replica: replica}
	m.fromU, m.fromHit = p.predict(without(hi.led, r), fromW, hi.cache)
	m.toU, m.toHit = p.predict(append(slices.Clip(to.led), r), toW, to.cache)
	m.gain = max(hi.u, to.u) - max(m.fromU, m.toU)
	return m
}

// operator turns the chosen move into an operator whose reason lists every node's predicted usage
// and whose benefit is the measured usage gap of its two nodes.
func (p *UsageBalance) operator(v *view, nodes []*usageNode, hi *usageNode, m *move) *operator.Operator {
	var b strings.Builder
	for _, un := range sortedByID(nodes) {
		fmt.Fprintf(&b, "n%d %s (hit %s), ", un.n.ID, pct(un.u), pct(un.hit))
	}
	gap := hi.u - nodes[len(nodes)-1].u
	why := fmt.Sprintf("predicted usage %sgap %s (acts above %s, stops below %s)", b.String(), pct(gap),
		pct(p.cfg.StartGap), pct(p.cfg.StopGap))
	l, _ := p.uRange(m.r)
	what := fmt.Sprintf("r%d (%.0f reads/s, %.0f scanned blocks/s, %.0f writes/s, alone %s)", m.r.ID, l.Reads, l.Scans,
		m.r.WriteQPS, pct(p.solo(m.r, hi.cache)))
	var op *operator.Operator
	if m.replica {
		op = operator.NewMoveReplica(NameUsageBalance, v.c.Now, v.c, m.r, hi.n.ID, m.to.n.ID,
			fmt.Sprintf("%s: move %s with its leadership to n%d", why, what, m.to.n.ID))
	} else {
		op = operator.NewTransferLeader(NameUsageBalance, v.c.Now, m.r, m.to.n.ID,
			fmt.Sprintf("%s: move %s's leadership to n%d", why, what, m.to.n.ID))
	}
	op.Priority = operator.PriorityLow
	op.PredictedBenefit = operator.Benefit{Metric: operator.MetricUsageGap, From: hi.n.ID, To: m.to.n.ID,
		Before: hi.n.MeasuredUsage() - m.to.n.MeasuredUsage(),
		Delta:  (m.fromU - m.toU) - (hi.u - m.to.u),
		Detail: fmt.Sprintf("predicted n%d %s→%s, n%d %s→%s; measured now n%d %s, n%d %s", hi.n.ID, pct(hi.u), pct(m.fromU),
			m.to.n.ID, pct(m.to.u), pct(m.toU), hi.n.ID, pct(hi.n.MeasuredUsage()), m.to.n.ID, pct(m.to.n.MeasuredUsage()))}
	p.moved[m.r.ID] = v.c.Now
	return op
}

// ask notes when a node's predicted usage passes AskAbove with no move to bring it down, and when
// that ends.
func (p *UsageBalance) ask(nodes []*usageNode, moving bool) {
	var over []string
	busy := false // a node at or above WithdrawBelow: an ask stands
	for _, un := range sortedByID(nodes) {
		if un.u > p.cfg.AskAbove {
			over = append(over, fmt.Sprintf("n%d %s", un.n.ID, pct(un.u)))
		}
		busy = busy || un.u >= p.cfg.WithdrawBelow
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !p.asking && len(over) > 0 && !moving:
		p.asking = true
		p.notes = append(p.notes, Note{What: fmt.Sprintf("%d nodes: one more wanted", len(nodes)), Status: StatusAsksForNode,
			Why: fmt.Sprintf("predicted usage above %s with no move that lowers it: %s", pct(p.cfg.AskAbove), strings.Join(over, ", "))})
	case p.asking && !busy:
		p.asking = false
		p.notes = append(p.notes, Note{What: fmt.Sprintf("%d nodes suffice", len(nodes)), Status: StatusNodeNoLongerNeeded,
			Why: fmt.Sprintf("every node's predicted usage is below %s", pct(p.cfg.WithdrawBelow))})
	}
}

func sortedByID(nodes []*usageNode) []*usageNode {
	out := slices.Clone(nodes)
	slices.SortFunc(out, func(a, b *usageNode) int { return cmp.Compare(a.n.ID, b.n.ID) })
	return out
}
