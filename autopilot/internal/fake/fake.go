// Package fake is an in-memory cluster for the autopilot's tests: it implements model.Source and the
// executor's Actuator by editing range descriptors directly, optionally serves a synthetic workload
// (each snapshot reports per-range QPS and key samples), and lets tests intercept every Actuator call.
//
// It owns nothing but test state and must never be imported by non-test code. It models only what the
// autopilot sees and asks for (descriptors, leaders, load): no raft, no data, no failures beyond what a
// test's Hook injects; the end-to-end behaviour is tested on real nodes (package test, bench/).
package fake

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
)

// Call is one Actuator call.
type Call struct {
	Kind   string // "add-learner", "promote-voter", "remove-replica", "transfer-leader", "split", "merge"
	Range  uint64
	Node   uint64 // target node (AddLearner, PromoteVoter, RemoveReplica, TransferLeader)
	Remove uint64 // PromoteVoter's removed node
	Key    []byte // Split's key
	// Profile is SetProfile's engine profile.
	Profile string
}

// String describes the call, e.g. "add-learner r2 n4".
func (c Call) String() string {
	switch c.Kind {
	case "split":
		return fmt.Sprintf("split r%d at %q", c.Range, c.Key)
	case "merge":
		return fmt.Sprintf("merge r%d", c.Range)
	case "set-profile":
		return fmt.Sprintf("set-profile n%d %s", c.Node, c.Profile)
	case "promote-voter":
		if c.Remove != 0 {
			return fmt.Sprintf("promote-voter r%d n%d remove n%d", c.Range, c.Node, c.Remove)
		}
	}
	return fmt.Sprintf("%s r%d n%d", c.Kind, c.Range, c.Node)
}

// Cluster is the fake cluster. Safe for concurrent use.
type Cluster struct {
	mu     sync.Mutex
	now    time.Time
	nodes  []*model.Node
	ranges map[uint64]*model.Range
	nextID uint64
	calls  []Call

	// Hook, if set, runs before each Actuator call is applied (without the lock held); a non-nil
	// error fails the call without applying it.
	Hook func(ctx context.Context, c Call) error
	// Tick, if positive, advances the clock by Tick on every Snapshot.
	Tick time.Duration

	load     func() []byte
	qps      int
	samplers map[uint64]*model.KeySampler
}

// New builds a fake cluster from the compact text form (model.ParseCluster).
// MustNew is New for tests: a parse error fails t.
func MustNew(t testing.TB, text string) *Cluster {
	t.Helper()
	c, err := New(text)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func New(text string) (*Cluster, error) {
	c, err := model.ParseCluster(text)
	if err != nil {
		return nil, err
	}
	f := &Cluster{now: c.Now, nodes: c.Nodes, ranges: map[uint64]*model.Range{}, samplers: map[uint64]*model.KeySampler{}}
	for _, r := range c.Ranges {
		f.ranges[r.ID] = r
		f.nextID = max(f.nextID, r.ID)
	}
	return f, nil
}

// SetLoad makes every snapshot report qps requests per second drawn from next, routed to the user
// ranges that contain them (with key samples). qps 0 stops the load.
func (f *Cluster) SetLoad(qps int, next func() []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.qps, f.load = qps, next
}

// Advance moves the clock; live nodes keep heartbeating.
func (f *Cluster) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advanceLocked(d)
}

func (f *Cluster) advanceLocked(d time.Duration) {
	f.now = f.now.Add(d)
	for _, n := range f.nodes {
		if n.Live {
			n.LastHeartbeat = f.now
		}
	}
	if f.load == nil || d <= 0 {
		return
	}
	user := f.userRangesLocked()
	for _, r := range user {
		r.ReadQPS = 0
	}
	n := int(float64(f.qps) * d.Seconds())
	for i := 0; i < n; i++ {
		k := f.load()
		j := sort.Search(len(user), func(j int) bool { return bytes.Compare(user[j].StartKey, k) > 0 }) - 1
		if j < 0 || !user[j].ContainsKey(k) {
			continue
		}
		r := user[j]
		r.ReadQPS++
		s := f.samplers[r.ID]
		if s == nil {
			s = model.NewKeySampler(0, r.ID)
			f.samplers[r.ID] = s
		}
		s.Record(k)
	}
	for _, r := range user {
		r.ReadQPS /= d.Seconds()
		if s := f.samplers[r.ID]; s != nil {
			r.Sample = s.Take(f.now)
		}
	}
}

func (f *Cluster) userRangesLocked() []*model.Range {
	var user []*model.Range
	for _, r := range f.ranges {
		if !r.System {
			user = append(user, r)
		}
	}
	sort.Slice(user, func(i, j int) bool { return bytes.Compare(user[i].StartKey, user[j].StartKey) < 0 })
	return user
}

// UpdateNode changes node id (e.g. marks it draining or dead).
func (f *Cluster) UpdateNode(id uint64, update func(n *model.Node)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.nodes {
		if n.ID == id {
			update(n)
		}
	}
}

// UpdateRange changes range id; a nil result removes the range.
func (f *Cluster) UpdateRange(id uint64, update func(r *model.Range) *model.Range) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.ranges[id]; r != nil {
		if nr := update(r); nr == nil {
			delete(f.ranges, id)
		} else {
			f.ranges[id] = nr
		}
	}
}

// Snapshot implements model.Source: a deep copy of the cluster (after advancing the clock by Tick).
func (f *Cluster) Snapshot() *model.Cluster {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Tick > 0 {
		f.advanceLocked(f.Tick)
	}
	nodes := make([]*model.Node, len(f.nodes))
	for i, n := range f.nodes {
		cp := *n
		nodes[i] = &cp
	}
	ranges := make([]*model.Range, 0, len(f.ranges))
	for _, r := range f.ranges {
		cp := *r
		cp.Replicas = append([]model.Replica(nil), r.Replicas...)
		ranges = append(ranges, &cp)
	}
	return model.NewCluster(f.now, nodes, ranges)
}

// Calls returns the Actuator calls applied or attempted so far.
func (f *Cluster) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// record notes call c and runs the Hook on it.
func (f *Cluster) record(ctx context.Context, c Call) error {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	hook := f.Hook
	f.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, c); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (f *Cluster) do(ctx context.Context, c Call, apply func(r *model.Range) error) error {
	if err := f.record(ctx, c); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.ranges[c.Range]
	if r == nil {
		return fmt.Errorf("r%d not found", c.Range)
	}
	return apply(r)
}

// AddLearner implements the Actuator.
func (f *Cluster) AddLearner(ctx context.Context, rangeID, node uint64) error {
	return f.do(ctx, Call{Kind: "add-learner", Range: rangeID, Node: node}, func(r *model.Range) error {
		if !r.HasReplica(node) {
			r.Replicas = append(r.Replicas, model.Replica{Node: node, Learner: true})
		}
		return nil
	})
}

// PromoteVoter implements the Actuator.
func (f *Cluster) PromoteVoter(ctx context.Context, rangeID, node, remove uint64) error {
	return f.do(ctx, Call{Kind: "promote-voter", Range: rangeID, Node: node, Remove: remove}, func(r *model.Range) error {
		if !r.HasReplica(node) {
			return fmt.Errorf("r%d has no replica on n%d", rangeID, node)
		}
		for i := range r.Replicas {
			if r.Replicas[i].Node == node {
				r.Replicas[i].Learner = false
			}
		}
		if remove != 0 {
			removeReplica(r, remove)
		}
		return nil
	})
}

// RemoveReplica implements the Actuator.
func (f *Cluster) RemoveReplica(ctx context.Context, rangeID, node uint64) error {
	return f.do(ctx, Call{Kind: "remove-replica", Range: rangeID, Node: node}, func(r *model.Range) error {
		removeReplica(r, node)
		return nil
	})
}

func removeReplica(r *model.Range, node uint64) {
	out := r.Replicas[:0]
	for _, rep := range r.Replicas {
		if rep.Node != node {
			out = append(out, rep)
		}
	}
	r.Replicas = out
	if r.Leader == node {
		if v := r.Voters(); len(v) > 0 {
			r.Leader = v[0]
		}
	}
}

// TransferLeader implements the Actuator.
func (f *Cluster) TransferLeader(ctx context.Context, rangeID, to uint64) error {
	return f.do(ctx, Call{Kind: "transfer-leader", Range: rangeID, Node: to}, func(r *model.Range) error {
		if !r.IsVoter(to) {
			return fmt.Errorf("n%d is not a voter of r%d", to, rangeID)
		}
		r.Leader = to
		return nil
	})
}

// Split implements the Actuator: the right half gets a new ID, the same replicas and leader, and the
// share of the load its keys had in the last sample.
func (f *Cluster) Split(ctx context.Context, rangeID uint64, key []byte) error {
	return f.do(ctx, Call{Kind: "split", Range: rangeID, Key: key}, func(r *model.Range) error {
		if !r.ContainsKey(key) || bytes.Equal(key, r.StartKey) {
			return fmt.Errorf("key %q not inside r%d", key, rangeID)
		}
		f.nextID++
		left := 0.5
		if r.Sample != nil {
			left = r.Sample.FractionBelow(key)
		}
		right := &model.Range{ID: f.nextID, StartKey: append([]byte(nil), key...), EndKey: r.EndKey,
			Replicas: append([]model.Replica(nil), r.Replicas...), Leader: r.Leader,
			ReadQPS: r.ReadQPS * (1 - left), WriteQPS: r.WriteQPS * (1 - left), Bytes: r.Bytes / 2}
		r.EndKey = append([]byte(nil), key...)
		r.ReadQPS, r.WriteQPS, r.Bytes, r.Sample = r.ReadQPS*left, r.WriteQPS*left, r.Bytes-right.Bytes, nil
		f.ranges[right.ID] = right
		return nil
	})
}

// Merge implements the Actuator.
func (f *Cluster) Merge(ctx context.Context, leftRangeID uint64) error {
	return f.do(ctx, Call{Kind: "merge", Range: leftRangeID}, func(r *model.Range) error {
		for id, o := range f.ranges {
			if !o.System && len(r.EndKey) > 0 && bytes.Equal(o.StartKey, r.EndKey) {
				r.EndKey = o.EndKey
				r.Bytes += o.Bytes
				r.ReadQPS += o.ReadQPS
				r.WriteQPS += o.WriteQPS
				delete(f.ranges, id)
				return nil
			}
		}
		return fmt.Errorf("r%d has no right neighbour", leftRangeID)
	})
}

// MarkDecommissioned implements autopilot.Decommissioner.
func (f *Cluster) MarkDecommissioned(ctx context.Context, node uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, Call{Kind: "mark-decommissioned", Node: node})
	for _, n := range f.nodes {
		if n.ID == node {
			n.Decommissioned, n.Decommissioning, n.Live = true, false, false
		}
	}
	return nil
}

// SetProfile implements executor.ProfileSetter: the node runs profile at once.
func (f *Cluster) SetProfile(ctx context.Context, node uint64, profile string) error {
	if err := f.record(ctx, Call{Kind: "set-profile", Node: node, Profile: profile}); err != nil {
		return err
	}
	f.UpdateNode(node, func(n *model.Node) { n.Profile = profile })
	return nil
}
