package policy

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
	"github.com/shoaldb/shoal/plan/hotspot"
)

// HotspotOffloadConfig configures hotspot_offload.
type HotspotOffloadConfig struct {
	// BreakEven is the break-even used until one is fitted from measured hot spots (and whenever
	// the fit fails): a hot spot predicted to last longer is offloaded. Default 5 s, the thesis's
	// figure at 95/5 on 8 nodes.
	BreakEven time.Duration
	// Sustain is how many rounds in a row a node must be in skewed overload. Default 3.
	Sustain int
	// SLO is the p99 latency the penalty counts from: P = Σ max(0, p99 − SLO) over 500 ms samples.
	// Default 50 ms.
	SLO time.Duration
	// Explore is how many of the first hot spots are measured alternately without and with the
	// offload (without first), to fit the break-even from. Default 4: two of each, the fewest a fit
	// of two lines takes.
	Explore int
}

func (c HotspotOffloadConfig) withDefaults() HotspotOffloadConfig {
	if c.BreakEven <= 0 {
		c.BreakEven = 5 * time.Second
	}
	if c.Sustain <= 0 {
		c.Sustain = 3
	}
	if c.SLO <= 0 {
		c.SLO = 50 * time.Millisecond
	}
	if c.Explore <= 0 {
		c.Explore = 4
	}
	return c
}

// HotspotOffload relieves a node in skewed overload (Bekas, chapters 3 and 5; plan/hotspot): its
// utilization (the busier of CPU and disk) at least 80 % and 1.3× the cluster's mean, for Sustain
// rounds, while it serves at least 1.3× the mean node's user requests (a node busy with other
// work — compactions, the meta range's lookups and the autopilot's own reads of it — is no hot
// spot a leadership could relieve). Each hot spot is an episode: the ranges the node led with load when it was detected, its
// penalty P = Σ max(0, p99 − SLO) over 500 ms of the cluster's requests while it lasts, and its end
// when those ranges' load falls below half of what it was (or, when it was left alone, when the
// node is no longer hot). The first Explore episodes are measured
// alternately without and with the offload; from then on the break-even is fitted online from the
// last measured episodes (hotspot.Fit, at most 5 points) and a hot spot is offloaded once its
// predicted duration (hotspot.PredictDuration, from the past episodes) exceeds it. Offloading moves
// its busiest led range's leadership to the least busy voter (never out of the range's preferred
// zone); when no voter is cooler and the hot spot is predicted to last twice the break-even, the
// busiest replica moves to the least busy node. One operator per hot node a round. Every
// abstention and every episode's measured penalty is a note in the decision log.
type HotspotOffload struct {
	cfg HotspotOffloadConfig
	// mu guards mode and sloSet: SetMode and SetSLO come from another goroutine than Propose's.
	mu     sync.Mutex
	mode   HotspotMode
	sloSet time.Duration

	det      hotspot.Detector
	episodes map[uint64]*episode // by hot node
	past     []float64           // durations of the episodes that ended, seconds (the last 64)
	points   []hotspot.Point     // their penalties, without or with the offload (the last 16)
	explored int                 // episodes measured while exploring
	notes    []Note
}

// episode is one hot spot on one node.
type episode struct {
	since    time.Time
	last     time.Time // the last penalty sample
	ranges   []uint64  // the node's led ranges with load at detection
	load     float64   // their load at detection, ops/s
	cool     int       // rounds in a row their load was below half of it
	calm     int       // rounds in a row the node, left alone, was not hot
	explore  bool      // measured for the fit: act is fixed
	act      bool      // offload (decided, or fixed while exploring)
	acted    bool      // an operator was proposed
	noted    bool      // the abstention is in the decision log
	penalty  float64   // Σ max(0, p99 − SLO) in ms, per 500 ms
	worstP99 time.Duration
}

// HotspotMode is how hotspot_offload decides. An experiment measures the penalty with and without
// the offload on the same hot spots by switching between ModeAct and ModeObserve.
type HotspotMode string

// Modes of hotspot_offload.
const (
	ModeAuto    HotspotMode = "auto"    // explore, then act on the hot spots predicted to outlast the break-even
	ModeAct     HotspotMode = "act"     // offload every hot spot (each measured with the offload)
	ModeObserve HotspotMode = "observe" // offload none (each measured without)
)

// SetMode sets how the policy decides from the next hot spot on (ModeAuto by default).
func (p *HotspotOffload) SetMode(m HotspotMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = m
}

// SetSLO sets the latency the penalty counts from (an experiment sets it from the p99 it
// measured at rest); 0 restores the configured one.
func (p *HotspotOffload) SetSLO(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sloSet = d
}

func (p *HotspotOffload) slo() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sloSet > 0 {
		return p.sloSet
	}
	return p.cfg.SLO
}

func (p *HotspotOffload) currentMode() HotspotMode {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == "" {
		return ModeAuto
	}
	return p.mode
}

// NewHotspotOffload returns the hotspot_offload policy.
func NewHotspotOffload(cfg HotspotOffloadConfig) *HotspotOffload {
	cfg = cfg.withDefaults()
	return &HotspotOffload{cfg: cfg, det: hotspot.Detector{Sustain: cfg.Sustain}, episodes: map[uint64]*episode{}}
}

// Name implements Policy.
func (p *HotspotOffload) Name() string { return NameHotspot }

// TakeNotes implements Noter.
func (p *HotspotOffload) TakeNotes() []Note {
	n := p.notes
	p.notes = nil
	return n
}

// Seed adds measured hot spots, as if the policy had measured them (tests, and a node that takes
// over the autopilot with a record of them).
func (p *HotspotOffload) Seed(points []hotspot.Point) {
	for _, pt := range points {
		p.record(pt)
	}
	p.explored = max(p.explored, min(len(p.points), p.cfg.Explore))
}

// BreakEven is the break-even in force: fitted from the measured hot spots, else the configured one.
func (p *HotspotOffload) BreakEven() (seconds float64, fit *hotspot.Breakeven) {
	if b, err := hotspot.Fit(p.points); err == nil {
		return b.CrossS, &b
	}
	return p.cfg.BreakEven.Seconds(), nil
}

// Propose implements Policy.
func (p *HotspotOffload) Propose(c *model.Cluster, pending []*operator.Operator) []*operator.Operator {
	util := map[uint64]float64{}
	for _, n := range c.Nodes {
		if n.Active() {
			util[n.ID] = n.Utilization()
		}
	}
	hot := p.det.Observe(util)
	served := userLoad(c)
	meanQPS := 0.0
	for id := range util {
		meanQPS += served[id]
	}
	meanQPS /= float64(max(len(util), 1))
	p99 := clusterP99(c)
	p.measure(c, p99)
	v := newView(c, pending)
	defer v.release()
	var ops []*operator.Operator
	for _, id := range hot {
		e := p.episodes[id]
		if e == nil {
			if p.moved(c, id) {
				continue // the hot spot of another episode, moved here by its offload: not a new one
			}
			if served[id] == 0 || served[id] < hotspot.MinSkew*meanQPS {
				continue // busy, but not with the user requests it serves: no leadership would relieve it
			}
			e = p.begin(c, id)
		}
		if op := p.decide(c, v, util, id, e); op != nil {
			ops = append(ops, op)
			v.add(op)
		}
	}
	return ops
}

// begin opens an episode on node: its led ranges with load, and whether it is measured for the fit.
func (p *HotspotOffload) begin(c *model.Cluster, node uint64) *episode {
	e := &episode{since: c.Now, last: c.Now}
	for r := range c.LedBy(node) {
		if r.Leader == node && !r.System && r.QPS() > 0 {
			e.ranges = append(e.ranges, r.ID)
			e.load += r.QPS()
		}
	}
	// Hot spots measured in a fixed mode count toward the exploration: they are its measurements.
	switch p.currentMode() {
	case ModeAct:
		e.explore, e.act = true, true
		p.explored = min(p.explored+1, p.cfg.Explore)
	case ModeObserve:
		e.explore = true
		p.explored = min(p.explored+1, p.cfg.Explore)
	default:
		if p.explored < p.cfg.Explore {
			e.explore, e.act = true, p.explored%2 == 1
			p.explored++
		}
	}
	p.episodes[node] = e
	return e
}

// moved reports whether most of node's load is ranges of other nodes' open episodes: the hot spot
// moved here with them, and is theirs. A node hot with load of its own starts its own episode.
func (p *HotspotOffload) moved(c *model.Cluster, node uint64) bool {
	n := c.Node(node)
	if n == nil {
		return false
	}
	theirs := 0.0
	for _, e := range p.episodes {
		for _, id := range e.ranges {
			if r := c.Range(id); r != nil && r.Leader == node {
				theirs += r.QPS()
			}
		}
	}
	return theirs > 0 && theirs >= n.QPS/2
}

// measure adds this round's penalty to every open episode and closes those whose load has gone.
func (p *HotspotOffload) measure(c *model.Cluster, p99 time.Duration) {
	excess := max(0, float64(p99-p.slo())/float64(time.Millisecond))
	for node, e := range p.episodes {
		dt := min(c.Now.Sub(e.last), 5*time.Second)
		e.last = c.Now
		e.penalty += excess * dt.Seconds() / 0.5
		e.worstP99 = max(e.worstP99, p99)
		load := 0.0
		for _, id := range e.ranges {
			if r := c.Range(id); r != nil {
				load += r.QPS()
			}
		}
		if load < e.load/2 || e.load == 0 && !p.det.Hot(node) {
			e.cool++
		} else {
			e.cool = 0
		}
		// A node left alone that is no longer hot has no hot spot left, whatever its ranges' load
		// (an alarm its load did not bear out); one offloaded is cooler because of it, and its hot
		// spot lasts as long as the load on the ranges it led.
		if !e.acted && !p.det.Hot(node) {
			e.calm++
		} else {
			e.calm = 0
		}
		if e.cool >= 2 || e.calm >= p.cfg.Sustain {
			p.end(c, node, e)
		}
	}
}

// end closes an episode and records its penalty as a measured point.
func (p *HotspotOffload) end(c *model.Cluster, node uint64, e *episode) {
	delete(p.episodes, node)
	d := c.Now.Sub(e.since).Seconds()
	pt := hotspot.Point{DurationS: d, On: math.NaN(), Off: math.NaN()}
	how := "without the offload"
	if e.acted {
		pt.On, how = e.penalty, "with the offload"
	} else {
		pt.Off = e.penalty
	}
	p.record(pt)
	be, fit := p.BreakEven()
	fitted := fmt.Sprintf("break-even %.1fs (configured: %d measured, fewer than two of each kind at two durations)", be, len(p.points))
	if fit != nil {
		fitted = fmt.Sprintf("break-even %s fitted from %d points (penalty without ≈ %.0f + %.0f·D, with ≈ %.0f + %.0f·D)",
			fmtSeconds(be), fit.Points, fit.OffA, fit.OffB, fit.OnA, fit.OnB)
	}
	p.notes = append(p.notes, Note{What: fmt.Sprintf("hot spot on n%d over", node), Status: StatusMeasured,
		Why: fmt.Sprintf("lasted %.1fs %s: penalty %.0f ms (SLO %s, worst p99 %s); %s", d, how, e.penalty,
			p.slo(), e.worstP99.Round(time.Millisecond), fitted)})
}

// record keeps a measured point and its duration.
func (p *HotspotOffload) record(pt hotspot.Point) {
	p.points = append(p.points, pt)
	if len(p.points) > 16 {
		p.points = p.points[len(p.points)-16:]
	}
	p.past = append(p.past, pt.DurationS)
	if len(p.past) > 64 {
		p.past = p.past[len(p.past)-64:]
	}
}

// Statuses of hotspot_offload's notes.
const (
	StatusMeasured  = "measured"
	StatusAbstained = "abstained"
)

// exploring says why an episode's mode is fixed.
func (p *HotspotOffload) exploring() string {
	if m := p.currentMode(); m != ModeAuto {
		return "mode " + string(m)
	}
	return fmt.Sprintf("exploring (%d of %d)", p.explored, p.cfg.Explore)
}

// decide offloads an episode's node when its mode says so, or notes that it abstains.
func (p *HotspotOffload) decide(c *model.Cluster, v *view, util map[uint64]float64, node uint64, e *episode) *operator.Operator {
	age := c.Now.Sub(e.since).Seconds()
	be, fit := p.BreakEven()
	predicted := hotspot.PredictDuration(age, p.past)
	var why string
	// A fixed mode holds from the round it is set, for the episodes already open too.
	switch p.currentMode() {
	case ModeAct:
		e.explore, e.act = true, true
	case ModeObserve:
		e.explore, e.act = true, false
	}
	switch {
	case e.explore && !e.act:
		if !e.noted {
			e.noted = true
			p.notes = append(p.notes, Note{What: fmt.Sprintf("hot spot on n%d left alone", node), Status: StatusAbstained,
				Why: fmt.Sprintf("%s: measuring its penalty without the offload", p.exploring())})
		}
		return nil
	case e.explore:
		why = fmt.Sprintf("%s: measuring the penalty with the offload", p.exploring())
	case predicted <= be:
		if !e.noted {
			e.noted = true
			why := fmt.Sprintf("at %.0fs predicted to last %s ≤ break-even %s: an offload would cost more than it saves",
				age, fmtSeconds(predicted), fmtSeconds(be))
			if math.IsInf(be, 1) {
				why = fmt.Sprintf("at %.0fs predicted to last %s; the measured hot spots fit no saving at any duration", age, fmtSeconds(predicted))
			}
			p.notes = append(p.notes, Note{What: fmt.Sprintf("hot spot on n%d left alone", node), Status: StatusAbstained, Why: why})
		}
		return nil
	default:
		e.act = true
		why = fmt.Sprintf("predicted to last %s > break-even %s", fmtSeconds(predicted), fmtSeconds(be))
		if fit != nil {
			without, with := fit.OffA+fit.OffB*predicted, fit.OnA+fit.OnB*predicted
			why += fmt.Sprintf(", saves a predicted penalty of %.0f ms (%.0f without, %.0f with)", without-with, without, with)
		}
	}
	why = fmt.Sprintf("n%d at %.0f%% busy (cluster mean %.0f%%, p99 %s) for %.0fs, %s",
		node, 100*util[node], 100*mean(util), nodeP99(c, node).Round(time.Millisecond), age, why)
	op := p.offload(c, v, util, node, max(predicted, age) >= 2*be, why)
	if op != nil {
		e.acted = true
	}
	return op
}

// offload moves load off node: a leadership to a cooler voter, else (when long is set: a hot spot
// predicted to last twice the break-even) a replica.
func (p *HotspotOffload) offload(c *model.Cluster, v *view, util map[uint64]float64, node uint64, long bool, why string) *operator.Operator {
	led := v.candidatesIn(c.LedBy(node), func(r *model.Range) bool { return r.Leader == node && r.QPS() > 0 })
	slices.SortStableFunc(led, func(a, b *model.Range) int { return cmp.Compare(b.QPS(), a.QPS()) })
	for _, r := range led {
		var voters []uint64
		for _, id := range r.Voters() {
			if n := c.Node(id); n != nil && !n.Busy() && !c.LeadsOutsideZone(r, node, id) {
				voters = append(voters, id)
			}
		}
		to := coolest(voters, util, node)
		// Only a move that narrows the gap: one range carrying the whole load would just move the
		// hot spot (splitting it is load_split's work).
		if to != 0 && util[to] < util[node] && r.QPS() < v.at(node).qps-v.at(to).qps {
			op := operator.NewTransferLeader(NameHotspot, c.Now, r, to,
				fmt.Sprintf("%s: move r%d's leadership (%.0f ops/s) to n%d (%.0f%% busy)", why, r.ID, r.QPS(), to, 100*util[to]))
			op.PredictedBenefit = operator.Benefit{Metric: operator.MetricQPSGap, From: node, To: to,
				Before: v.at(node).qps - v.at(to).qps, Delta: -2 * r.QPS()}
			return op
		}
	}
	if !long {
		return nil
	}
	// The replicas whose load the node serves: those of the ranges it leads (the move takes the
	// leadership along). A follower's replica costs it little, and moving it relieves nothing. The
	// move, too, must narrow the load gap: the range the node is left with after its transfers, or
	// one that carries all its load, would only make its target the hot node (a disk's utilization
	// lags the leaderships just given to it, so a target that looks cool may already be loaded).
	for _, r := range led {
		var others []uint64
		for id := range util {
			if to := v.at(id); !r.HasReplica(id) && to != nil && r.QPS() < v.at(node).qps-to.qps {
				others = append(others, id)
			}
		}
		slices.Sort(others)
		if to := coolest(others, util, node); to != 0 && util[to] < util[node] && !narrowsZones(c, r, node, to) {
			return operator.NewMoveReplica(NameHotspot, c.Now, c, r, node, to,
				fmt.Sprintf("%s, and no cooler voter: move r%d's replica (%.0f ops/s) to n%d (%.0f%% busy)", why, r.ID, r.QPS(), to, 100*util[to]))
		}
	}
	return nil
}

// userLoad is each node's requests per second at the user ranges it leads. The system ranges'
// load (the meta range's lookups, the autopilot's own reads of it every round) is left out: it is
// no hot spot, and offload never moves a system range, so a node busy with it would start an
// episode that nothing relieves and that would count the cluster's latency as its penalty.
func userLoad(c *model.Cluster) map[uint64]float64 {
	out := map[uint64]float64{}
	for _, r := range c.Ranges {
		if !r.System && r.Leader != 0 {
			out[r.Leader] += r.QPS()
		}
	}
	return out
}

// clusterP99 is the p99 of the requests every range's leader reported in its last heartbeat.
func clusterP99(c *model.Cluster) time.Duration {
	var all model.LatencyCounts
	for _, r := range c.Ranges {
		if !r.System {
			all.Add(r.Latency)
		}
	}
	return all.Quantile(0.99)
}

// nodeP99 is the p99 of the requests of the ranges node leads, from their last heartbeats.
func nodeP99(c *model.Cluster, node uint64) time.Duration {
	var all model.LatencyCounts
	for r := range c.LedBy(node) {
		if r.Leader == node {
			all.Add(r.Latency)
		}
	}
	return all.Quantile(0.99)
}

// fmtSeconds is "6.3s", or "never" for an infinite break-even.
func fmtSeconds(s float64) string {
	if math.IsInf(s, 1) {
		return "never"
	}
	return fmt.Sprintf("%.1fs", s)
}

// coolest is the least busy of nodes other than not, among the active ones (0 if none).
func coolest(nodes []uint64, util map[uint64]float64, not uint64) uint64 {
	var best uint64
	for _, n := range nodes {
		u, ok := util[n]
		if !ok || n == not {
			continue
		}
		if best == 0 || u < util[best] {
			best = n
		}
	}
	return best
}

func mean(util map[uint64]float64) float64 {
	if len(util) == 0 {
		return 0
	}
	s := 0.0
	for _, u := range util {
		s += u
	}
	return s / float64(len(util))
}
