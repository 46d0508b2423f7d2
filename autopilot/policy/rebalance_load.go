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
	rate     map[uint64]float64   // range → smoothed QPS
	movedAt  map[uint64]time.Time // range → when rebalance last moved its leadership for load
	nodeRate map[uint64]float64   // node → smoothed QPS of the ranges it leads, this round
}

func newLoadMemory(tau, cooldown time.Duration) *loadMemory {
	return &loadMemory{tau: tau, cooldown: cooldown, rate: map[uint64]float64{},
		movedAt: map[uint64]time.Time{}, nodeRate: map[uint64]float64{}}
}

// update folds the cluster's current rates in. Time not moving forward, or a gap of many time
// constants, starts over from the current figures (a new cluster in a test, an autopilot that just
// took over).
func (m *loadMemory) update(c *model.Cluster) {
	dt := c.Now.Sub(m.at)
	fresh := m.at.IsZero() || dt <= 0 || dt > 10*m.tau
	alpha := 1.0
	if !fresh {
		alpha = 1 - math.Exp(-float64(dt)/float64(m.tau))
	}
	m.at = c.Now
	if fresh {
		clear(m.rate)
		clear(m.movedAt)
	}
	// In place, no map a round: this runs every round over every range.
	clear(m.nodeRate)
	for _, r := range c.Ranges {
		q := r.QPS()
		if old, ok := m.rate[r.ID]; ok {
			q = old + alpha*(q-old)
		}
		m.rate[r.ID] = q
		if r.Leader != 0 {
			m.nodeRate[r.Leader] += q
		}
	}
	if len(m.rate) > len(c.Ranges) { // some ranges are gone (merged)
		for id := range m.rate {
			if c.Range(id) == nil {
				delete(m.rate, id)
			}
		}
	}
	for id, t := range m.movedAt {
		if c.Now.Sub(t) >= m.cooldown || c.Range(id) == nil {
			delete(m.movedAt, id)
		}
	}
}

// qps is r's smoothed rate.
func (m *loadMemory) qps(r *model.Range) float64 {
	if q, ok := m.rate[r.ID]; ok {
		return q
	}
	return r.QPS()
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
			l.qps = m.nodeRate[n.ID] + (l.qps - n.QPS)
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
