package sim

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/sim/des"
	"github.com/shoaldb/shoal/sim/workload"
)

// metaRangeID is the system range's ID, as on a real cluster.
const metaRangeID = 1

// simNode is one simulated node.
type simNode struct {
	id       uint64
	addr     string
	up       bool // the process runs and heartbeats
	lastHB   time.Time
	draining bool
	decomm   bool // decommissioning
	gone     bool // decommissioned
	join     *model.Join
	tasks    []model.Task
	taskDone map[string]time.Time
	ledAtReq []uint64
	profile  string               // the engine profile (SetProfile); "" the default
	locality string               // "zone=…" (Scenario.Zones)
	reps     map[uint64]*simRange // ranges with a replica here
	ordered  []*simRange          // the same, in key order (as Cluster.each visits them)
	// sendFree and recvFree are when the node's snapshot links are next idle (FIFO streams at the
	// configured rates, the transport's shared rate limiters); snaps counts the snapshots it sends
	// or receives.
	sendFree, recvFree time.Time
	snaps              int
	// Load of the last heartbeat: offered and served read-equivalents per second, and the served
	// requests per second per unit of a range's share that its led ranges last reported at.
	offered, served float64
	perShare        float64
	host            *hostNode // its disk and block cache (Params.Host)
}

// simRange is one simulated range: records [lo, hi) of the workload's key space.
type simRange struct {
	id       uint64
	lo, hi   int64
	start    []byte // the range's keys, [start, end): a split's key need not be a record's
	end      []byte
	system   bool
	reps     []model.Replica
	leader   uint64 // 0 while leaderless
	bytes    uint64
	gen      uint64
	share    float64 // its share of the workload's requests
	read     float64 // reported (served) reads per second
	write    float64
	sample   *model.KeySample
	electing bool
	view     *model.Range    // the model's copy, shared by snapshots until the range changes
	pos      int             // the view's place in Cluster.views (set when they are rebuilt)
	placed   *model.Range    // the view at pos, and its replicas and bytes (not read from it: a
	placedAt []model.Replica // cache miss per changed range)
	placedB  uint64
	shown    []model.Replica // the last view's replicas, shared by the next view if reps is the same
	owner    *Cluster        // told of a change, so that the next snapshot replaces this range's view only
	dirty    bool            // in owner.changed since the last snapshot
	// The leader, replicas and share the load per unit of offered rate last counted (computeUnits),
	// and whether the range is in owner.unitDirty.
	uLeader   uint64
	uReps     []model.Replica
	uShare    float64
	unitDirty bool
	// cached is the bytes of the range's blocks in its leader's block cache, which warmed at
	// cacheAt (Params.Host; a new leader starts cold).
	cached  float64
	cacheAt uint64
	// shape is its block-access histogram per unit of reads, access the statistics its leader
	// last reported, at reads accRead and hit ratio accHit (access.go; Params.Host).
	shape           []model.AccessBucket
	access          *model.Access
	accRead, accHit float64
}

func (r *simRange) changed() {
	r.view = nil
	if r.owner != nil && !r.dirty {
		r.dirty = true
		r.owner.changed = append(r.owner.changed, r)
	}
	if r.owner != nil && !r.unitDirty {
		r.unitDirty = true
		r.owner.unitDirty = append(r.owner.unitDirty, r)
	}
}

// before is key order as Cluster.each visits ranges: the meta range, then user ranges by record.
func before(a, b *simRange) bool {
	if a.system != b.system {
		return a.system
	}
	return a.lo < b.lo
}

// attach records a replica of r on n.
func (n *simNode) attach(r *simRange) {
	n.reps[r.id] = r
	k := sort.Search(len(n.ordered), func(k int) bool { return before(r, n.ordered[k]) })
	n.ordered = slices.Insert(n.ordered, k, r)
}

// detach forgets n's replica of r, if it has one.
func (n *simNode) detach(r *simRange) {
	delete(n.reps, r.id)
	if k := slices.Index(n.ordered, r); k >= 0 {
		n.ordered = slices.Delete(n.ordered, k, k+1)
	}
}

func (r *simRange) hasReplica(n uint64) bool {
	for _, rep := range r.reps {
		if rep.Node == n {
			return true
		}
	}
	return false
}

func (r *simRange) isVoter(n uint64) bool {
	for _, rep := range r.reps {
		if rep.Node == n && !rep.Learner {
			return true
		}
	}
	return false
}

// Cluster is the simulated cluster: nodes, ranges and their load on a virtual clock. It implements
// model.Source and the executor's Actuator (with autopilot.Decommissioner and JoinRecorder): every
// step it is asked for is checked at once and lands later, after the simulated delay of its
// mechanism, as the next snapshots show. It is driven from one goroutine (the run's event loop).
type Cluster struct {
	p       Params
	loop    *des.Loop
	rnd     *rand.Rand
	start   time.Time
	nodes   []*simNode // by ID
	ranges  map[uint64]*simRange
	order   []*simRange // user ranges by key
	meta    *simRange
	nextRID uint64

	records    int64
	valueBytes uint64
	pace       pacing // closed-loop clients' pacing (Scenario.Pace)
	dist       workload.Dist
	rate       workload.Rate
	readFrac   float64
	// replicaReads: every replica, a learner too, serves an equal part of its range's reads.
	replicaReads bool
	sampleMin    float64 // ranges serving at least this much get key samples
	hints        bool    // read hints on: replicas keep their caches warm (coldLeaders)
	maxSnaps     int     // the executor's snapshots in flight per node
	onLand       func()  // called when a step lands (the run schedules a reconciliation)
	snapshots    int
	inflight     int // snapshots streaming

	// topo counts changes of leaders and replicas; unitWork and unitReqs (load per unit of offered
	// rate, by node) were computed at unitTopo.
	topo, unitTopo     uint64
	unitWork, unitReqs []float64
	touched            map[uint64]*simRange // ranges whose leader changed since the last heartbeat
	unitDirty          []*simRange          // ranges changed since computeUnits (see simRange.uLeader)
	hot                map[uint64]*simRange // ranges serving at least sampleMin

	// views are the last snapshot's ranges (the meta range, then c.order) and disk each node's
	// bytes in them; a snapshot replaces the views of the changed ranges only, unless a split or
	// merge reshaped c.order. A walk over every range per snapshot was a tenth of a large run.
	views    []*model.Range
	disk     []uint64
	changed  []*simRange
	reshaped bool
	last     *model.Cluster // the last snapshot (NewClusterAfter)

	leadZones []model.LeadZone // the operators' lead-zone preferences (Scenario.LeadZone)

	// The requests per unit of offered rate that find no leader: now (lossNow, since lossAt) and
	// integrated over the time since the last heartbeat (lossInt, from lossFrom), so that a second's
	// throughput counts the part of it a range was leaderless, not the state at its end.
	lossNow, lossInt float64
	lossAt, lossFrom time.Time

	// cache is the loopback host's last heartbeat per live node: its reads, cache hits and disk
	// operations (closedLoop), for the run's series.
	cache []NodeSecond
}

// clusterSpec is what a cluster starts with.
type clusterSpec struct {
	nodes, ranges, rf int
	records           int64
	valueBytes        uint64
	dist              workload.Dist
	rate              workload.Rate
	readFrac          float64
	gatherLeaders     bool // every user range led by the first node (leadBy: by that node)
	leadBy            uint64
	metaOn            []uint64
	replicaReads      bool // reads served at every replica (Cluster.replicaReads)
	learners          int  // learners every user range starts with (uniform read replicas)
	empty             int  // the last nodes that start without replicas
	zones             []string
	leadZone          string
	bounds            []int64 // the ranges' first records and the last's end (nil: equal spans)
	scatter           bool    // replicas on nodes drawn at random, led by the first drawn
	pace              pacing
}

func newCluster(p Params, loop *des.Loop, seed uint64, spec clusterSpec) *Cluster {
	c := &Cluster{p: p, loop: loop, rnd: rand.New(rand.NewPCG(seed, seed^0x5151)), start: loop.Now(),
		ranges: map[uint64]*simRange{}, touched: map[uint64]*simRange{}, hot: map[uint64]*simRange{}, records: spec.records, valueBytes: spec.valueBytes,
		dist: spec.dist, rate: spec.rate, readFrac: spec.readFrac, replicaReads: spec.replicaReads, pace: spec.pace}
	for i := 0; i < spec.nodes; i++ {
		n := c.addNode()
		if i < len(spec.zones) {
			n.locality = "zone=" + spec.zones[i]
		}
	}
	if spec.leadZone != "" {
		c.leadZones = []model.LeadZone{{Zone: spec.leadZone}}
	}
	rf := min(spec.rf, spec.nodes)
	c.meta = &simRange{id: metaRangeID, system: true, leader: 1, bytes: 1 << 20, owner: c}
	for k := 0; k < rf; k++ {
		c.meta.reps = append(c.meta.reps, model.Replica{Node: uint64(k + 1)})
	}
	if len(spec.metaOn) > 0 {
		c.meta.reps = c.meta.reps[:0]
		for _, id := range spec.metaOn {
			c.meta.reps = append(c.meta.reps, model.Replica{Node: id})
		}
		c.meta.leader = spec.metaOn[0]
	}
	c.ranges[metaRangeID] = c.meta
	c.nextRID = metaRangeID
	holding := max(spec.nodes-spec.empty, rf)
	for i := 0; i < spec.ranges; i++ {
		c.nextRID++
		r := &simRange{id: c.nextRID, lo: int64(i) * spec.records / int64(spec.ranges),
			hi: int64(i+1) * spec.records / int64(spec.ranges)}
		if len(spec.bounds) == spec.ranges+1 {
			r.lo, r.hi = spec.bounds[i], spec.bounds[i+1]
		}
		if r.lo > 0 {
			r.start = workload.Key(r.lo)
		}
		if r.hi < spec.records {
			r.end = workload.Key(r.hi)
		}
		for k := 0; k < rf; k++ {
			r.reps = append(r.reps, model.Replica{Node: uint64((i+k)%holding + 1)})
		}
		if spec.scatter {
			for k, j := range c.rnd.Perm(holding)[:rf] {
				r.reps[k].Node = uint64(j + 1)
			}
		}
		for k := rf; k < min(rf+spec.learners, holding); k++ {
			r.reps = append(r.reps, model.Replica{Node: uint64((i+k)%holding + 1), Learner: true})
		}
		r.leader = r.reps[0].Node
		if by := spec.leadBy; by > 0 || spec.gatherLeaders {
			by = max(by, 1)
			r.leader = by
			if !r.hasReplica(by) {
				r.reps[0].Node = by
			}
		}
		c.initRange(r)
		c.order = append(c.order, r)
		c.ranges[r.id] = r
	}
	for _, r := range c.ranges {
		for _, rep := range r.reps {
			c.node(rep.Node).attach(r)
		}
	}
	return c
}

func (c *Cluster) initRange(r *simRange) {
	r.owner = c
	r.bytes = uint64(r.hi-r.lo) * c.valueBytes
	r.share = c.dist.Share(r.lo, r.hi)
	r.shape = nil
	r.changed()
}

func (c *Cluster) addNode() *simNode {
	id := uint64(len(c.nodes) + 1)
	n := &simNode{id: id, addr: fmt.Sprintf("sim-n%d", id), up: true, lastHB: c.loop.Now(), reps: map[uint64]*simRange{}, taskDone: map[string]time.Time{}}
	c.nodes = append(c.nodes, n)
	c.topo++
	return n
}

func (c *Cluster) now() time.Time { return c.loop.Now() }

// node returns the node with id, or nil (IDs are 1..len(nodes): a slice, not a map, on the hot paths).
func (c *Cluster) node(id uint64) *simNode {
	if id == 0 || id > uint64(len(c.nodes)) {
		return nil
	}
	return c.nodes[id-1]
}

// live is the node's liveness as a heartbeat-based liveness mechanism reports it.
func (c *Cluster) live(n *simNode) bool {
	return n != nil && n.up && !n.gone && c.now().Sub(n.lastHB) <= c.p.LiveWindow
}

// Snapshot implements model.Source. Ranges that did not change since the last snapshot are the same
// *model.Range values (a Cluster is immutable, so sharing them is safe); nodes are built afresh,
// since NewCluster derives their totals.
func (c *Cluster) Snapshot() *model.Cluster {
	c.snapshots++
	now := c.now()
	ranges := c.views
	if c.refreshViews() || c.last == nil {
		ranges = append([]*model.Range(nil), c.views...) // NewCluster takes ownership
	} else {
		ranges = c.last.Ranges // nothing changed: share the last snapshot's (immutable) ranges
	}
	disk := c.disk
	nodes := make([]*model.Node, 0, len(c.nodes))
	slab := make([]model.Node, len(c.nodes)) // one allocation, not one per node
	for i, n := range c.nodes {
		mn := &slab[i]
		*mn = model.Node{ID: n.id, Addr: n.addr, Live: c.live(n), LastHeartbeat: n.lastHB,
			Draining: n.draining, Decommissioning: n.decomm, Decommissioned: n.gone,
			CPUPercent: 100 * c.p.Cores * min(1, n.served/c.p.mu()), CPUCores: c.p.Cores, DiskCapacity: c.p.DiskBytes,
			Tasks: n.tasks, LedBefore: n.ledAtReq, Join: n.join, Profile: n.profile, Locality: n.locality}
		if mn.Profile == "" {
			mn.Profile = "default"
		}
		if len(n.taskDone) > 0 {
			mn.LastCompleted = make(map[string]time.Time, len(n.taskDone))
			for k, v := range n.taskDone {
				mn.LastCompleted[k] = v
			}
		}
		mn.DiskUsed = disk[n.id]
		if h := c.p.Host; h != nil && h.IOPS > 0 {
			mn.CacheBytes, mn.BlockBytes = uint64(h.CacheBytes), uint64(h.BlockBytes)
			if n.host != nil {
				mn.DiskBusy = n.host.busy
			}
		}
		if c.replicaReads {
			mn.ReadQPS = n.served // every read is served at some replica of the node's: its read load
		}
		nodes = append(nodes, mn)
	}
	c.last = model.NewClusterAfter(c.last, now, nodes, ranges)
	c.last.LeadZones = c.leadZones
	return c.last
}

// refreshViews brings views and disk up to date: the changed ranges' views replaced (and their
// bytes moved between nodes' totals: integers, so the totals are exactly a full pass's), or, after a
// split, merge or new node, everything rebuilt. It reports whether a view may have changed (nearly
// half the snapshots of a large run come between two changes).
func (c *Cluster) refreshViews() bool {
	if c.views == nil || c.reshaped || len(c.disk) != len(c.nodes)+1 {
		c.views = make([]*model.Range, 0, len(c.order)+1)
		c.disk = make([]uint64, len(c.nodes)+1)
		c.each(func(r *simRange) {
			for _, rep := range r.reps {
				c.disk[rep.Node] += r.bytes
			}
			r.pos = len(c.views)
			c.views = append(c.views, c.place(r))
		})
		for _, r := range c.changed {
			r.dirty = false
		}
		c.changed, c.reshaped = c.changed[:0], false
		return true
	}
	changed := len(c.changed) > 0
	for _, r := range c.changed {
		r.dirty = false
		i := r.pos // no split or merge since the views were rebuilt: the places are the same
		if i >= len(c.views) || c.views[i] != r.placed {
			continue // merged away since it changed
		}
		oldReps, oldBytes := r.placedAt, r.placedB
		v := c.place(r)
		if oldBytes != v.Bytes || !sameSlice(oldReps, v.Replicas) {
			for _, rep := range oldReps {
				c.disk[rep.Node] -= oldBytes
			}
			for _, rep := range v.Replicas {
				c.disk[rep.Node] += v.Bytes
			}
		}
		c.views[i] = v
	}
	clear(c.changed)
	c.changed = c.changed[:0]
	return changed
}

// place is r's view, noted as the one in views.
func (c *Cluster) place(r *simRange) *model.Range {
	v := c.viewOf(r)
	r.placed, r.placedAt, r.placedB = v, v.Replicas, v.Bytes
	return v
}

// sameSlice reports whether a and b are the same slice (the same elements in the same storage).
func sameSlice(a, b []model.Replica) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func (c *Cluster) viewOf(r *simRange) *model.Range {
	if r.view == nil {
		if !slices.Equal(r.shown, r.reps) {
			r.shown = append([]model.Replica(nil), r.reps...) // a view is immutable: r.reps is not
		}
		r.view = &model.Range{ID: r.id, StartKey: r.start, EndKey: r.end, Generation: r.gen, System: r.system,
			Replicas: r.shown, Leader: r.leader, ReadQPS: r.read, WriteQPS: r.write,
			Bytes: r.bytes, Sample: r.sample, Access: r.access}
	}
	return r.view
}

// land runs fn after d, then tells the run that the cluster changed.
func (c *Cluster) land(d time.Duration, fn func()) {
	c.loop.After(d, func() {
		fn()
		c.topo++
		if c.onLand != nil {
			c.onLand()
		}
	})
}

func (c *Cluster) rangeOf(id uint64) (*simRange, error) {
	r := c.ranges[id]
	if r == nil {
		return nil, fmt.Errorf("r%d not found", id)
	}
	return r, nil
}

func (c *Cluster) reachable(id uint64) error {
	if n := c.node(id); n == nil || !n.up || n.gone {
		return fmt.Errorf("n%d unreachable", id)
	}
	return nil
}

func (c *Cluster) leaderOf(r *simRange) error {
	if r.leader == 0 || c.reachable(r.leader) != nil {
		return fmt.Errorf("r%d has no leader", r.id)
	}
	return nil
}

// AddLearner implements executor.Actuator: the range's leader streams a snapshot to node over both
// nodes' snapshot links (each a FIFO at the configured rate); the learner shows in the descriptor
// once it has applied the snapshot and caught up.
func (c *Cluster) AddLearner(ctx context.Context, rangeID, node uint64) error {
	r, err := c.rangeOf(rangeID)
	if err != nil {
		return err
	}
	if r.hasReplica(node) {
		return nil
	}
	if err := c.reachable(node); err != nil {
		return err
	}
	if err := c.leaderOf(r); err != nil {
		return err
	}
	from, to := c.node(r.leader), c.node(node)
	for _, n := range []*simNode{from, to} {
		if c.maxSnaps > 0 && n.snaps >= c.maxSnaps {
			// The executor holds a step back while a node has its limit of snapshots in flight, but
			// only while the Actuator call blocks, and a simulated call returns at once.
			return fmt.Errorf("n%d already has %d snapshots in flight", n.id, n.snaps)
		}
	}
	begin := maxTime(c.now(), from.sendFree)
	if c.p.SnapshotRecvRate > 0 {
		begin = maxTime(begin, to.recvFree)
		to.recvFree = begin.Add(seconds(float64(r.bytes) / c.p.snapshotRate()))
	}
	stream := seconds(float64(r.bytes) / c.p.snapshotRate())
	from.sendFree = begin.Add(stream)
	c.addStream(from, to, begin, begin.Add(stream), r)
	from.snaps++
	to.snaps++
	c.inflight++
	c.land(begin.Sub(c.now())+stream+c.p.snapshotTime(r.bytes), func() {
		c.inflight--
		from.snaps--
		to.snaps--
		if c.ranges[rangeID] != r || r.hasReplica(node) || c.reachable(node) != nil || c.reachable(from.id) != nil {
			return
		}
		r.reps = append(r.reps, model.Replica{Node: node, Learner: true})
		c.node(node).attach(r)
		r.gen++
		r.changed()
	})
	return nil
}

// PromoteVoter implements executor.Actuator (a joint configuration change when remove is set).
func (c *Cluster) PromoteVoter(ctx context.Context, rangeID, node, remove uint64) error {
	r, err := c.rangeOf(rangeID)
	if err != nil {
		return err
	}
	if !r.hasReplica(node) {
		return fmt.Errorf("r%d has no replica on n%d", rangeID, node)
	}
	if err := c.leaderOf(r); err != nil {
		return err
	}
	c.land(c.p.ConfChange, func() {
		if c.ranges[rangeID] != r || !r.hasReplica(node) {
			return
		}
		for i := range r.reps {
			if r.reps[i].Node == node {
				r.reps[i].Learner = false
			}
		}
		r.gen++
		r.changed()
		if remove != 0 {
			c.removeReplica(r, remove)
		}
	})
	return nil
}

// RemoveReplica implements executor.Actuator.
func (c *Cluster) RemoveReplica(ctx context.Context, rangeID, node uint64) error {
	r, err := c.rangeOf(rangeID)
	if err != nil {
		return err
	}
	if err := c.leaderOf(r); err != nil {
		return err
	}
	c.land(c.p.ConfChange, func() {
		if c.ranges[rangeID] == r {
			c.removeReplica(r, node)
		}
	})
	return nil
}

func (c *Cluster) removeReplica(r *simRange, node uint64) {
	out := r.reps[:0]
	for _, rep := range r.reps {
		if rep.Node != node {
			out = append(out, rep)
		}
	}
	r.reps = out
	if n := c.node(node); n != nil {
		n.detach(r)
	}
	r.gen++
	r.changed()
	if r.leader == node {
		c.leaderless(r, true)
		r.leader = 0 // the removed leader steps down; the others elect one
		c.touch(r)
		c.elect(r)
	}
}

// TransferLeader implements executor.Actuator.
func (c *Cluster) TransferLeader(ctx context.Context, rangeID, to uint64) error {
	r, err := c.rangeOf(rangeID)
	if err != nil {
		return err
	}
	if !r.isVoter(to) {
		return fmt.Errorf("n%d is not a voter of r%d", to, rangeID)
	}
	if err := c.reachable(to); err != nil {
		return err
	}
	if err := c.leaderOf(r); err != nil {
		return err
	}
	c.land(c.p.Transfer, func() {
		if c.ranges[rangeID] == r && r.isVoter(to) && c.reachable(to) == nil && r.leader != 0 {
			r.leader = to
			r.changed()
			c.touch(r)
		}
	})
	return nil
}

// Split implements executor.Actuator: the right half gets a new ID, the same replicas and leader.
func (c *Cluster) Split(ctx context.Context, rangeID uint64, key []byte) error {
	r, err := c.rangeOf(rangeID)
	if err != nil {
		return err
	}
	at := workload.Index(key, c.records)
	if r.system || bytes.Compare(key, r.start) <= 0 || (len(r.end) > 0 && bytes.Compare(key, r.end) >= 0) {
		return fmt.Errorf("key %q not inside r%d", key, rangeID)
	}
	if at <= r.lo || at >= r.hi {
		return fmt.Errorf("key %q leaves no record on one side of r%d (the simulator splits between records)", key, rangeID)
	}
	if err := c.leaderOf(r); err != nil {
		return err
	}
	c.land(c.p.Split, func() {
		if c.ranges[rangeID] != r || at <= r.lo || at >= r.hi {
			return
		}
		c.nextRID++
		right := &simRange{id: c.nextRID, lo: at, hi: r.hi, start: append([]byte(nil), key...), end: r.end,
			reps: append([]model.Replica(nil), r.reps...), leader: r.leader}
		r.hi, r.end = at, append([]byte(nil), key...)
		r.gen++
		c.initRange(r)
		c.initRange(right)
		c.rescale(r)
		c.rescale(right)
		c.ranges[right.id] = right
		for _, rep := range right.reps {
			c.node(rep.Node).attach(right)
		}
		i := c.indexOf(r)
		c.order = append(c.order, nil)
		copy(c.order[i+2:], c.order[i+1:])
		c.order[i+1] = right
		c.reshaped = true
		c.unitWork = nil // shares changed: count every range again
	})
	return nil
}

// Merge implements executor.Actuator: the right neighbour, with its replicas on the same nodes, is
// absorbed.
func (c *Cluster) Merge(ctx context.Context, leftRangeID uint64) error {
	r, err := c.rangeOf(leftRangeID)
	if err != nil {
		return err
	}
	i := c.indexOf(r)
	if r.system || i+1 >= len(c.order) {
		return fmt.Errorf("r%d has no right neighbour", leftRangeID)
	}
	right := c.order[i+1]
	if !sameNodes(r, right) {
		return fmt.Errorf("r%d and r%d have replicas on different nodes", r.id, right.id)
	}
	if err := c.leaderOf(r); err != nil {
		return err
	}
	c.land(c.p.Merge, func() {
		i := c.indexOf(r)
		if c.ranges[r.id] != r || i+1 >= len(c.order) || c.order[i+1] != right || !sameNodes(r, right) {
			return
		}
		r.hi, r.end = right.hi, right.end
		r.gen++
		c.initRange(r)
		c.rescale(r)
		delete(c.ranges, right.id)
		for _, rep := range right.reps {
			c.node(rep.Node).detach(right)
		}
		c.order = append(c.order[:i+1], c.order[i+2:]...)
		c.reshaped = true
		c.unitWork = nil // shares changed: count every range again
	})
	return nil
}

func sameNodes(a, b *simRange) bool {
	if len(a.reps) != len(b.reps) {
		return false
	}
	for _, rep := range a.reps {
		if !b.hasReplica(rep.Node) {
			return false
		}
	}
	return true
}

func (c *Cluster) indexOf(r *simRange) int {
	i := sort.Search(len(c.order), func(i int) bool { return c.order[i].lo >= r.lo })
	if i < len(c.order) && c.order[i] == r {
		return i
	}
	return len(c.order)
}

// MarkDecommissioned implements autopilot.Decommissioner.
func (c *Cluster) MarkDecommissioned(ctx context.Context, node uint64) error {
	n := c.node(node)
	if n == nil {
		return fmt.Errorf("n%d unknown", node)
	}
	n.gone, n.decomm = true, false
	return nil
}

// profileRestart is how long a simulated node takes to change its engine profile: the rolling
// restart in process (shed, reopen, warm, take back) took 0.2 s in the integration test of a
// three-node cluster; a second leaves room for larger caches to warm. The simulator models no
// engine, so the profile changes nothing else.
const profileRestart = time.Second

// SetProfile implements executor.ProfileSetter: the node reports the profile after profileRestart.
func (c *Cluster) SetProfile(ctx context.Context, node uint64, profile string) error {
	n := c.node(node)
	if n == nil {
		return fmt.Errorf("n%d unknown", node)
	}
	if err := c.reachable(node); err != nil {
		return err
	}
	c.land(profileRestart, func() { n.profile = profile })
	return nil
}

// RecordJoin implements autopilot.JoinRecorder (the meta range's join record).
func (c *Cluster) RecordJoin(ctx context.Context, node uint64, j model.Join) error {
	n := c.node(node)
	if n == nil {
		return fmt.Errorf("n%d unknown", node)
	}
	n.join = &j
	return nil
}

// leaderless records that r loses (or, with lost false, gains) its leader now: its requests are
// refused from here on (or served again).
func (c *Cluster) leaderless(r *simRange, lost bool) {
	if r.system {
		return // clients' requests go to user ranges
	}
	c.accrueLoss()
	if lost {
		c.lossNow += r.share
	} else {
		c.lossNow = max(0, c.lossNow-r.share)
	}
}

// accrueLoss adds the leaderless requests since lossAt to lossInt.
func (c *Cluster) accrueLoss() {
	now := c.now()
	if !c.lossAt.IsZero() {
		c.lossInt += c.lossNow * now.Sub(c.lossAt).Seconds()
	}
	c.lossAt = now
}

// elect schedules an election for a leaderless range: after a randomized election timeout a live
// voter wins if the live voters are a quorum; otherwise the range waits for a voter to come back.
func (c *Cluster) elect(r *simRange) {
	if r.electing {
		return
	}
	r.electing = true
	d := c.p.ElectionMin + time.Duration(c.rnd.Int64N(int64(c.p.ElectionMax-c.p.ElectionMin)+1))
	c.land(d, func() {
		r.electing = false
		if c.ranges[r.id] != r || r.leader != 0 {
			return
		}
		var voters, up []uint64
		for _, rep := range r.reps {
			if !rep.Learner {
				voters = append(voters, rep.Node)
				if c.reachable(rep.Node) == nil {
					up = append(up, rep.Node)
				}
			}
		}
		if len(up) == 0 || 2*len(up) <= len(voters) {
			return
		}
		c.leaderless(r, false)
		r.leader = up[c.rnd.IntN(len(up))]
		r.changed()
		c.touch(r)
	})
}

// kill stops node id: it heartbeats no more, and the ranges it led elect new leaders.
func (c *Cluster) kill(id uint64) {
	n := c.node(id)
	if n == nil || !n.up {
		return
	}
	n.up = false
	c.topo++
	for _, r := range c.sortedReps(n) {
		if r.leader == id {
			c.leaderless(r, true)
			r.leader = 0
			r.changed()
			c.touch(r)
			c.elect(r)
		}
	}
}

// restart brings node id back; leaderless ranges it holds a vote in hold elections.
func (c *Cluster) restart(id uint64) {
	n := c.node(id)
	if n == nil || n.up || n.gone {
		return
	}
	n.up, n.lastHB = true, c.now()
	c.topo++
	for _, r := range c.sortedReps(n) {
		if r.leader == 0 {
			c.elect(r)
		}
	}
}

// userReplicas counts the user ranges with a replica on node id.
func (c *Cluster) userReplicas(id uint64) int {
	n := c.node(id)
	if n == nil {
		return 0
	}
	k := 0
	for _, r := range n.reps {
		if !r.system {
			k++
		}
	}
	return k
}

func (c *Cluster) sortedReps(n *simNode) []*simRange {
	out := make([]*simRange, 0, len(n.reps))
	for _, r := range n.reps {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func maxTime(ts ...time.Time) time.Time {
	m := ts[0]
	for _, t := range ts[1:] {
		if t.After(m) {
			m = t
		}
	}
	return m
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
