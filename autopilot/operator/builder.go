package operator

import (
	"fmt"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
)

// Operator kinds.
const (
	KindAddReplica     = "add-replica"
	KindPromoteLearner = "promote-learner"
	KindMoveReplica    = "move-replica"
	KindRemoveReplica  = "remove-replica"
	KindTransferLeader = "transfer-leader"
	KindSplit          = "split"
	KindMerge          = "merge"
	KindAddLearner     = "add-learner"
)

// New builds an operator of kind on r from steps, created at now, with its timeout (DefaultTimeouts)
// and influence computed from the steps. Priority defaults to normal; the caller sets the benefit.
func New(kind, policy string, now time.Time, r *model.Range, reason string, steps ...Step) *Operator {
	return &Operator{
		Kind:      kind,
		Policy:    policy,
		RangeID:   r.ID,
		Steps:     steps,
		Priority:  PriorityNormal,
		Reason:    reason,
		Timeout:   DefaultTimeouts.Total(steps, r),
		Created:   now,
		Influence: stepsInfluence(steps, r),
	}
}

// NewAddReplica adds a voter on to: a learner first (it receives a snapshot), then promoted.
func NewAddReplica(policy string, now time.Time, r *model.Range, to uint64, reason string) *Operator {
	return New(KindAddReplica, policy, now, r, reason, AddLearner{Node: to}, PromoteVoter{Node: to})
}

// NewAddLearner adds a learner (a read replica) on to, and leaves it one.
func NewAddLearner(policy string, now time.Time, r *model.Range, to uint64, reason string) *Operator {
	return New(KindAddLearner, policy, now, r, reason, AddLearner{Node: to})
}

// NewPromoteLearner promotes the existing learner on node to a voter.
func NewPromoteLearner(policy string, now time.Time, r *model.Range, node uint64, reason string) *Operator {
	return New(KindPromoteLearner, policy, now, r, reason, PromoteVoter{Node: node})
}

// NewMoveReplica moves the replica on from to to. The new replica is added as a learner and promoted
// while the old one is removed, in one joint change. If from leads the range and is live, the
// leadership follows the replica to to before from is removed.
func NewMoveReplica(policy string, now time.Time, c *model.Cluster, r *model.Range, from, to uint64, reason string) *Operator {
	if n := c.Node(from); r.Leader == from && n != nil && n.Live {
		return New(KindMoveReplica, policy, now, r, reason,
			AddLearner{Node: to}, PromoteVoter{Node: to}, TransferLeader{To: to}, RemoveReplica{Node: from})
	}
	return New(KindMoveReplica, policy, now, r, reason, AddLearner{Node: to}, PromoteVoter{Node: to, Remove: from})
}

// NewRemoveReplica removes the replica on node. If node leads the range and is live, leadership moves
// to newLeader first (which must be another voter).
func NewRemoveReplica(policy string, now time.Time, c *model.Cluster, r *model.Range, node, newLeader uint64, reason string) *Operator {
	if n := c.Node(node); r.Leader == node && n != nil && n.Live {
		return New(KindRemoveReplica, policy, now, r, reason, TransferLeader{To: newLeader}, RemoveReplica{Node: node})
	}
	return New(KindRemoveReplica, policy, now, r, reason, RemoveReplica{Node: node})
}

// NewTransferLeader moves r's leadership to the voter on to.
func NewTransferLeader(policy string, now time.Time, r *model.Range, to uint64, reason string) *Operator {
	return New(KindTransferLeader, policy, now, r, reason, TransferLeader{To: to})
}

// NewSplit splits r at key.
func NewSplit(policy string, now time.Time, r *model.Range, key []byte, reason string) *Operator {
	return New(KindSplit, policy, now, r, reason, Split{Key: append([]byte(nil), key...)})
}

// NewMerge merges right into left, its right neighbour; both must have replicas on the same nodes.
func NewMerge(policy string, now time.Time, left, right *model.Range, reason string) (*Operator, error) {
	if !SameReplicas(left, right) {
		return nil, fmt.Errorf("merge r%d into r%d: replicas are not on the same nodes", right.ID, left.ID)
	}
	return New(KindMerge, policy, now, left, reason,
		Merge{RightRangeID: right.ID, RightEndKey: append([]byte(nil), right.EndKey...)}), nil
}
