package policy

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
	"github.com/shoaldb/shoal/plan/profileplan"
)

// NameNodeProfiles is the node_profiles policy's switch.
const NameNodeProfiles = "node_profiles"

// DefaultRowBytes is the bytes of a scanned row a scan's cost counts by default: 1 KiB, YCSB's
// ten 100-byte fields and a key.
const DefaultRowBytes = 1 << 10

// NodeProfilesConfig configures node_profiles.
type NodeProfilesConfig struct {
	// SampleEvery is how often each range's request mix is sampled into its smoothed mix. Default
	// 30 s, the thesis's monitoring interval.
	SampleEvery time.Duration
	// Samples is how many samples a range needs before its class counts. Default 6 (the thesis's).
	Samples int
	// Alpha is the weight of the newest sample in the exponential smoothing. Default 0.5.
	Alpha float64
	// MinQPS: a range whose smoothed load is below it is left out of the plan (it stays where it
	// is): an idle range would claim a node for its class. Default 1 request a second.
	MinQPS float64
	// MaxMoves bounds the replica moves and leadership transfers of this policy in flight. Default 2.
	MaxMoves int
	// RetryAfter: a node that was asked for a profile and does not report it is not asked for it
	// again before this. Default 1 min.
	RetryAfter time.Duration
	// Overloaded and Underloaded are the utilizations (the busier of CPU and disk) above and below
	// which a node is sub-optimal (Alg. 1's input). Defaults 0.8 and 0.2.
	Overloaded, Underloaded float64
	// GrowThreshold is Alg. 1's SubOptimalNodesThreshold: with more than this share of the nodes
	// overloaded, nodes are asked for at once. Default 0.5 (the thesis's).
	GrowThreshold float64
	// RowBytes is the bytes of a row as a scan's cost counts them (rows × RowBytes): the heartbeats
	// carry the rows scans return, not their bytes. Default DefaultRowBytes.
	RowBytes float64
	// Settle is how long a node restarted for a profile change must be back (live, with the profile,
	// its compaction done) before the mixes are sampled and the plan made again: the leaderships it
	// shed return in that time, and the samples before it would show them elsewhere. Default 10 s.
	Settle time.Duration
	// HotShare: a user range whose cost is at least this share of all user ranges' is hot, and no
	// replica move reads its snapshot off the node leading it (place). Default a node's share,
	// 1/nodes: such a range alone loads a node as much as the cluster's mean.
	HotShare float64
	// MaxAway bounds the wait for such a node: after it the policy samples and plans without it.
	// Default 5 min (the supervisor's bound on the compaction after a block size change).
	MaxAway time.Duration
	// KeepVoters leaves the voters of ranges with writes where they are (no voterMove): for a
	// cluster whose voters another policy places, e.g. rebalance by replica count, which would
	// move them back. Default false: they move off the read nodes, before any restart.
	KeepVoters bool
}

func (c NodeProfilesConfig) withDefaults() NodeProfilesConfig {
	if c.SampleEvery <= 0 {
		c.SampleEvery = 30 * time.Second
	}
	if c.Samples <= 0 {
		c.Samples = 6
	}
	if c.Alpha <= 0 || c.Alpha > 1 {
		c.Alpha = 0.5
	}
	if c.MinQPS <= 0 {
		c.MinQPS = 1
	}
	if c.MaxMoves <= 0 {
		c.MaxMoves = 2
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = time.Minute
	}
	if c.Overloaded <= 0 {
		c.Overloaded = 0.8
	}
	if c.Underloaded <= 0 {
		c.Underloaded = 0.2
	}
	if c.GrowThreshold <= 0 {
		c.GrowThreshold = 0.5
	}
	if c.RowBytes <= 0 {
		c.RowBytes = DefaultRowBytes
	}
	if c.Settle <= 0 {
		c.Settle = 10 * time.Second
	}
	if c.MaxAway <= 0 {
		c.MaxAway = 5 * time.Minute
	}
	return c
}

// NodeProfiles gives groups of nodes engine profiles that suit the ranges they lead (Cruz's MeT,
// thesis chapter 3; plan/profileplan): every SampleEvery it samples each user range's request mix
// into an exponentially smoothed one and classifies the range read, write, read/write or scan; when
// the classes (or the nodes: all but dead or leaving ones) change it plans again: nodes per class
// in proportion to the class's share of the load, each class's ranges spread over its nodes by LPT
// with a count cap, matched to the current layout with the fewest moves. It then proposes, a round
// at a time:
//
//   - a SetProfile operator for one node whose profile differs from the plan's (one node at a time
//     in the cluster: the node restarts in process, masked by shedding its leaderships and warming
//     its cache);
//   - leadership transfers (to a voter) and replica moves (that carry the leadership) that put each
//     range's leader on its planned node, once that node runs its planned profile, at most MaxMoves
//     in flight.
//
// The plan holds until a class or the set of nodes changes, so a steady workload converges and
// then proposes nothing; it is neither sampled nor made again while a node it restarts is away. Once
// every node runs its planned profile, the voters of ranges that take writes move, one replica
// move at a time, off the nodes whose profile suits writes least (voterMove): under Raft every
// voter syncs and compacts its range's writes.
// Alg. 1's cluster sizing is advice only (a note in the decision log: how many nodes MeT would add
// or remove); nodes are never started or stopped here.
type NodeProfiles struct {
	cfg NodeProfilesConfig

	smooth     map[uint64]*profileplan.Smoother
	lastSample time.Time

	// A range's class changes only after its smoothed mix has shown the new one for Samples/2
	// samples in a row (at least 2): one burst does not move a range.
	switching map[uint64]switching

	// The plan in force and what it was made from.
	classes  map[uint64]profileplan.Class
	nodesKey string
	plan     *profileplan.Plan
	leadOn   map[uint64]uint64            // range → node planned to lead it
	profile  map[uint64]profileplan.Class // node → planned profile
	asked    map[uint64]asked             // node → the profile last asked for, and when
	// moved is when a replica move of each range was last proposed, and how many in a row: another
	// waits moveWait. A move adds a learner whose snapshot loads two disks; retried each round after
	// it failed (its promotion timed out on a seek-bound disk), nine moves of one range in four
	// minutes starved the hot range's node.
	moved map[uint64]moveTry
	// transferred is the same for the leadership transfers to a planned node: the next waits
	// TransferRetry, doubling.
	transferred map[uint64]moveTry
	// votersOff is the node the last voter move of each range takes its voter off: the range's next
	// waits moveWait (from moved) while that voter is still there (the move failed or runs), and
	// not once it is gone.
	votersOff map[uint64]uint64
	// away are the nodes restarting for a profile this policy asked for, from the ask until they
	// have been back for Settle: no sample and no plan meanwhile (see hold).
	away map[uint64]*away
	// deferred is when each node due to change profile was first left to restart later, while
	// place moves a range it leads to that range's planned node (restartOrder).
	deferred map[uint64]time.Time
	// unsettled is when a policy without a plan last saw a node away (not active, or busy), and
	// unsettledSince when it first did (elsewhere).
	unsettled, unsettledSince time.Time
	// inherit are the classes a policy without a plan reads from the layout (inherited): each
	// range's hysteresis starts from it.
	inherit map[uint64]profileplan.Class

	resizer profileplan.Resizer
	advice  string // the last cluster-size advice noted
	notes   []Note
}

type switching struct {
	to   profileplan.Class
	seen int
}

type asked struct {
	profile profileplan.Class
	at      time.Time
}

type away struct {
	profile  profileplan.Class
	at, back time.Time // asked; back (zero: not yet)
	// ended is the view in which its operator was first seen gone without the profile (zero: not).
	ended time.Time
	// led are the user ranges it led when asked: the supervisor takes them back last. up is when it
	// was first seen live and active with the profile and no heavy task (zero: not yet).
	led []uint64
	up  time.Time
}

// TakeBackWait bounds how long a node restarted for a profile, up with it, may take to lead again
// the ranges it led before the policy counts it back anyway: the supervisor's warm-up (20 s at most)
// and its returns, one at a time (a return may fail: the range stays with another voter).
const TakeBackWait = 45 * time.Second

// returned reports whether every range of a.led that node still holds a voter of is led by it.
func (a *away) returned(c *model.Cluster, node uint64) bool {
	for _, id := range a.led {
		if r := c.Range(id); r != nil && r.IsVoter(node) && r.Leader != node {
			return false
		}
	}
	return true
}

// NewNodeProfiles returns the node_profiles policy.
func NewNodeProfiles(cfg NodeProfilesConfig) *NodeProfiles {
	cfg = cfg.withDefaults()
	return &NodeProfiles{cfg: cfg, smooth: map[uint64]*profileplan.Smoother{}, asked: map[uint64]asked{}, switching: map[uint64]switching{},
		moved: map[uint64]moveTry{}, transferred: map[uint64]moveTry{}, votersOff: map[uint64]uint64{},
		away: map[uint64]*away{}, deferred: map[uint64]time.Time{},
		resizer: profileplan.Resizer{Threshold: cfg.GrowThreshold}}
}

// Name implements Policy.
func (p *NodeProfiles) Name() string { return NameNodeProfiles }

// TakeNotes implements Noter: the plans made and the cluster-size advice.
func (p *NodeProfiles) TakeNotes() []Note {
	out := p.notes
	p.notes = nil
	return out
}

// profileOf is a node's profile as a class ("" reported: the default).
func profileOf(n *model.Node) profileplan.Class {
	if n.Profile == "" {
		return profileplan.Default
	}
	return profileplan.Class(n.Profile)
}

// Propose implements Policy.
func (p *NodeProfiles) Propose(c *model.Cluster, pending []*operator.Operator) []*operator.Operator {
	restarting := map[uint64]bool{}
	moves, copies := 0, 0
	for _, op := range pending {
		for _, s := range op.Steps {
			if sp, ok := s.(operator.SetProfile); ok {
				restarting[sp.Node] = true
			}
		}
		if op.Policy == NameNodeProfiles && op.Kind != operator.KindSetProfile {
			moves++
		}
		if op.Policy == NameNodeProfiles && op.Kind == operator.KindMoveReplica {
			copies++
		}
	}
	hold, waiting := p.hold(c, restarting)
	hold = hold || p.elsewhere(c)
	if !hold && (p.lastSample.IsZero() || c.Now.Sub(p.lastSample) >= p.cfg.SampleEvery) {
		p.sample(c)
		p.replan(c)
	}
	if p.plan == nil {
		return nil
	}
	v := newView(c, pending)
	defer v.release()
	var ops []*operator.Operator
	// The voters of ranges with writes move first, before any restart: a move needs no node
	// restarted, its gain (the read nodes' disks freed of writes) lands at once and lifts the level
	// the restarts' hand-overs then dip from. A restart waits while a replica move of this policy
	// runs (two disks loaded by its snapshot) or one is proposed.
	if !hold && moves < p.cfg.MaxMoves && copies == 0 {
		if op := p.voterMove(c, v, restarting); op != nil {
			ops = append(ops, op)
			v.add(op)
			moves++
			copies++
		}
	}
	if !waiting && copies == 0 {
		if op := p.reprofile(c, v); op != nil {
			ops = append(ops, op)
			v.add(op)
			restarting[op.Steps[0].(operator.SetProfile).Node] = true
		}
	}
	for id, a := range p.away {
		if a.back.IsZero() {
			restarting[id] = true
		}
	}
	for _, op := range p.place(c, v, restarting, p.cfg.MaxMoves-moves, copies == 0) {
		ops = append(ops, op)
		v.add(op)
		moves++
		if op.Kind == operator.KindMoveReplica {
			copies++
		}
	}
	return ops
}

// hold reports whether a node is restarting for a profile this policy asked for, or came back from
// it less than Settle ago (restarting: the nodes a pending SetProfile operator names): meanwhile
// the policy neither samples nor plans. The restarted node has shed its leaderships, may be
// compacting its store for a new block size, and takes them back only then, so the mixes and the
// active nodes it would see are the restart's, not the workload's — planning on them moved
// leaderships that the restart was about to bring back, and asked for more restarts. waiting reports
// whether such a node is not back yet: meanwhile no other node restarts. A node is back when it is
// live and active with the profile, has no heavy task and leads again what it led; a change that
// failed (its operator ended and a later view still shows the old profile) or took longer than
// MaxAway ends the wait. The next node's restart does not wait for Settle: the node back has its
// leaderships and its warm cache, and Settle is for the samples, which a rolling reconfiguration
// keeps on hold until its last node is back (waiting 10 s more a node made four restarts 40 s
// longer, on a disk where each took 20–90 s).
func (p *NodeProfiles) hold(c *model.Cluster, restarting map[uint64]bool) (hold, waiting bool) {
	for _, id := range slices.Sorted(maps.Keys(p.away)) {
		a := p.away[id]
		n := c.Node(id)
		switch {
		case n == nil || n.Decommissioned:
			delete(p.away, id)
		case !a.back.IsZero():
			if c.Now.Sub(a.back) >= p.cfg.Settle {
				delete(p.away, id)
				next := ": sampling and planning again"
				if len(p.away) > 0 || len(restarting) > 0 {
					next = "; another node is restarting"
				}
				p.notes = append(p.notes, Note{What: fmt.Sprintf("n%d", id), Status: "back",
					Why: fmt.Sprintf("n%d back with profile %s %s after it was asked, settled for %s%s",
						id, a.profile, a.back.Sub(a.at).Round(time.Second), c.Now.Sub(a.back).Round(time.Second), next)})
			}
		case profileOf(n) == a.profile && n.Active() && !n.Busy():
			// Up with the profile; back once it leads its ranges again (or TakeBackWait after): an
			// earlier end let the next node shed while this one was still taking its leaderships
			// back, and two restarts overlapped.
			if a.up.IsZero() {
				a.up = c.Now
			}
			if a.returned(c, id) || c.Now.Sub(a.up) >= TakeBackWait {
				a.back = c.Now
			}
		case c.Now.Sub(a.at) >= p.cfg.MaxAway:
			delete(p.away, id)
			p.notes = append(p.notes, Note{What: fmt.Sprintf("n%d", id), Status: "not back",
				Why: fmt.Sprintf("n%d not back with %s after %s: planning without waiting", id, a.profile, p.cfg.MaxAway)})
		case restarting[id]:
			a.ended = time.Time{}
		case profileOf(n) != a.profile:
			// Its operator ended without the profile in this view. The view may be older than the
			// executor's, which ended it on a heartbeat showing the profile (the snapshot is taken
			// before the pending operators are read): only a later view without it shows the change
			// refused or failed. Ending the wait on the first, another node was restarted while this
			// one compacted.
			if a.ended.IsZero() {
				a.ended = c.Now
			} else if c.Now.After(a.ended) {
				delete(p.away, id)
			}
		}
	}
	waiting = len(restarting) > 0
	for _, a := range p.away {
		waiting = waiting || a.back.IsZero()
	}
	return len(p.away) > 0 || len(restarting) > 0, waiting
}

// ReturnWait is how long after a node restarted for a profile is active again it may still be
// taking its leaderships back: its supervisor's warm-up (supervisor.ReturnWarmWait) and returns.
const ReturnWait = 25 * time.Second

// elsewhere reports whether a policy without a plan should wait for a node to come back: one not
// active (shedding, down, catching up) or rewriting its store for a new block size was most
// likely restarted for a profile by an earlier autopilot — the meta leader's restart moves the
// autopilot here, and this policy knows nothing of it. Until that node has been active and idle for
// Settle and ReturnWait (its leaderships back), and at most MaxAway, it neither samples nor plans,
// and it forgets the samples taken while the node shed: a new autopilot that planned on them
// while the node restarted restarted it again.
func (p *NodeProfiles) elsewhere(c *model.Cluster) bool {
	if p.plan != nil {
		return false
	}
	for _, n := range c.Nodes {
		if inPlan(c, n) && (!n.Active() || rewriting(n)) {
			if p.unsettledSince.IsZero() {
				p.unsettledSince = c.Now
				clear(p.smooth)
			}
			p.unsettled = c.Now
		}
	}
	switch {
	case p.unsettled.IsZero() || c.Now.Sub(p.unsettledSince) >= p.cfg.MaxAway:
		return false
	case c.Now.Sub(p.unsettled) < p.cfg.Settle+ReturnWait:
		return true
	}
	p.notes = append(p.notes, Note{What: "nodes", Status: "back", Why: fmt.Sprintf(
		"every node active and idle for %s: sampling and planning", (p.cfg.Settle + ReturnWait).Round(time.Second))})
	p.unsettled, p.unsettledSince = time.Time{}, time.Time{}
	return false
}

// rewriting reports whether n runs the compaction a profile change with a new block size begins
// (profileplan.RewriteTaskName).
func rewriting(n *model.Node) bool {
	return slices.ContainsFunc(n.Tasks, func(t model.Task) bool {
		return t.Kind == "manual_compaction" && profileplan.IsRewriteTask(t.Name)
	})
}

// sample adds each user range's mix now to its smoothed mix and forgets ranges that are gone.
func (p *NodeProfiles) sample(c *model.Cluster) {
	p.lastSample = c.Now
	seen := map[uint64]bool{}
	for _, r := range c.UserRanges() {
		s := p.smooth[r.ID]
		if s == nil {
			s = &profileplan.Smoother{Alpha: p.cfg.Alpha, MinSeen: p.cfg.Samples}
			p.smooth[r.ID] = s
		}
		s.Observe(p.costMix(r))
		seen[r.ID] = true
	}
	for id := range p.smooth {
		if !seen[id] {
			delete(p.smooth, id)
			delete(p.switching, id)
		}
	}
}

// costMix is r's mix with the bytes of the rows its scans return: the rows its leader's access
// statistics count, times RowBytes. Not the blocks the scans load: those depend on the leader's
// block size, so a range's cost would rise when its leader turned to the scan profile's 128 KiB
// blocks, and the plan that gave it that profile would change with it.
func (p *NodeProfiles) costMix(r *model.Range) profileplan.Mix {
	m := operator.MixOf(r)
	if r.Access != nil {
		m.ScanBytes = r.Access.ScanRowsQPS * p.cfg.RowBytes
	}
	return m
}

// requests is about how many requests a smoothed mix rests on: its rate over one sample times the
// samples the exponential smoothing weighs, (2−α)/α (three at α = 0.5). The class's hysteresis
// widens with the noise of so few (profileplan.NoiseBand).
func (p *NodeProfiles) requests(m profileplan.Mix) float64 {
	return m.Total() * p.cfg.SampleEvery.Seconds() * (2 - p.cfg.Alpha) / p.cfg.Alpha
}

// classOf is the class range id is planned with: its smoothed class (with Reclassify's hysteresis
// about the class it had) once that has held for Samples/2 samples in a row (at least 2), else the
// class it had.
func (p *NodeProfiles) classOf(id uint64, now profileplan.Class) profileplan.Class {
	had, ok := p.classes[id]
	if !ok || had == now {
		delete(p.switching, id)
		return now
	}
	sw := p.switching[id]
	if sw.to != now {
		sw = switching{to: now}
	}
	sw.seen++
	if sw.seen >= max(2, p.cfg.Samples/2) {
		delete(p.switching, id)
		return now
	}
	p.switching[id] = sw
	return had
}

// planRanges are the user ranges a plan places, with their classes: those whose smoothed mix is
// ready and busy enough to classify, and planned ones whose load fell below MinQPS.
func (p *NodeProfiles) planRanges(c *model.Cluster) ([]profileplan.Range, map[uint64]profileplan.Class) {
	var ranges []profileplan.Range
	classes := map[uint64]profileplan.Class{}
	for _, r := range c.UserRanges() {
		s := p.smooth[r.ID]
		if s == nil || !s.Ready() {
			continue
		}
		had, planned := p.classes[r.ID]
		if !planned {
			had = p.inherit[r.ID]
		}
		switch {
		case s.Mix().Total() >= p.cfg.MinQPS:
			classes[r.ID] = p.classOf(r.ID, profileplan.ReclassifyBand(had, s.Mix(), profileplan.NoiseBand(p.requests(s.Mix()))))
		case planned:
			// A planned range whose load fell below MinQPS keeps its class and place: its mix is too
			// thin to classify, and leaving the plan and coming back made a new plan each time (a
			// scan tenant's cold range hovering about 1 request/s re-planned every few samples).
			classes[r.ID] = had
		default:
			continue
		}
		ranges = append(ranges, profileplan.Range{ID: r.ID, Mix: s.Mix(), Class: classes[r.ID], Voters: r.Voters()})
	}
	return ranges, classes
}

// planNodes are the nodes a plan places ranges on, each with the classified ranges it leads, and the
// key that names that set of nodes.
func (p *NodeProfiles) planNodes(c *model.Cluster, classes map[uint64]profileplan.Class) ([]profileplan.Node, string) {
	meta := metaLeader(c)
	var nodes []profileplan.Node
	var ids []string
	for _, n := range c.Nodes {
		if !inPlan(c, n) {
			continue
		}
		// The autopilot's node keeps its profile if a group has it: restarting it moves the autopilot,
		// and the next one starts without these samples and plans again from the restart's layout.
		pn := profileplan.Node{ID: n.ID, Profile: profileOf(n), Pinned: n.ID == meta}
		for r := range c.LedBy(n.ID) {
			if _, ok := classes[r.ID]; ok {
				pn.Ranges = append(pn.Ranges, r.ID)
			}
		}
		nodes = append(nodes, pn)
		ids = append(ids, fmt.Sprint(n.ID))
	}
	return nodes, strings.Join(ids, ",")
}

// replan makes a new plan when the ranges' classes or the nodes (inPlan) changed since the last one.
func (p *NodeProfiles) replan(c *model.Cluster) {
	if p.plan == nil {
		p.inherit = inherited(c)
	}
	ranges, classes := p.planRanges(c)
	nodes, key := p.planNodes(c, classes)
	p.advise(c)
	if len(ranges) == 0 || len(nodes) == 0 || (p.plan != nil && key == p.nodesKey && maps.Equal(classes, p.classes)) {
		return
	}
	// The same nodes and the same groups: only the ranges whose class changed move (Update);
	// otherwise a new plan from the current layout.
	plan, ok := profileplan.Plan{}, false
	switch {
	case p.plan != nil && key == p.nodesKey:
		plan, ok = profileplan.Update(*p.plan, ranges, nodes)
	case p.plan == nil && len(p.inherit) > 0:
		plan, ok = profileplan.Update(layoutPlan(nodes, classes), ranges, nodes)
	}
	if !ok {
		var err error
		if plan, err = profileplan.Make(ranges, nodes); err != nil {
			return
		}
	}
	p.plan, p.classes, p.nodesKey = &plan, classes, key
	p.leadOn, p.profile = map[uint64]uint64{}, map[uint64]profileplan.Class{}
	for _, a := range plan.Assignments {
		if len(a.Ranges) > 0 { // a node planned to lead nothing keeps the profile it has
			p.profile[a.Node] = a.Profile
		}
		for _, r := range a.Ranges {
			p.leadOn[r] = a.Node
		}
	}
	reprofiled := 0
	for _, n := range nodes {
		if want, ok := p.profile[n.ID]; ok && want != n.Profile {
			reprofiled++
		}
	}
	p.notes = append(p.notes, Note{What: "plan", Status: "planned", Why: describePlan(plan, reprofiled)})
}

// inherited are the classes a policy without a plan starts from: when the nodes run more than one
// of the classes' profiles — an earlier autopilot's plan, the meta leader's restart having moved the
// autopilot here — each user range's class is its leader's profile, the class its hysteresis
// starts from, and the groups go on from that plan (layoutPlan) instead of planning afresh: planned
// afresh, a new autopilot classed a range read/write that the first had read, and restarted a node
// again.
// Nil on a cluster of one profile, whose ranges are classed from their mixes alone.
func inherited(c *model.Cluster) map[uint64]profileplan.Class {
	running := map[profileplan.Class]bool{}
	for _, n := range c.Nodes {
		if inPlan(c, n) && slices.Contains(profileplan.Classes, profileOf(n)) {
			running[profileOf(n)] = true
		}
	}
	if len(running) < 2 {
		return nil
	}
	out := map[uint64]profileplan.Class{}
	for _, r := range c.UserRanges() {
		if n := c.Node(r.Leader); n != nil && slices.Contains(profileplan.Classes, profileOf(n)) {
			out[r.ID] = profileOf(n)
		}
	}
	return out
}

// layoutPlan is the plan the nodes' profiles and leaderships show: each node its profile and the
// classed ranges it leads, a group the nodes of a profile leading any of them.
func layoutPlan(nodes []profileplan.Node, classes map[uint64]profileplan.Class) profileplan.Plan {
	p := profileplan.Plan{Groups: map[profileplan.Class]int{}}
	for _, n := range nodes {
		a := profileplan.Assignment{Node: n.ID, Profile: n.Profile}
		for _, r := range n.Ranges {
			if _, ok := classes[r]; ok {
				a.Ranges = append(a.Ranges, r)
			}
		}
		if len(a.Ranges) > 0 {
			p.Groups[n.Profile]++
		}
		p.Assignments = append(p.Assignments, a)
	}
	return p
}

// inPlan reports whether the plan counts node n: every node but a dead or leaving one. A node that
// missed a few heartbeats (a disk-bound node's heartbeats run late) or is shedding its leaderships
// for a restart is still one of the cluster's nodes: planning without it, and again with it a few
// seconds later, gave it and then took from it a group's ranges. Leaderships go only to active
// nodes (place), whatever the plan.
func inPlan(c *model.Cluster, n *model.Node) bool {
	return !n.Decommissioning && !n.Decommissioned && !n.Dead(c.Now, 0)
}

// describePlan is a plan in words: class shares, groups, each node's profile and load, and its
// cost (reprofiled: the nodes to restart with another profile).
func describePlan(plan profileplan.Plan, reprofiled int) string {
	var parts []string
	for _, cl := range profileplan.Classes {
		if plan.Classes[cl] == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s %s → %s", cl, plural(plan.Classes[cl], "range"), pct(plan.Shares[cl]), plural(plan.Groups[cl], "node")))
	}
	var nodes []string
	for _, a := range plan.Assignments {
		if len(a.Ranges) == 0 {
			nodes = append(nodes, fmt.Sprintf("n%d leads nothing (keeps its profile)", a.Node))
			continue
		}
		nodes = append(nodes, fmt.Sprintf("n%d %s (%s, %s)", a.Node, a.Profile, plural(len(a.Ranges), "range"), fmt.Sprintf("cost %.0f/s", a.Load)))
	}
	return fmt.Sprintf("classes: %s; nodes: %s; %s to move, %s to change profile",
		strings.Join(parts, ", "), strings.Join(nodes, ", "), plural(plan.Moves, "leadership"), plural(reprofiled, "node"))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// advise is Alg. 1 as advice: the share of overloaded nodes decides whether nodes would be added
// (1, 2, 4 … a round while it stays above the threshold) or one removed (every node underloaded).
func (p *NodeProfiles) advise(c *model.Cluster) {
	active, over, under := 0, 0, 0
	for _, n := range c.Nodes {
		if !n.Active() || (n.CPUCores == 0 && n.DiskBusy == 0) {
			continue // utilization unknown
		}
		active++
		switch u := n.Utilization(); {
		case u > p.cfg.Overloaded:
			over++
		case u < p.cfg.Underloaded:
			under++
		}
	}
	if active == 0 || (over == 0 && under < active) {
		p.advice = ""
		return // healthy (or unknown): Alg. 1 does not run
	}
	var why string
	switch k := p.resizer.Next(float64(over)/float64(active), over == 0); {
	case k > 0:
		why = fmt.Sprintf("%d of %d nodes above %s busy: add %d node(s)", over, active, pct(p.cfg.Overloaded), k)
	case k < 0:
		why = fmt.Sprintf("every node below %s busy: one node could leave", pct(p.cfg.Underloaded))
	}
	if why != "" && why != p.advice {
		p.notes = append(p.notes, Note{What: "cluster size", Status: "advice", Why: why})
	}
	p.advice = why
}

// reprofile proposes the profile change of the first node in restartOrder whose profile differs
// from its planned one, carried by one of its ranges that no operator holds.
func (p *NodeProfiles) reprofile(c *model.Cluster, v *view) *operator.Operator {
	for _, n := range p.restartOrder(c) {
		want, ok := p.profile[n.ID]
		if !ok || !n.Active() || profileOf(n) == want {
			continue
		}
		if a := p.asked[n.ID]; a.profile == want && c.Now.Sub(a.at) < p.cfg.RetryAfter {
			continue // asked already: it is restarting, or it cannot (no supervisor)
		}
		carriers := v.candidatesIn(c.RangesOf(n.ID), func(r *model.Range) bool { return r.HasReplica(n.ID) })
		if len(carriers) == 0 {
			continue
		}
		var served []string
		load := 0.0
		for r, node := range p.leadOn {
			if node == n.ID {
				served = append(served, fmt.Sprintf("r%d", r))
				if rr := c.Range(r); rr != nil {
					load += rr.QPS() + rr.ReplicaReadQPS
				}
			}
		}
		slices.Sort(served)
		op := operator.NewSetProfile(NameNodeProfiles, c.Now, carriers[0], n.ID, string(want),
			fmt.Sprintf("n%d is to lead %s ranges %s (%s) but runs profile %s: restart it with %s",
				n.ID, want, strings.Join(served, ","), fmtQPS(load), profileOf(n), want))
		op.Priority = operator.PriorityLow
		before, total := operator.ProfileMatched(c)
		op.PredictedBenefit = operator.Benefit{Metric: operator.MetricProfileMatched, From: n.ID,
			Before: fraction(before, total), Delta: fraction(p.gain(c, n.ID, want), total)}
		p.asked[n.ID] = asked{profile: want, at: c.Now}
		a := &away{profile: want, at: c.Now}
		for r := range c.LedBy(n.ID) {
			if !r.System {
				a.led = append(a.led, r.ID)
			}
		}
		p.away[n.ID] = a
		clear(p.deferred)
		return op
	}
	return nil
}

// restartOrder is the order in which nodes change profile. The node leading the meta range goes
// last: the autopilot runs there, and its restart moves the autopilot to another node, which starts
// without this policy's samples. Before it, the node leading the least load goes first: a restart
// hands its leaderships to peers and takes them back to a reopened cache, so the node leading the
// hot ranges restarts last, when they are led where the plan wants them or its peers are done. A
// node still leading a range planned on another node that is ready for it (running its planned
// profile, back, the range movable there) is left out while place moves the range — one hand-over
// to a warm voter instead of three (away, back cold, then to its planned node) — at most
// RetryAfter: a move that keeps failing must not hold the reconfiguration.
func (p *NodeProfiles) restartOrder(c *model.Cluster) []*model.Node {
	meta := metaLeader(c)
	led := map[uint64]float64{}
	var out []*model.Node
	waits := false
	for _, n := range c.Nodes {
		if p.leavesFirst(c, n.ID) {
			if _, ok := p.deferred[n.ID]; !ok {
				p.deferred[n.ID] = c.Now
			}
			if c.Now.Sub(p.deferred[n.ID]) < p.cfg.RetryAfter {
				waits = true
				continue
			}
		} else {
			delete(p.deferred, n.ID)
		}
		for r := range c.LedBy(n.ID) {
			if !r.System {
				led[n.ID] += r.QPS()
			}
		}
		out = append(out, n)
	}
	slices.SortStableFunc(out, func(a, b *model.Node) int {
		if x := cmp.Compare(boolInt(a.ID == meta), boolInt(b.ID == meta)); x != 0 {
			return x
		}
		if x := cmp.Compare(led[a.ID], led[b.ID]); x != 0 {
			return x
		}
		return cmp.Compare(a.ID, b.ID)
	})
	if waits { // the meta range's leader stays last
		out = slices.DeleteFunc(out, func(n *model.Node) bool { return n.ID == meta })
	}
	return out
}

// leavesFirst reports whether node, due to change profile, leads a user range planned on another
// node that is ready to lead it: running its planned profile, active, idle, not away for a restart,
// and a voter of the range (a transfer) or without a replica move of it tried within RetryAfter.
func (p *NodeProfiles) leavesFirst(c *model.Cluster, node uint64) bool {
	if want, ok := p.profile[node]; !ok || c.Node(node) == nil || profileOf(c.Node(node)) == want {
		return false
	}
	for r := range c.LedBy(node) {
		to, ok := p.leadOn[r.ID]
		if r.System || !ok || to == node {
			continue
		}
		m := c.Node(to)
		if m == nil || !m.Active() || m.Busy() || profileOf(m) != p.profile[to] {
			continue
		}
		if a := p.away[to]; a != nil && a.back.IsZero() {
			continue
		}
		if m, tried := p.moved[r.ID]; r.IsVoter(to) || !tried || c.Now.Sub(m.at) >= p.moveWait(m) {
			return true
		}
	}
	return false
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// gain is the load that becomes matched when node runs profile, among the ranges it leads now.
func (p *NodeProfiles) gain(c *model.Cluster, node uint64, profile profileplan.Class) float64 {
	n := c.Node(node)
	g := 0.0
	for r := range c.LedBy(node) {
		if r.System {
			continue
		}
		cl := profileplan.Classify(operator.MixOf(r))
		q := r.QPS() + r.ReplicaReadQPS
		switch {
		case cl == profile && profileOf(n) != cl:
			g += q
		case cl != profile && profileOf(n) == cl:
			g -= q
		}
	}
	return g
}

func fraction(x, total float64) float64 {
	if total <= 0 {
		return 0
	}
	return x / total
}

// place proposes up to budget operators that move leaderships to their planned nodes, busiest
// ranges first, each to a node that already runs its planned profile and is not restarting. A
// replica move only when snapshot is true (none in flight): its snapshot is read from the leader's
// disk and written to the target's, and two at once from the node leading the hot range took that
// range's tenant from 165 to 82 ops/s for the 20 s they ran. Nor from a node leading a hot range
// (hotLeaders) other than the moving one: the range's leadership goes first to a voter on a node
// leading none (quietVoter), whose disk then sends the snapshot, or, with none, the move waits.
func (p *NodeProfiles) place(c *model.Cluster, v *view, restarting map[uint64]bool, budget int, snapshot bool) []*operator.Operator {
	if budget <= 0 {
		return nil
	}
	todo := p.toPlace(c, v, restarting)
	before, total := operator.ProfileMatched(c)
	hot := p.hotLeaders(c)
	var ops []*operator.Operator
	for _, r := range todo {
		if len(ops) == budget {
			break
		}
		to := p.leadOn[r.ID]
		cl := p.classes[r.ID]
		why := fmt.Sprintf("r%d is %s (%s): lead it on n%d (profile %s) rather than n%d (profile %s)",
			r.ID, cl, mixText(p.smooth[r.ID].Mix()), to, p.profile[to], r.Leader, profileOf(c.Node(r.Leader)))
		var op *operator.Operator
		switch {
		case r.IsVoter(to):
			op = operator.NewTransferLeader(NameNodeProfiles, c.Now, r, to, why)
			noteTry(p.transferred, r.ID, c.Now, TransferRetry)
		case !snapshot:
			continue
		case hot[r.Leader] != 0 && hot[r.Leader] != r.ID:
			// Its snapshot would be read off the disk of the node serving a hot range: first lead it
			// on a voter whose node serves none, or wait.
			w := p.quietVoter(c, v, r, hot, restarting)
			if w == 0 {
				continue
			}
			op = operator.NewTransferLeader(NameNodeProfiles, c.Now, r, w, why+fmt.Sprintf(
				"; first lead it on n%d: a replica move reads its snapshot off its leader's disk, and n%d leads hot r%d", w, r.Leader, hot[r.Leader]))
			to = w
		default:
			snapshot = false
			op = operator.NewMoveReplica(NameNodeProfiles, c.Now, c, r, r.Leader, to, why+"; move its leader's replica there")
			p.noteMove(r.ID, c.Now)
		}
		op.Priority = operator.PriorityLow
		q, now := r.QPS()+r.ReplicaReadQPS, profileplan.Classify(operator.MixOf(r))
		if from := v.at(r.Leader); p.profile[to] == p.profile[r.Leader] && from != nil {
			// Within a group: LPT evens the group's load, so that is what the move changes.
			op.PredictedBenefit = operator.Benefit{Metric: operator.MetricQPSGap, From: r.Leader, To: to,
				Before: from.qps - v.at(to).qps, Delta: -2 * r.QPS()}
			ops = append(ops, op)
			continue
		}
		delta := 0.0
		if string(now) == c.Node(to).Profile {
			delta += q
		}
		if string(now) == c.Node(r.Leader).Profile {
			delta -= q
		}
		op.PredictedBenefit = operator.Benefit{Metric: operator.MetricProfileMatched, Range: r.ID, From: r.Leader, To: to,
			Before: fraction(before, total), Delta: fraction(delta, total)}
		ops = append(ops, op)
	}
	return ops
}

// toPlace are the ranges place may move, busiest first: led elsewhere than planned, idle, their
// planned node ready (active, idle, running its planned profile), neither node restarting, and
// not tried as a replica move within RetryAfter.
func (p *NodeProfiles) toPlace(c *model.Cluster, v *view, restarting map[uint64]bool) []*model.Range {
	// The ranges a node restarting for a profile led when asked: its supervisor takes them back
	// once it is up, from whichever node leads them, so a move meanwhile would be undone — two more
	// hand-overs of the range, each to a cold cache. They move once it is back.
	returning := map[uint64]bool{}
	for _, a := range p.away {
		if a.back.IsZero() {
			for _, id := range a.led {
				returning[id] = true
			}
		}
	}
	var todo []*model.Range
	for id, to := range p.leadOn {
		r := c.Range(id)
		if r == nil || r.Leader == to || c.Node(r.Leader) == nil || v.busy[id] || restarting[to] || restarting[r.Leader] || returning[id] {
			continue
		}
		if n := c.Node(to); n == nil || !n.Active() || n.Busy() || profileOf(n) != p.profile[to] {
			continue
		}
		if m, ok := p.moved[id]; ok && !r.IsVoter(to) && c.Now.Sub(m.at) < p.moveWait(m) {
			continue
		}
		if m, ok := p.transferred[id]; ok && r.IsVoter(to) && c.Now.Sub(m.at) < m.wait(TransferRetry) {
			continue
		}
		todo = append(todo, r)
	}
	slices.SortFunc(todo, func(a, b *model.Range) int {
		if x := cmp.Compare(b.QPS(), a.QPS()); x != 0 {
			return x
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return todo
}

// hotLeaders maps each node leading a hot range to that range (the hottest, if several): a user
// range whose cost (costMix) is at least HotShare of the user ranges' total. Such a range loads its
// node's disk near its budget, so any other disk work there shows in its requests: a replica move's
// snapshot read off that node (the leader sends it) took the hot range's tenant to 55–65 % of its
// level for the 10–20 s it ran.
func (p *NodeProfiles) hotLeaders(c *model.Cluster) map[uint64]uint64 {
	cost := map[uint64]float64{}
	total := 0.0
	for _, r := range c.UserRanges() {
		cost[r.ID] = p.costMix(r).Cost()
		total += cost[r.ID]
	}
	share := p.cfg.HotShare
	if share <= 0 {
		share = 1 / float64(max(1, len(c.Nodes)))
	}
	out := map[uint64]uint64{}
	for _, r := range c.UserRanges() {
		if total <= 0 || cost[r.ID] < share*total || cost[r.ID] < p.cfg.MinQPS {
			continue
		}
		if h := out[r.Leader]; h == 0 || cost[r.ID] > cost[h] {
			out[r.Leader] = r.ID
		}
	}
	return out
}

// quietVoter is the voter of r (0: none) to lead it before its replica move, so that the move's
// snapshot is read off a disk that serves no hot range: live, active, idle, not restarting nor
// taking back its leaderships, leading no hot range; the one leading the least load.
func (p *NodeProfiles) quietVoter(c *model.Cluster, v *view, r *model.Range, hot map[uint64]uint64, restarting map[uint64]bool) uint64 {
	best, load := uint64(0), 0.0
	for _, id := range r.Voters() {
		n := c.Node(id)
		if id == r.Leader || hot[id] != 0 || restarting[id] || n == nil || !n.Active() || n.Busy() {
			continue
		}
		if a := p.away[id]; a != nil && a.back.IsZero() {
			continue
		}
		q := 0.0
		if l := v.at(id); l != nil {
			q = l.qps
		}
		if best == 0 || q < load {
			best, load = id, q
		}
	}
	return best
}

// mixText is a mix in words: "80% reads, 90% of them scans".
func mixText(m profileplan.Mix) string {
	t := m.Total()
	if t <= 0 {
		return "idle"
	}
	s := fmt.Sprintf("%s reads", pct(m.Reads/t))
	if m.Reads > 0 && m.Scans > 0 {
		s += fmt.Sprintf(", %s of them scans", pct(m.Scans/m.Reads))
	}
	return s + ", " + fmtQPS(t)
}

// moveTry is when a range's replica move (or, in transferred, its leadership transfer) was last
// proposed, and how many were proposed in a row, each soon after the wait of the one before ran out
// (it had not done what it was for).
type moveTry struct {
	at    time.Time
	tries int
}

// maxMoveBackoff bounds the doubling of a range's replica move wait.
const maxMoveBackoff = 8

// moveWait is how long after m the range's next replica move waits: RetryAfter, doubled for each
// earlier move in the row (at most maxMoveBackoff times). Each try streams a snapshot to the target
// and its learner is removed again when it fails: in the experiment the moves onto a saturated
// disk failed over and over, once a minute, each time loading two disks for nothing.
func (p *NodeProfiles) moveWait(m moveTry) time.Duration { return m.wait(p.cfg.RetryAfter) }

// wait is how long after m the next try waits: base, doubled for each earlier try in the row (at
// most maxMoveBackoff times).
func (m moveTry) wait(base time.Duration) time.Duration {
	return base * time.Duration(min(1<<max(m.tries-1, 0), maxMoveBackoff))
}

// noteTry records in tries a try for range id proposed at now: one in a row with the last when it
// comes within twice the last one's wait (from base), else the first of a new row.
func noteTry(tries map[uint64]moveTry, id uint64, now time.Time, base time.Duration) {
	m, n := tries[id], 1
	if !m.at.IsZero() && now.Sub(m.at) < 2*m.wait(base) {
		n = m.tries + 1
	}
	tries[id] = moveTry{at: now, tries: n}
}

// noteMove records a replica move of range id proposed at now.
func (p *NodeProfiles) noteMove(id uint64, now time.Time) {
	noteTry(p.moved, id, now, p.cfg.RetryAfter)
}

// TransferRetry is how long after a leadership transfer of a range this policy proposed it proposes
// the next, doubling while they keep coming (at most maxMoveBackoff times): a transfer to a voter
// that does not catch up (behind on its log) holds the range's proposals for each hand-over, and
// in one run of the experiment, 20 transfers to one node timed out in a 5-min reconfiguration.
const TransferRetry = 20 * time.Second
