package kv

import (
	"context"
	"time"

	"github.com/shoaldb/shoal/pb"
)

// runQueues is the node's periodic maintenance: repair meta entries of ranges it leads, split ranges
// that grew past RangeMaxBytes and garbage-collect replicas the cluster removed. Replication, moves
// and balancing are the autopilot's (autopilot.go).
func (n *Node) runQueues(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	descs, err := n.allRanges(ctx)
	if err != nil {
		return
	}
	metaByID := make(map[uint64]*pb.RangeDescriptor, len(descs))
	for _, d := range descs {
		metaByID[d.RangeId] = d
	}
	var stale []*pb.RangeDescriptor
	// The meta range's descriptor is not in the meta range: take the newest one peers reported.
	n.dir.mu.RLock()
	if md := n.dir.metaDescCache; md != nil {
		metaByID[md.RangeId] = md
	}
	n.dir.mu.RUnlock()
	for _, r := range n.store.Replicas() {
		if r.IsMeta() {
			if d, md := r.Desc(), metaByID[r.RangeID()]; d != nil && md != nil && !r.IsLeader() &&
				md.Generation > d.Generation && !hasNode(md, n.ident.NodeID) && r.LeaderNode() == 0 {
				n.store.RemoveReplica(r.RangeID(), "no longer in the meta range's descriptor")
			}
			continue
		}
		d := r.Desc()
		if d == nil {
			continue
		}
		md := metaByID[d.RangeId]
		if r.IsLeader() {
			if md == nil || md.Generation < d.Generation {
				stale = append(stale, d)
			}
			continue
		}
		if md != nil && md.Generation > d.Generation && !hasNode(md, n.ident.NodeID) && r.LeaderNode() == 0 {
			n.store.RemoveReplica(d.RangeId, "no longer in the range's descriptor")
		}
	}
	if len(stale) > 0 {
		if _, err := n.metaCommand(ctx, &pb.Command{MetaUpdate: &pb.MetaUpdate{Ranges: stale}}); err != nil {
			n.log.Warn("meta repair failed", "err", err)
		}
	}
	n.abortStuckMerges(ctx)
	n.maybeSplitBySize(ctx)
}

func hasNode(d *pb.RangeDescriptor, node uint64) bool {
	for _, rd := range d.Replicas {
		if rd.NodeId == node {
			return true
		}
	}
	return false
}

func (n *Node) maybeSplitBySize(ctx context.Context) {
	for _, r := range n.store.Replicas() {
		if r.IsMeta() || !r.IsLeader() {
			continue
		}
		if int64(r.ApproximateBytes()) < n.cfg.RangeMaxBytes {
			continue
		}
		key, err := r.SplitKeyBySize()
		if err != nil || key == nil {
			continue
		}
		if _, _, err := n.splitLocal(ctx, r, key); err != nil {
			n.log.Warn("size split failed", "range", r.RangeID(), "err", err)
		}
		return // one split per pass keeps the meta range and raft traffic calm
	}
}
