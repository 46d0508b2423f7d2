// Package model is the autopilot's picture of the cluster: nodes, ranges and the load each carries, as
// last reported by the nodes' heartbeats. The node leading the meta range builds a Cluster from
// heartbeats and the meta range and hands it to the autopilot through Source; the autopilot's tests
// build one from text (ParseCluster) or from an in-memory cluster (autopilot/internal/fake). Nothing
// else in the autopilot reads cluster state.
//
// The package owns plain data types and the helpers that derive facts from them (per-node counts,
// liveness, key samples). It must never import protobuf types, call another node, or hold a clock or a
// goroutine: a Cluster is a value that a test can build as easily as a live node.
//
// Invariant: a Cluster is immutable once NewCluster returns it. Source returns a fresh one per call,
// and policies, operators and the executor only read it.
package model

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultDeadAfter is how long a node may stay silent (no heartbeat) before the autopilot treats it as
// dead and re-replicates its ranges elsewhere.
const DefaultDeadAfter = 60 * time.Second

// Source is what the node leading the meta range (or a test's cluster) implements to feed the autopilot.
type Source interface {
	// Snapshot returns the current cluster state. It must return a new Cluster on every call (the
	// caller may keep it) and must not block for long: the autopilot calls it every interval.
	Snapshot() *Cluster
}

// SourceFunc adapts a function to Source.
type SourceFunc func() *Cluster

// Snapshot implements Source.
func (f SourceFunc) Snapshot() *Cluster { return f() }

// Node is one node as the autopilot sees it.
type Node struct {
	ID   uint64
	Addr string

	// Live is the node's liveness as the cluster's liveness mechanism reports it (a heartbeat within
	// its TTL). A node that is not Live but was heard from within DeadAfter is suspect: it receives
	// nothing new, but its replicas are not replaced yet.
	Live bool
	// Draining nodes hand all their leaderships to other nodes and receive none; they keep replicas.
	Draining bool
	// Decommissioning nodes are being emptied of replicas; once empty they are marked Decommissioned.
	Decommissioning bool
	// Decommissioned nodes have left the cluster for good; replicas on them count as lost.
	Decommissioned bool
	// LastHeartbeat is when the node was last heard from.
	LastHeartbeat time.Time

	// CPUPercent is the node's CPU use, 0–100 per core summed (as reported).
	CPUPercent float64
	// DiskCapacity is the size of the node's store volume in bytes; 0 means unknown.
	DiskCapacity uint64
	// DiskUsed is the number of bytes the node's store occupies.
	DiskUsed uint64
	// Engine statistics of the node's storage engine.
	BlockCacheHits     uint64
	BlockCacheMisses   uint64
	CompactionsRunning uint32
	L0Files            uint32
	MemtableBytes      uint64

	// Background work the node reports (package bgtask): its pending and running tasks, the engine's
	// compaction-debt estimate, when each kind of task last completed, and the ranges it led when its
	// last heavy task was requested (the preferred-primary ranking gives those back).
	Tasks          []Task
	CompactionDebt uint64
	LastCompleted  map[string]time.Time
	LedBefore      []uint64

	// Join is the node's join, as the autopilot recorded it in the meta range (nil: none).
	Join *Join

	// Derived by NewCluster from the ranges; a Source need not fill them.
	Replicas int     // replicas (voters and learners) on the node
	Voters   int     // voting replicas on the node
	Leaders  int     // ranges the node leads
	Bytes    uint64  // sum of the bytes of the ranges with a replica on the node
	QPS      float64 // sum of the QPS of the ranges the node leads (the load it serves)
}

// Join is a node's join into the cluster (docs/design/incremental-join.md): the replicas it is to
// receive and how far it got. It is recorded in the meta range, so a join resumes wherever the
// autopilot runs next.
type Join struct {
	Strategy string    `json:"strategy"` // "incremental" or "parallel"
	Started  time.Time `json:"started"`
	// Target is the number of replicas the node is to hold (its share from the rebalance policy).
	Target int `json:"target"`
	// Done is when the last move (and, for parallel joins, the leadership hand-over) finished.
	Done time.Time `json:"done,omitempty"`
	// FirstServed is when the node first led a range it received (zero: not yet).
	FirstServed time.Time `json:"first_served,omitempty"`
}

// Active reports whether the join is still under way.
func (j *Join) Active() bool { return j != nil && j.Done.IsZero() }

// Joining reports whether the node is in the middle of a join.
func (n *Node) Joining() bool { return n.Join.Active() }

// Task is one background task a node reports.
type Task struct {
	ID      uint64
	Kind    string // "compaction", "manual_compaction", "backup", "announced", "flush"
	Name    string
	Running bool // false: pending, waiting for the node's leaderships to move
	Heavy   bool
	Bytes   uint64
	Since   time.Time
}

// State is "pending" or "running".
func (t Task) State() string {
	if t.Running {
		return "running"
	}
	return "pending"
}

// Busy reports whether the node has a heavy background task pending or running: it should lead
// nothing, and no policy may choose it as a new leader.
func (n *Node) Busy() bool { return n.HeavyTask() != nil }

// HeavyTask returns the node's first heavy task (running ones before pending ones), or nil.
func (n *Node) HeavyTask() *Task {
	var pending *Task
	for i := range n.Tasks {
		t := &n.Tasks[i]
		if !t.Heavy {
			continue
		}
		if t.Running {
			return t
		}
		if pending == nil {
			pending = t
		}
	}
	return pending
}

// LastHeavyCompleted is when the node last finished a background task other than a flush (zero if it
// never reported one): the most-recently-completed ranking expects the longest quiet period there.
func (n *Node) LastHeavyCompleted() time.Time {
	var last time.Time
	for kind, at := range n.LastCompleted {
		if kind != "flush" && at.After(last) {
			last = at
		}
	}
	return last
}

// CacheHitRatio is the block-cache hit ratio, or 0 when the cache saw no traffic.
func (n *Node) CacheHitRatio() float64 {
	total := n.BlockCacheHits + n.BlockCacheMisses
	if total == 0 {
		return 0
	}
	return float64(n.BlockCacheHits) / float64(total)
}

// SilentFor is how long the node has not been heard from at now.
func (n *Node) SilentFor(now time.Time) time.Duration {
	switch {
	case n.LastHeartbeat.IsZero():
		return time.Duration(math.MaxInt64) // never heard from
	case now.Before(n.LastHeartbeat):
		return 0
	default:
		return now.Sub(n.LastHeartbeat)
	}
}

// Dead reports whether the node's replicas should be treated as lost at now: it is decommissioned, or it
// has been silent for longer than deadAfter (DefaultDeadAfter when deadAfter is 0).
func (n *Node) Dead(now time.Time, deadAfter time.Duration) bool {
	if n.Decommissioned {
		return true
	}
	if deadAfter <= 0 {
		deadAfter = DefaultDeadAfter
	}
	return n.SilentFor(now) > deadAfter
}

// Active reports whether the node may receive replicas and leaderships: live, and neither draining,
// decommissioning nor decommissioned.
func (n *Node) Active() bool {
	return n.Live && !n.Draining && !n.Decommissioning && !n.Decommissioned
}

// DiskFull reports whether the node's disk is filled beyond fraction (e.g. 0.95) of its capacity. A node
// of unknown capacity is never full.
func (n *Node) DiskFull(fraction float64) bool {
	if n.DiskCapacity == 0 {
		return false
	}
	return float64(n.DiskUsed) > fraction*float64(n.DiskCapacity)
}

// String is "n3".
func (n *Node) String() string { return fmt.Sprintf("n%d", n.ID) }

// Replica is one member of a range's Raft group.
type Replica struct {
	Node    uint64
	Learner bool // a non-voting member (catching up, or serving follower reads)
}

// Range is a range descriptor with the load its leader reports.
type Range struct {
	ID       uint64
	StartKey []byte // inclusive; empty means the start of the key space
	EndKey   []byte // exclusive; empty means the end of the key space
	// Generation is bumped by every split, merge and replica change (0 if the source does not track it).
	Generation uint64
	// System ranges (the meta range) are replicated like any other but never split or merged.
	System   bool
	Replicas []Replica
	Leader   uint64 // node id of the Raft leader, 0 if unknown

	ReadQPS  float64
	WriteQPS float64
	Bytes    uint64
	// Sample is a small weighted sample of the keys requested since the previous heartbeat, filled by
	// the leader with a KeySampler; nil when not reported.
	Sample *KeySample
	// Latency is how long the leader took to serve the range's requests since its previous heartbeat
	// (from a LatencyRecorder); nil when it served none or did not report it.
	Latency *LatencyHistogram
}

// QPS is read plus write requests per second.
func (r *Range) QPS() float64 { return r.ReadQPS + r.WriteQPS }

// Voters are the nodes holding a voting replica, in descriptor order.
func (r *Range) Voters() []uint64 {
	var out []uint64
	for _, rep := range r.Replicas {
		if !rep.Learner {
			out = append(out, rep.Node)
		}
	}
	return out
}

// Learners are the nodes holding a non-voting replica, in descriptor order.
func (r *Range) Learners() []uint64 {
	var out []uint64
	for _, rep := range r.Replicas {
		if rep.Learner {
			out = append(out, rep.Node)
		}
	}
	return out
}

// ReplicaOn returns the replica on node, if any.
func (r *Range) ReplicaOn(node uint64) (Replica, bool) {
	for _, rep := range r.Replicas {
		if rep.Node == node {
			return rep, true
		}
	}
	return Replica{}, false
}

// HasReplica reports whether node holds a replica (voter or learner) of the range.
func (r *Range) HasReplica(node uint64) bool {
	_, ok := r.ReplicaOn(node)
	return ok
}

// IsVoter reports whether node holds a voting replica of the range.
func (r *Range) IsVoter(node uint64) bool {
	rep, ok := r.ReplicaOn(node)
	return ok && !rep.Learner
}

// ContainsKey reports whether key lies in [StartKey, EndKey).
func (r *Range) ContainsKey(key []byte) bool {
	return bytes.Compare(key, r.StartKey) >= 0 && (len(r.EndKey) == 0 || bytes.Compare(key, r.EndKey) < 0)
}

// String is "r7".
func (r *Range) String() string { return fmt.Sprintf("r%d", r.ID) }

// Span renders [start, end) with keys quoted, "" for an open end.
func (r *Range) Span() string { return FormatSpan(r.StartKey, r.EndKey) }

// FormatSpan renders [start, end) with keys quoted.
func FormatSpan(start, end []byte) string {
	return fmt.Sprintf("[%s, %s)", FormatKey(start), FormatKey(end))
}

// FormatKey quotes a key for logs and decision entries ("" for the empty key).
func FormatKey(k []byte) string { return fmt.Sprintf("%q", k) }

// Cluster is a snapshot of the whole cluster at Now.
type Cluster struct {
	// Now is the time of the snapshot: the wall clock on a node, the test's clock in a test.
	// Everything time-dependent in the autopilot uses it.
	Now time.Time
	// Nodes sorted by ID.
	Nodes []*Node
	// Ranges: system ranges first (by ID), then user ranges sorted by StartKey.
	Ranges []*Range

	// The lookups by ID: slices indexed by ID when the IDs are dense (they are allocated in
	// sequence), maps otherwise. Hashing 100 000 range IDs on every snapshot cost more than all the
	// policies' work on a quiet cluster.
	nodeAt    []*Node
	nodeByID  map[uint64]*Node
	rangeAt   []*Range
	rangeByID map[uint64]*Range
	user      []*Range // user ranges sorted by StartKey

	// perNode is built on first use (see RangesOf): the policies ask for one node's ranges many
	// times per round, and a scan of every range per question grows with nodes × ranges.
	perNodeOnce sync.Once
	perNodeAt   []nodeRanges // by node ID, when nodeAt is
	perNode     map[uint64]*nodeRanges
	userVoters  int
	strays      bool // a replica or leader on a node not in Nodes

	// leaderAt and qpsAt are each range's leader and QPS by position in Ranges, for patch: the
	// nodes' QPS totals are summed again in Ranges' order (a float sum patched by differences would
	// differ in its last bits), over these arrays instead of every range's struct.
	leaderAt []uint64
	qpsAt    []float64
	// from, set by patch, says how to build the per-node index from an earlier snapshot's (dropped
	// once it is built, so that snapshots do not keep a chain of their predecessors).
	from       atomic.Pointer[patchBase]
	indexed    atomic.Bool // perNodeAt or perNode is built
	positioned bool        // perNodeAt has positions (indexDense, indexFrom)
}

// nodeRanges are the ranges with a replica on one node, and those it leads, in Ranges' order.
type nodeRanges struct {
	held, led   []*Range
	nheld, nled int
	// heldAt and ledAt are the positions in Ranges of held and led (built by indexDense and
	// indexFrom only), so that indexFrom finds a range's place by an integer search.
	heldAt, ledAt []int32
}

// denseLimit says whether IDs up to maxID are dense enough for n entries to index a slice by ID.
func denseLimit(maxID uint64, n int) bool { return maxID <= uint64(4*n+1024) }

// NewCluster builds a snapshot from nodes and ranges (it takes ownership of both): sorts them, indexes
// them and derives each node's replica, leader, byte and QPS totals from the ranges.
func NewCluster(now time.Time, nodes []*Node, ranges []*Range) *Cluster {
	return NewClusterAfter(nil, now, nodes, ranges)
}

// NewClusterAfter is NewCluster for a source that shares the *Range values of unchanged ranges
// between snapshots (the simulator): two neighbours that prev held at the same places are in order
// without a comparison of their keys. The snapshot is the same as NewCluster's.
func NewClusterAfter(prev *Cluster, now time.Time, nodes []*Node, ranges []*Range) *Cluster {
	c := &Cluster{Now: now, Nodes: nodes, Ranges: ranges}
	nodeLess := func(i, j int) bool { return c.Nodes[i].ID < c.Nodes[j].ID }
	if !sort.SliceIsSorted(c.Nodes, nodeLess) {
		sort.Slice(c.Nodes, nodeLess)
	}
	rangeLess := func(i, j int) bool {
		a, b := c.Ranges[i], c.Ranges[j]
		if a.System != b.System {
			return a.System
		}
		if a.System {
			return a.ID < b.ID
		}
		if cmp := bytes.Compare(a.StartKey, b.StartKey); cmp != 0 {
			return cmp < 0
		}
		return a.ID < b.ID
	}
	// A source that keeps its ranges in order (the simulator) pays one pass, not a sort.
	var was []*Range
	if prev != nil && len(prev.Ranges) == len(c.Ranges) {
		was = prev.Ranges // sorted: a pair in the same places is in order
	}
	for i := len(c.Ranges) - 1; i > 0; i-- {
		if was != nil && c.Ranges[i] == was[i] && c.Ranges[i-1] == was[i-1] {
			continue
		}
		if rangeLess(i, i-1) {
			sort.SliceStable(c.Ranges, rangeLess)
			was = nil
			break
		}
	}
	if was != nil && c.patch(prev) {
		return c
	}
	var maxNode, maxRange uint64
	for _, n := range c.Nodes {
		maxNode = max(maxNode, n.ID)
	}
	for _, r := range c.Ranges {
		maxRange = max(maxRange, r.ID)
	}
	if denseLimit(maxNode, len(c.Nodes)) {
		c.nodeAt = make([]*Node, maxNode+1)
	} else {
		c.nodeByID = make(map[uint64]*Node, len(c.Nodes))
	}
	if denseLimit(maxRange, len(c.Ranges)) {
		c.rangeAt = make([]*Range, maxRange+1)
	} else {
		c.rangeByID = make(map[uint64]*Range, len(c.Ranges))
	}
	for _, n := range c.Nodes {
		n.Replicas, n.Voters, n.Leaders, n.Bytes, n.QPS = 0, 0, 0, 0, 0
		if c.nodeAt != nil {
			c.nodeAt[n.ID] = n
		} else {
			c.nodeByID[n.ID] = n
		}
	}
	user := 0
	for _, r := range c.Ranges {
		if !r.System {
			user++
		}
	}
	c.user = make([]*Range, 0, user)
	for _, r := range c.Ranges {
		if c.rangeAt != nil {
			c.rangeAt[r.ID] = r
		} else {
			c.rangeByID[r.ID] = r
		}
		if !r.System {
			c.user = append(c.user, r)
		}
		for _, rep := range r.Replicas {
			if n := c.Node(rep.Node); n != nil {
				n.Replicas++
				if !rep.Learner {
					n.Voters++
				}
				n.Bytes += r.Bytes
			} else {
				c.strays = true
			}
			if !r.System && !rep.Learner {
				c.userVoters++
			}
		}
		if n := c.Node(r.Leader); n != nil {
			n.Leaders++
			n.QPS += r.QPS()
		} else if r.Leader != 0 {
			c.strays = true
		}
	}
	c.leaderAt, c.qpsAt = make([]uint64, len(c.Ranges)), make([]float64, len(c.Ranges))
	for i, r := range c.Ranges {
		c.leaderAt[i], c.qpsAt[i] = r.Leader, r.QPS()
	}
	if len(c.user) == 0 {
		c.user = nil
	}
	return c
}

// patch derives c's indexes and node totals from prev, whose Ranges hold the same ranges in the same
// places except where a range changed (c.Ranges[i] != prev.Ranges[i]): only those are looked at, and
// every figure comes out as a full pass would make it (integer totals moved by the changed ranges,
// QPS totals summed again in order over compact arrays). It reports false, having changed nothing,
// when the shapes differ (other nodes, a range becoming a system range, an ID beyond the dense
// index, a replica on an unknown node): then the full pass runs.
func (c *Cluster) patch(prev *Cluster) bool {
	if prev.nodeAt == nil || prev.rangeAt == nil || prev.strays || prev.leaderAt == nil ||
		len(prev.Nodes) != len(c.Nodes) || len(prev.Ranges) != len(c.Ranges) {
		return false
	}
	for i, n := range c.Nodes {
		if prev.Nodes[i].ID != n.ID {
			return false
		}
	}
	var changed []int
	for i, r := range c.Ranges {
		if r == prev.Ranges[i] {
			continue
		}
		old := prev.Ranges[i]
		if r.System != old.System || r.ID >= uint64(len(prev.rangeAt)) || r.Leader >= uint64(len(prev.nodeAt)) ||
			r.Leader != 0 && prev.nodeAt[r.Leader] == nil {
			return false
		}
		for _, rep := range r.Replicas {
			if rep.Node >= uint64(len(prev.nodeAt)) || prev.nodeAt[rep.Node] == nil {
				return false
			}
		}
		changed = append(changed, i)
	}
	c.nodeAt = make([]*Node, len(prev.nodeAt))
	for _, n := range c.Nodes {
		p := prev.nodeAt[n.ID]
		n.Replicas, n.Voters, n.Leaders, n.Bytes, n.QPS = p.Replicas, p.Voters, 0, p.Bytes, 0
		c.nodeAt[n.ID] = n
	}
	c.rangeAt = append([]*Range(nil), prev.rangeAt...)
	c.user = append([]*Range(nil), prev.user...)
	c.leaderAt = append([]uint64(nil), prev.leaderAt...)
	c.qpsAt = append([]float64(nil), prev.qpsAt...)
	c.userVoters = prev.userVoters
	if prev.indexed.Load() && prev.positioned {
		c.from.Store(&patchBase{base: prev, moved: changed})
	} else if pb := prev.from.Load(); pb != nil {
		// prev's index was never asked for (a snapshot the executor only reconciled on): patch the
		// index prev would have been patched from, at the positions changed since.
		c.from.Store(&patchBase{base: pb.base, moved: union(pb.moved, changed)})
	}
	system := len(c.Ranges) - len(c.user) // system ranges come first
	add := func(r *Range, sign int) {
		for _, rep := range r.Replicas {
			n := c.nodeAt[rep.Node]
			n.Replicas += sign
			if !rep.Learner {
				n.Voters += sign
				if !r.System {
					c.userVoters += sign
				}
			}
			if sign > 0 {
				n.Bytes += r.Bytes
			} else {
				n.Bytes -= r.Bytes
			}
		}
	}
	for _, i := range changed {
		old := prev.Ranges[i]
		add(old, -1)
		c.rangeAt[old.ID] = nil
	}
	for _, i := range changed {
		r := c.Ranges[i]
		add(r, +1)
		c.rangeAt[r.ID] = r
		if !r.System {
			c.user[i-system] = r
		}
		c.leaderAt[i], c.qpsAt[i] = r.Leader, r.QPS()
	}
	for i, l := range c.leaderAt {
		if l < uint64(len(c.nodeAt)) {
			if n := c.nodeAt[l]; n != nil {
				n.Leaders++
				n.QPS += c.qpsAt[i]
			}
		}
	}
	return true
}

// Node returns the node with id, or nil.
func (c *Cluster) Node(id uint64) *Node {
	if c.nodeAt != nil {
		if id < uint64(len(c.nodeAt)) {
			return c.nodeAt[id]
		}
		return nil
	}
	return c.nodeByID[id]
}

// Range returns the range with id, or nil.
func (c *Cluster) Range(id uint64) *Range {
	if c.rangeAt != nil {
		if id < uint64(len(c.rangeAt)) {
			return c.rangeAt[id]
		}
		return nil
	}
	return c.rangeByID[id]
}

func (c *Cluster) indexNodes() {
	c.perNodeOnce.Do(func() {
		defer c.indexed.Store(true)
		if pb := c.from.Swap(nil); pb != nil {
			c.indexFrom(pb.base, pb.moved)
			return
		}
		if c.nodeAt != nil && !c.strays {
			c.indexDense()
			return
		}
		// Two passes: counts, then one backing array for every node's lists. Nodes are found
		// by ID through the dense slice when there is one.
		var dense []nodeRanges
		if c.nodeAt != nil {
			dense = make([]nodeRanges, len(c.nodeAt))
		}
		c.perNode = map[uint64]*nodeRanges{}
		at := func(id uint64) *nodeRanges {
			if id < uint64(len(dense)) {
				return &dense[id]
			}
			nr := c.perNode[id]
			if nr == nil {
				nr = &nodeRanges{}
				c.perNode[id] = nr
			}
			return nr
		}
		total := 0
		for _, r := range c.Ranges {
			for _, rep := range r.Replicas {
				at(rep.Node).nheld++
				total++
			}
			if r.Leader != 0 {
				at(r.Leader).nled++
				total++
			}
		}
		backing := make([]*Range, total)
		carve := func(nr *nodeRanges) {
			nr.held, backing = backing[:0:nr.nheld], backing[nr.nheld:]
			nr.led, backing = backing[:0:nr.nled], backing[nr.nled:]
		}
		for i := range dense {
			carve(&dense[i])
		}
		for _, nr := range c.perNode {
			carve(nr)
		}
		for _, r := range c.Ranges {
			for _, rep := range r.Replicas {
				nr := at(rep.Node)
				nr.held = append(nr.held, r)
			}
			if r.Leader != 0 {
				nr := at(r.Leader)
				nr.led = append(nr.led, r)
			}
		}
		c.perNodeAt = dense
	})
}

// indexDense is indexNodes when every replica and leader is on a node of Nodes and nodes are found
// by ID through a slice: NewCluster's counts (Replicas, Leaders) size the lists, one pass fills them.
func (c *Cluster) indexDense() {
	dense := make([]nodeRanges, len(c.nodeAt))
	total := 0
	for _, n := range c.Nodes {
		total += n.Replicas + n.Leaders
	}
	backing := make([]*Range, total)
	positions := make([]int32, total)
	for _, n := range c.Nodes {
		nr := &dense[n.ID]
		nr.held, backing = backing[:0:n.Replicas], backing[n.Replicas:]
		nr.led, backing = backing[:0:n.Leaders], backing[n.Leaders:]
		nr.heldAt, positions = positions[:0:n.Replicas], positions[n.Replicas:]
		nr.ledAt, positions = positions[:0:n.Leaders], positions[n.Leaders:]
	}
	for i, r := range c.Ranges {
		for _, rep := range r.Replicas {
			nr := &dense[rep.Node]
			nr.held, nr.heldAt = append(nr.held, r), append(nr.heldAt, int32(i))
		}
		if r.Leader != 0 {
			nr := &dense[r.Leader]
			nr.led, nr.ledAt = append(nr.led, r), append(nr.ledAt, int32(i))
		}
	}
	c.perNodeAt, c.positioned = dense, true
}

// patchBase is a snapshot with a positioned per-node index, and the positions at which a later
// snapshot's ranges differ from its own.
type patchBase struct {
	base  *Cluster
	moved []int
}

// union merges two ascending lists of positions.
func union(a, b []int) []int {
	out := make([]int, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		switch {
		case len(b) == 0 || len(a) > 0 && a[0] < b[0]:
			out, a = append(out, a[0]), a[1:]
		case len(a) == 0 || b[0] < a[0]:
			out, b = append(out, b[0]), b[1:]
		default:
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	return out
}

// indexFrom is indexDense for a snapshot patched from base: base's lists, with the ranges at the
// moved positions taken out of their old nodes' lists and put into their new nodes', copying a
// node's lists before its first change (base's are shared, and immutable). Positions are the same in
// both snapshots, so a range's place in a list is found by its position.
func (c *Cluster) indexFrom(base *Cluster, moved []int) {
	dense := append([]nodeRanges(nil), base.perNodeAt...)
	copied := make([]bool, len(dense))
	own := func(n uint64) *nodeRanges {
		nr := &dense[n]
		if !copied[n] {
			copied[n] = true
			nr.held = append(make([]*Range, 0, len(nr.held)+4), nr.held...)
			nr.led = append(make([]*Range, 0, len(nr.led)+4), nr.led...)
			nr.heldAt = append(make([]int32, 0, len(nr.heldAt)+4), nr.heldAt...)
			nr.ledAt = append(make([]int32, 0, len(nr.ledAt)+4), nr.ledAt...)
		}
		return nr
	}
	for _, i := range moved {
		old := base.Ranges[i]
		for _, rep := range old.Replicas {
			nr := own(rep.Node)
			nr.held, nr.heldAt = without(nr.held, nr.heldAt, int32(i))
		}
		if old.Leader != 0 {
			nr := own(old.Leader)
			nr.led, nr.ledAt = without(nr.led, nr.ledAt, int32(i))
		}
	}
	for _, i := range moved {
		r := c.Ranges[i]
		for _, rep := range r.Replicas {
			nr := own(rep.Node)
			nr.held, nr.heldAt = inserted(nr.held, nr.heldAt, r, int32(i))
		}
		if r.Leader != 0 {
			nr := own(r.Leader)
			nr.led, nr.ledAt = inserted(nr.led, nr.ledAt, r, int32(i))
		}
	}
	c.perNodeAt, c.positioned = dense, true
}

// without removes the range at position i from rs (at is rs's positions, ascending), if there.
func without(rs []*Range, at []int32, i int32) ([]*Range, []int32) {
	k := sort.Search(len(at), func(k int) bool { return at[k] >= i })
	if k < len(at) && at[k] == i {
		return append(rs[:k], rs[k+1:]...), append(at[:k], at[k+1:]...)
	}
	return rs, at
}

// inserted puts r, at position i, into rs at its place (at is rs's positions, ascending).
func inserted(rs []*Range, at []int32, r *Range, i int32) ([]*Range, []int32) {
	k := sort.Search(len(at), func(k int) bool { return at[k] >= i })
	rs, at = append(rs, nil), append(at, 0)
	copy(rs[k+1:], rs[k:])
	copy(at[k+1:], at[k:])
	rs[k], at[k] = r, i
	return rs, at
}

func (c *Cluster) rangesOfNode(node uint64) *nodeRanges {
	c.indexNodes()
	if node < uint64(len(c.perNodeAt)) {
		return &c.perNodeAt[node]
	}
	return c.perNode[node]
}

// RangesOf returns the ranges (system ones included) with a replica, voter or learner, on node, in
// Ranges' order. The caller must not modify the slice.
func (c *Cluster) RangesOf(node uint64) []*Range {
	if nr := c.rangesOfNode(node); nr != nil {
		return nr.held
	}
	return nil
}

// LedBy returns the ranges (system ones included) whose leader is node, in Ranges' order. The caller
// must not modify the slice.
func (c *Cluster) LedBy(node uint64) []*Range {
	if nr := c.rangesOfNode(node); nr != nil {
		return nr.led
	}
	return nil
}

// UserVoters is the number of voting replicas of user ranges.
func (c *Cluster) UserVoters() int { return c.userVoters }

// RangeFor returns the user range containing key, or nil.
func (c *Cluster) RangeFor(key []byte) *Range {
	i := sort.Search(len(c.user), func(i int) bool { return bytes.Compare(c.user[i].StartKey, key) > 0 })
	if i == 0 {
		return nil
	}
	if r := c.user[i-1]; r.ContainsKey(key) {
		return r
	}
	return nil
}

// RightNeighborAt is RightNeighbor(UserRanges()[i]), without a search when the next range in key
// order starts where the range ends.
func (c *Cluster) RightNeighborAt(i int) *Range {
	r := c.user[i]
	if len(r.EndKey) > 0 && i+1 < len(c.user) {
		next := c.user[i+1]
		if bytes.Equal(next.StartKey, r.EndKey) && (i+2 == len(c.user) || bytes.Compare(c.user[i+2].StartKey, r.EndKey) > 0) {
			// RangeFor(r.EndKey) finds next: the last range starting at or before the key.
			if next.ContainsKey(r.EndKey) {
				return next
			}
			return nil
		}
	}
	return c.RightNeighbor(r)
}

// RightNeighbor returns the user range starting where r ends, or nil (r ends the key space, or the
// descriptors have a gap there).
func (c *Cluster) RightNeighbor(r *Range) *Range {
	if r.System || len(r.EndKey) == 0 {
		return nil
	}
	if n := c.RangeFor(r.EndKey); n != nil && bytes.Equal(n.StartKey, r.EndKey) {
		return n
	}
	return nil
}

// UserRanges returns the user ranges sorted by StartKey (the caller must not modify the slice).
func (c *Cluster) UserRanges() []*Range { return c.user }

// RangesIn returns the user ranges overlapping [start, end) (empty end: to the end of the key space).
func (c *Cluster) RangesIn(start, end []byte) []*Range {
	var out []*Range
	for _, r := range c.user {
		if len(end) > 0 && bytes.Compare(r.StartKey, end) >= 0 {
			break
		}
		if len(r.EndKey) > 0 && bytes.Compare(r.EndKey, start) <= 0 {
			continue
		}
		out = append(out, r)
	}
	return out
}
