// Package profileplan decides which engine profile each node should run and which ranges it should
// serve, from the ranges' measured request mix: Cruz's MeT (thesis chapter 3). Ranges are classified
// read, write, read/write or scan from their exponentially smoothed mix (§3.3); the nodes are split
// into one group per class in proportion to the class's share of the load; each group's ranges are
// spread over its nodes by Longest Processing Time with a per-node cap on the count (Alg. 2); and the
// new layout is matched to the current one so that as few ranges move and as few nodes change
// profile as the matching finds (Alg. 3). Alg. 1 sizes the cluster: nodes are added 1, 2, 4 … at a
// time while too many are overloaded, and removed one at a time.
//
// It is a leaf: it sees ranges as ids with request rates and nodes as ids with a profile, and never
// reads a cluster or moves anything; the node_profiles policy turns its plan into operators.
package profileplan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// rewriteTaskPrefix begins the name of the heavy task a node runs while it rewrites its store with
// a new profile's block size (RewriteTaskName, IsRewriteTask).
const rewriteTaskPrefix = "profile "

// RewriteTaskName names the task a node's store rewrite for profile runs as: the node announces it,
// and node_profiles waits on a node that runs it.
func RewriteTaskName(profile string) string {
	return rewriteTaskPrefix + profile + ": rewrite with its block size"
}

// IsRewriteTask reports whether a task of that name is a store rewrite for a profile.
func IsRewriteTask(name string) bool { return strings.HasPrefix(name, rewriteTaskPrefix) }

// Class is a range's access pattern, and the engine profile that suits it.
type Class string

// The classes (§3.1.3); Default is a node's profile before any plan.
const (
	Read      Class = "read"
	Write     Class = "write"
	ReadWrite Class = "readwrite"
	Scan      Class = "scan"
	Default   Class = "default"
)

// Classes lists the classes a range can have, in a fixed order.
var Classes = []Class{Read, Write, ReadWrite, Scan}

// Mix is a range's requests per second by kind; Scans are also counted in Reads. ScanBytes are the
// bytes of the rows its scans return per second — rows times the bytes of a row (0: not measured).
// It is what the workload asks of the range, not what the engine loads to answer it: the blocks a
// scan loads depend on the data block size of the leader's profile (a scan of a few rows loads a
// whole 128 KiB block with the scan profile, a 32 KiB one with the read profile), and a cost that
// moved with the profile would move the plan that set the profile.
type Mix struct {
	Reads, Writes, Scans float64
	ScanBytes            float64
}

// RefBlockBytes is the unit a scan's bytes are counted in: the read profile's data block, about
// what one point read from disk loads.
const RefBlockBytes = 32 << 10

// Total is the range's requests per second.
func (m Mix) Total() float64 { return m.Reads + m.Writes }

// Cost is the range's load as the groups and LPT weigh it: a point read or a write is one unit, a
// scan the bytes of its rows in RefBlockBytes units (at least one). Counting requests alone, a scan
// of a hundred rows would weigh as much as a point read, and the scan group would get too few
// nodes. The cost depends on the workload only, never on the profile of the node serving it.
func (m Mix) Cost() float64 {
	return m.Reads - m.Scans + m.Writes + max(m.Scans, m.ScanBytes/RefBlockBytes)
}

// Threshold is the share above which a kind of request decides the class (the thesis's 60 %).
const Threshold = 0.6

// Classify is m's class: scan if more than Threshold of the reads are scans and reads dominate,
// read or write if more than Threshold of the requests are, read/write otherwise (and for no load).
func Classify(m Mix) Class {
	t := m.Total()
	switch {
	case t <= 0:
		return ReadWrite
	case m.Reads/t > Threshold && m.Scans/m.Reads > Threshold:
		return Scan
	case m.Reads/t > Threshold:
		return Read
	case m.Writes/t > Threshold:
		return Write
	}
	return ReadWrite
}

// Band is the hysteresis of Reclassify: a range keeps its class until its mix is past the
// threshold by this much. A YCSB F range (half reads, half read-modify-writes: two reads a write,
// 67 % reads) sampled every few seconds swings between about 55 % and 70 %, and classified at 60 %
// alone it flipped between read and read/write and moved between their nodes each time.
const Band = 0.1

// MaxBand bounds NoiseBand: a class with a mix 30 points past its threshold changes however few
// requests show it.
const MaxBand = 0.3

// NoiseBand is the hysteresis for a mix measured over requests requests: Band plus two standard
// errors of a share near one half (1/√requests), at most MaxBand. Sampled every 3 s, a range of
// 6 requests a second smoothed over about three samples rests on some 50 requests, and its shares
// swing by ±14 points from sampling alone: with Band only, ranges of A (half reads) and F (two
// thirds) turned read, read/write and write in turn, each change a new plan and two leadership
// moves (three plans in the 50 s after a reconfiguration's last restart). At the thesis's 30-s
// samples or hundreds of requests a second it is Band.
func NoiseBand(requests float64) float64 {
	if requests <= 0 {
		return MaxBand
	}
	return min(MaxBand, Band+1/math.Sqrt(requests))
}

// Reclassify is ReclassifyBand with Band.
func Reclassify(had Class, m Mix) Class { return ReclassifyBand(had, m, Band) }

// ReclassifyBand is m's class for a range that had class had: had while m is within band of it — a
// read or scan range stays while more than Threshold−band of its requests are reads (and, for a
// scan range, of its reads scans; for a read one, at most Threshold+band), a write range while more
// than Threshold−band are writes, a read/write range until reads or writes pass Threshold+band —
// else Classify(m). An unplanned range (had "") or one with no load is classified afresh.
func ReclassifyBand(had Class, m Mix, band float64) Class {
	t := m.Total()
	if t <= 0 {
		return Classify(m)
	}
	reads, writes, scans := m.Reads/t, m.Writes/t, 0.0
	if m.Reads > 0 {
		scans = m.Scans / m.Reads
	}
	lo, hi := Threshold-band, Threshold+band
	keep := false
	switch had {
	case Read:
		keep = reads > lo && scans <= hi
	case Scan:
		keep = reads > lo && scans > lo
	case Write:
		keep = writes > lo
	case ReadWrite:
		keep = reads <= hi && writes <= hi
	}
	if keep {
		return had
	}
	return Classify(m)
}

// Smoother smooths a range's mix exponentially over its samples (the newest weighs most) and says
// when it has seen enough of them to decide: the thesis samples every 30 s and decides after six.
type Smoother struct {
	Alpha   float64 // weight of the newest sample (default 0.5)
	MinSeen int     // samples before Ready (default 6)
	mix     Mix
	seen    int
}

// Observe adds one sample.
func (s *Smoother) Observe(m Mix) {
	a := s.Alpha
	if a <= 0 || a > 1 {
		a = 0.5
	}
	if s.seen == 0 {
		s.mix = m
	} else {
		s.mix = Mix{Reads: a*m.Reads + (1-a)*s.mix.Reads, Writes: a*m.Writes + (1-a)*s.mix.Writes,
			Scans: a*m.Scans + (1-a)*s.mix.Scans, ScanBytes: a*m.ScanBytes + (1-a)*s.mix.ScanBytes}
	}
	s.seen++
}

// Mix is the smoothed mix.
func (s *Smoother) Mix() Mix { return s.mix }

// Ready reports whether enough samples were seen to decide on them.
func (s *Smoother) Ready() bool {
	n := s.MinSeen
	if n <= 0 {
		n = 6
	}
	return s.seen >= n
}

// Range is one range as the plan sees it: its id and smoothed mix, its class when the caller
// decided it (with hysteresis; "" classifies the mix), and the nodes holding a voting replica of it
// (nil: unknown).
type Range struct {
	ID     uint64
	Mix    Mix
	Class  Class
	Voters []uint64
}

// VoterSlack is how much a range may raise its group's highest load when it goes to a node of the
// group that holds a voter of it rather than to the node LPT chose, which holds none: a leadership
// transfer instead of a replica move, whose snapshot loads both nodes' disks.
const VoterSlack = 0.1

// Node is one node: its id, its current profile and the ranges it serves now. Pinned marks a node
// whose profile change costs more than the others' (the node_profiles policy pins the node the
// autopilot runs on: its restart moves the autopilot, which starts again without its samples).
type Node struct {
	ID      uint64
	Profile Class
	Ranges  []uint64
	Pinned  bool
}

// Assignment is one node's part of a plan.
type Assignment struct {
	Node    uint64
	Profile Class
	Ranges  []uint64
	Load    float64 // the Cost of its ranges
}

// Plan is the target layout and what reaching it costs.
type Plan struct {
	Assignments []Assignment // by node id
	// Classes counts the ranges of each class, Shares the class's share of the load, Groups the nodes
	// it gets.
	Classes map[Class]int
	Shares  map[Class]float64
	Groups  map[Class]int
	// Moves counts the ranges whose node changes; Reprofiled the nodes whose profile changes.
	Moves, Reprofiled int
}

// Groups gives each class with load a number of the n nodes in proportion to its share of the load
// (largest remainders), at least one each while there are nodes to give; classes without load get
// none. With fewer nodes than loaded classes the heaviest classes get one each and the others
// share theirs (Merge).
func Groups(load map[Class]float64, n int) map[Class]int {
	total := 0.0
	var loaded []Class
	for _, c := range Classes {
		if load[c] > 0 {
			loaded, total = append(loaded, c), total+load[c]
		}
	}
	out := map[Class]int{}
	if n <= 0 || len(loaded) == 0 {
		return out
	}
	slices.SortStableFunc(loaded, func(a, b Class) int { return cmp.Compare(load[b], load[a]) })
	if n <= len(loaded) {
		for _, c := range loaded[:n] {
			out[c] = 1
		}
		return out
	}
	type rem struct {
		c Class
		r float64
	}
	var rems []rem
	given := 0
	for _, c := range loaded {
		exact := load[c] / total * float64(n)
		k := max(1, int(math.Floor(exact)))
		out[c], given = k, given+k
		rems = append(rems, rem{c, exact - math.Floor(exact)})
	}
	slices.SortStableFunc(rems, func(a, b rem) int { return cmp.Compare(b.r, a.r) })
	for i := 0; given < n; i = (i + 1) % len(rems) {
		out[rems[i].c]++
		given++
	}
	for given > n { // the floors of one raised the total above n: take from the largest groups
		big := loaded[0]
		for _, c := range loaded {
			if out[c] > out[big] {
				big = c
			}
		}
		out[big]--
		given--
	}
	return out
}

// Merge is the class whose group serves class c when c got no nodes of its own: the loaded class
// with nodes whose profile is nearest (read/write serves all; scan and read are close).
func Merge(c Class, groups map[Class]int) Class {
	if groups[c] > 0 {
		return c
	}
	near := map[Class][]Class{Read: {Scan, ReadWrite, Write}, Scan: {Read, ReadWrite, Write}, Write: {ReadWrite, Read, Scan}, ReadWrite: {Read, Write, Scan}}
	for _, o := range near[c] {
		if groups[o] > 0 {
			return o
		}
	}
	return c
}

// LPT spreads ranges over nodes: heaviest first, each to the least loaded node that holds fewer than
// max ranges (Alg. 2; max = ⌈ranges/nodes⌉ balances the count as well as the load). The cap yields
// where keeping it would put a range on a node already above the mean load while another node,
// with it, stays at or below the mean: a hot range's node then leads it alone. Capped, the fifth
// read range went beside tenant C's hot range (95 of the group's 146 units) and its writes took
// that node's disk from C's reads. It returns each node's ranges in nodes' order.
func LPT(ranges []Range, nodes int, max int) ([][]uint64, []float64) {
	if nodes <= 0 {
		return nil, nil
	}
	if max <= 0 {
		max = (len(ranges) + nodes - 1) / nodes
	}
	total := 0.0
	for _, r := range ranges {
		total += r.Mix.Cost()
	}
	mean := total / float64(nodes)
	rs := slices.Clone(ranges)
	slices.SortStableFunc(rs, func(a, b Range) int {
		if c := cmp.Compare(b.Mix.Cost(), a.Mix.Cost()); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	out, load := make([][]uint64, nodes), make([]float64, nodes)
	for _, r := range rs {
		best := -1
		for i := range nodes {
			if len(out[i]) < max && (best < 0 || load[i] < load[best]) {
				best = i
			}
		}
		least := slices.Index(load, slices.Min(load))
		switch {
		case best < 0: // every node at the cap: a cap below ⌈ranges/nodes⌉ cannot hold them all
			best = least
		case load[best] > mean && load[least]+r.Mix.Cost() <= mean:
			best = least
		}
		out[best], load[best] = append(out[best], r.ID), load[best]+r.Mix.Cost()
	}
	return out, load
}

// Make plans the layout of ranges over nodes: classify, group, assign (LPT per group), and match the
// result to the current layout (Alg. 3: each current node, in order of the most ranges it would keep,
// takes the target set of its own profile, else of any profile, that overlaps its ranges most).
// Last, a range planned on a node that holds no voter of it goes to a node of the same profile that
// holds one, if its group stays within VoterSlack of its highest load (preferVoters).
func Make(ranges []Range, nodes []Node) (Plan, error) {
	if len(nodes) == 0 {
		return Plan{}, fmt.Errorf("profileplan: no nodes")
	}
	p, served := grouped(ranges, len(nodes))
	var target []Assignment
	for _, c := range Classes {
		k := p.Groups[c]
		if k == 0 {
			continue
		}
		sets, loads := LPT(served[c], k, 0)
		for i := range sets {
			target = append(target, Assignment{Profile: c, Ranges: sets[i], Load: loads[i]})
		}
	}
	p.Assignments = preferVoters(match(nodes, target), ranges)
	p.count(nodes)
	return p, nil
}

// grouped classifies ranges and sizes the groups of n nodes: the plan's Classes, Shares and Groups,
// and the ranges each group serves (a class without nodes merged into the nearest one's).
func grouped(ranges []Range, n int) (Plan, map[Class][]Range) {
	p := Plan{Classes: map[Class]int{}, Shares: map[Class]float64{}}
	byClass := map[Class][]Range{}
	load, total := map[Class]float64{}, 0.0
	for _, r := range ranges {
		c := r.Class
		if c == "" {
			c = Classify(r.Mix)
		}
		p.Classes[c]++
		load[c] += r.Mix.Cost()
		total += r.Mix.Cost()
		byClass[c] = append(byClass[c], r)
	}
	if total == 0 { // no load yet: count ranges instead, as the thesis groups by partitions
		for c, k := range p.Classes {
			load[c] = float64(k)
		}
		total = float64(len(ranges))
	}
	for c, l := range load {
		p.Shares[c] = l / total
	}
	p.Groups = Groups(load, n)
	served := map[Class][]Range{}
	for _, c := range Classes {
		m := Merge(c, p.Groups)
		served[m] = append(served[m], byClass[c]...)
	}
	return p, served
}

// count sets Moves and Reprofiled: the ranges the plan puts on another node than nodes' current
// layout, and the nodes whose profile it changes.
func (p *Plan) count(nodes []Node) {
	holder := map[uint64]uint64{}
	profile := map[uint64]Class{}
	for _, n := range nodes {
		for _, r := range n.Ranges {
			holder[r] = n.ID
		}
		profile[n.ID] = n.Profile
	}
	p.Moves, p.Reprofiled = 0, 0
	for _, a := range p.Assignments {
		if profile[a.Node] != a.Profile {
			p.Reprofiled++
		}
		for _, r := range a.Ranges {
			if h, ok := holder[r]; !ok || h != a.Node {
				p.Moves++
			}
		}
	}
}

// nearGroups reports whether the groups the loads ask for now are those of prev give or take one
// node a class, with the same classes: then the groups stay. The shares move with the plan itself —
// a class served by nodes of its profile does more, and the others' shares fall while their nodes
// restart — so re-sizing on them gave a class's second node to another class and restarted a node
// the plan had just set (the read group's second node turned scan after the scan node made E
// faster and the read restarts slowed C).
func nearGroups(now, prev map[Class]int) bool {
	if len(now) != len(prev) {
		return false
	}
	for c, k := range now {
		if j, ok := prev[c]; !ok || k-j > 1 || j-k > 1 {
			return false
		}
	}
	return true
}

// Update brings plan prev to ranges with the fewest moves, when the groups come out as prev's give
// or take a node a class (nearGroups; prev's are kept) on the same nodes: each range stays on its planned node while its class
// is still that node's profile; a range new to the plan or whose class changed goes to the least
// loaded node of its group, one holding a voter of it if that raises the group's highest load by
// at most VoterSlack; ranges gone leave. Making the plan again instead re-ran LPT on loads that had
// drifted, and moved ranges of unchanged classes between the nodes of a group. ok is false when
// the groups or the nodes differ from prev's: then Make plans afresh.
func Update(prev Plan, ranges []Range, nodes []Node) (p Plan, ok bool) {
	p, served := grouped(ranges, len(nodes))
	if !nearGroups(p.Groups, prev.Groups) || len(prev.Assignments) != len(nodes) {
		return p, false
	}
	p.Groups = prev.Groups
	at := map[uint64]int{}     // node → its index in p.Assignments
	was := map[uint64]uint64{} // range → its node in prev
	for i, a := range prev.Assignments {
		if !slices.ContainsFunc(nodes, func(n Node) bool { return n.ID == a.Node }) {
			return p, false
		}
		at[a.Node] = i
		p.Assignments = append(p.Assignments, Assignment{Node: a.Node, Profile: a.Profile})
		for _, r := range a.Ranges {
			was[r] = a.Node
		}
	}
	var moved []Range
	for _, c := range Classes {
		for _, r := range served[c] {
			if n, ok := was[r.ID]; ok && p.Assignments[at[n]].Profile == c {
				a := &p.Assignments[at[n]]
				a.Ranges, a.Load = append(a.Ranges, r.ID), a.Load+r.Mix.Cost()
				continue
			}
			moved = append(moved, r)
		}
	}
	slices.SortStableFunc(moved, func(a, b Range) int { return cmp.Compare(b.Mix.Cost(), a.Mix.Cost()) })
	for _, r := range moved {
		place(p.Assignments, r, Merge(classOf(r), p.Groups))
	}
	p.count(nodes)
	return p, true
}

func classOf(r Range) Class {
	if r.Class != "" {
		return r.Class
	}
	return Classify(r.Mix)
}

// place puts r on the least loaded node of profile c, or on the least loaded of them holding a voter
// of r when that keeps the group's highest load within VoterSlack of what it would be.
func place(as []Assignment, r Range, c Class) {
	best, voter := -1, -1
	top := 0.0
	for i, a := range as {
		if a.Profile != c {
			continue
		}
		top = max(top, a.Load)
		if best < 0 || a.Load < as[best].Load {
			best = i
		}
		if slices.Contains(r.Voters, a.Node) && (voter < 0 || a.Load < as[voter].Load) {
			voter = i
		}
	}
	if best < 0 {
		return
	}
	limit := max(top, as[best].Load+r.Mix.Cost()) * (1 + VoterSlack)
	if voter >= 0 && as[voter].Load+r.Mix.Cost() <= limit && !soleTop(as, voter) {
		best = voter
	}
	as[best].Ranges, as[best].Load = append(as[best].Ranges, r.ID), as[best].Load+r.Mix.Cost()
}

// soleTop reports whether as[i] alone carries its group's highest load. It takes no range for the
// voter it holds (VoterSlack): a few units more there went beside the group's hot range, whose
// node's disk the small range's writes then shared (tenant A's range beside C's hot one halved C).
func soleTop(as []Assignment, i int) bool {
	for j, a := range as {
		if j != i && a.Profile == as[i].Profile && a.Load >= as[i].Load {
			return false
		}
	}
	return true
}

// preferVoters moves each range whose planned node holds no voter of it to the least loaded node of
// the same profile that holds one, when that raises the group's highest load by at most VoterSlack.
func preferVoters(as []Assignment, ranges []Range) []Assignment {
	byID := map[uint64]Range{}
	for _, r := range ranges {
		byID[r.ID] = r
	}
	top := map[Class]float64{}
	for _, a := range as {
		top[a.Profile] = max(top[a.Profile], a.Load)
	}
	for i := range as {
		for _, id := range slices.Clone(as[i].Ranges) {
			r := byID[id]
			if len(r.Voters) == 0 || slices.Contains(r.Voters, as[i].Node) {
				continue
			}
			best := -1
			for j := range as {
				if j == i || as[j].Profile != as[i].Profile || !slices.Contains(r.Voters, as[j].Node) ||
					as[j].Load+r.Mix.Cost() > top[as[i].Profile]*(1+VoterSlack) || soleTop(as, j) {
					continue
				}
				if best < 0 || as[j].Load < as[best].Load {
					best = j
				}
			}
			if best < 0 {
				continue
			}
			as[i].Ranges = slices.DeleteFunc(as[i].Ranges, func(x uint64) bool { return x == id })
			as[i].Load -= r.Mix.Cost()
			as[best].Ranges = append(as[best].Ranges, id)
			as[best].Load += r.Mix.Cost()
		}
	}
	return as
}

// match gives each node one target set (Alg. 3). A pinned node picks first, among the sets of its
// own profile the one that keeps the most of its ranges and then takes the fewest from other nodes
// (takenFrom; it keeps its profile, if a set has it); then
// nodes pick in turn, the one that would keep the most of its ranges first; a node prefers the set
// of its own profile when it keeps as many ranges.
func match(nodes []Node, target []Assignment) []Assignment {
	left := slices.Clone(target)
	for len(left) < len(nodes) {
		left = append(left, Assignment{Profile: Default})
	}
	free := slices.Clone(nodes)
	out := make([]Assignment, 0, len(nodes))
	for i := 0; i < len(free); i++ {
		n := free[i]
		if !n.Pinned || n.Profile == Default { // a default node has no group to keep (only padding)
			continue
		}
		bj, bestKeep, bestTaken := -1, -1, 0
		for j, t := range left {
			k, taken := kept(n, t), takenFrom(nodes, n, t)
			if t.Profile == n.Profile && (k > bestKeep || k == bestKeep && taken < bestTaken) {
				bj, bestKeep, bestTaken = j, k, taken
			}
		}
		if bj < 0 {
			continue
		}
		a := left[bj]
		a.Node = n.ID
		out = append(out, a)
		free = slices.Delete(free, i, i+1)
		left = slices.Delete(left, bj, bj+1)
		i--
	}
	for len(free) > 0 {
		bi, bj, bestKeep, bestSame := -1, -1, -1, false
		for i, n := range free {
			for j, t := range left {
				keep := kept(n, t)
				same := t.Profile == n.Profile
				if keep > bestKeep || (keep == bestKeep && same && !bestSame) {
					bi, bj, bestKeep, bestSame = i, j, keep, same
				}
			}
		}
		a := left[bj]
		a.Node = free[bi].ID
		out = append(out, a)
		free = slices.Delete(free, bi, bi+1)
		left = slices.Delete(left, bj, bj+1)
	}
	slices.SortFunc(out, func(a, b Assignment) int { return cmp.Compare(a.Node, b.Node) })
	return out
}

// takenFrom is how many of target set t's ranges nodes other than n lead: what n taking t moves
// away from them. Among sets keeping as many of its ranges, a pinned node takes the one taking
// least: picking the first, a meta leader leading no user range took the hot range's set and the
// hot range moved to it by a replica move, its snapshot read off its own busy disk.
func takenFrom(nodes []Node, n Node, t Assignment) int {
	k := 0
	for _, m := range nodes {
		if m.ID != n.ID {
			k += kept(m, t)
		}
	}
	return k
}

// kept is how many of n's ranges target set t keeps on it.
func kept(n Node, t Assignment) int {
	k := 0
	for _, r := range t.Ranges {
		if slices.Contains(n.Ranges, r) {
			k++
		}
	}
	return k
}

// Resizer is Alg. 1: how many nodes to add (positive) or remove (negative) after each decision
// round. It doubles the step while the cluster stays overloaded (1, 2, 4 …) and removes one node at
// a time when it is underloaded.
type Resizer struct {
	// Threshold is the share of sub-optimal nodes above which nodes are added at once.
	Threshold float64
	step      int
	started   bool
}

// Next is the change for a round: subOptimal is the share of nodes outside their acceptable load,
// remove that the cluster is underloaded (rather than overloaded). The first round with few
// sub-optimal nodes only reconfigures (0).
func (r *Resizer) Next(subOptimal float64, remove bool) int {
	if r.step == 0 {
		r.step = 1
	}
	first := !r.started
	r.started = true
	switch {
	case subOptimal > r.Threshold:
	case first:
		return 0
	case remove:
		r.step = 1
		return -1
	}
	n := r.step
	r.step *= 2
	return n
}
