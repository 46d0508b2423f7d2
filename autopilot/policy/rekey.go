package policy

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

// NameRekey is the switch of the rekey policy, and the policy a re-key's operators carry.
const NameRekey = "rekey"

// RekeyConfig configures rekey.
type RekeyConfig struct {
	// MaxPerRound bounds the leaderships placed in one round (default 8): a re-key into many new
	// ranges places them over a few rounds rather than in one burst of elections.
	MaxPerRound int
	// TTL is how long a planned leadership is pursued (default 2 min): a plan the cluster cannot
	// follow by then (a transfer refused again and again) is dropped rather than retried forever.
	TTL time.Duration
}

func (c RekeyConfig) withDefaults() RekeyConfig {
	if c.MaxPerRound <= 0 {
		c.MaxPerRound = 8
	}
	if c.TTL <= 0 {
		c.TTL = 2 * time.Minute
	}
	return c
}

// Placement is one planned leadership: Range to be led by Node.
type Placement struct {
	Range, Node uint64
}

// Rekey leads a re-key's new ranges where the re-key's plan put them (plan/rekeyplan: the
// assignment that moves the fewest bytes, Ghosh ch. 2). The re-key's coordinator hands its plan over
// (the PlaceLeaders RPC → Request); each round the policy proposes, for every planned range not yet
// led by its node, a leadership transfer — or, where that node holds no voter of the range, a move
// of the leader's replica there that carries the leadership. A plan entry is dropped once its range
// is led as planned, when the range is gone or its node can no longer lead, or after TTL. Switched
// off it takes no plan and proposes nothing: a re-key then runs with its new ranges led wherever
// their splits left them.
type Rekey struct {
	cfg   RekeyConfig
	mu    sync.Mutex
	plans map[uint64]plannedLeader // by range id
}

type plannedLeader struct {
	node   uint64
	reason string
	since  time.Time
}

// NewRekey returns the rekey policy.
func NewRekey(cfg RekeyConfig) *Rekey {
	return &Rekey{cfg: cfg.withDefaults(), plans: map[uint64]plannedLeader{}}
}

// Name implements Policy.
func (p *Rekey) Name() string { return NameRekey }

// Request takes a plan judged against c: ranges already led as planned count as in place; ranges
// c does not know, and nodes that are not live or are draining or leaving, are refused with a
// reason each; the rest are queued for the next rounds (replacing an earlier plan of the range).
func (p *Rekey) Request(c *model.Cluster, ls []Placement, reason string) (queued, inPlace int, refused []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range ls {
		r, n := c.Range(l.Range), c.Node(l.Node)
		switch {
		case r == nil:
			refused = append(refused, fmt.Sprintf("r%d: unknown", l.Range))
		case r.Leader == l.Node:
			inPlace++
		case n == nil || !n.Active():
			refused = append(refused, fmt.Sprintf("r%d: n%d is not live, or is draining or leaving", l.Range, l.Node))
		default:
			p.plans[l.Range] = plannedLeader{node: l.Node, reason: reason, since: c.Now}
			queued++
		}
	}
	return queued, inPlace, refused
}

// Propose implements Policy.
func (p *Rekey) Propose(c *model.Cluster, pending []*operator.Operator) []*operator.Operator {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.plans) == 0 {
		return nil
	}
	v := newView(c, pending)
	defer v.release()
	ids := make([]uint64, 0, len(p.plans))
	for id := range p.plans {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []*operator.Operator
	for _, id := range ids {
		pl := p.plans[id]
		r, n := c.Range(id), c.Node(pl.node)
		if r == nil || r.Leader == pl.node || n == nil || !n.Active() || c.Now.Sub(pl.since) > p.cfg.TTL {
			delete(p.plans, id)
			continue
		}
		if len(out) >= p.cfg.MaxPerRound || v.busy[id] || r.Leader == 0 {
			continue
		}
		var op *operator.Operator
		if r.IsVoter(pl.node) {
			op = operator.NewTransferLeader(NameRekey, c.Now, r, pl.node, pl.reason)
		} else {
			op = operator.NewMoveReplica(NameRekey, c.Now, c, r, r.Leader, pl.node,
				fmt.Sprintf("%s; n%d holds no voter of %s: move its leader's replica there", pl.reason, pl.node, r))
		}
		op.PredictedBenefit = operator.Benefit{Metric: operator.MetricNodeLeaders, From: r.Leader,
			Before: float64(v.leadersOf(r.Leader)), Delta: -1}
		v.add(op)
		out = append(out, op)
	}
	return out
}
