package operator

import (
	"bytes"
	"fmt"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
)

// Step is one change to one range. Steps are declarative: IsFinished says whether the observed range
// already looks the way the step wants, whoever made it so. Running an operator again after a restart, or
// on another node after the autopilot moved, therefore skips what is done and resumes where it stopped.
type Step interface {
	fmt.Stringer
	// Kind names the step type ("add-learner", "promote-voter", ...).
	Kind() string
	// IsFinished reports whether r already shows the step's effect.
	IsFinished(r *model.Range) bool
	// Check returns why the step can no longer finish as planned on c (its target node left, the key
	// is no longer in the range, ...), or nil. Only meaningful while the step is unfinished.
	Check(c *model.Cluster, r *model.Range) error
	// Apply returns a copy of r as it will look once the step is done (used to plan later steps).
	Apply(r *model.Range) *model.Range
	// Influence adds to inf what the step does to each node's load; r is the range before the step.
	Influence(r *model.Range, inf Influence)
	// Timeout is how long the step may take on r under t.
	Timeout(r *model.Range, t Timeouts) time.Duration
}

// AddLearner adds a non-voting replica on Node; the range's leader sends it a snapshot.
type AddLearner struct{ Node uint64 }

// PromoteVoter makes the learner on Node a voter and, if Remove is not 0, removes the replica on Remove
// in the same configuration change (a joint change, so the group never has an even number of voters in
// between).
type PromoteVoter struct{ Node, Remove uint64 }

// RemoveReplica removes the replica (voter or learner) on Node.
type RemoveReplica struct{ Node uint64 }

// TransferLeader moves the range's Raft leadership to the voter on To.
type TransferLeader struct{ To uint64 }

// Split splits the range at Key: the range keeps [start, Key) and its ID; [Key, end) becomes a new range
// with the same replicas.
type Split struct{ Key []byte }

// Merge absorbs the right neighbour RightRangeID, which ended at RightEndKey when the step was planned,
// into the range. Both must have their replicas on the same nodes.
type Merge struct {
	RightRangeID uint64
	RightEndKey  []byte
}

// Kind implements Step.
func (AddLearner) Kind() string { return "add-learner" }

// Kind implements Step.
func (PromoteVoter) Kind() string { return "promote-voter" }

// Kind implements Step.
func (RemoveReplica) Kind() string { return "remove-replica" }

// Kind implements Step.
func (TransferLeader) Kind() string { return "transfer-leader" }

// Kind implements Step.
func (Split) Kind() string { return "split" }

// Kind implements Step.
func (Merge) Kind() string { return "merge" }

// String implements Step.
func (s AddLearner) String() string { return fmt.Sprintf("add-learner n%d", s.Node) }

// String implements Step.
func (s PromoteVoter) String() string {
	if s.Remove != 0 {
		return fmt.Sprintf("promote-voter n%d (remove n%d)", s.Node, s.Remove)
	}
	return fmt.Sprintf("promote-voter n%d", s.Node)
}

// String implements Step.
func (s RemoveReplica) String() string { return fmt.Sprintf("remove-replica n%d", s.Node) }

// String implements Step.
func (s TransferLeader) String() string { return fmt.Sprintf("transfer-leader n%d", s.To) }

// String implements Step.
func (s Split) String() string { return fmt.Sprintf("split at %s", model.FormatKey(s.Key)) }

// String implements Step.
func (s Merge) String() string { return fmt.Sprintf("merge r%d", s.RightRangeID) }

// IsFinished implements Step: Node holds a replica (learner or voter).
func (s AddLearner) IsFinished(r *model.Range) bool { return r.HasReplica(s.Node) }

// IsFinished implements Step: Node is a voter and Remove is gone.
func (s PromoteVoter) IsFinished(r *model.Range) bool {
	return r.IsVoter(s.Node) && (s.Remove == 0 || !r.HasReplica(s.Remove))
}

// IsFinished implements Step: Node holds no replica.
func (s RemoveReplica) IsFinished(r *model.Range) bool { return !r.HasReplica(s.Node) }

// IsFinished implements Step: To leads the range.
func (s TransferLeader) IsFinished(r *model.Range) bool { return r.Leader == s.To }

// IsFinished implements Step: the range ends at Key.
func (s Split) IsFinished(r *model.Range) bool { return bytes.Equal(r.EndKey, s.Key) }

// IsFinished implements Step: the range reaches the right neighbour's end.
func (s Merge) IsFinished(r *model.Range) bool { return bytes.Equal(r.EndKey, s.RightEndKey) }

// nodeUsable explains why node cannot receive a replica or a leadership on c, or returns nil.
func nodeUsable(c *model.Cluster, node uint64) error {
	n := c.Node(node)
	switch {
	case n == nil:
		return fmt.Errorf("n%d left the cluster", node)
	case n.Decommissioned:
		return fmt.Errorf("n%d is decommissioned", node)
	case n.Decommissioning:
		return fmt.Errorf("n%d is decommissioning", node)
	case n.Draining:
		return fmt.Errorf("n%d is draining", node)
	case !n.Live:
		return fmt.Errorf("n%d is not live (silent for %s)", node, n.SilentFor(c.Now).Round(time.Second))
	}
	return nil
}

// Check implements Step: the target must be able to take a replica.
func (s AddLearner) Check(c *model.Cluster, r *model.Range) error { return nodeUsable(c, s.Node) }

// Check implements Step: the learner must still exist and its node be usable.
func (s PromoteVoter) Check(c *model.Cluster, r *model.Range) error {
	if !r.HasReplica(s.Node) {
		return fmt.Errorf("r%d has no replica on n%d to promote", r.ID, s.Node)
	}
	return nodeUsable(c, s.Node)
}

// Check implements Step: a live leader is not removed (leadership must move first).
func (s RemoveReplica) Check(c *model.Cluster, r *model.Range) error {
	if n := c.Node(s.Node); r.Leader == s.Node && n != nil && n.Live {
		return fmt.Errorf("n%d leads r%d; leadership must move before its replica is removed", s.Node, r.ID)
	}
	return nil
}

// Check implements Step: To must be a voter on a usable node.
func (s TransferLeader) Check(c *model.Cluster, r *model.Range) error {
	if !r.IsVoter(s.To) {
		return fmt.Errorf("n%d holds no voter of r%d", s.To, r.ID)
	}
	return nodeUsable(c, s.To)
}

// Check implements Step: Key must still lie strictly inside the range.
func (s Split) Check(c *model.Cluster, r *model.Range) error {
	if !r.ContainsKey(s.Key) || bytes.Equal(r.StartKey, s.Key) {
		return fmt.Errorf("split key %s is no longer inside r%d %s", model.FormatKey(s.Key), r.ID, r.Span())
	}
	return nil
}

// Check implements Step: the right neighbour must be unchanged, adjacent and co-located.
func (s Merge) Check(c *model.Cluster, r *model.Range) error {
	right := c.Range(s.RightRangeID)
	switch {
	case right == nil:
		return fmt.Errorf("r%d (right of r%d) is gone", s.RightRangeID, r.ID)
	case !bytes.Equal(right.StartKey, r.EndKey):
		return fmt.Errorf("r%d no longer starts where r%d ends", s.RightRangeID, r.ID)
	case !bytes.Equal(right.EndKey, s.RightEndKey):
		return fmt.Errorf("r%d no longer ends at %s", s.RightRangeID, model.FormatKey(s.RightEndKey))
	case !SameReplicas(r, right):
		return fmt.Errorf("r%d and r%d no longer have replicas on the same nodes", r.ID, s.RightRangeID)
	}
	return nil
}

// SameReplicas reports whether a and b have voters on the same nodes and learners on the same nodes.
func SameReplicas(a, b *model.Range) bool {
	if len(a.Replicas) != len(b.Replicas) {
		return false
	}
	for _, rep := range a.Replicas {
		o, ok := b.ReplicaOn(rep.Node)
		if !ok || o.Learner != rep.Learner {
			return false
		}
	}
	return true
}

func cloneRange(r *model.Range) *model.Range {
	c := *r
	c.Replicas = append([]model.Replica(nil), r.Replicas...)
	return &c
}

func withoutReplica(reps []model.Replica, node uint64) []model.Replica {
	out := reps[:0]
	for _, rep := range reps {
		if rep.Node != node {
			out = append(out, rep)
		}
	}
	return out
}

// Apply implements Step.
func (s AddLearner) Apply(r *model.Range) *model.Range {
	c := cloneRange(r)
	if !c.HasReplica(s.Node) {
		c.Replicas = append(c.Replicas, model.Replica{Node: s.Node, Learner: true})
	}
	return c
}

// Apply implements Step.
func (s PromoteVoter) Apply(r *model.Range) *model.Range {
	c := cloneRange(r)
	for i := range c.Replicas {
		if c.Replicas[i].Node == s.Node {
			c.Replicas[i].Learner = false
		}
	}
	if s.Remove != 0 {
		c.Replicas = withoutReplica(c.Replicas, s.Remove)
	}
	return c
}

// Apply implements Step.
func (s RemoveReplica) Apply(r *model.Range) *model.Range {
	c := cloneRange(r)
	c.Replicas = withoutReplica(c.Replicas, s.Node)
	if c.Leader == s.Node {
		c.Leader = 0
	}
	return c
}

// Apply implements Step.
func (s TransferLeader) Apply(r *model.Range) *model.Range {
	c := cloneRange(r)
	c.Leader = s.To
	return c
}

// Apply implements Step (the left half).
func (s Split) Apply(r *model.Range) *model.Range {
	c := cloneRange(r)
	c.EndKey = append([]byte(nil), s.Key...)
	return c
}

// Apply implements Step.
func (s Merge) Apply(r *model.Range) *model.Range {
	c := cloneRange(r)
	c.EndKey = append([]byte(nil), s.RightEndKey...)
	return c
}

// Influence implements Step: the new replica holds the range's bytes.
func (s AddLearner) Influence(r *model.Range, inf Influence) {
	if !r.HasReplica(s.Node) {
		inf.add(s.Node, NodeInfluence{Replicas: 1, Bytes: int64(r.Bytes)})
	}
}

// Influence implements Step: the removed replica's node loses the range.
func (s PromoteVoter) Influence(r *model.Range, inf Influence) {
	if s.Remove != 0 {
		RemoveReplica{Node: s.Remove}.Influence(r, inf)
	}
}

// Influence implements Step.
func (s RemoveReplica) Influence(r *model.Range, inf Influence) {
	if r.HasReplica(s.Node) {
		d := NodeInfluence{Replicas: -1, Bytes: -int64(r.Bytes)}
		if r.Leader == s.Node {
			d.Leaders, d.QPS = -1, -r.QPS()
		}
		inf.add(s.Node, d)
	}
}

// Influence implements Step: the range's load moves with the leadership.
func (s TransferLeader) Influence(r *model.Range, inf Influence) {
	if r.Leader == s.To {
		return
	}
	if r.Leader != 0 {
		inf.add(r.Leader, NodeInfluence{Leaders: -1, QPS: -r.QPS()})
	}
	inf.add(s.To, NodeInfluence{Leaders: 1, QPS: r.QPS()})
}

// Influence implements Step: every replica node gets one more replica (the right half), the leader one
// more leadership; bytes and load stay where they are.
func (s Split) Influence(r *model.Range, inf Influence) {
	for _, rep := range r.Replicas {
		d := NodeInfluence{Replicas: 1}
		if rep.Node == r.Leader {
			d.Leaders = 1
		}
		inf.add(rep.Node, d)
	}
}

// Influence implements Step: every replica node loses the right neighbour's replica.
func (s Merge) Influence(r *model.Range, inf Influence) {
	for _, rep := range r.Replicas {
		inf.add(rep.Node, NodeInfluence{Replicas: -1})
	}
}

// Timeout implements Step: the base plus the snapshot transfer time.
func (s AddLearner) Timeout(r *model.Range, t Timeouts) time.Duration { return t.transfer(r.Bytes) }

// Timeout implements Step: a promotion waits for its learner to catch up, which takes the snapshot's
// time when the add-learner's call ended before the snapshot arrived.
func (s PromoteVoter) Timeout(r *model.Range, t Timeouts) time.Duration { return t.transfer(r.Bytes) }

// Timeout implements Step.
func (s RemoveReplica) Timeout(r *model.Range, t Timeouts) time.Duration { return t.base() }

// Timeout implements Step.
func (s TransferLeader) Timeout(r *model.Range, t Timeouts) time.Duration { return t.base() }

// Timeout implements Step.
func (s Split) Timeout(r *model.Range, t Timeouts) time.Duration { return t.base() }

// Timeout implements Step: a merge may have to catch the right side up, so it scales with the bytes.
func (s Merge) Timeout(r *model.Range, t Timeouts) time.Duration { return t.transfer(r.Bytes) }
