package policy

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

// Rankings of the candidates for a shed leadership (chapter 3 of the Papaioannou thesis).
const (
	// RankMRC prefers the voter that most recently completed a heavy background task: it should enjoy
	// the longest quiet period before its next one.
	RankMRC = "mrc"
	// RankLSP prefers the voter that has led the range longest (as this policy observed): its block
	// cache is the warmest.
	RankLSP = "lsp"
	// RankPreferred hands off as RankLSP does, and gives each leadership back to the node that shed it
	// once that node's task is over: one node leads except while it is busy.
	RankPreferred = "preferred"
)

// ShedConfig configures the shed_leadership policy.
type ShedConfig struct {
	// Ranking is RankMRC (default), RankLSP or RankPreferred.
	Ranking string
	// MaxPerRound bounds the transfers proposed per round. Default 64.
	MaxPerRound int
}

func (c ShedConfig) withDefaults() ShedConfig {
	if c.Ranking == "" {
		c.Ranking = RankMRC
	}
	if c.MaxPerRound <= 0 {
		c.MaxPerRound = 64
	}
	return c
}

func (c ShedConfig) validate() error {
	switch c.Ranking {
	case RankMRC, RankLSP, RankPreferred:
		return nil
	}
	return fmt.Errorf("policy: shed ranking %q unknown; use %s, %s or %s", c.Ranking, RankMRC, RankLSP, RankPreferred)
}

// Shed moves leaderships away from a node that is about to run, or runs, a heavy background task
// (a compaction, a backup, an announced maintenance job), so that clients never wait behind it. The
// node holds a pending task until its leaderships are gone (package bgtask); this policy moves them,
// one TransferLeader per range, to the best idle voter by the configured ranking. A range whose other
// voters are all busy (or not live) is left where it is and noted as postponed; the node runs its task
// anyway after its bounded wait, and that is noted too. Under RankPreferred the policy also returns
// leaderships to a node whose task is over.
//
// The meta range is not shed: its load is routing lookups, which clients cache, and moving it moves
// the autopilot itself, which would drop the in-flight operators of the very shed it is running.
//
// State: how long each node has led each range (for RankLSP), and which postponements were already
// noted. Both are rebuilt from snapshots if the autopilot moves; "what to give back" is reported by the
// nodes themselves (model.Node.LedBefore), so it survives a move of the autopilot.
type Shed struct {
	cfg ShedConfig

	// The time each node led each range is kept lazily: clock sums the gaps between the snapshots
	// seen (each at most a minute), led holds each range's leader and the clock when it took over,
	// and served the stretches that ended. Only ranges that changed since the previous snapshot
	// (prev; ChangedSince says which when it can) are looked at: crediting every range's leader on
	// every snapshot cost as much as all the other policies together at 100 000 ranges.
	lastSeen time.Time
	clock    time.Duration
	prev     *model.Cluster
	led      map[uint64]ledSince                 // range → its leader at lastSeen, since when
	served   map[uint64]map[uint64]time.Duration // range → node → time led in ended stretches
	noted    map[string]bool                     // postponement/ran-anyway notes already written
	notes    []Note
}

// ledSince is a range's leader (0: none) and the Shed's clock when it became the leader.
type ledSince struct {
	leader uint64
	since  time.Duration
}

// NewShed returns the shed_leadership policy.
func NewShed(cfg ShedConfig) *Shed {
	return &Shed{cfg: cfg.withDefaults(), served: map[uint64]map[uint64]time.Duration{}, noted: map[string]bool{},
		led: map[uint64]ledSince{}}
}

// Name implements Policy.
func (p *Shed) Name() string { return NameShed }

// Ranking is the configured ranking.
func (p *Shed) Ranking() string { return p.cfg.Ranking }

// TakeNotes implements Noter.
func (p *Shed) TakeNotes() []Note {
	out := p.notes
	p.notes = nil
	return out
}

// observe credits the time since the previous snapshot to the leader each range had then (for RankLSP).
// A range that is the same *model.Range at the same place as in the previous snapshot (a source that
// shares unchanged ranges between snapshots) has the same leader: its stretch simply goes on.
func (p *Shed) observe(c *model.Cluster) {
	if !p.lastSeen.IsZero() && c.Now.After(p.lastSeen) {
		dt := c.Now.Sub(p.lastSeen)
		if dt > time.Minute {
			dt = time.Minute // a long gap (the autopilot was elsewhere) says nothing about who led
		}
		p.clock += dt
	}
	p.lastSeen = c.Now
	var prev []*model.Range
	if p.prev != nil {
		prev = p.prev.Ranges
	}
	aligned := len(c.Ranges) == len(prev)
	look := func(i int) {
		r := c.Ranges[i]
		if aligned {
			old := prev[i]
			if old == r {
				return
			}
			if old.ID != r.ID && c.Range(old.ID) == nil {
				p.end(old.ID)
			}
		}
		p.track(r.ID, r.Leader)
	}
	if changed, ok := c.ChangedSince(p.prev); ok {
		for _, i := range changed {
			look(i)
		}
	} else {
		for i := range c.Ranges {
			look(i)
		}
	}
	if !aligned {
		for id := range p.led {
			if c.Range(id) == nil {
				p.end(id)
			}
		}
	}
	p.prev = c
	if len(p.served) > 2*len(c.Ranges)+64 { // forget merged-away ranges
		for id := range p.served {
			if c.Range(id) == nil {
				delete(p.served, id)
			}
		}
	}
}

// track notes range id's leader at the current clock, ending the previous leader's stretch.
func (p *Shed) track(id, leader uint64) {
	cur, ok := p.led[id]
	if ok && cur.leader == leader {
		return
	}
	if ok {
		p.credit(id, cur)
	}
	p.led[id] = ledSince{leader: leader, since: p.clock}
}

// end ends the stretch of a range that left the cluster.
func (p *Shed) end(id uint64) {
	if cur, ok := p.led[id]; ok {
		p.credit(id, cur)
		delete(p.led, id)
	}
}

func (p *Shed) credit(id uint64, cur ledSince) {
	if cur.leader == 0 || p.clock == cur.since {
		return
	}
	m := p.served[id]
	if m == nil {
		m = map[uint64]time.Duration{}
		p.served[id] = m
	}
	m[cur.leader] += p.clock - cur.since
}

// servedBy is how long node has led range id, as observed.
func (p *Shed) servedBy(id, node uint64) time.Duration {
	d := p.served[id][node]
	if cur, ok := p.led[id]; ok && cur.leader == node && node != 0 {
		d += p.clock - cur.since
	}
	return d
}

// Propose implements Policy.
func (p *Shed) Propose(c *model.Cluster, pending []*operator.Operator) []*operator.Operator {
	p.observe(c)
	v := newView(c, pending)
	defer v.release()
	var out []*operator.Operator
	busyNow := map[string]bool{}
	for _, n := range c.Nodes {
		task := n.HeavyTask()
		if task == nil || !n.Live || n.Decommissioned {
			continue
		}
		for r := range c.LedBy(n.ID) {
			if r.Leader != n.ID || v.busy[r.ID] || r.System {
				continue // the meta range stays: see the type's comment
			}
			if len(out) >= p.cfg.MaxPerRound {
				return out
			}
			to, why := p.candidate(v, r, n.ID)
			if to == 0 {
				p.note(busyNow, n, task, r, why)
				continue
			}
			op := operator.NewTransferLeader(NameShed, c.Now, r, to,
				fmt.Sprintf("n%d has a heavy %s %s (%s): move r%d's leadership to n%d, %s",
					n.ID, task.State(), task.Kind, taskName(task), r.ID, to, why))
			op.PredictedBenefit = operator.Benefit{Metric: operator.MetricNodeLeaders, From: n.ID,
				Before: float64(v.at(n.ID).leaders), Delta: -1}
			v.add(op)
			out = append(out, op)
		}
	}
	for k := range p.noted {
		if !busyNow[k] {
			delete(p.noted, k) // the situation is over; note it again if it comes back
		}
	}
	if p.cfg.Ranking == RankPreferred {
		out = append(out, p.giveBack(c, v, p.cfg.MaxPerRound-len(out))...)
	}
	return out
}

// candidate picks the voter of r, other than from, to take its leadership: live, active, not busy,
// ranked by the configured ranking; ties go to the fewest leaderships, then the lowest ID. It also
// returns the reasoning for the decision log (each voter's state).
func (p *Shed) candidate(v *view, r *model.Range, from uint64) (uint64, string) {
	cands, states := idleVoters(v, r, from)
	if len(cands) == 0 {
		if len(states) == 0 {
			return 0, "no other voter"
		}
		return 0, "no idle voter: " + strings.Join(states, ", ")
	}
	score := func(n *model.Node) float64 {
		if p.cfg.Ranking == RankMRC {
			if t := n.LastHeavyCompleted(); !t.IsZero() {
				return float64(t.UnixNano())
			}
			return 0
		}
		return float64(p.servedBy(r.ID, n.ID))
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if sa, sb := score(a), score(b); sa != sb {
			return sa > sb
		}
		if la, lb := v.at(a.ID).leaders, v.at(b.ID).leaders; la != lb {
			return la < lb
		}
		return a.ID < b.ID
	})
	var desc []string
	for _, n := range cands {
		switch p.cfg.Ranking {
		case RankMRC:
			if t := n.LastHeavyCompleted(); !t.IsZero() {
				desc = append(desc, fmt.Sprintf("n%d idle, last task done %s ago", n.ID, roundDur(v.c.Now.Sub(t))))
			} else {
				desc = append(desc, fmt.Sprintf("n%d idle, no task completed yet", n.ID))
			}
		default:
			desc = append(desc, fmt.Sprintf("n%d idle, led r%d for %s", n.ID, r.ID, roundDur(p.servedBy(r.ID, n.ID))))
		}
	}
	return cands[0].ID, fmt.Sprintf("ranking %s (%s)", p.cfg.Ranking, strings.Join(append(desc, states...), "; "))
}

// note records, once per situation, that a busy node keeps a leadership: postponed while its task is
// pending, ran anyway once it runs.
func (p *Shed) note(seen map[string]bool, n *model.Node, task *model.Task, r *model.Range, why string) {
	key := fmt.Sprintf("%d/%d/%d/%v", n.ID, task.ID, r.ID, task.Running)
	seen[key] = true
	if p.noted[key] {
		return
	}
	p.noted[key] = true
	what := fmt.Sprintf("keep r%d's leadership on n%d", r.ID, n.ID)
	if task.Running {
		p.notes = append(p.notes, Note{What: what, Status: StatusRanAnyway,
			Why: fmt.Sprintf("n%d runs its heavy %s (%s) while leading r%d: %s", n.ID, task.Kind, taskName(task), r.ID, why)})
		return
	}
	p.notes = append(p.notes, Note{What: what, Status: StatusPostponed,
		Why: fmt.Sprintf("n%d's %s (%s) is postponed: %s; re-evaluated on every status change", n.ID, task.Kind, taskName(task), why)})
}

// giveBack returns leaderships to idle nodes that shed them for a task (RankPreferred).
func (p *Shed) giveBack(c *model.Cluster, v *view, budget int) []*operator.Operator {
	var out []*operator.Operator
	for _, n := range c.Nodes {
		if len(n.LedBefore) == 0 || !n.Live || !n.Active() || n.Busy() {
			continue
		}
		for _, id := range n.LedBefore {
			if len(out) >= budget {
				return out
			}
			r := c.Range(id)
			if r == nil || r.Leader == n.ID || r.Leader == 0 || !r.IsVoter(n.ID) || v.busy[r.ID] {
				continue
			}
			op := operator.NewTransferLeader(NameShed, c.Now, r, n.ID,
				fmt.Sprintf("ranking preferred: n%d, which led r%d before its background task, is idle again: give the leadership back from n%d",
					n.ID, r.ID, r.Leader))
			op.PredictedBenefit = operator.Benefit{Metric: operator.MetricNodeLeaders, From: r.Leader, To: n.ID,
				Before: float64(v.at(r.Leader).leaders), Delta: -1}
			v.add(op)
			out = append(out, op)
		}
	}
	return out
}

// idleVoters splits r's voters other than from into those that may take its leadership (live,
// active, not busy with a heavy task) and a description of why each other one may not.
func idleVoters(v *view, r *model.Range, from uint64) ([]*model.Node, []string) {
	var cands []*model.Node
	var states []string
	for _, id := range r.Voters() {
		if id == from {
			continue
		}
		n := v.c.Node(id)
		switch {
		case n == nil || !n.Live:
			states = append(states, fmt.Sprintf("n%d not live", id))
		case !n.Active():
			states = append(states, fmt.Sprintf("n%d draining or leaving", id))
		case n.Busy():
			t := n.HeavyTask()
			states = append(states, fmt.Sprintf("n%d busy (%s %s)", id, t.State(), t.Kind))
		default:
			cands = append(cands, n)
		}
	}
	return cands, states
}

func taskName(t *model.Task) string {
	if t.Name == "" {
		return "unnamed"
	}
	return t.Name
}
