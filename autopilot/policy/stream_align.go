package policy

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

// NameStreamAlign is the stream alignment controller's switch.
const NameStreamAlign = "stream_align"

// StatusFollows is the status of stream_align's notes: a stream's tasks follow another policy's move.
const StatusFollows = "tasks follow"

// StreamAlignConfig configures stream_align.
type StreamAlignConfig struct {
	// MinEvents is the stream load (events a second a range's tasks apply, the mean of its recent
	// windows) below which a range is never split: a floor against splitting trickles, not a capacity.
	// What a range can absorb is judged by BacklogLatency and what its nodes can by Saturated. Default 500.
	MinEvents float64
	// BacklogLatency: a range whose leader served its requests (the tasks' state reads and commits among
	// them) at a p90 of at least this over the recent windows is backlogged — its events wait. An
	// unloaded commit takes a few milliseconds here. Default 20ms.
	BacklogLatency time.Duration
	// Saturated is the utilization (model.Node.Utilization: CPU over its cores, or disk busy) at which a
	// node can absorb no more: a split helps only if the leader or another node is below it, since both
	// halves stay at the leader until a half moves. Default 0.85; above 1 no node is ever saturated.
	Saturated float64
	// HotFor is how long a range must stay above MinEvents and backlogged before it is split. Default 5s.
	HotFor time.Duration
	// MinSamples is how many sampled events the recent windows must hold before a split. Default 256.
	MinSamples uint64
	// RecentWindows is how many recent windows of sampled event keys, of rates and of latencies are kept;
	// the range's rate is their rates' mean, its latency their requests' p90. Default 5.
	RecentWindows int
	// MaxPredictedImbalance: no split if the samples put the halves' events further apart than this
	// (one hot key cannot be split). Default 0.25.
	MaxPredictedImbalance float64
}

func (c StreamAlignConfig) withDefaults() StreamAlignConfig {
	if c.MinEvents <= 0 {
		c.MinEvents = 500
	}
	if c.BacklogLatency <= 0 {
		c.BacklogLatency = 20 * time.Millisecond
	}
	if c.Saturated <= 0 {
		c.Saturated = 0.85
	}
	if c.HotFor <= 0 {
		c.HotFor = 5 * time.Second
	}
	if c.MinSamples == 0 {
		c.MinSamples = 256
	}
	if c.RecentWindows <= 0 {
		c.RecentWindows = 5
	}
	if c.MaxPredictedImbalance <= 0 {
		c.MaxPredictedImbalance = 0.25
	}
	return c
}

// StatusAbstains is the status of stream_align's note on a backlogged range it does not split: no node
// has the capacity to absorb a half, so a split would add a raft group's work and no throughput.
const StatusAbstains = "no split"

// StreamAlign is the alignment controller of stream tasks with ranges (Papaioannou's Amoeba, ch. 5
// §5.4.4–5.4.5). In Shoal a job's task for a range runs at the range's leader because the producer
// routes each event there (node/streamhost), so tasks follow every split, merge and leadership move
// without being moved; what the controller adds is coordinated elasticity:
//
//   - The job's scale-out: a second task for a range helps only when the range cannot absorb its events
//     and some node can absorb more. So a range is split when, for HotFor, its tasks apply at least
//     MinEvents a second, its leader serves its requests at a p90 of BacklogLatency or more (its events
//     wait), and a node has spare capacity: the leader itself (a second raft group beside the first) or
//     another active node below Saturated (where rebalance moves a half). The split is at the median
//     key of its recent events (from the leader's sample of event keys, as load_split does with
//     requests), so the stream's load decides where the second task starts. When every node is
//     saturated it abstains and says so in the decision log (StatusAbstains): more ranges there add
//     raft groups' work and no capacity. The threshold is what the cluster can absorb, not a rate.
//   - The store's scale-out: when a node joins, incremental_join moves replicas to it, hottest range
//     first, a replica then its leadership (replica-then-promote), and rebalance evens out the
//     leaderships after; the range's task moves with the leadership. The controller does not
//     duplicate those moves: it notes in the decision log each operator that carries a stream range's
//     leadership (StatusFollows), so the tasks' move is accounted for.
//
// Its splits are remembered in the SplitMemory shared with load_split and merge, so merge leaves
// them alone for a while. It never proposes for a range that has an operator pending.
type StreamAlign struct {
	cfg    StreamAlignConfig
	splits *SplitMemory
	ranges map[uint64]*streamRange
	noted  map[*operator.Operator]bool
	notes  []Note
}

type streamRange struct {
	start, end []byte
	hotSince   time.Time
	abstained  bool // noted StatusAbstains since it became hot
	lastSample time.Time
	lastLat    time.Time
	recent     []*model.KeySample
	rates      []float64 // the range's events/s in recent rounds
	lats       []*model.LatencyHistogram
}

// rate is the mean of the recent rounds' events/s.
func (st *streamRange) rate() float64 {
	var sum float64
	for _, q := range st.rates {
		sum += q
	}
	return sum / float64(max(len(st.rates), 1))
}

// p90 is the 90th percentile of the requests the leader served on the range in the recent windows (0:
// none reported).
func (st *streamRange) p90() time.Duration {
	var c model.LatencyCounts
	for _, h := range st.lats {
		c.Add(h)
	}
	return c.Quantile(0.9)
}

// observe adds r's report of this round to the recent windows (a sample or histogram already seen is
// not added twice).
func (st *streamRange) observe(r *model.Range, windows int) {
	keep := func(n int) int { return max(n-windows, 0) }
	if s := r.StreamSample; s != nil && s.At.After(st.lastSample) {
		st.lastSample = s.At
		st.recent = append(st.recent, s)
		st.recent = st.recent[keep(len(st.recent)):]
	}
	if h := r.Latency; h != nil && h.At.After(st.lastLat) {
		st.lastLat = h.At
		st.lats = append(st.lats, h)
		st.lats = st.lats[keep(len(st.lats)):]
	}
	// Events come in batches, so one window's rate swings by half or more: the range is hot when the
	// mean of its recent windows' rates is.
	st.rates = append(st.rates, r.StreamQPS)
	st.rates = st.rates[keep(len(st.rates)):]
}

// NewStreamAlign returns the stream_align policy remembering its splits in splits (may be nil).
func NewStreamAlign(cfg StreamAlignConfig, splits *SplitMemory) *StreamAlign {
	if splits == nil {
		splits = NewSplitMemory()
	}
	return &StreamAlign{cfg: cfg.withDefaults(), splits: splits, ranges: map[uint64]*streamRange{},
		noted: map[*operator.Operator]bool{}}
}

// Name implements Policy.
func (p *StreamAlign) Name() string { return NameStreamAlign }

// TakeNotes implements Noter.
func (p *StreamAlign) TakeNotes() []Note {
	out := p.notes
	p.notes = nil
	return out
}

// Propose implements Policy.
func (p *StreamAlign) Propose(c *model.Cluster, pending []*operator.Operator) []*operator.Operator {
	v := newView(c, pending)
	defer v.release()
	p.noteMoves(c, pending)
	seen := map[uint64]bool{}
	var out []*operator.Operator
	for _, r := range c.Ranges {
		st := p.ranges[r.ID]
		if r.System || (st == nil && r.StreamQPS == 0) {
			continue
		}
		seen[r.ID] = true
		if st == nil || !bytes.Equal(st.start, r.StartKey) || !bytes.Equal(st.end, r.EndKey) {
			st = &streamRange{start: r.StartKey, end: r.EndKey} // new, or split or merged: start over
			p.ranges[r.ID] = st
		}
		st.observe(r, p.cfg.RecentWindows)
		if st.rate() < p.cfg.MinEvents || st.p90() < p.cfg.BacklogLatency {
			// A trickle, or a range that absorbs its events: a second task would not help.
			st.hotSince, st.abstained = time.Time{}, false
			if st.rate() == 0 && len(st.rates) == p.cfg.RecentWindows {
				delete(p.ranges, r.ID) // its stream has stopped
			}
			continue
		}
		if st.hotSince.IsZero() {
			st.hotSince = c.Now
		}
		if v.busy[r.ID] || c.Now.Sub(st.hotSince) < p.cfg.HotFor {
			continue
		}
		to, why := p.capacity(c, r)
		if to == 0 {
			p.abstain(c, r, st, why)
			continue
		}
		if op := p.split(c, r, st, why); op != nil {
			p.splits.Remember(op.Steps[0].(operator.Split).Key, c.Now)
			delete(p.ranges, r.ID)
			v.add(op)
			out = append(out, op)
		}
	}
	for id := range p.ranges {
		if !seen[id] {
			delete(p.ranges, id)
		}
	}
	return out
}

// capacity names a node that can absorb a half of r's events — r's leader when it is below Saturated,
// else the least utilized other active node below it — and says why; 0 when every node is saturated.
func (p *StreamAlign) capacity(c *model.Cluster, r *model.Range) (uint64, string) {
	lead := c.Node(r.Leader)
	if lead == nil {
		return 0, fmt.Sprintf("its leader n%d is unknown", r.Leader)
	}
	if u := lead.Utilization(); u < p.cfg.Saturated {
		return lead.ID, fmt.Sprintf("its leader n%d has spare capacity (%s busy, saturated at %s): the second task "+
			"runs beside the first", lead.ID, pct(u), pct(p.cfg.Saturated))
	}
	var best *model.Node
	for _, n := range c.Nodes {
		if n.ID == lead.ID || !n.Active() || n.Utilization() >= p.cfg.Saturated {
			continue
		}
		if best == nil || n.Utilization() < best.Utilization() {
			best = n
		}
	}
	if best == nil {
		return 0, fmt.Sprintf("its leader n%d is saturated (%s busy, saturated at %s) and so is every other node",
			lead.ID, pct(lead.Utilization()), pct(p.cfg.Saturated))
	}
	return best.ID, fmt.Sprintf("its leader n%d is saturated (%s busy) but n%d has spare capacity (%s busy): "+
		"rebalance can move a half there", lead.ID, pct(lead.Utilization()), best.ID, pct(best.Utilization()))
}

// abstain notes, once while r stays hot, that r is backlogged but no node can absorb a half.
func (p *StreamAlign) abstain(c *model.Cluster, r *model.Range, st *streamRange, why string) {
	if st.abstained {
		return
	}
	st.abstained = true
	p.notes = append(p.notes, Note{What: fmt.Sprintf("r%d's stream tasks are backlogged (%s events/s, p90 %s) but not split",
		r.ID, fmtRate(st.rate()), fmtMs(st.p90())), Status: StatusAbstains, Why: fmt.Sprintf(
		"%s for %s; %s: a split would add a raft group's work and no capacity", backlogged(st, p.cfg),
		roundDur(c.Now.Sub(st.hotSince)), why)})
}

// backlogged describes st's load against the thresholds.
func backlogged(st *streamRange, cfg StreamAlignConfig) string {
	return fmt.Sprintf("%s events/s (at least %s) served at a p90 of %s (backlogged from %s)", fmtRate(st.rate()),
		fmtRate(cfg.MinEvents), fmtMs(st.p90()), fmtMs(cfg.BacklogLatency))
}

// split proposes r's split at the median key of its recent stream events, or nil when the samples are
// too few or the median cannot halve the events (a hot key). why says which node has the capacity.
func (p *StreamAlign) split(c *model.Cluster, r *model.Range, st *streamRange, why string) *operator.Operator {
	var size uint64
	for _, s := range st.recent {
		size += s.Size()
	}
	if size < p.cfg.MinSamples {
		return nil
	}
	// Events come in whole keys: the median key goes to the right half, or (split after it, at the next
	// sampled key) to the left; whichever halves the events better.
	var key []byte
	left := 0.0
	for _, k := range medianKeys(st.recent, size) {
		k = roundSplitKey(k, st.recent)
		if bytes.Compare(k, r.StartKey) <= 0 || !r.ContainsKey(k) {
			continue
		}
		if l := fractionBelow(st.recent, k); key == nil || operator.Imbalance(l, 1-l) < operator.Imbalance(left, 1-left) {
			key, left = k, l
		}
	}
	if key == nil || operator.Imbalance(left, 1-left) > p.cfg.MaxPredictedImbalance {
		return nil
	}
	q := st.rate()
	lq, rq := q*left, q*(1-left)
	op := operator.NewSplit(NameStreamAlign, c.Now, r, key, fmt.Sprintf(
		"r%d's stream tasks applied %s for %s, and %s; split at the median of %d sampled "+
			"events' keys, %s (%s of the events left of it): a second task starts there, at the same leader "+
			"until rebalance moves a half", r.ID, backlogged(st, p.cfg), roundDur(c.Now.Sub(st.hotSince)), why,
		size, model.FormatKey(key), pct(left)))
	op.PredictedBenefit = operator.Benefit{Metric: operator.MetricSpanMaxStream, Span: r.Span(), Before: q,
		Delta: math.Max(lq, rq) - q, Detail: fmt.Sprintf("left ≈ %s events/s, right ≈ %s", fmtRate(lq), fmtRate(rq)),
		Start: r.StartKey, End: r.EndKey, Key: key}
	return op
}

// medianKeys are the key of the size/2-th sampled event over samples, in key order, and the next
// sampled key after it (if any).
func medianKeys(samples []*model.KeySample, size uint64) [][]byte {
	var all []model.KeyCount
	for _, s := range samples {
		all = append(all, s.Keys...)
	}
	slices.SortFunc(all, func(a, b model.KeyCount) int { return bytes.Compare(a.Key, b.Key) })
	half, n := size/2, uint64(0)
	for i, kc := range all {
		if n += uint64(kc.Count); n > half {
			for _, next := range all[i+1:] {
				if !bytes.Equal(next.Key, kc.Key) {
					return [][]byte{kc.Key, next.Key}
				}
			}
			return [][]byte{kc.Key}
		}
	}
	return nil
}

// noteMoves notes, once per operator, each pending operator of another policy that hands the
// leadership of a range with stream load to another node (a join's, rebalance's, a drain's): the
// range's tasks move with that leadership, since events are routed to the leader. A move that leaves
// the leadership where it is moves no task and is not noted.
func (p *StreamAlign) noteMoves(c *model.Cluster, pending []*operator.Operator) {
	live := make(map[*operator.Operator]bool, len(pending))
	for _, op := range pending {
		live[op] = true
		if op.Policy == NameStreamAlign || p.noted[op] {
			continue
		}
		r := c.Range(op.RangeID)
		if r == nil || r.StreamQPS == 0 {
			continue
		}
		var to uint64
		for n, d := range op.Influence {
			if d.Leaders > 0 {
				to = n
			}
		}
		if to == 0 {
			continue
		}
		p.noted[op] = true
		how := "its leadership moves to a replica already there"
		if op.Kind != operator.KindTransferLeader {
			how = "a replica is added there first, then the leadership moves"
		}
		p.notes = append(p.notes, Note{What: fmt.Sprintf("r%d's stream tasks (%s events/s) move to n%d with its leadership",
			r.ID, fmtRate(r.StreamQPS), to), Status: StatusFollows, Why: fmt.Sprintf(
			"%s: %s (%s); events are routed to the leader, so the tasks start at n%d when the leadership does",
			op.Policy, how, op.Reason, to)})
	}
	for op := range p.noted {
		if !live[op] {
			delete(p.noted, op)
		}
	}
}

// fmtRate formats an events-per-second rate.
func fmtRate(q float64) string {
	return fmt.Sprintf("%.0f", q)
}

// fmtMs formats a latency in milliseconds.
func fmtMs(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}
