package kv

import (
	"context"
	"time"

	"github.com/shoaldb/shoal/pb"
)

// runQueues is the node's periodic maintenance: repair meta entries of ranges it leads, split ranges
// that grew past RangeMaxBytes and garbage-collect replicas the cluster removed. Replication, moves
// and balancing are the autopilot's (autopilot.go).
func (s *Service) runQueues(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	descs, err := s.AllRanges(ctx)
	if err != nil {
		return
	}
	metaByID := make(map[uint64]*pb.RangeDescriptor, len(descs))
	for _, d := range descs {
		metaByID[d.RangeId] = d
	}
	var stale []*pb.RangeDescriptor
	// The meta range's descriptor is not in the meta range: take the newest one peers reported.
	if md := s.cluster.MetaDesc(); md != nil {
		metaByID[md.RangeId] = md
	}
	for _, r := range s.store.Replicas() {
		if r.IsMeta() {
			if d, md := r.Desc(), metaByID[r.RangeID()]; d != nil && md != nil && !r.IsLeader() &&
				md.Generation > d.Generation && !hasNode(md, s.nodeID) && r.LeaderNode() == 0 {
				s.store.RemoveReplica(r.RangeID(), "no longer in the meta range's descriptor")
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
		if md != nil && md.Generation > d.Generation && !hasNode(md, s.nodeID) && r.LeaderNode() == 0 {
			s.store.RemoveReplica(d.RangeId, "no longer in the range's descriptor")
		}
	}
	if len(stale) > 0 {
		if _, err := s.ProposeMeta(ctx, &pb.Command{MetaUpdate: &pb.MetaUpdate{Ranges: stale}}); err != nil {
			s.log.Warn("meta repair failed", "err", err)
		}
	}
	s.abortStuckMerges(ctx)
	s.maybeSplitBySize(ctx)
}

func hasNode(d *pb.RangeDescriptor, node uint64) bool {
	for _, rd := range d.Replicas {
		if rd.NodeId == node {
			return true
		}
	}
	return false
}

func (s *Service) maybeSplitBySize(ctx context.Context) {
	for _, r := range s.store.Replicas() {
		if r.IsMeta() || !r.IsLeader() {
			continue
		}
		if int64(r.ApproximateBytes()) < s.cfg.RangeMaxBytes {
			continue
		}
		key, err := r.SplitKeyBySize()
		if err != nil || key == nil {
			continue
		}
		if d := r.Desc(); d == nil {
			continue
		} else if _, ok := slotAlignedSplitKey(key, d.StartKey, d.EndKey); !ok {
			continue // one Redis hash slot: never split (the size alone cannot be helped)
		}
		if _, _, err := s.splitLocal(ctx, r, key); err != nil {
			s.log.Warn("size split failed", "range", r.RangeID(), "err", err)
		}
		return // one split per pass keeps the meta range and raft traffic calm
	}
}
