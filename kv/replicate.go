package kv

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// Ranges implements pb.ShoalServer: every range (meta first) with its best known leader, or only
// the ranges req names; without their size estimates when req asks.
func (s *Service) Ranges(ctx context.Context, req *pb.RangesRequest) (*pb.RangesResponse, error) {
	select {
	case <-s.ready:
	default:
		return &pb.RangesResponse{Error: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "node is starting"}}, nil
	}
	ctx, cancel := WithTimeout(ctx)
	defer cancel()
	descs, err := s.AllRanges(ctx)
	if err != nil {
		return &pb.RangesResponse{Error: s.PBError(err)}, nil
	}
	if md := s.MetaDesc(); md != nil {
		descs = append([]*pb.RangeDescriptor{md}, descs...)
	}
	if ids := req.GetRangeIds(); len(ids) > 0 {
		descs = slices.DeleteFunc(descs, func(d *pb.RangeDescriptor) bool { return !slices.Contains(ids, d.RangeId) })
	}
	out := make([]*pb.RangeStatus, 0, len(descs))
	for _, d := range descs {
		rs := &pb.RangeStatus{Desc: d, LeaderNodeId: s.LeaderNodeOf(d.RangeId)}
		if r := s.store.Replica(d.RangeId); r != nil {
			st := r.Status()
			rs.AppliedIndex = st.Applied
			if !req.GetWithoutSizes() {
				rs.ApproxBytes = r.ApproximateBytes()
			}
		}
		out = append(out, rs)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].Desc.RangeId == replica.MetaRangeID) != (out[j].Desc.RangeId == replica.MetaRangeID) {
			return out[i].Desc.RangeId == replica.MetaRangeID
		}
		return string(out[i].Desc.StartKey) < string(out[j].Desc.StartKey)
	})
	return &pb.RangesResponse{Ranges: out}, nil
}

// relocateLocal changes the replicas of r (led by this node): add a learner on add, let it catch up
// by snapshot, then promote it and drop remove in one joint change; finally record the descriptor in
// the meta range. Each step checks what is already done, so a retried relocation resumes. step
// limits the call to one of those steps (the autopilot's operators run them one at a time).
func (s *Service) relocateLocal(ctx context.Context, r *replica.Replica, add, remove uint64, step pb.RelocateStep) (*pb.RangeDescriptor, error) {
	d := r.Desc()
	if d == nil {
		return nil, errCode(pb.ErrorCode_UNAVAILABLE, "replica not initialized")
	}
	if remove == s.nodeID && step != pb.RelocateStep_RELOCATE_ADD_LEARNER {
		// A leader does not remove itself: hand leadership to another voter, then the caller retries.
		for _, rd := range d.Replicas {
			if rd.NodeId != s.nodeID && !rd.Learner && rd.NodeId != add {
				if err := r.TransferLeadership(rd.NodeId); err == nil {
					time.Sleep(300 * time.Millisecond)
					return nil, errCode(pb.ErrorCode_NOT_LEADER, "leadership moved away before removing the leader's replica")
				}
			}
		}
		return nil, errCode(pb.ErrorCode_UNAVAILABLE, "no other voter to take leadership")
	}
	all := step == pb.RelocateStep_RELOCATE_ALL
	if add != 0 && (all || step == pb.RelocateStep_RELOCATE_ADD_LEARNER) {
		var err error
		if d, err = s.addLearner(ctx, r, add); err != nil {
			return nil, err
		}
		if !all {
			return d, nil
		}
	}
	if step == pb.RelocateStep_RELOCATE_REMOVE {
		add = 0
	}
	if step == pb.RelocateStep_RELOCATE_PROMOTE && add != 0 {
		if rd := replicaOn(d, add); rd == nil {
			return nil, errCode(pb.ErrorCode_INVALID_ARGUMENT, fmt.Sprintf("range %d has no replica on node %d to promote", d.RangeId, add))
		} else if rd.Learner {
			if err := s.waitCaughtUp(ctx, r, rd.ReplicaId); err != nil {
				return nil, err
			}
		}
	}
	var changes []*raftpb.ConfChangeSingle
	next := proto.Clone(d).(*pb.RangeDescriptor)
	if add != 0 {
		if rd := replicaOn(next, add); rd != nil && rd.Learner {
			rd.Learner = false
			changes = append(changes, &raftpb.ConfChangeSingle{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: proto.Uint64(rd.ReplicaId)})
		}
	}
	if remove != 0 {
		if old := replicaOn(next, remove); old != nil {
			keep := next.Replicas[:0]
			for _, rd := range next.Replicas {
				if rd.NodeId != remove {
					keep = append(keep, rd)
				}
			}
			next.Replicas = keep
			changes = append(changes, &raftpb.ConfChangeSingle{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: proto.Uint64(old.ReplicaId)})
		}
	}
	if len(changes) == 0 {
		return d, nil
	}
	next.Generation = d.Generation + 1
	if err := r.ChangeReplicas(ctx, next, changes); err != nil {
		return nil, fmt.Errorf("range %d: change replicas: %w", d.RangeId, err)
	}
	d = r.Desc()
	s.updateMeta(ctx, d)
	s.log.Info("replicas changed", "range", d.RangeId, "added", add, "removed", remove, "generation", d.Generation)
	return d, nil
}

func replicaOn(d *pb.RangeDescriptor, node uint64) *pb.ReplicaDescriptor {
	for _, rd := range d.Replicas {
		if rd.NodeId == node {
			return rd
		}
	}
	return nil
}

// addLearner adds a learner on node (unless a replica is there already) and waits until it holds
// (almost) the leader's whole log — normally after one snapshot.
func (s *Service) addLearner(ctx context.Context, r *replica.Replica, node uint64) (*pb.RangeDescriptor, error) {
	d := r.Desc()
	existing := replicaOn(d, node)
	if existing == nil {
		ld := proto.Clone(d).(*pb.RangeDescriptor)
		rid := ld.NextReplicaId
		ld.NextReplicaId++
		ld.Generation++
		ld.Replicas = append(ld.Replicas, &pb.ReplicaDescriptor{NodeId: node, ReplicaId: rid, Learner: true})
		if err := r.ChangeReplicas(ctx, ld, []*raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddLearnerNode.Enum(), NodeId: proto.Uint64(rid)}}); err != nil {
			return nil, fmt.Errorf("range %d: add learner on node %d: %w", d.RangeId, node, err)
		}
		d = r.Desc()
		existing = replicaOn(d, node)
		s.updateMeta(ctx, d)
	}
	if existing != nil && existing.Learner {
		if err := s.waitCaughtUp(ctx, r, existing.ReplicaId); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (s *Service) updateMeta(ctx context.Context, d *pb.RangeDescriptor) {
	if d == nil || d.RangeId == replica.MetaRangeID {
		return
	}
	if _, err := s.ProposeMeta(ctx, &pb.Command{MetaUpdate: &pb.MetaUpdate{Ranges: []*pb.RangeDescriptor{d}}}); err != nil {
		s.log.Warn("meta update failed; repair queue will retry", "range", d.RangeId, "err", err)
	}
}

// waitCaughtUp waits until the learner replicaID has (almost) the leader's whole log. A timeout
// says how far behind the learner last was and how long it was waited for, so a stuck snapshot
// (lag unchanged) can be told from a caller's budget running out on a slow one (lag falling).
func (s *Service) waitCaughtUp(ctx context.Context, r *replica.Replica, replicaID uint64) error {
	start := time.Now()
	lag, first, seen := uint64(0), uint64(0), false
	for {
		st := r.Status()
		if !st.IsLeader {
			return errCode(pb.ErrorCode_NOT_LEADER, "lost leadership while a learner caught up")
		}
		if l, ok := st.LaggingPeers[replicaID]; ok {
			if l <= 2 {
				return nil
			}
			if !seen {
				first, seen = l, true
			}
			lag = l
		}
		select {
		case <-ctx.Done():
			behind := "not yet in the leader's progress"
			if seen {
				behind = fmt.Sprintf("%d entries behind (%d when first seen)", lag, first)
			}
			return errCode(pb.ErrorCode_TIMEOUT, fmt.Sprintf("range %d: learner %d did not catch up in %v: %s",
				r.RangeID(), replicaID, time.Since(start).Round(time.Millisecond), behind))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
