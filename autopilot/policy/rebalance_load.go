package policy

import (
	"math"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

// loadMemory is what rebalance remembers of served load between rounds, so that it balances load, not
// one heartbeat's noise, and does not chase the effect of its own moves.
//
// A range's QPS in the model is one heartbeat's count (a second). Under closed-loop clients the count
// swings by tens of percent from second to second, and a node whose disk or CPU is saturated serves
// fewer requests exactly because it is busy: acting on raw figures moved leaderships back and forth
// (in an experiment with every range offered the same rate, one range went between the same two nodes
// three times). Rates are therefore smoothed (an exponential average with time constant tau), a range
// whose leadership rebalance moved for load, or another policy placed, stays put for a cooldown, and a node whose disk is
// saturated is no target for load however few requests it serves.
type loadMemory struct {
	tau      time.Duration
	cooldown time.Duration
	at       time.Time
	seen     *model.Cluster           // the snapshot of the last update (ChangedSince)
	rate     map[uint64]smoothed      // range → its smoothed QPS
	movedAt  map[uint64]time.Time     // range → when rebalance last moved its leadership for load
	nodeRate map[uint64]*smoothedNode // node → the ranges it leads, summed
}

// smoothed is a range's exponential average as of t0 (val) and the rate it has reported since (q):
// while q holds, the average at t is q + (val − q)·e^(−(t−t0)/tau), so a range that reported nothing
// new costs nothing a round. At 100 000 ranges, folding every range in each round was most of a
// simulated hour's CPU.
type smoothed struct {
	val, q float64
	t0     time.Time
	leader uint64
}

// smoothedNode is the sum of its led ranges' q and of their deviations val − q as of the last update:
// the node's smoothed rate is q + dev, and dev decays by e^(−dt/tau) a round.
type smoothedNode struct{ q, dev float64 }

func newLoadMemory(tau, cooldown time.Duration) *loadMemory {
	return &loadMemory{tau: tau, cooldown: cooldown, rate: map[uint64]smoothed{},
		movedAt: map[uint64]time.Time{}, nodeRate: map[uint64]*smoothedNode{}}
}

func (m *loadMemory) decay(d time.Duration) float64 { return math.Exp(-float64(d) / float64(m.tau)) }

// value is s's average at t.
func (m *loadMemory) value(s smoothed, t time.Time) float64 {
	return s.q + (s.val-s.q)*m.decay(t.Sub(s.t0))
}

// update folds the cluster's current rates in. Time not moving forward, or a gap of many time
// constants, starts over from the current figures (a new cluster in a test, an autopilot that just
// took over). A range's new rate counts from the previous update on (the average over the last
// interval steps towards it by 1 − e^(−dt/tau)); only the ranges that changed since the last
// snapshot seen are looked at, when the model can tell which.
func (m *loadMemory) update(c *model.Cluster) {
	prev := m.at
	dt := c.Now.Sub(prev)
	fresh := prev.IsZero() || dt <= 0 || dt > 10*m.tau
	m.at = c.Now
	changed, known := c.ChangedSince(m.seen)
	m.seen = c
	if fresh || !known || len(m.rate) != len(c.Ranges) {
		if fresh {
			clear(m.rate)
			clear(m.movedAt)
		}
		m.refold(c, prev, fresh)
	} else {
		k := m.decay(dt)
		for _, n := range m.nodeRate {
			n.dev *= k
		}
		for _, i := range changed {
			m.fold(c.Ranges[i], prev, k, true)
		}
	}
	for id, t := range m.movedAt {
		if c.Now.Sub(t) >= m.cooldown || c.Range(id) == nil {
			delete(m.movedAt, id)
		}
	}
}

// fold takes r's rate as of now (the node sums already decayed by k): its average follows the rate
// it reported until prev, then this one. unsum takes its last figure out of its leader's sum first
// (not when the sums are being built again).
func (m *loadMemory) fold(r *model.Range, prev time.Time, k float64, unsum bool) {
	q := r.QPS()
	next := smoothed{val: q, q: q, t0: m.at, leader: r.Leader}
	if old, ok := m.rate[r.ID]; ok {
		if n := m.nodeRate[old.leader]; unsum && old.leader != 0 && n != nil {
			n.q -= old.q
			n.dev -= (m.value(old, prev) - old.q) * k
		}
		next.val = q + (m.value(old, prev)-q)*k
	}
	m.rate[r.ID] = next
	if r.Leader != 0 {
		n := m.nodeRate[r.Leader]
		if n == nil {
			n = &smoothedNode{}
			m.nodeRate[r.Leader] = n
		}
		n.q += q
		n.dev += next.val - q
	}
}

// refold folds every range in and sums the nodes again (no drift kept from the running sums), dropping
// the ranges that are gone (merged).
func (m *loadMemory) refold(c *model.Cluster, prev time.Time, fresh bool) {
	k := 1.0
	if !fresh {
		k = m.decay(m.at.Sub(prev))
	}
	clear(m.nodeRate)
	for _, r := range c.Ranges {
		if fresh {
			delete(m.rate, r.ID)
		}
		m.fold(r, prev, k, false)
	}
	if len(m.rate) > len(c.Ranges) {
		for id := range m.rate {
			if c.Range(id) == nil {
				delete(m.rate, id)
			}
		}
	}
}

// qps is r's smoothed rate.
func (m *loadMemory) qps(r *model.Range) float64 {
	if s, ok := m.rate[r.ID]; ok {
		return m.value(s, m.at)
	}
	return r.QPS()
}

// nodeQPS is the smoothed rate of the ranges node leads.
func (m *loadMemory) nodeQPS(node uint64) float64 {
	if n := m.nodeRate[node]; n != nil {
		return n.q + n.dev
	}
	return 0
}

// settled reports whether r may move for load: rebalance did not move it within the cooldown.
func (m *loadMemory) settled(r *model.Range) bool {
	_, recent := m.movedAt[r.ID]
	return !recent
}

// moved records that range id's leadership was moved for load, or placed by another policy, now.
func (m *loadMemory) moved(id uint64, now time.Time) { m.movedAt[id] = now }

// restPlaced rests the ranges whose leadership another policy is placing (a re-key's planned
// leaders, a lease preference, a hot spot's offload, usage_balance): rebalance would otherwise undo
// the placement as soon as it is done. The rest runs from the last round the operator was pending.
func (m *loadMemory) restPlaced(pending []*operator.Operator, now time.Time) {
	for _, op := range pending {
		if op.Policy == NameRebalance {
			continue
		}
		for _, d := range op.Influence {
			if d.Leaders != 0 {
				m.moved(op.RangeID, now)
				break
			}
		}
	}
}

// smoothView replaces the view's served load with the smoothed one, keeping the influence of the
// operators in flight (the view's figure less the node's reported one).
func (m *loadMemory) smoothView(v *view, nodes []*model.Node) {
	for _, n := range nodes {
		if l := v.at(n.ID); l != nil {
			l.qps = m.nodeQPS(n.ID) + (l.qps - n.QPS)
		}
	}
}

// smoothInfluence restates a load move's influence with r's smoothed rate, so the rest of the round
// plans on the figures it chose by.
func (m *loadMemory) smoothInfluence(op *operator.Operator, r *model.Range) {
	raw, q := r.QPS(), m.qps(r)
	for id, d := range op.Influence {
		switch {
		case d.QPS < 0:
			d.QPS += raw - q
		case d.QPS > 0:
			d.QPS += q - raw
		}
		op.Influence[id] = d
	}
}

// saturatedDisk is the disk busy share above which a node takes no load from rebalance, when its
// disk is busier than the source's by more than diskMargin. The margin keeps nodes that share one
// device (in-process clusters, which all report the device's figure) free to trade load.
const (
	saturatedDisk = 0.8
	diskMargin    = 0.1
)

// saturated reports whether to's disk is too busy to take load from from: its few requests are a
// sign of its saturation, not of room.
func saturated(from, to *model.Node) bool {
	return to.DiskBusy >= saturatedDisk && to.DiskBusy > from.DiskBusy+diskMargin
}
