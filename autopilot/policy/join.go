package policy

import (
	"fmt"
	"iter"
	"math"
	"sort"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

// Join strategies (docs/design/incremental-join.md, chapter 2 of the Papaioannou thesis).
const (
	// JoinIncremental moves one replica at a time, from one sender at a time, and hands each moved
	// range's leadership to the new node as soon as its replica has caught up: capacity arrives range
	// by range, and only the range in flight carries extra replication traffic.
	JoinIncremental = "incremental"
	// JoinParallel moves the new node's whole share at once from every sender (Cassandra's bootstrap);
	// the new node leads nothing until every move is done.
	JoinParallel = "parallel"
)

// Sender choices and range orders of the incremental schedule.
const (
	SenderRoundRobin  = "round-robin"
	SenderLeastLoaded = "least-loaded"
	OrderHottest      = "hottest" // ours: capacity arrives where it is needed first
	OrderKey          = "key"     // the chapter's: in key (token) order
)

// JoinConfig configures the incremental_join policy.
type JoinConfig struct {
	// Strategy is JoinIncremental (default) or JoinParallel.
	Strategy string
	// Sender picks the next sender of the incremental schedule: SenderRoundRobin (default) or
	// SenderLeastLoaded (least served load).
	Sender string
	// Order is the order of a sender's ranges: OrderHottest (default) or OrderKey.
	Order string
	// ServeAtEnd keeps the sequential schedule but gives the new node no leadership until every move
	// is done (the chapter's "sequential but not incremental" control).
	ServeAtEnd bool
	// MaxParallel bounds the moves in flight of a parallel join (default 64).
	MaxParallel int
}

func (c JoinConfig) withDefaults() JoinConfig {
	if c.Strategy == "" {
		c.Strategy = JoinIncremental
	}
	if c.Sender == "" {
		c.Sender = SenderRoundRobin
	}
	if c.Order == "" {
		c.Order = OrderHottest
	}
	if c.MaxParallel <= 0 {
		c.MaxParallel = 64
	}
	return c
}

func (c JoinConfig) validate() error {
	c = c.withDefaults()
	switch {
	case c.Strategy != JoinIncremental && c.Strategy != JoinParallel:
		return fmt.Errorf("policy: join strategy %q unknown; use %s or %s", c.Strategy, JoinIncremental, JoinParallel)
	case c.Sender != SenderRoundRobin && c.Sender != SenderLeastLoaded:
		return fmt.Errorf("policy: join sender %q unknown; use %s or %s", c.Sender, SenderRoundRobin, SenderLeastLoaded)
	case c.Order != OrderHottest && c.Order != OrderKey:
		return fmt.Errorf("policy: join order %q unknown; use %s or %s", c.Order, OrderHottest, OrderKey)
	}
	return nil
}

// JoinMark is a change of a node's join record that the autopilot writes into the meta range.
type JoinMark struct {
	Node uint64
	Join model.Join
	Why  string
}

// IncrementalJoin brings a new node into the cluster. A join starts when a live node holds no
// replica while every range is fully replicated and the node's share (total replicas / active nodes,
// what rebalance would give it) is at least one. Its record (model.Join, kept in the meta range by
// the autopilot through Marks) makes the join resumable and visible (`shoal admin nodes`,
// `shoal admin join-status`). While any join is under way, rebalance proposes nothing: the join owns
// the placement.
//
// Incremental: one snapshot in flight per joining node (a move whose learner has caught up lets the
// next one start while it promotes, hands over and removes; see streaming). Each round, first hand the node a leadership
// (the hottest of the ranges it already holds) while it leads fewer than its share, then move the next
// replica: the sender is the next node in round-robin order (or the least loaded) among those holding
// a range the node lacks, the range the sender's hottest (or first in key order). A range's snapshot
// streams from its Raft leader, so while the node leads fewer ranges than its share the senders are
// the ranges' leaders and each move hands the leadership over with it (the node serves the range the
// moment its replica has caught up); the first move comes from the autopilot's own node, which surely
// knows the newcomer. Parallel: all the share's moves at once, each from a non-leader voter, then,
// once every move is done, the leaderships at once.
type IncrementalJoin struct {
	cfg  JoinConfig
	rf   int
	next map[uint64]int // joining node → round-robin position
	// moved is when each joining node last had a move proposed or in flight (see belowShareGrace).
	moved map[uint64]time.Time
	marks []JoinMark
	// known are the records this policy decided, for the rounds before the model shows them (or if
	// writing one failed).
	known map[uint64]model.Join
}

// NewIncrementalJoin returns the incremental_join policy; rf is the replication factor.
func NewIncrementalJoin(cfg JoinConfig, rf int) *IncrementalJoin {
	if rf <= 0 {
		rf = 3
	}
	return &IncrementalJoin{cfg: cfg.withDefaults(), rf: rf, next: map[uint64]int{}, known: map[uint64]model.Join{},
		moved: map[uint64]time.Time{}}
}

// Name implements Policy.
func (p *IncrementalJoin) Name() string { return NameJoin }

// Reactive marks the join as sequential work: its next move is planned as soon as the previous one
// has made progress (see Reactive).
func (p *IncrementalJoin) Reactive() {}

// Config is the policy's configuration with defaults.
func (p *IncrementalJoin) Config() JoinConfig { return p.cfg }

// Marks returns (and forgets) the join records to write, decided in the last Propose.
func (p *IncrementalJoin) Marks() []JoinMark {
	out := p.marks
	p.marks = nil
	return out
}

func (p *IncrementalJoin) mark(m JoinMark) {
	p.marks = append(p.marks, m)
	p.known[m.Node] = m.Join
}

// healthy: every range has rf voters, so a new node is not needed for repair.
func (p *IncrementalJoin) healthy(c *model.Cluster) bool {
	for _, r := range c.Ranges {
		if voters, learners := members(r); voters < p.rf || learners > 0 || r.Leader == 0 {
			return false
		}
	}
	return len(c.Ranges) > 0
}

// members counts r's voters and learners (Voters and Learners allocate: this is a pass over every
// range).
func members(r *model.Range) (voters, learners int) {
	for _, rep := range r.Replicas {
		if rep.Learner {
			learners++
		} else {
			voters++
		}
	}
	return voters, learners
}

// settled: every range has exactly rf voters and no learner. A join is complete only then: a move
// cut short (the new node restarted between the promotion and the removal) leaves a range with a
// surplus voter, which replicate may remove from the new node, taking it back under its share.
func (p *IncrementalJoin) settled(c *model.Cluster) bool {
	for _, r := range c.Ranges {
		if voters, learners := members(r); voters != p.rf || learners > 0 {
			return false
		}
	}
	return true
}

// share is the number of user-range replicas (resp. leaderships) a node holds when they are spread
// evenly over the active nodes.
func share(c *model.Cluster, leaders bool) int {
	total, active := 0, 0
	for _, n := range c.Nodes {
		if n.Active() {
			active++
		}
	}
	if leaders {
		total = len(c.UserRanges())
	} else {
		total = c.UserVoters()
	}
	if active == 0 {
		return 0
	}
	return int(math.Floor(float64(total) / float64(active)))
}

// Propose implements Policy.
func (p *IncrementalJoin) Propose(c *model.Cluster, pending []*operator.Operator) []*operator.Operator {
	v := newView(c, pending)
	defer v.release()
	var out []*operator.Operator
	// healthy and settled are scans of every range: once per round, not once per joining node.
	isHealthy := once(func() bool { return p.healthy(c) })
	isSettled := once(func() bool { return p.settled(c) })
	for _, n := range c.Nodes {
		j := n.Join
		if k, ok := p.known[n.ID]; ok {
			if newerJoin(&k, j) {
				j = &k // decided here, not yet (or not successfully) recorded
			} else {
				delete(p.known, n.ID) // the model has caught up
			}
		}
		if j == nil {
			if !n.Live || !n.Active() || n.Replicas > 0 || !isHealthy() {
				continue
			}
			target := share(c, false)
			if target < 1 {
				continue
			}
			j = &model.Join{Strategy: p.strategy(), Started: c.Now, Target: target}
			p.mark(JoinMark{Node: n.ID, Join: *j, Why: fmt.Sprintf(
				"n%d joined with no replica: it is to receive %d replicas (its share), %s", n.ID, target, p.describe())})
		}
		if !j.Active() || !n.Live {
			continue
		}
		if j.FirstServed.IsZero() && n.Leaders > 0 && userLeaders(c, n.ID) > 0 {
			rec := *j
			rec.FirstServed = c.Now
			j = &rec
			p.mark(JoinMark{Node: n.ID, Join: rec, Why: fmt.Sprintf("n%d serves its first range", n.ID)})
		}
		ops, done := p.plan(c, v, n, j, pending)
		for _, op := range ops {
			v.add(op)
			out = append(out, op)
		}
		if done && isSettled() {
			rec := *j
			rec.Done = c.Now
			p.mark(JoinMark{Node: n.ID, Join: rec, Why: fmt.Sprintf(
				"n%d holds %d replicas and leads %d ranges: join complete after %s", n.ID, n.Voters, n.Leaders,
				roundDur(c.Now.Sub(j.Started)))})
			delete(p.next, n.ID)
		}
	}
	return out
}

// once returns f's answer, asking f the first time only.
func once(f func() bool) func() bool {
	asked, answer := false, false
	return func() bool {
		if !asked {
			asked, answer = true, f()
		}
		return answer
	}
}

func (p *IncrementalJoin) strategy() string {
	return p.cfg.Strategy
}

func (p *IncrementalJoin) describe() string {
	if p.cfg.Strategy == JoinParallel {
		return "parallel: every move at once, leaderships at the end"
	}
	s := fmt.Sprintf("incremental: one move at a time, sender %s, ranges %s first", p.cfg.Sender, p.cfg.Order)
	if p.cfg.ServeAtEnd {
		s += ", leaderships only at the end"
	}
	return s
}

// userLeaders counts the user ranges node leads.
func userLeaders(c *model.Cluster, node uint64) int {
	n := 0
	for r := range c.LedBy(node) {
		if !r.System {
			n++
		}
	}
	return n
}

// inFlight counts the pending operators that involve node.
func inFlight(pending []*operator.Operator, node uint64) (moves, transfers int) {
	for _, op := range pending {
		if _, ok := op.Influence[node]; !ok {
			continue
		}
		if op.Kind == operator.KindTransferLeader {
			transfers++
		} else {
			moves++
		}
	}
	return moves, transfers
}

// streaming counts the pending moves to node whose snapshot is (or is about to be) in flight: their
// add-learner step is not complete. The executor completes that step only once the learner has
// caught up (kv's relocation waits for it), so a move past it has streamed its data; its promotion,
// leadership hand-over and removal overlap the next move's snapshot, and the per-move overhead of
// those steps does not add up over the join. The model alone cannot tell: a learner that has caught
// up is still a learner until its promotion.
func streaming(c *model.Cluster, pending []*operator.Operator, node uint64) int {
	n := 0
	for _, op := range pending {
		if _, ok := op.Influence[node]; !ok || op.Kind == operator.KindTransferLeader {
			continue
		}
		if r := c.Range(op.RangeID); r != nil && r.IsVoter(node) {
			continue
		}
		if i := addLearnerStep(op, node); i < 0 || op.StepsDone() <= i {
			n++
		}
	}
	return n
}

// addLearnerStep returns the index of op's step that adds a learner on node (-1: none).
func addLearnerStep(op *operator.Operator, node uint64) int {
	for i, s := range op.Steps {
		if al, ok := s.(operator.AddLearner); ok && al.Node == node {
			return i
		}
	}
	return -1
}

// strayLearner reports whether node holds a learner that no pending operator is moving: one left by a
// failed move (say, the node restarted), in flight until replicate removes it.
func strayLearner(c *model.Cluster, pending []*operator.Operator, node uint64) bool {
	moving := map[uint64]bool{}
	for _, op := range pending {
		if _, ok := op.Influence[node]; ok {
			moving[op.RangeID] = true
		}
	}
	for r := range c.RangesOf(node) {
		if rep, ok := r.ReplicaOn(node); ok && rep.Learner && !moving[r.ID] {
			return true
		}
	}
	return false
}

// plan proposes the next operators of n's join and reports whether the join is complete.
func (p *IncrementalJoin) plan(c *model.Cluster, v *view, n *model.Node, j *model.Join, pending []*operator.Operator) ([]*operator.Operator, bool) {
	moves, transfers := inFlight(pending, n.ID)
	held := v.at(n.ID).replicas // includes moves in flight
	leaderShare := share(c, true)
	parallel := j.Strategy == JoinParallel
	atEnd := parallel || p.cfg.ServeAtEnd
	if !parallel && (streaming(c, pending, n.ID)+transfers > 0 || strayLearner(c, pending, n.ID) ||
		!atEnd && userLeaders(c, n.ID) == 0 && moves > 0) {
		// One snapshot at a time (see streaming: a move that has streamed its data lets the next one
		// start); a learner left on the node by a failed move is in flight too until replicate removes it.
		// The first move is not overlapped: the node serves its first range (the hand-over may wait
		// for its cache to warm, up to seconds) before anything else streams to it, so it never ends
		// up holding several ranges and leading none (measured: 3 of 8 joins in test/join_test.go).
		return nil, false
	}
	// Incremental: hand over a leadership of a range the node already holds, before the next move.
	if !atEnd && v.at(n.ID).leaders < leaderShare {
		if op := p.transfer(c, v, n); op != nil {
			return []*operator.Operator{op}, false
		}
	}
	if held < j.Target {
		var out []*operator.Operator
		budget := 1
		if parallel {
			budget = p.cfg.MaxParallel - moves
		}
		for ; budget > 0 && held < j.Target; budget-- {
			// A move from the range's leader hands the leadership over too: only while the node
			// leads fewer ranges than its share (and never before the end for parallel joins).
			keepLeader := atEnd || v.at(n.ID).leaders >= leaderShare
			op := p.move(c, v, n, j.Target, keepLeader)
			if op == nil {
				break
			}
			v.add(op)
			out = append(out, op)
			held++
		}
		if len(out) > 0 || moves > 0 {
			p.moved[n.ID] = c.Now
			return out, false
		}
		if last, ok := p.moved[n.ID]; !ok || c.Now.Sub(last) < belowShareGrace {
			// No move possible this round (the ranges it lacks are busy, say with replicate removing
			// what a restart of the new node left): not done below its share yet.
			if !ok {
				p.moved[n.ID] = c.Now
			}
			return nil, false
		}
	}
	if moves > 0 {
		return nil, false
	}
	// Every move is done: serve (all at once for parallel and serve-at-end joins).
	var out []*operator.Operator
	for v.at(n.ID).leaders < leaderShare {
		op := p.transfer(c, v, n)
		if op == nil {
			break
		}
		v.add(op)
		out = append(out, op)
		if !atEnd {
			break
		}
	}
	if len(out) > 0 || transfers > 0 {
		return out, false
	}
	if v.at(n.ID).leaders < leaderShare && couldLead(c, n.ID) {
		// Every range it could lead is busy (another policy's operator, an election): not done yet.
		return nil, false
	}
	return nil, true
}

// belowShareGrace is how long a join may find no move possible before it is done below its share:
// ranges are busy for a while after a restart of the new node (a join once ended at 2 of 3 replicas),
// but a join must not stay open for ever when its share cannot be reached (holding it open without
// a bound stalled joins in tests).
const belowShareGrace = 30 * time.Second

// couldLead reports whether node holds a voter of a user range it does not lead.
func couldLead(c *model.Cluster, node uint64) bool {
	for r := range c.RangesOf(node) {
		if !r.System && r.IsVoter(node) && r.Leader != node {
			return true
		}
	}
	return false
}

// ordered sorts ranges by the configured order: hottest first, or key order.
func (p *IncrementalJoin) ordered(rs []*model.Range) []*model.Range {
	out := append([]*model.Range(nil), rs...)
	if p.cfg.Order == OrderHottest {
		sort.SliceStable(out, func(i, j int) bool { return out[i].QPS() > out[j].QPS() })
	}
	return out
}

// transfer hands n the leadership of the hottest user range it holds as a voter but does not lead.
func (p *IncrementalJoin) transfer(c *model.Cluster, v *view, n *model.Node) *operator.Operator {
	var cands []*model.Range
	for r := range c.RangesOf(n.ID) {
		if !r.System && r.IsVoter(n.ID) && r.Leader != n.ID && r.Leader != 0 && !v.busy[r.ID] {
			cands = append(cands, r)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	// Take it from a node that leads the most, the configured order breaking ties: a parallel join
	// hands every leadership over at once, and taking the hottest from whichever node led it left
	// the donors unbalanced (5/8/5/6 leaderships once, measured).
	most := -1
	var top []*model.Range
	for _, r := range cands {
		switch l := v.leadersOf(r.Leader); {
		case l > most:
			most, top = l, []*model.Range{r}
		case l == most:
			top = append(top, r)
		}
	}
	r := p.ordered(top)[0]
	op := operator.NewTransferLeader(NameJoin, c.Now, r, n.ID, fmt.Sprintf(
		"joining n%d holds r%d (%s): it serves it now (%d of its %d leaderships)", n.ID, r.ID, fmtQPS(r.QPS()),
		v.at(n.ID).leaders+1, share(c, true)))
	op.PredictedBenefit = operator.Benefit{Metric: operator.MetricNodeLeaders, From: r.Leader, To: n.ID,
		Before: float64(v.at(r.Leader).leaders), Delta: -1}
	return op
}

// move moves the next replica to n: from the next sender in the schedule (incremental) or from a
// non-leader voter of each range (parallel and serve-at-end, so that leadership stays put).
func (p *IncrementalJoin) move(c *model.Cluster, v *view, n *model.Node, target int, keepLeader bool) *operator.Operator {
	ss := joinSenders{c: c, v: v, n: n, keepLeader: keepLeader, hottest: p.cfg.Order == OrderHottest}
	var from *model.Node
	// The join's first move comes from the autopilot's own node (it leads the meta range) when it can:
	// that node has surely heard of the newcomer, where another may not have yet and refuse the move.
	if v.at(n.ID).replicas == 0 {
		if self := c.Node(metaLeader(c)); self != nil && ss.isSender(self) {
			from = self
			if !keepLeader && p.cfg.Sender != SenderLeastLoaded {
				p.next[n.ID] = 1 // the turn after the only sender's
			}
		}
	}
	if from == nil {
		var fallback bool
		switch {
		case keepLeader:
			from = ss.mostLoaded()
		case p.cfg.Sender == SenderLeastLoaded:
			from, fallback = ss.leastBusy(), true
		default:
			from, fallback = p.inTurn(ss), true
		}
		if from == nil {
			if fallback {
				return p.move(c, v, n, target, true) // no live leader to stream a range with its leadership
			}
			return nil
		}
	}
	r := ss.first(from.ID)
	why := fmt.Sprintf("joining n%d (%d of %d replicas): move r%d (%s) from n%d", n.ID, v.at(n.ID).replicas+1,
		target, r.ID, fmtQPS(r.QPS()), from.ID)
	if !keepLeader && r.Leader == from.ID {
		why += ", with its leadership"
	}
	op := operator.NewMoveReplica(NameJoin, c.Now, c, r, from.ID, n.ID, why)
	op.PredictedBenefit = operator.Benefit{Metric: operator.MetricNodeReplicas, From: from.ID, To: n.ID,
		Before: float64(v.at(from.ID).replicas), Delta: -1}
	return op
}

// inTurn is the sender whose turn it is (nil: none): turn i goes to the i-th sender, and the turns
// start with the sender of the hottest range.
func (p *IncrementalJoin) inTurn(ss joinSenders) *model.Node {
	i, started := p.next[ss.n.ID]
	var from *model.Node
	var list []*model.Node
	if started {
		// Only when there are no more than i senders does the turn wrap around, and only then does
		// it take counting them all.
		for _, sn := range ss.c.Nodes {
			if ss.isSender(sn) {
				if len(list) == i {
					from = sn
					break
				}
				list = append(list, sn)
			}
		}
	} else if list = ss.all(); len(list) > 0 {
		firsts := make([]*model.Range, len(list))
		for k, sn := range list {
			firsts[k] = ss.first(sn.ID)
		}
		for k := range list {
			if firsts[k].QPS() > firsts[i].QPS() {
				i = k
			}
		}
	}
	if from == nil {
		if len(list) == 0 {
			return nil
		}
		i %= len(list)
		from = list[i]
	}
	p.next[ss.n.ID] = i + 1
	return from
}

// joinSenders are the nodes that can send a joining node n a range, and the range each sends first.
//
// A range's snapshot always streams from its Raft leader. While the node is to take leaderships
// (incremental, under its leader share: keepLeader false), the sender of a range is therefore its
// leader, whose replica leaves with the leadership: the senders that take turns are the nodes that
// stream. A sender's ranges come from the model's per-node index: scanning every range for every
// joining node made a 10 % scale-out quadratic.
type joinSenders struct {
	c          *model.Cluster
	v          *view
	n          *model.Node
	keepLeader bool
	hottest    bool // the sender's hottest range goes first (else the first eligible one)
}

func (ss joinSenders) offers(sender uint64) iter.Seq[*model.Range] {
	if ss.keepLeader {
		return ss.c.RangesOf(sender)
	}
	return ss.c.LedBy(sender)
}

func (ss joinSenders) eligible(sender uint64, r *model.Range) bool {
	return !r.System && !r.HasReplica(ss.n.ID) && !ss.v.busy[r.ID] && r.IsVoter(sender) &&
		(ss.keepLeader && r.Leader != sender || !ss.keepLeader && r.Leader == sender)
}

// first is the sender's range that the configured order puts first (nil: it has none to give).
func (ss joinSenders) first(sender uint64) *model.Range {
	var best *model.Range
	for r := range ss.offers(sender) {
		if !ss.eligible(sender, r) {
			continue
		}
		if !ss.hottest {
			return r
		}
		if best == nil || r.QPS() > best.QPS() {
			best = r
		}
	}
	return best
}

// isSender reports whether sn is live with a range to give. Most choices need a few senders only
// (the next in turn, the most loaded): listing them all for every move, a pass over every node's
// ranges, was most of a 10 % scale-out's cost at 1 000 nodes.
func (ss joinSenders) isSender(sn *model.Node) bool {
	if !sn.Live {
		return false
	}
	for r := range ss.offers(sn.ID) {
		if ss.eligible(sn.ID, r) {
			return true
		}
	}
	return false
}

// all lists the senders in c.Nodes' order.
func (ss joinSenders) all() []*model.Node {
	var out []*model.Node
	for _, sn := range ss.c.Nodes {
		if ss.isSender(sn) {
			out = append(out, sn)
		}
	}
	return out
}

// mostLoaded is the sender with the most replicas left (nil: none), for parallel moves. The most
// loaded live node is nearly always a sender; if not, the list decides.
func (ss joinSenders) mostLoaded() *model.Node {
	var from *model.Node
	for _, sn := range ss.c.Nodes {
		if sn.Live && (from == nil || ss.v.lessLoaded(from, sn)) {
			from = sn
		}
	}
	if from != nil && !ss.isSender(from) {
		from = nil
		for _, sn := range ss.all() {
			if from == nil || ss.v.lessLoaded(from, sn) {
				from = sn
			}
		}
	}
	return from
}

// leastBusy is the sender serving the fewest requests (nil: none).
func (ss joinSenders) leastBusy() *model.Node {
	all := ss.all()
	if len(all) == 0 {
		return nil
	}
	return sortedNodes(all, func(a, b *model.Node) bool {
		if ss.v.at(a.ID).qps != ss.v.at(b.ID).qps {
			return ss.v.at(a.ID).qps < ss.v.at(b.ID).qps
		}
		return a.ID < b.ID
	})[0]
}

// newerJoin reports whether record a is further along than b (nil: no record).
func newerJoin(a, b *model.Join) bool {
	if b == nil {
		return true
	}
	if !a.Started.Equal(b.Started) {
		return a.Started.After(b.Started)
	}
	stage := func(j *model.Join) int {
		switch {
		case !j.Done.IsZero():
			return 2
		case !j.FirstServed.IsZero():
			return 1
		}
		return 0
	}
	return stage(a) > stage(b)
}

// metaLeader is the node leading the meta range (where the autopilot runs), or 0.
func metaLeader(c *model.Cluster) uint64 {
	for _, r := range c.Ranges {
		if r.System {
			return r.Leader
		}
	}
	return 0
}
