package sim

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/sim/queueing"
	"github.com/shoaldb/shoal/sim/workload"
)

// second is what one heartbeat measured: the requests served and refused, and the latency
// percentiles of the served ones.
type second struct {
	ops, errors float64 // per second
	p50, p99    time.Duration
	cpuCores    float64
	nodes       []NodeSecond    // the loopback host's nodes' caches and disks (Host.on), else nil
	parts       []queueing.Part // each serving node's share of requests and sojourn rate
}

// task is a heavy background task on a node (a compaction, a backup): pending until the node leads
// nothing or TaskWait passed, then running for its duration, taking TaskCost of the node's service.
type task struct {
	node    uint64
	id      uint64
	kind    string
	runFor  time.Duration
	since   time.Time
	running bool
}

// heartbeat is one round of load reports: every live node heartbeats; the offered rate is spread
// over ranges by their share of the key distribution and over nodes by the ranges they lead and
// follow; each node serves what its M/M/1 server can (queueing.Server.Served); and the ranges report
// the load they served. It costs O(nodes) when nothing moved: the load per unit of offered rate is
// recomputed (O(ranges)) only after the topology changed, and a node's ranges report again only when
// the node's served rate per unit share moved by more than LoadEpsilon.
func (c *Cluster) heartbeat(tasks []*task) second {
	now := c.now()
	for _, n := range c.nodes {
		if n.up && !n.gone {
			n.lastHB = now
		}
	}
	if c.unitTopo != c.topo || c.unitWork == nil {
		c.computeUnits()
	}
	total, disks := c.offeredNow(now)
	// The mean leaderless share since the last heartbeat, against the share now (exact, from the
	// count: lossNow's running sum only times the changes).
	c.accrueLoss()
	lossMean, lossEnd := c.unitReqs[0], c.unitReqs[0]
	if dt := now.Sub(c.lossFrom).Seconds(); !c.lossFrom.IsZero() && dt > 0 {
		lossMean = c.lossInt / dt
	}
	c.lossNow, c.lossInt, c.lossFrom = lossEnd, 0, now
	running := map[uint64]bool{}
	for _, t := range tasks {
		if t.running {
			running[t.node] = true
		}
	}
	var out second
	var parts []queueing.Part
	var offeredReqs float64
	for _, n := range c.nodes {
		mu := c.p.mu()
		if running[n.id] {
			mu *= 1 - c.p.TaskCost
		}
		n.offered = total * c.unitWork[n.id]
		n.served = queueing.Server{Mu: mu}.Served(n.offered)
		if !n.up || n.gone {
			n.served = 0
		}
		f, disk := n.servedShare(disks)
		reqs := total * c.unitReqs[n.id]
		offeredReqs += reqs
		out.ops += reqs * f
		out.cpuCores += c.p.Cores * n.served / c.p.mu()
		if q := reqs * f; q > 0 {
			// Follower work takes capacity but is no client's request: the mean service time of a
			// client request here is the node's work per request.
			meanService := n.offered / reqs / mu
			parts = append(parts, openParts(q, (1-n.served/mu)/meanService, disk)...)
		}
		if perShare := total * f; moved(n.perShare, perShare, c.p.LoadEpsilon) {
			n.perShare = perShare
			for _, r := range n.ordered { // a slice, not the map: the order does not matter
				if r.leader == n.id {
					c.report(r)
				}
			}
		}
	}
	offeredReqs += total * c.unitReqs[0] // leaderless ranges: all refused
	// The second served what its leaderless part allowed over it, not at its end.
	out.ops = min(offeredReqs, max(0, out.ops+(lossEnd-lossMean)*total))
	out.errors = offeredReqs - out.ops
	out.parts = parts
	if c.p.Host.on() {
		out.nodes = slices.Clone(c.cache)
	}
	out.p50 = queueing.MixtureQuantile(parts, 0.50)
	out.p99 = queueing.MixtureQuantile(parts, 0.99)
	for _, r := range c.sortedTouched() {
		c.report(r)
	}
	c.touched = map[uint64]*simRange{}
	if c.p.Host != nil && c.p.Host.IOPS > 0 {
		c.reportAccess()
	}
	c.sampleHot(now)
	return out
}

// offeredNow is the rate offered now: the workload's, or with client threads the closed loop's
// throughput; under an open loop on the nodes' own machines (Host.open), their disks too.
func (c *Cluster) offeredNow(now time.Time) (float64, []openDisk) {
	total := c.rate.At(now.Sub(c.start))
	switch {
	case c.p.Host.on():
		c.coldLeaders()
		return c.closedLoop(now), nil
	case c.p.Host.open():
		c.coldLeaders()
		return total, c.openDisks(now, total)
	}
	return total, nil
}

// servedShare is the share of its offered load n serves, its CPU's (n.served) or, if less, its
// disk's (disks, index node ID; nil: no disk modelled), and its disk; n.served follows the disk.
func (n *simNode) servedShare(disks []openDisk) (float64, openDisk) {
	f := 0.0
	if n.offered > 0 {
		f = n.served / n.offered
	}
	disk := openDisk{served: 1}
	if disks != nil {
		disk = disks[n.id]
		f = min(f, disk.served)
		n.served = n.offered * f
	}
	return f, disk
}

// computeUnits is the work (in read-equivalents) and the client requests each node takes per unit
// of offered rate: a leader does its ranges' reads and writes, a follower applies their writes.
// Index 0 of unitReqs counts the ranges without a leader. Only the nodes of ranges whose leader or
// replicas changed since the last count are counted again, each over its ranges in key order, so
// that every sum is the one a pass over every range makes, to the last bit; a pass over every range
// runs after a split, merge or new node, and when a range lost or found its leader.
func (c *Cluster) computeUnits() {
	defer func() { c.unitTopo = c.topo }()
	if c.unitWork == nil || len(c.unitWork) != len(c.nodes)+1 {
		c.unitWork, c.unitReqs = c.countUnits(true)
		return
	}
	queued := make([]bool, len(c.nodes)+1)
	var again []uint64
	mark := func(id uint64) {
		if id != 0 && !queued[id] {
			queued[id] = true
			again = append(again, id)
		}
	}
	full := false
	for _, r := range c.unitDirty {
		r.unitDirty = false
		if r.uLeader == r.leader && r.uShare == r.share && slices.Equal(r.uReps, r.reps) {
			continue // its load moved, or a learner became a voter: nothing counted here changed
		}
		full = full || r.uLeader == 0 || r.leader == 0 || c.ranges[r.id] != r
		mark(r.uLeader)
		mark(r.leader)
		for _, rep := range r.uReps {
			mark(rep.Node)
		}
		for _, rep := range r.reps {
			mark(rep.Node)
		}
		r.uLeader, r.uShare, r.uReps = r.leader, r.share, append(r.uReps[:0], r.reps...)
	}
	clear(c.unitDirty)
	c.unitDirty = c.unitDirty[:0]
	if full {
		c.unitWork, c.unitReqs = c.countUnits(true)
		return
	}
	for _, id := range again {
		var work, reqs float64
		for _, r := range c.node(id).ordered {
			w, q := c.unitsAt(r, id)
			work += w
			reqs += q
		}
		c.unitWork[id], c.unitReqs[id] = work, reqs
	}
	if verifyUnits {
		work, reqs := c.countUnits(false)
		if !slices.Equal(work, c.unitWork) || !slices.Equal(reqs, c.unitReqs) {
			panic("sim: the load per unit counted again differs from a full count")
		}
	}
}

// unitsAt is the work (read-equivalents) and the client requests node takes per unit of offered
// rate for range r, one of whose replicas it holds: its leader serves the reads and writes, a
// follower or learner applies the writes; with replica reads, every replica serves an equal part of
// the reads (the clients' load-based routing, all replicas alike), and a range without a leader
// serves none (its requests count as refused in computeUnits).
func (c *Cluster) unitsAt(r *simRange, node uint64) (work, reqs float64) {
	rd, wr := c.readFrac, 1-c.readFrac
	if c.replicaReads {
		if r.leader == 0 {
			return r.share * wr * c.p.FollowerWriteCost, 0
		}
		reads := r.share * rd / float64(len(r.reps))
		if node == r.leader {
			return reads + r.share*wr*c.p.WriteCost, reads + r.share*wr
		}
		return reads + r.share*wr*c.p.FollowerWriteCost, reads
	}
	if node == r.leader {
		return r.share * (rd + wr*c.p.WriteCost), r.share
	}
	return r.share * wr * c.p.FollowerWriteCost, 0
}

// nodeReads is the reads per second each node is offered now (index: node id), from the load per
// unit of offered rate: with replica reads, its equal part of each of its ranges' reads; else its
// led ranges' reads.
func (c *Cluster) nodeReads() []float64 {
	out := make([]float64, len(c.nodes)+1)
	total := c.rate.At(c.now().Sub(c.start)) * c.readFrac
	c.each(func(r *simRange) {
		if r.leader == 0 {
			return
		}
		if !c.replicaReads {
			out[r.leader] += total * r.share
			return
		}
		for _, rep := range r.reps {
			out[rep.Node] += total * r.share / float64(len(r.reps))
		}
	})
	return out
}

// readReport measures the read replicas and the nodes' read load now.
func (c *Cluster) readReport() *ReadReport {
	if c.unitTopo != c.topo || c.unitWork == nil {
		c.computeUnits()
	}
	rep := &ReadReport{}
	for _, r := range c.order {
		n := 0
		for _, x := range r.reps {
			if x.Learner {
				n++
			}
		}
		rep.Learners += n
		rep.LearnerBytes += uint64(n) * r.bytes
		rep.ReplicasPerRange += float64(len(r.reps))
		if n > 0 {
			rep.RangesWithLearner++
		}
	}
	if len(c.order) > 0 {
		rep.ReplicasPerRange = math.Round(rep.ReplicasPerRange/float64(len(c.order))*1000) / 1000
	}
	reads := c.nodeReads()
	live := 0
	for _, n := range c.nodes {
		if !n.up || n.gone {
			continue
		}
		live++
		rep.MeanNodeReads += reads[n.id]
		rep.HottestNodeReads = max(rep.HottestNodeReads, reads[n.id])
		if c.unitWork != nil {
			rep.HottestNodeUtil = max(rep.HottestNodeUtil, c.rate.At(c.now().Sub(c.start))*c.unitWork[n.id]/c.p.mu())
		}
	}
	if live > 0 {
		rep.MeanNodeReads /= float64(live)
	}
	rep.HottestNodeReads = math.Round(rep.HottestNodeReads)
	rep.MeanNodeReads = math.Round(rep.MeanNodeReads)
	rep.HottestNodeUtil = math.Round(rep.HottestNodeUtil*1000) / 1000
	return rep
}

// verifyUnits makes computeUnits check every partial count against a full one (tests).
var verifyUnits = false

// countUnits is computeUnits' pass over every range; with note, it notes what it counted of each.
func (c *Cluster) countUnits(note bool) (work, reqs []float64) {
	work = make([]float64, len(c.nodes)+1)
	reqs = make([]float64, len(c.nodes)+1)
	c.each(func(r *simRange) {
		if r.leader == 0 {
			reqs[0] += r.share
		}
		for _, rep := range r.reps {
			w, q := c.unitsAt(r, rep.Node)
			work[rep.Node] += w
			reqs[rep.Node] += q
		}
		if note {
			r.uLeader, r.uShare, r.uReps = r.leader, r.share, append(r.uReps[:0], r.reps...)
		}
	})
	if note {
		for _, r := range c.unitDirty {
			r.unitDirty = false
		}
		clear(c.unitDirty)
		c.unitDirty = c.unitDirty[:0]
	}
	return work, reqs
}

// report sets r's reported load from its leader's served rate per unit share, if it moved by more
// than LoadEpsilon, and keeps the set of ranges busy enough to be sampled for load_split.
func (c *Cluster) report(r *simRange) {
	var perShare float64
	if l := c.node(r.leader); l != nil {
		perShare = l.perShare
	}
	rd, wr := perShare*r.share*c.readFrac, perShare*r.share*(1-c.readFrac)
	if moved(r.read, rd, c.p.LoadEpsilon) || moved(r.write, wr, c.p.LoadEpsilon) {
		r.read, r.write = rd, wr
		r.changed()
	}
	if !r.system && c.sampleMin > 0 && rd+wr >= c.sampleMin {
		c.hot[r.id] = r
	} else if c.hot[r.id] != nil {
		delete(c.hot, r.id)
		r.sample = nil
		r.changed()
	}
}

// touch makes r report its load at the next heartbeat (its leader changed).
func (c *Cluster) touch(r *simRange) { c.touched[r.id] = r }

func (c *Cluster) sortedTouched() []*simRange { return sortedRanges(c.touched) }

// sampleHot gives every range busy enough for load_split a key sample of the last window.
func (c *Cluster) sampleHot(now time.Time) {
	for _, r := range sortedRanges(c.hot) {
		if c.ranges[r.id] != r {
			delete(c.hot, r.id)
			continue
		}
		r.sample = c.keySample(r, now, (r.read+r.write)*c.p.Heartbeat.Seconds())
		r.changed()
	}
}

func sortedRanges(m map[uint64]*simRange) []*simRange {
	out := make([]*simRange, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// each calls fn for the meta range and every user range in key order.
func (c *Cluster) each(fn func(r *simRange)) {
	fn(c.meta)
	for _, r := range c.order {
		fn(r)
	}
}

// moved reports whether a reported rate should change from old to cur.
func moved(old, cur, eps float64) bool {
	if old == 0 || cur == 0 {
		return old != cur
	}
	return math.Abs(cur-old) > eps*old
}

// keySample is what a range's leader's KeySampler would report for a window of requests: up to
// model.DefaultKeySampleSize of them, drawn from the workload within the range. It is what
// model.NewKeySample makes of the drawn keys, built from the records drawn: record keys have one
// width, so their order is the records' (sorting and comparing integers, not keys, and one key per
// record drawn, was a tenth of a large run's heartbeats).
func (c *Cluster) keySample(r *simRange, at time.Time, requests float64) *model.KeySample {
	n := min(int(requests), model.DefaultKeySampleSize)
	drawn := make([]int64, n)
	for i := range drawn {
		drawn[i] = c.dist.Sample(c.rnd, r.lo, r.hi)
	}
	slices.Sort(drawn)
	s := &model.KeySample{At: at, Requests: uint64(requests)}
	for i, rec := range drawn {
		if i > 0 && rec == drawn[i-1] {
			s.Keys[len(s.Keys)-1].Count++
			continue
		}
		s.Keys = append(s.Keys, model.KeyCount{Key: workload.Key(rec), Count: 1})
	}
	return s
}

// rescale gives a range whose records changed (a split or merge) its load at once, as its leader
// measures it from then on.
func (c *Cluster) rescale(r *simRange) {
	r.read, r.write, r.sample = -1, -1, nil // force the report
	c.report(r)
	c.topo++
}

// setTasks reports each node's heavy tasks in the model (a new slice: snapshots share the old one).
func (c *Cluster) setTasks(tasks []*task) {
	by := map[uint64][]model.Task{}
	for _, t := range tasks {
		by[t.node] = append(by[t.node], model.Task{ID: t.id, Kind: t.kind, Name: t.kind, Running: t.running, Heavy: true,
			Since: t.since})
	}
	for _, n := range c.nodes {
		n.tasks = by[n.id]
	}
}

// leads counts the user ranges node leads.
func (c *Cluster) leads(node uint64) int {
	k := 0
	for _, r := range c.node(node).reps {
		if r.leader == node && !r.system {
			k++
		}
	}
	return k
}

// ledBy lists the user ranges node leads, by ID.
func (c *Cluster) ledBy(node uint64) []uint64 {
	var out []uint64
	for _, r := range c.sortedReps(c.node(node)) {
		if r.leader == node && !r.system {
			out = append(out, r.id)
		}
	}
	return out
}
