package main

import (
	"fmt"

	"github.com/shoaldb/shoal/pb"
)

// drainBlocker says why node's leaderships cannot all move away, or returns nil: a leadership moves
// only to another voter of the same range, so every range node leads needs a voter on another node
// that is live and not draining or decommissioning (the drain policy's choice of targets).
func drainBlocker(nodes []*pb.NodeStatus, ranges []*pb.RangeStatus, node uint64) error {
	active := map[uint64]bool{}
	for _, n := range nodes {
		active[n.GetDesc().GetNodeId()] = canTake(n)
	}
	for _, r := range ranges {
		if r.GetLeaderNodeId() != node {
			continue
		}
		taker := false
		for _, rep := range r.GetDesc().GetReplicas() {
			taker = taker || (rep.GetNodeId() != node && !rep.GetLearner() && active[rep.GetNodeId()])
		}
		if !taker {
			return fmt.Errorf("node %d cannot be drained: range %d, which it leads, has no voter on another live, active node to take "+
				"its leadership; start another node (shoal start --join ...) or bring its peers back first", node, r.GetDesc().GetRangeId())
		}
	}
	return nil
}

// canTake reports whether n may receive replicas or leaderships the autopilot moves: live, and
// neither draining nor decommissioning (the drain and decommission policies' choice of targets).
func canTake(n *pb.NodeStatus) bool {
	return n.GetLive() && !n.GetDraining() && !n.GetDecommissioned() && n.GetState() != "decommissioning"
}
