// Package policy holds the autopilot's policies: each looks at the cluster model and the operators
// already pending and proposes operators for one mechanism — keep the replication factor (replicate),
// empty a decommissioning node (decommission), move leaderships off a draining node (drain), split ranges
// by load (load_split), merge small cold neighbours (merge), even out replicas, bytes, leaderships and
// served load across nodes (rebalance), move leaderships off a node before its heavy background task
// (shed_leadership), lead a re-key's new ranges where its plan put them (rekey), bring a new node in
// range by range (incremental_join), lead ranges in the zone
// an operator prefers (lease_preference), carry the read hints
// switch (read_hints), and (off by default) add read replicas (read_replicas), offload hot spots
// (hotspot_offload), give node groups engine profiles that suit their ranges (node_profiles) and pack
// leaderships by predicted resource usage (usage_balance). A Registry keeps them in priority order with an on/off switch each
// (`shoal admin policy set NAME on|off`); the registry alone says which switches are on by default
// (DefaultOn).
//
// The package owns the decisions: what to change and why, with a predicted benefit. A policy must never
// act — it never calls the Actuator, never submits or cancels an operator and never blocks; it only
// returns operators. A switched-off policy proposes nothing.
//
// Invariant: Registry.Propose never returns two operators for one range, nor one for a range that
// already has a pending operator; every policy plans with the influence of the pending operators and
// of the ones proposed before it in the same round.
package policy

import (
	"fmt"
	"iter"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

// Policy is one autopilot mechanism.
type Policy interface {
	// Name is the policy's switch name (e.g. "load_split").
	Name() string
	// Propose returns operators that would improve c, given the operators already pending. It must not
	// propose for a range that has a pending operator, must not modify c or pending, and must return
	// quickly. Policies may keep state between calls (e.g. what they observed); they are called from
	// one goroutine.
	Propose(c *model.Cluster, pending []*operator.Operator) []*operator.Operator
}

// Policy names: each is the policy's switch (`shoal admin policy set NAME on|off`) and the key of its
// stored switch in the meta range.
const (
	NameReplicate    = "replicate"
	NameDecommission = "decommission"
	NameDrain        = "drain"
	NameShed         = "shed_leadership"
	NameJoin         = "incremental_join"
	NameLoadSplit    = "load_split"
	NameMerge        = "merge"
	NameRebalance    = "rebalance"
	NameReadHints    = "read_hints"
	NameReadReplicas = "read_replicas"
	NameHotspot      = "hotspot_offload"
)

// Note is a decision that is not an operator (a postponement, a task that ran anyway), for the
// decision log.
type Note struct {
	What, Why, Status string
}

// Statuses of notes.
const (
	StatusPostponed = "postponed"
	StatusRanAnyway = "ran anyway"
)

// Noter is a policy that also reports notes; the autopilot takes them after every round.
type Noter interface {
	TakeNotes() []Note
}

// DefaultMaxDiskUse is the share of a node's disk beyond which it receives no new replicas.
const DefaultMaxDiskUse = 0.95

// Config configures every policy; zero fields mean defaults.
type Config struct {
	Replicate    ReplicateConfig
	Decommission DecommissionConfig
	Drain        DrainConfig
	LoadSplit    LoadSplitConfig
	Merge        MergeConfig
	Rebalance    RebalanceConfig
	Shed         ShedConfig
	Join         JoinConfig
	ReadReplicas ReadReplicasConfig
	Hotspot      HotspotOffloadConfig
	// LeasePreference configures lease_preference.
	LeasePreference LeasePreferenceConfig
	NodeProfiles    NodeProfilesConfig
	UsageBalance    UsageBalanceConfig
	// StreamAlign configures stream_align (stream tasks' coordinated elasticity).
	StreamAlign StreamAlignConfig
	// Rekey configures rekey (a re-key's planned leaderships).
	Rekey RekeyConfig
	// MaxDiskUse is the share of a node's disk beyond which no policy places a replica on it. Default 0.95.
	MaxDiskUse float64
}

// DefaultConfig returns the configuration with every default filled in.
func DefaultConfig() Config { return Config{}.WithDefaults() }

// WithDefaults fills the zero fields with their defaults.
func (c Config) WithDefaults() Config {
	c.Replicate = c.Replicate.withDefaults()
	c.Decommission = c.Decommission.withDefaults()
	c.Drain = c.Drain.withDefaults()
	c.LoadSplit = c.LoadSplit.withDefaults()
	c.Merge = c.Merge.withDefaults()
	c.Rebalance = c.Rebalance.withDefaults()
	c.Shed = c.Shed.withDefaults()
	c.Join = c.Join.withDefaults()
	c.ReadReplicas = c.ReadReplicas.withDefaults()
	c.Hotspot = c.Hotspot.withDefaults()
	c.LeasePreference = c.LeasePreference.withDefaults()
	c.NodeProfiles = c.NodeProfiles.withDefaults()
	c.UsageBalance = c.UsageBalance.withDefaults()
	c.StreamAlign = c.StreamAlign.withDefaults()
	c.Rekey = c.Rekey.withDefaults()
	c.MaxDiskUse = withDefaultDiskUse(c.MaxDiskUse)
	return c
}

// withDefaultDiskUse is maxDiskUse, or DefaultMaxDiskUse when it is not set (0 or below).
func withDefaultDiskUse(maxDiskUse float64) float64 {
	if maxDiskUse <= 0 {
		return DefaultMaxDiskUse
	}
	return maxDiskUse
}

// Validate reports the first inconsistent setting, saying which field to change.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.Replicate.Factor < 1:
		return fmt.Errorf("policy: replicate factor %d must be at least 1", c.Replicate.Factor)
	case c.MaxDiskUse > 1:
		return fmt.Errorf("policy: max disk use %.2f must be at most 1", c.MaxDiskUse)
	case c.Rebalance.ReplicaLow > c.Rebalance.ReplicaHigh || c.Rebalance.LeaderLow > c.Rebalance.LeaderHigh ||
		c.Rebalance.BytesLow > c.Rebalance.BytesHigh || c.Rebalance.QPSLow > c.Rebalance.QPSHigh:
		return fmt.Errorf("policy: rebalance stop thresholds must not exceed start thresholds")
	case c.Merge.MaxQPS*2 >= c.LoadSplit.QPSThreshold:
		return fmt.Errorf("policy: merge max QPS %.0f must stay well below the load split threshold %.0f "+
			"(at most half), or ranges would be split and merged back and forth", c.Merge.MaxQPS, c.LoadSplit.QPSThreshold)
	}
	if err := c.Shed.validate(); err != nil {
		return err
	}
	if err := c.Join.validate(); err != nil {
		return err
	}
	return c.LoadSplit.Search.validate()
}

// Status is one policy's switch.
type Status struct {
	Name string `json:"name"`
	On   bool   `json:"on"`
}

// Registry is the ordered set of policies with their switches. Safe for concurrent use; Propose calls
// are serialized.
type Registry struct {
	mu       sync.Mutex
	propose  sync.Mutex
	policies []Policy
	off      map[string]bool
}

// NewRegistry returns a registry running policies in the given order, all switched on.
func NewRegistry(policies ...Policy) *Registry {
	return &Registry{policies: policies, off: map[string]bool{}}
}

// builtin is one policy of the standard registry: its name, its switch in a cluster whose operators
// never set it, and how to build it.
type builtin struct {
	name  string
	on    bool
	build func(cfg Config, splits *SplitMemory) Policy
}

// builtins are the standard registry's policies in priority order: replicate, decommission and drain
// first (availability and operator requests), then shed_leadership (clients must not wait behind a
// heavy background task), incremental_join (a new node's share, range by range), load_split, merge
// and rebalance, and the read_hints switch. load_split and merge share their memory of recent load
// splits, so merge does not undo them.
var builtins = []builtin{
	{NameReplicate, true, func(cfg Config, _ *SplitMemory) Policy { return NewReplicate(cfg.Replicate, cfg.MaxDiskUse) }},
	{NameDecommission, true, func(cfg Config, _ *SplitMemory) Policy { return NewDecommission(cfg.Decommission, cfg.MaxDiskUse) }},
	{NameDrain, true, func(cfg Config, _ *SplitMemory) Policy { return NewDrain(cfg.Drain) }},
	{NameShed, true, func(cfg Config, _ *SplitMemory) Policy { return NewShed(cfg.Shed) }},
	// Inert until a re-key hands over its plan (`shoal table rekey`).
	{NameRekey, true, func(cfg Config, _ *SplitMemory) Policy { return NewRekey(cfg.Rekey) }},
	{NameJoin, true, func(cfg Config, _ *SplitMemory) Policy { return NewIncrementalJoin(cfg.Join, cfg.Replicate.Factor) }},
	{NameLoadSplit, true, func(cfg Config, s *SplitMemory) Policy { return NewLoadSplit(cfg.LoadSplit, s) }},
	// Off until the Linear Road arms (docs/design/streams.md) show what it buys: its splits may cut a
	// handler's writes away from its event's key (CROSS_RANGE).
	{NameStreamAlign, false, func(cfg Config, s *SplitMemory) Policy { return NewStreamAlign(cfg.StreamAlign, s) }},
	{NameMerge, true, func(cfg Config, s *SplitMemory) Policy { return NewMerge(cfg.Merge, s) }},
	// Inert until an operator sets a zone preference (`shoal admin zone-config`).
	{NameLeasePreference, true, func(cfg Config, _ *SplitMemory) Policy { return NewLeasePreference(cfg.LeasePreference) }},
	{NameRebalance, true, func(cfg Config, _ *SplitMemory) Policy { return NewRebalance(cfg.Rebalance, cfg.MaxDiskUse) }},
	{NameReadHints, true, func(Config, *SplitMemory) Policy { return NewReadHints() }},
	// Off until a cluster experiment shows what it buys here (docs/design/read-replicas.md).
	{NameReadReplicas, false, func(cfg Config, _ *SplitMemory) Policy { return NewReadReplicas(cfg.ReadReplicas) }},
	// Off until the hot-spot experiment (docs/design/cross-layer.md) shows where it pays.
	{NameHotspot, false, func(cfg Config, _ *SplitMemory) Policy { return NewHotspotOffload(cfg.Hotspot) }},
	// Off until the profiles experiment (docs/design/profiles.md) shows where it pays; a node changes
	// profile only under an in-process supervisor (node/supervisor).
	{NameNodeProfiles, false, func(cfg Config, _ *SplitMemory) Policy { return NewNodeProfiles(cfg.NodeProfiles) }},
	// Off until the usage experiment (docs/design/usage.md) shows where it pays; when on, rebalance
	// leaves its load dimensions (served QPS, leadership counts) to it.
	{NameUsageBalance, false, func(cfg Config, _ *SplitMemory) Policy { return NewUsageBalance(cfg.UsageBalance) }},
}

// DefaultOn reports whether the standard registry's policy name is switched on in a cluster whose
// operators never set its switch (false for a name it does not know). Nodes that read a switch from
// the meta range fall back to it when no switch is stored.
func DefaultOn(name string) bool {
	for _, b := range builtins {
		if b.name == name {
			return b.on
		}
	}
	return false
}

// Default returns the standard registry (builtins' order), each switch at its default (DefaultOn).
func Default(cfg Config) *Registry {
	cfg = cfg.WithDefaults()
	cfg.Decommission.Sequential = cfg.Decommission.Sequential || cfg.Join.Strategy == JoinIncremental
	splits := NewSplitMemory()
	r := NewRegistry()
	for _, b := range builtins {
		r.policies = append(r.policies, b.build(cfg, splits))
		if !b.on {
			r.off[b.name] = true
		}
	}
	// replicate leaves the learners read_replicas keeps (they are read replicas, not stray).
	rep, _ := r.lookup(NameReplicate).(*Replicate)
	rr, _ := r.lookup(NameReadReplicas).(*ReadReplicas)
	if rep != nil && rr != nil {
		rep.keep = rr.Keeps
	}
	if rb, ok := r.lookup(NameRebalance).(*Rebalance); ok {
		rb.yieldLoad = func() bool { return r.Enabled(NameUsageBalance) }
	}
	return r
}

// Set switches the policy name on or off.
func (r *Registry) Set(name string, on bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lookup(name) == nil {
		return fmt.Errorf("unknown policy %q; known policies: %s", name, strings.Join(r.names(), ", "))
	}
	r.off[name] = !on
	return nil
}

// Enabled reports whether the policy name is switched on.
func (r *Registry) Enabled(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookup(name) != nil && !r.off[name]
}

// Policy returns the policy called name, or nil.
func (r *Registry) Policy(name string) Policy {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookup(name)
}

// List returns every policy's switch, in priority order.
func (r *Registry) List() []Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Status, len(r.policies))
	for i, p := range r.policies {
		out[i] = Status{Name: p.Name(), On: !r.off[p.Name()]}
	}
	return out
}

func (r *Registry) lookup(name string) Policy {
	for _, p := range r.policies {
		if p.Name() == name {
			return p
		}
	}
	return nil
}

func (r *Registry) names() []string {
	out := make([]string, len(r.policies))
	for i, p := range r.policies {
		out[i] = p.Name()
	}
	return out
}

// TakeNotes collects the notes of every policy that keeps them (Noter), in priority order, each
// prefixed with its policy's name.
func (r *Registry) TakeNotes() map[string][]Note {
	r.propose.Lock()
	defer r.propose.Unlock()
	out := map[string][]Note{}
	for _, st := range r.List() {
		if nt, ok := r.Policy(st.Name).(Noter); ok {
			if notes := nt.TakeNotes(); len(notes) > 0 && st.On {
				out[st.Name] = notes
			}
		}
	}
	return out
}

// Propose asks every switched-on policy, in priority order, for operators. Each policy sees the pending
// operators plus those proposed before it in this round.
func (r *Registry) Propose(c *model.Cluster, pending []*operator.Operator) []*operator.Operator {
	return r.proposeWith(c, pending, false)
}

// Reactive is implemented by a policy that schedules work one operator after another (a join, a
// drain), so that the autopilot also runs it as soon as an operator makes progress rather than only
// at its next round. The other policies keep the round's pace: their thresholds and hysteresis are
// set in rounds.
type Reactive interface {
	Policy
	// Reactive is a marker; it does nothing.
	Reactive()
}

// ProposeReactive is Propose restricted to the enabled Reactive policies.
func (r *Registry) ProposeReactive(c *model.Cluster, pending []*operator.Operator) []*operator.Operator {
	return r.proposeWith(c, pending, true)
}

func (r *Registry) proposeWith(c *model.Cluster, pending []*operator.Operator, reactiveOnly bool) []*operator.Operator {
	r.propose.Lock()
	defer r.propose.Unlock()
	all := append([]*operator.Operator(nil), pending...)
	busy := map[uint64]bool{}
	for _, op := range pending {
		for _, id := range op.Ranges() {
			busy[id] = true
		}
	}
	var out []*operator.Operator
	for _, st := range r.List() {
		if !st.On {
			continue
		}
		p := r.Policy(st.Name)
		if _, ok := p.(Reactive); reactiveOnly && !ok {
			continue
		}
		for _, op := range p.Propose(c, all) {
			if anyBusy(busy, op.Ranges()) {
				continue // a policy bug; the invariant holds regardless
			}
			for _, id := range op.Ranges() {
				busy[id] = true
			}
			out = append(out, op)
			all = append(all, op)
		}
	}
	return out
}

// nodeLoad is a node's load including the influence of pending operators.
type nodeLoad struct {
	replicas int
	leaders  int
	bytes    float64
	qps      float64
}

// view is the cluster as a policy plans on it: the snapshot plus the influence of pending operators.
type view struct {
	c    *model.Cluster
	busy map[uint64]bool
	// The nodes' loads (at finds them): by ID in a slice when IDs are dense, else in a map. Every
	// policy builds a view every round: a map of a thousand loads was a tenth of what they allocated.
	loadAt []*nodeLoad
	loadBy map[uint64]*nodeLoad
	loads  []nodeLoad
}

// views keeps released views' storage: every policy builds a view every round.
var views = sync.Pool{New: func() any { return new(view) }}

func newView(c *model.Cluster, pending []*operator.Operator) *view {
	v := views.Get().(*view)
	v.c = c
	if v.busy == nil {
		v.busy = map[uint64]bool{}
	}
	var maxID uint64
	for _, n := range c.Nodes {
		maxID = max(maxID, n.ID)
	}
	if maxID <= uint64(4*len(c.Nodes)+1024) {
		v.loadAt = slices.Grow(v.loadAt[:0], int(maxID)+1)[:maxID+1]
		clear(v.loadAt)
	} else {
		v.loadBy = make(map[uint64]*nodeLoad, len(c.Nodes))
	}
	v.loads = slices.Grow(v.loads[:0], len(c.Nodes))[:len(c.Nodes)]
	for i, n := range c.Nodes {
		l := &v.loads[i]
		*l = nodeLoad{replicas: n.Replicas, leaders: n.Leaders, bytes: float64(n.Bytes), qps: n.QPS}
		if v.loadAt != nil {
			v.loadAt[n.ID] = l
		} else {
			v.loadBy[n.ID] = l
		}
	}
	for _, op := range pending {
		for _, id := range op.Ranges() {
			v.busy[id] = true
		}
		v.apply(op.PendingInfluence(c.Range(op.RangeID)))
	}
	return v
}

// candidates are the user ranges, in the model's order, that no operator in flight touches and that
// keep says a plan may take.
func (v *view) candidates(keep func(*model.Range) bool) []*model.Range {
	var out []*model.Range
	for _, r := range v.c.Ranges {
		if !r.System && !v.busy[r.ID] && keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// candidatesIn is candidates restricted to rs (a subsequence of the model's ranges, such as one
// node's): the same ranges in the same order when keep implies membership of rs.
func (v *view) candidatesIn(rs iter.Seq[*model.Range], keep func(*model.Range) bool) []*model.Range {
	var out []*model.Range
	for r := range rs {
		if !r.System && !v.busy[r.ID] && keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// release gives v's storage to the next view: v must not be used after.
func (v *view) release() {
	clear(v.busy)
	v.c, v.loadBy = nil, nil
	views.Put(v)
}

// at is node's load, operators in flight included (nil for an unknown node).
func (v *view) at(node uint64) *nodeLoad {
	if v.loadBy != nil {
		return v.loadBy[node]
	}
	if node < uint64(len(v.loadAt)) {
		return v.loadAt[node]
	}
	return nil
}

// leadersOf is how many leaderships node leads, operators in flight included (0 for an unknown node).
func (v *view) leadersOf(node uint64) int {
	if l := v.at(node); l != nil {
		return l.leaders
	}
	return 0
}

func (v *view) apply(inf operator.Influence) {
	for id, d := range inf {
		l := v.at(id)
		if l == nil {
			continue
		}
		l.replicas += d.Replicas
		l.leaders += d.Leaders
		l.bytes += float64(d.Bytes)
		l.qps += d.QPS
	}
}

// add records a newly proposed operator: its range becomes busy and its influence counts.
func (v *view) add(op *operator.Operator) {
	for _, id := range op.Ranges() {
		v.busy[id] = true
	}
	v.apply(op.Influence)
}

// active returns the nodes that may receive replicas and leaderships.
func (v *view) active() []*model.Node {
	var out []*model.Node
	for _, n := range v.c.Nodes {
		if n.Active() {
			out = append(out, n)
		}
	}
	return out
}

// targetFor picks the node to receive a new replica of r: active, not already holding one, not in
// exclude, disk below maxDisk; fewest replicas (counting pending operators), then fewest bytes, then
// lowest ID. It returns 0 when no node qualifies.
func (v *view) targetFor(r *model.Range, maxDisk float64, exclude ...uint64) uint64 {
	// Zones already holding the range's replicas (not those leaving): a new replica goes to the
	// least used zone first, so one zone's loss takes as few replicas of a range as it can.
	zones := map[string]int{}
	for _, rep := range r.Replicas {
		if n := v.c.Node(rep.Node); n != nil && !contains(exclude, rep.Node) {
			zones[n.Zone()]++
		}
	}
	var best *model.Node
	for _, n := range v.active() {
		if r.HasReplica(n.ID) || n.DiskFull(maxDisk) || contains(exclude, n.ID) {
			continue
		}
		if best == nil || zones[n.Zone()] < zones[best.Zone()] || zones[n.Zone()] == zones[best.Zone()] && v.lessLoaded(n, best) {
			best = n
		}
	}
	if best == nil {
		return 0
	}
	return best.ID
}

func (v *view) lessLoaded(a, b *model.Node) bool {
	la, lb := v.at(a.ID), v.at(b.ID)
	if la.replicas != lb.replicas {
		return la.replicas < lb.replicas
	}
	if la.bytes != lb.bytes {
		return la.bytes < lb.bytes
	}
	return a.ID < b.ID
}

// leaderTarget picks the voter of r (other than exclude) to lead it: on an active node, fewest
// leaderships (counting pending operators), then least served QPS, then lowest ID. 0 if none.
func (v *view) leaderTarget(r *model.Range, exclude uint64) uint64 {
	var best *model.Node
	for _, id := range r.Voters() {
		n := v.c.Node(id)
		if id == exclude || n == nil || !n.Active() || n.Busy() {
			continue // a node with a heavy background task pending or running must not lead
		}
		if best == nil {
			best = n
			continue
		}
		ln, lb := v.at(n.ID), v.at(best.ID)
		if ln.leaders != lb.leaders {
			if ln.leaders < lb.leaders {
				best = n
			}
			continue
		}
		if ln.qps != lb.qps {
			if ln.qps < lb.qps {
				best = n
			}
			continue
		}
		if n.ID < best.ID {
			best = n
		}
	}
	if best == nil {
		return 0
	}
	return best.ID
}

func contains(ids []uint64, id uint64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// rangesOn returns the ranges with a replica on node, in the cluster's order.
func rangesOn(c *model.Cluster, node uint64) []*model.Range {
	var out []*model.Range
	for r := range c.RangesOf(node) {
		if r.HasReplica(node) {
			out = append(out, r)
		}
	}
	return out
}

func sortedNodes(nodes []*model.Node, less func(a, b *model.Node) bool) []*model.Node {
	out := append([]*model.Node(nil), nodes...)
	// sort.SliceStable's algorithm, generic (no reflection): it asks cmp(a, b) < 0 where that asks less.
	slices.SortStableFunc(out, func(a, b *model.Node) int {
		switch {
		case less(a, b):
			return -1
		case less(b, a):
			return 1
		}
		return 0
	})
	return out
}

func roundDur(d time.Duration) time.Duration {
	if d > time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

func fmtQPS(q float64) string {
	if math.Abs(q) >= 100 {
		return fmt.Sprintf("%.0f ops/s", q)
	}
	return fmt.Sprintf("%.1f ops/s", q)
}

func anyBusy(busy map[uint64]bool, ids []uint64) bool {
	for _, id := range ids {
		if busy[id] {
			return true
		}
	}
	return false
}
