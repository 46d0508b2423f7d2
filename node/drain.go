package node

import (
	"context"
	"time"
)

// DrainLeaderships hands every leadership this node holds to another voter of the same range and
// waits until none is left here or ctx ends. The node keeps its replicas. It is what a node does on
// SIGTERM so clients see at most a retry, not an election timeout; it reports how many leaderships
// were still here at the end.
//
// It returns at once when no leadership here has anywhere to go: no other voter of its range is live
// and not draining itself (a single node, or a cluster stopping all at once). Waiting would only delay
// the stop.
func (n *Node) DrainLeaderships(ctx context.Context) int {
	st := n.Store()
	if n.notReady() != nil || st == nil {
		return 0
	}
	n.draining.Store(true)
	for {
		takers := map[uint64]bool{}
		for _, id := range n.dir.LiveNodes(n.liveWindow()) {
			if _, draining := n.dir.StatsOf(id); id != n.NodeID() && !draining {
				takers[id] = true
			}
		}
		left, movable := 0, 0
		for _, r := range st.Replicas() {
			if !r.IsLeader() {
				continue
			}
			left++
			d := r.Desc()
			if d == nil {
				continue
			}
			// A voter that holds the whole log takes over at once; one catching up (a node just
			// restarted, in a rolling restart) would stall the range's writes until it has caught up.
			to := uint64(0)
			for _, rd := range d.Replicas {
				if rd.Learner || !takers[rd.NodeId] {
					continue
				}
				if to == 0 {
					to = rd.NodeId
				}
				if ok, _ := r.TransfereeCaughtUp(rd.NodeId); ok {
					to = rd.NodeId
					break
				}
			}
			if to != 0 {
				movable++
				_ = r.TransferLeadership(to)
			}
		}
		if left == 0 || movable == 0 {
			return left
		}
		select {
		case <-ctx.Done():
			return left
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// DrainRequests refuses new client requests with UNAVAILABLE (their clients retry another node:
// nothing of them ran) and waits until those in flight have answered or ctx ends; it returns how many
// still run. A stopping node calls it after DrainLeaderships and before Stop, so that a write it
// forwards to the new leader finishes rather than being cut, which its client could only report as
// ambiguous.
func (n *Node) DrainRequests(ctx context.Context) int {
	n.draining.Store(true)
	return n.Service.Drain(ctx)
}
