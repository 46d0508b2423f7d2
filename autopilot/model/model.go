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
	"iter"
	"math"
	"sort"
	"strings"
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
	// Locality is where the node runs, "region=r1,zone=z1" (tiers from the most general; "": unknown).
	Locality string
	// Profile is the engine profile the node runs ("read", "write", "readwrite", "scan", "default";
	// "": not reported).
	Profile string

	// CPUPercent is the node's CPU use, 0–100 per core summed (as reported), of CPUCores cores;
	// DiskBusy the share of time its store's disk was busy (0..1).
	CPUPercent float64
	CPUCores   float64
	DiskBusy   float64
	// ReadQPS is the reads per second the node served at all its replicas, leader or not, as its
	// heartbeat reported them; 0: not reported.
	ReadQPS float64
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
	// CacheBytes is the block cache's capacity, BlockBytes the engine's data block size (0: not
	// reported), IndexFilterBytes the part of the cache index and filter blocks take: the usage
	// model's cache is CacheBytes less IndexFilterBytes, in blocks (usage.go).
	CacheBytes, BlockBytes, IndexFilterBytes uint64

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

// Zone is the value of the node's most specific locality tier ("" when it has none): a range's
// replicas are spread over zones.
func (n *Node) Zone() string {
	l := n.Locality
	if i := strings.LastIndexByte(l, ','); i >= 0 {
		l = l[i+1:]
	}
	_, v, _ := strings.Cut(l, "=")
	return v
}

// Utilization is how busy the node is, 0..1: the busier of its CPU (over its cores) and its disk
// (Bekas's utilization, CPU and disk busy). 0 when it reports neither.
func (n *Node) Utilization() float64 {
	u := n.DiskBusy
	if n.CPUCores > 0 {
		u = max(u, n.CPUPercent/(100*n.CPUCores))
	}
	return min(max(u, 0), 1)
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
	System bool
	// Fenced: a span fence holds part of the range (a table being re-keyed, or its retired old
	// keys); the store refuses to merge it.
	Fenced   bool
	Replicas []Replica
	Leader   uint64 // node id of the Raft leader, 0 if unknown

	ReadQPS  float64
	WriteQPS float64
	// ScanQPS are the scans among the leader's reads (ReadQPS counts them too).
	ScanQPS float64
	// ReplicaReadQPS are the reads other replicas than the leader served (replica, bounded-staleness
	// and follower reads); ReadQPS is the leader's.
	ReplicaReadQPS float64
	Bytes          uint64
	// Sample is a small weighted sample of the keys requested since the previous heartbeat, filled by
	// the leader with a KeySampler; nil when not reported.
	Sample *KeySample
	// Latency is how long the leader took to serve the range's requests since its previous heartbeat
	// (from a LatencyRecorder); nil when it served none or did not report it.
	Latency *LatencyHistogram
	// Access is the leader's access statistics for the usage model (usage.go); nil: not reported.
	Access *Access
	// StreamQPS are the stream events the leader's tasks applied in the range a second (node/streamhost);
	// StreamSample a uniform sample of their keys in the last window (nil: none reported).
	StreamQPS    float64
	StreamSample *KeySample
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
	// LeadZones are the operators' preferences for where spans are led (see LeadZoneOf); a Source
	// sets them before it hands the snapshot out.
	LeadZones []LeadZone

	// The lookups by ID: slices indexed by ID when the IDs are dense (they are allocated in
	// sequence), maps otherwise. Hashing 100 000 range IDs on every snapshot cost more than all the
	// policies' work on a quiet cluster. rangeAt holds positions in Ranges (-1: no such range), not
	// the ranges, so that snapshots whose ranges changed in place share it.
	nodeAt    []*Node
	nodeByID  map[uint64]*Node
	rangeAt   []int32
	rangeByID map[uint64]*Range
	system    int // system ranges: Ranges[:system]; the user ranges are Ranges[system:]
	// latencies counts the ranges reporting a Latency (the decision log skips its pass without any).
	latencies  int
	userVoters int
	strays     bool // a replica or leader on a node not in Nodes

	// The per-node index, of positions in Ranges: built on first use (see RangesOf) by NewCluster's
	// snapshots, at once by a patched one (from its predecessor's, which it needs for the nodes'
	// QPS totals). Positions, not ranges: a range whose load changed keeps its place, so the lists
	// of its nodes stay shared with the predecessor's.
	perNodeOnce sync.Once
	perNodeAt   []nodeRanges // by node ID, when nodeAt is
	perNode     map[uint64]*nodeRanges

	// hist and seq place the snapshot in its chain of patched snapshots (see ChangedSince).
	hist *history
	seq  uint64
	// since is ChangedSince's last union, for the policies that ask it after the first.
	since atomic.Pointer[changedSince]
}

type changedSince struct {
	seq uint64
	at  []int
}

// history is what a chain of snapshots, each patched from the one before, changed: the positions in
// Ranges at which each differs from its predecessor. It is shared by the chain and only appended to.
type history struct {
	mu    sync.Mutex
	first uint64  // seq of the snapshot whose changes are at[0]
	at    [][]int // at[k]: the positions changed by snapshot first+k, ascending
}

// historyLength bounds the snapshots a history remembers: a policy that last looked further back
// than that compares every range.
const historyLength = 256

// ChangedSince returns the positions in Ranges, ascending, at which c's range may differ from
// since's (every other position holds the same *Range in both), and true; or false when the model
// cannot tell (since is not an earlier snapshot of c's chain, or too old), and then every position
// may differ. The caller must not modify the slice. Policies that keep what they derived from each
// range use it to look at the changed ranges only.
func (c *Cluster) ChangedSince(since *Cluster) ([]int, bool) {
	if since == nil || c.hist == nil || since.hist != c.hist || since.seq > c.seq {
		return nil, false
	}
	if since.seq == c.seq {
		return nil, since == c
	}
	h := c.hist
	h.mu.Lock()
	if since.seq+1 < h.first {
		h.mu.Unlock()
		return nil, false
	}
	entries := h.at[since.seq+1-h.first : c.seq+1-h.first]
	h.mu.Unlock()
	if len(entries) == 1 {
		return entries[0], true
	}
	if cs := c.since.Load(); cs != nil && cs.seq == since.seq {
		return cs.at, true
	}
	var out []int
	for _, e := range entries {
		out = union(out, e)
	}
	c.since.Store(&changedSince{seq: since.seq, at: out})
	return out, true
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

// follow makes c the successor of prev in prev's history, with changed its changed positions (a
// new history if prev already has one: two snapshots patched from the same one).
func (c *Cluster) follow(prev *Cluster, changed []int) {
	h := prev.hist
	if h == nil {
		c.hist, c.seq = &history{first: 1}, 0
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.first+uint64(len(h.at)) != prev.seq+1 {
		c.hist, c.seq = &history{first: prev.seq + 2, at: nil}, prev.seq+1
		return
	}
	h.at = append(h.at, changed)
	if len(h.at) > historyLength {
		h.at = append([][]int(nil), h.at[len(h.at)-historyLength/2:]...)
		h.first = prev.seq + 2 - uint64(len(h.at))
	}
	c.hist, c.seq = h, prev.seq+1
}

// nodeRanges are the positions in Ranges, ascending, of the ranges with a replica on one node and
// of those it leads.
type nodeRanges struct {
	held, led []int32
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
// without a comparison of their keys, and when the ranges are prev's except in place (same count,
// same order), the lookups, totals and index are prev's patched where ranges differ. The snapshot is
// the same as NewCluster's.
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
	// A source that keeps its ranges in order (the simulator) pays one pass, not a sort; none when it
	// hands prev's own ranges again (nothing changed).
	var was []*Range
	if prev != nil && len(prev.Ranges) == len(c.Ranges) {
		was = prev.Ranges // sorted: a pair in the same places is in order
	}
	same := was != nil && (len(was) == 0 || &was[0] == &c.Ranges[0])
	for i := len(c.Ranges) - 1; i > 0 && !same; i-- {
		if was != nil && c.Ranges[i] == was[i] && c.Ranges[i-1] == was[i-1] {
			continue
		}
		if rangeLess(i, i-1) {
			sort.SliceStable(c.Ranges, rangeLess)
			was = nil
			break
		}
	}
	if was != nil && c.patch(prev, same) {
		return c
	}
	c.hist = &history{first: 1}
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
	if denseLimit(maxRange, len(c.Ranges)) && len(c.Ranges) < math.MaxInt32 {
		c.rangeAt = make([]int32, maxRange+1)
		for i := range c.rangeAt {
			c.rangeAt[i] = -1
		}
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
	for i, r := range c.Ranges {
		if c.rangeAt != nil {
			c.rangeAt[r.ID] = int32(i)
		} else {
			c.rangeByID[r.ID] = r
		}
		if r.System {
			c.system++
		}
		if r.Latency != nil {
			c.latencies++
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
	return c
}

// patch derives c's lookups, node totals and index from prev, whose Ranges hold the same ranges in
// the same places except where a range changed (c.Ranges[i] != prev.Ranges[i]): only those are
// looked at, and every figure comes out as a full pass would make it (integer totals moved by the
// changed ranges; a node's QPS summed again, in Ranges' order, over its led ranges when one of them
// changed, else prev's). It reports false, having changed nothing, when the shapes differ (other
// nodes, a range becoming a system range, an ID beyond the dense index, a replica on an unknown
// node): then the full pass runs.
func (c *Cluster) patch(prev *Cluster, same bool) bool {
	changed, renamed, ok := c.patchable(prev, same)
	if !ok {
		return false
	}
	prev.indexNodes()
	c.nodeAt = make([]*Node, len(prev.nodeAt))
	for _, n := range c.Nodes {
		p := prev.nodeAt[n.ID]
		n.Replicas, n.Voters, n.Leaders, n.Bytes, n.QPS = p.Replicas, p.Voters, p.Leaders, p.Bytes, p.QPS
		c.nodeAt[n.ID] = n
	}
	c.rangeAt, c.system, c.latencies, c.userVoters = prev.rangeAt, prev.system, prev.latencies, prev.userVoters
	if renamed {
		c.rangeAt = append([]int32(nil), prev.rangeAt...)
		for _, i := range changed {
			c.rangeAt[prev.Ranges[i].ID] = -1
		}
		for _, i := range changed {
			c.rangeAt[c.Ranges[i].ID] = int32(i)
		}
	}
	pt := patcher{c: c, dense: prev.perNodeAt, queued: make([]bool, len(c.nodeAt))}
	for _, i := range changed {
		pt.apply(prev.Ranges[i], c.Ranges[i], int32(i))
	}
	for _, id := range pt.resum {
		n := c.nodeAt[id]
		n.QPS = 0
		for _, p := range pt.dense[id].led {
			n.QPS += c.Ranges[p].QPS()
		}
	}
	c.perNodeOnce.Do(func() { c.perNodeAt = pt.dense })
	c.follow(prev, changed)
	return true
}

// patchable lists the positions of c's ranges that differ from prev's, and whether one of another ID
// took a place (renamed); ok is false when c cannot be patched from prev: other nodes, another range
// count, or a range naming a node prev does not know.
func (c *Cluster) patchable(prev *Cluster, same bool) (changed []int, renamed, ok bool) {
	if prev.nodeAt == nil || prev.rangeAt == nil || prev.strays || len(prev.Nodes) != len(c.Nodes) ||
		len(prev.Ranges) != len(c.Ranges) {
		return nil, false, false
	}
	for i, n := range c.Nodes {
		if prev.Nodes[i].ID != n.ID {
			return nil, false, false
		}
	}
	if same {
		return nil, false, true // prev's own ranges: none changed
	}
	for i, r := range c.Ranges {
		if r == prev.Ranges[i] {
			continue
		}
		old := prev.Ranges[i]
		if r.System != old.System || r.ID >= uint64(len(prev.rangeAt)) || r.Leader >= uint64(len(prev.nodeAt)) ||
			r.Leader != 0 && prev.nodeAt[r.Leader] == nil {
			return nil, false, false
		}
		for _, rep := range r.Replicas {
			if rep.Node >= uint64(len(prev.nodeAt)) || prev.nodeAt[rep.Node] == nil {
				return nil, false, false
			}
		}
		renamed = renamed || r.ID != old.ID
		changed = append(changed, i)
	}
	return changed, renamed, true
}

// patcher carries a patch's per-node index (prev's lists, a node's copied before its first change)
// and the nodes whose QPS is summed again, once each.
type patcher struct {
	c      *Cluster
	dense  []nodeRanges
	copied []bool
	resum  []uint64
	queued []bool
}

// own is node n's lists, copied on first use so that prev's stay as they were.
func (pt *patcher) own(n uint64) *nodeRanges {
	if pt.copied == nil {
		pt.dense = append([]nodeRanges(nil), pt.dense...)
		pt.copied = make([]bool, len(pt.dense))
	}
	nr := &pt.dense[n]
	if !pt.copied[n] {
		pt.copied[n] = true
		nr.held = append(make([]int32, 0, len(nr.held)+4), nr.held...)
		nr.led = append(make([]int32, 0, len(nr.led)+4), nr.led...)
	}
	return nr
}

func (pt *patcher) again(n uint64) {
	if !pt.queued[n] {
		pt.queued[n] = true
		pt.resum = append(pt.resum, n)
	}
}

// apply moves the counts and the index from old to r, the range at position pos.
func (pt *patcher) apply(old, r *Range, pos int32) {
	c := pt.c
	if old.Latency != nil {
		c.latencies--
	}
	if r.Latency != nil {
		c.latencies++
	}
	pt.count(old, r, pos, -1)
	pt.count(r, old, pos, +1)
	switch {
	case old.Leader != r.Leader:
		if old.Leader != 0 {
			nr := pt.own(old.Leader)
			nr.led = without(nr.led, pos)
			c.nodeAt[old.Leader].Leaders--
			pt.again(old.Leader)
		}
		if r.Leader != 0 {
			nr := pt.own(r.Leader)
			nr.led = inserted(nr.led, pos)
			c.nodeAt[r.Leader].Leaders++
			pt.again(r.Leader)
		}
	case r.Leader != 0 && old.QPS() != r.QPS():
		pt.again(r.Leader)
	}
}

// count adds sign times x's replicas to their nodes' counts, and for a node holding no replica of
// other, removes (sign −1) or inserts (sign +1) position pos in its list.
func (pt *patcher) count(x, other *Range, pos int32, sign int) {
	c := pt.c
	for _, rep := range x.Replicas {
		n := c.nodeAt[rep.Node]
		n.Replicas += sign
		if sign < 0 {
			n.Bytes -= x.Bytes
		} else {
			n.Bytes += x.Bytes
		}
		if !rep.Learner {
			n.Voters += sign
			if !x.System {
				c.userVoters += sign
			}
		}
		if !other.HasReplica(rep.Node) {
			nr := pt.own(rep.Node)
			if sign < 0 {
				nr.held = without(nr.held, pos)
			} else {
				nr.held = inserted(nr.held, pos)
			}
		}
	}
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
			if i := c.rangeAt[id]; i >= 0 {
				return c.Ranges[i]
			}
		}
		return nil
	}
	return c.rangeByID[id]
}

// Latencies is the number of ranges that report a Latency.
func (c *Cluster) Latencies() int { return c.latencies }

// indexNodes builds the per-node index, once: two passes, counts then one backing array for every
// node's lists. Nodes are found by ID through the dense slice when there is one, and NewCluster's
// counts size the lists when every replica and leader is on a node of Nodes.
func (c *Cluster) indexNodes() {
	c.perNodeOnce.Do(func() {
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
		if c.nodeAt != nil && !c.strays {
			for _, n := range c.Nodes {
				dense[n.ID].held, dense[n.ID].led = make([]int32, 0, n.Replicas), make([]int32, 0, n.Leaders)
			}
		} else {
			nheld, nled := map[*nodeRanges]int{}, map[*nodeRanges]int{}
			for _, r := range c.Ranges {
				for _, rep := range r.Replicas {
					nheld[at(rep.Node)]++
				}
				if r.Leader != 0 {
					nled[at(r.Leader)]++
				}
			}
			for nr, k := range nheld {
				nr.held = make([]int32, 0, k)
			}
			for nr, k := range nled {
				nr.led = make([]int32, 0, k)
			}
		}
		for i, r := range c.Ranges {
			for _, rep := range r.Replicas {
				nr := at(rep.Node)
				nr.held = append(nr.held, int32(i))
			}
			if r.Leader != 0 {
				nr := at(r.Leader)
				nr.led = append(nr.led, int32(i))
			}
		}
		c.perNodeAt = dense
	})
}

// without removes position i from at (ascending), if there.
func without(at []int32, i int32) []int32 {
	k := sort.Search(len(at), func(k int) bool { return at[k] >= i })
	if k < len(at) && at[k] == i {
		return append(at[:k], at[k+1:]...)
	}
	return at
}

// inserted puts position i into at (ascending) at its place.
func inserted(at []int32, i int32) []int32 {
	k := sort.Search(len(at), func(k int) bool { return at[k] >= i })
	at = append(at, 0)
	copy(at[k+1:], at[k:])
	at[k] = i
	return at
}

func (c *Cluster) rangesOfNode(node uint64) *nodeRanges {
	c.indexNodes()
	if node < uint64(len(c.perNodeAt)) {
		return &c.perNodeAt[node]
	}
	return c.perNode[node]
}

// RangesOf returns the ranges (system ones included) with a replica, voter or learner, on node, in
// Ranges' order.
func (c *Cluster) RangesOf(node uint64) iter.Seq[*Range] {
	var at []int32
	if nr := c.rangesOfNode(node); nr != nil {
		at = nr.held
	}
	return c.at(at)
}

// LedBy returns the ranges (system ones included) whose leader is node, in Ranges' order.
func (c *Cluster) LedBy(node uint64) iter.Seq[*Range] {
	var at []int32
	if nr := c.rangesOfNode(node); nr != nil {
		at = nr.led
	}
	return c.at(at)
}

// at yields the ranges at positions at.
func (c *Cluster) at(at []int32) iter.Seq[*Range] {
	return func(yield func(*Range) bool) {
		for _, i := range at {
			if !yield(c.Ranges[i]) {
				return
			}
		}
	}
}

// UserVoters is the number of voting replicas of user ranges.
func (c *Cluster) UserVoters() int { return c.userVoters }

// RangeFor returns the user range containing key, or nil.
func (c *Cluster) RangeFor(key []byte) *Range {
	user := c.UserRanges()
	i := sort.Search(len(user), func(i int) bool { return bytes.Compare(user[i].StartKey, key) > 0 })
	if i == 0 {
		return nil
	}
	if r := user[i-1]; r.ContainsKey(key) {
		return r
	}
	return nil
}

// RightNeighborAt is RightNeighbor(UserRanges()[i]), without a search when the next range in key
// order starts where the range ends.
func (c *Cluster) RightNeighborAt(i int) *Range {
	user := c.UserRanges()
	r := user[i]
	if len(r.EndKey) > 0 && i+1 < len(user) {
		next := user[i+1]
		if bytes.Equal(next.StartKey, r.EndKey) && (i+2 == len(user) || bytes.Compare(user[i+2].StartKey, r.EndKey) > 0) {
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
func (c *Cluster) UserRanges() []*Range {
	if c.system == len(c.Ranges) {
		return nil
	}
	return c.Ranges[c.system:]
}

// RangesIn returns the user ranges overlapping [start, end) (empty end: to the end of the key space).
func (c *Cluster) RangesIn(start, end []byte) []*Range {
	var out []*Range
	for _, r := range c.UserRanges() {
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
