package node

import (
	"context"
	"fmt"
	"time"

	"github.com/shoaldb/shoal/pb"
)

// A restarted node's replicas miss whatever their ranges committed while it was down. Until each has
// applied what a peer had applied when asked, the node is *catching up*: its heartbeats say it takes
// no leadership (the autopilot gives it none back, a peer's prestop drain passes it by, a heavy task
// counts it busy), /healthz answers 503 "catching up" (an orchestrator's rolling restart stops the
// next node only once this one is ready), and `shoal node poststart` waits for it. A leadership
// handed to a replica that holds the log but has not applied it serves its first reads only once it
// has, and from a cache that has not seen the recent writes.

// catchUpBound is how long a node stays catching up at most: a replica that cannot catch up (its
// range dropped it while the node was down, its peers unreachable) must not keep the node out of
// service; the node logs which replicas were still behind.
const catchUpBound = 30 * time.Second

// catchUpPoll is how often the catching-up node checks its replicas' applied indexes.
const catchUpPoll = 50 * time.Millisecond

// catchUpReplica is what the catch-up check needs of one local replica.
type catchUpReplica struct {
	rangeID uint64
	applied uint64
	leader  uint64   // node id of the leader this replica knows (0: none heard yet)
	voters  []uint64 // node ids of the range's other voters
}

// appliedAsker asks node for its replica of rangeID's applied index.
type appliedAsker func(ctx context.Context, node, rangeID uint64) (uint64, error)

// catchUpTargets remembers, per range, the applied index this node's replica must reach: the
// leader's when it answered, else the highest of the other voters' (an idle range's restarted
// replica may not have heard of its leader yet; a peer's applied index still bounds what it missed).
type catchUpTargets map[uint64]uint64

// pending counts the replicas that have not reached their target, asking for the targets it lacks.
// A replica this node leads, or one with no other voter, has nothing to catch up.
func (tg catchUpTargets) pending(ctx context.Context, self uint64, rs []catchUpReplica, ask appliedAsker) (behind []uint64) {
	for _, r := range rs {
		target, ok := tg[r.rangeID]
		if !ok {
			target, ok = askTarget(ctx, self, r, ask)
			if ok {
				tg[r.rangeID] = target
			}
		}
		if !ok || r.applied < target {
			behind = append(behind, r.rangeID)
		}
	}
	return behind
}

// askTarget finds one replica's target: 0 when this node leads it or it has no other voter.
func askTarget(ctx context.Context, self uint64, r catchUpReplica, ask appliedAsker) (uint64, bool) {
	if r.leader == self || len(r.voters) == 0 {
		return 0, true
	}
	if r.leader != 0 {
		if a, err := ask(ctx, r.leader, r.rangeID); err == nil {
			return a, true
		}
	}
	var best uint64
	answered := false
	for _, v := range r.voters {
		if v == r.leader {
			continue // asked above
		}
		if a, err := ask(ctx, v, r.rangeID); err == nil {
			best, answered = max(best, a), true
		}
	}
	return best, answered
}

// localCatchUpReplicas lists this node's voter replicas with their peers.
func (n *Node) localCatchUpReplicas() []catchUpReplica {
	st := n.Store()
	if st == nil {
		return nil
	}
	self := n.NodeID()
	var out []catchUpReplica
	for _, r := range st.Replicas() {
		d := r.Desc()
		if d == nil {
			continue
		}
		cr := catchUpReplica{rangeID: r.RangeID(), applied: r.Applied(), leader: r.LeaderNode()}
		voter := false
		for _, rd := range d.Replicas {
			switch {
			case rd.NodeId == self:
				voter = !rd.Learner
			case !rd.Learner:
				cr.voters = append(cr.voters, rd.NodeId)
			}
		}
		if voter {
			out = append(out, cr)
		}
	}
	return out
}

// askApplied is an appliedAsker over the peers' WaitApplied RPC (index 0 answers at once).
func (n *Node) askApplied(ctx context.Context, node, rangeID uint64) (uint64, error) {
	c, err := n.peerClient(node)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := c.WaitApplied(ctx, &pb.WaitAppliedRequest{RangeId: rangeID})
	if err == nil && resp.GetError() != nil {
		err = fmt.Errorf("node %d: %s", node, resp.GetError().GetMessage())
	}
	return resp.GetApplied(), err
}

// catchUp runs once raft has started: it marks the node caught up when every local voter replica
// has reached its target, or after catchUpBound.
func (n *Node) catchUp(ctx context.Context) {
	defer n.caughtUp()
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, catchUpBound)
	defer cancel()
	tg := catchUpTargets{}
	for {
		rs := n.localCatchUpReplicas()
		behind := tg.pending(ctx, n.NodeID(), rs, n.askApplied)
		if len(behind) == 0 {
			if len(rs) > 0 {
				n.log.Info("replicas caught up with their peers", "replicas", len(rs), "took", time.Since(start).Round(time.Millisecond))
			}
			return
		}
		select {
		case <-ctx.Done():
			if time.Since(start) >= catchUpBound {
				n.log.Warn("replicas still catching up: the node serves and takes leaderships anyway", "behind", len(behind), "of", len(rs), "ranges", behind, "bound", catchUpBound)
			}
			return
		case <-time.After(catchUpPoll):
		}
	}
}

// caughtUp ends the catch-up: readiness and the heartbeat's leadership flag follow at once.
func (n *Node) caughtUp() {
	if n.catchingUp.CompareAndSwap(true, false) {
		close(n.catchUpDone)
		n.kickHeartbeat()
	}
}

// CatchingUp reports whether the node's replicas are still catching up after its start.
func (n *Node) CatchingUp() bool { return n.catchingUp.Load() }

// WaitCaughtUp waits until the node's replicas have caught up or ctx ends; it reports whether they
// have.
func (n *Node) WaitCaughtUp(ctx context.Context) bool {
	select {
	case <-n.catchUpDone:
		return true
	case <-ctx.Done():
		return !n.catchingUp.Load()
	}
}

// postStart answers background.PostStartTask: once the replicas have caught up, or after d.
func (n *Node) postStart(ctx context.Context, d time.Duration) *pb.MaintenanceResponse {
	self := n.NodeID()
	if d <= 0 || d > time.Hour {
		return &pb.MaintenanceResponse{NodeId: self, Error: &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT,
			Message: fmt.Sprintf("poststart: duration %s must be in (0, 1h]", d)}}
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	if !n.WaitCaughtUp(ctx) {
		return &pb.MaintenanceResponse{NodeId: self, Outcome: fmt.Sprintf("replicas still catching up after %s", time.Since(start).Round(time.Millisecond))}
	}
	return &pb.MaintenanceResponse{NodeId: self, Outcome: fmt.Sprintf("replicas caught up (waited %s)", time.Since(start).Round(time.Millisecond))}
}
