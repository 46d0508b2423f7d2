package kv

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// Merge implements pb.ShoalServer: absorb the right neighbour of a range into it (docs/design/merge.md).
func (s *Service) Merge(ctx context.Context, req *pb.MergeRequest) (*pb.MergeResponse, error) {
	if pe := s.notReady(); pe != nil {
		return &pb.MergeResponse{Error: pe}, nil
	}
	ctx, cancel := WithTimeout(ctx)
	defer cancel()
	leftID := req.LeftRangeId
	if leftID == 0 {
		if pe := s.validateKey(req.Key); pe != nil {
			return &pb.MergeResponse{Error: InvalidArgument("give left_range_id or a key in the left range")}, nil
		}
		d, err := s.LookupRange(ctx, req.Key)
		if err != nil {
			return &pb.MergeResponse{Error: s.PBError(err)}, nil
		}
		leftID = d.RangeId
	}
	if leftID == replica.MetaRangeID {
		return &pb.MergeResponse{Error: InvalidArgument("the meta range does not merge")}, nil
	}
	resp := &pb.MergeResponse{}
	err := s.OnLeader(ctx, leftID, func(r *replica.Replica) error {
		d, err := s.mergeLocal(ctx, r)
		resp.Merged = d
		return err
	}, func(ctx context.Context, c pb.ShoalClient) (*pb.Error, error) {
		if isForwarded(ctx) {
			return nil, errNoForward
		}
		out, err := c.Merge(ctx, &pb.MergeRequest{LeftRangeId: leftID})
		if err != nil {
			return nil, err
		}
		resp.Merged = out.Merged
		return out.Error, nil
	})
	if err != nil {
		resp.Error = s.PBError(err)
	}
	return resp, nil
}

// mergeLocal merges r's right neighbour into r (this node leads r): freeze the right range, wait
// until every right replica applied the freeze, then apply the merge trigger on r. Any failure after
// the freeze aborts through r's own log before the right range is unfrozen, so a trigger still in
// flight can never apply to a right range that serves again.
func (s *Service) mergeLocal(ctx context.Context, r *replica.Replica) (*pb.RangeDescriptor, error) {
	// The merge's steps on other ranges are requests of this node's own, even if the merge request
	// itself was forwarded here.
	ctx = metadata.NewIncomingContext(ctx, metadata.MD{})
	left := r.Desc()
	if left == nil {
		return nil, errCode(pb.ErrorCode_UNAVAILABLE, "replica not initialized")
	}
	if len(left.EndKey) == 0 {
		return nil, errCode(pb.ErrorCode_INVALID_ARGUMENT, fmt.Sprintf("range %d is the last range: it has no right neighbour", left.RangeId))
	}
	if left.MergingInto != 0 {
		return nil, errCode(pb.ErrorCode_UNAVAILABLE, fmt.Sprintf("range %d is itself frozen for a merge into range %d", left.RangeId, left.MergingInto))
	}
	right, err := s.LookupRange(ctx, left.EndKey)
	if err != nil {
		return nil, fmt.Errorf("look up the right neighbour of range %d: %w", left.RangeId, err)
	}
	if !bytes.Equal(right.StartKey, left.EndKey) || right.RangeId == left.RangeId {
		return nil, errCode(pb.ErrorCode_UNAVAILABLE, fmt.Sprintf("meta range is being updated at the end of range %d", left.RangeId))
	}
	if right.MergingInto != 0 && right.MergingInto != left.RangeId {
		return nil, errCode(pb.ErrorCode_UNAVAILABLE, fmt.Sprintf("range %d is frozen for a merge into range %d", right.RangeId, right.MergingInto))
	}
	for _, rd := range append(append([]*pb.ReplicaDescriptor(nil), left.Replicas...), right.Replicas...) {
		if rd.Learner {
			return nil, errCode(pb.ErrorCode_INVALID_ARGUMENT, fmt.Sprintf("ranges %d and %d must have only voters to merge (learner on node %d)", left.RangeId, right.RangeId, rd.NodeId))
		}
	}
	if len(left.Fences) > 0 || len(right.Fences) > 0 {
		return nil, errCode(pb.ErrorCode_INVALID_ARGUMENT, fmt.Sprintf("ranges %d and %d: a range with a span fence (a table being re-keyed) does not merge", left.RangeId, right.RangeId))
	}
	if !replica.SameNodes(left, right) {
		return nil, errCode(pb.ErrorCode_INVALID_ARGUMENT, fmt.Sprintf("ranges %d (nodes %v) and %d (nodes %v) must have replicas on the same nodes to merge; relocate first",
			left.RangeId, nodesOf(left), right.RangeId, nodesOf(right)))
	}

	frozen, _, err := s.rangeCommand(ctx, right.RangeId, &pb.Command{Freeze: &pb.FreezeForMerge{LeftRangeId: left.RangeId, Generation: right.Generation}})
	if err != nil {
		return nil, fmt.Errorf("freeze range %d: %w", right.RangeId, err)
	}
	if frozen.MergingInto != left.RangeId || frozen.FreezeIndex == 0 {
		return nil, errCode(pb.ErrorCode_UNAVAILABLE, fmt.Sprintf("range %d did not freeze for range %d", right.RangeId, left.RangeId))
	}
	merged, err := s.completeMerge(ctx, r, left, frozen)
	if err == nil {
		return merged, nil
	}
	// Abort with a fresh deadline: the caller's may be what just ran out.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	done, aerr := s.abortMergeRetrying(actx, left.RangeId, frozen)
	if aerr != nil {
		s.log.Warn("merge abort failed; the stuck-merge queue retries", "left", left.RangeId, "right", right.RangeId, "err", aerr)
		return nil, errCode(pb.ErrorCode_AMBIGUOUS, fmt.Sprintf("merge ranges %d and %d: %v (abort failed: %v)", left.RangeId, right.RangeId, err, aerr))
	}
	if done {
		// The trigger applied after all (its answer was lost): the merge happened.
		d := r.Desc()
		s.updateMeta(ctx, d)
		return d, nil
	}
	return nil, errCode(pb.ErrorCode_UNAVAILABLE, fmt.Sprintf("merge ranges %d and %d aborted: %v", left.RangeId, right.RangeId, err))
}

// completeMerge waits for the frozen right range's replicas and applies the trigger on r.
func (s *Service) completeMerge(ctx context.Context, r *replica.Replica, left, frozen *pb.RangeDescriptor) (*pb.RangeDescriptor, error) {
	for _, rd := range frozen.Replicas {
		if err := s.waitApplied(ctx, rd.NodeId, frozen.RangeId, frozen.FreezeIndex); err != nil {
			return nil, fmt.Errorf("replica of range %d on node %d did not apply its freeze: %w", frozen.RangeId, rd.NodeId, err)
		}
	}
	merged := proto.Clone(left).(*pb.RangeDescriptor)
	merged.EndKey = append([]byte(nil), frozen.EndKey...)
	merged.Generation = max(left.Generation, frozen.Generation) + 1
	if _, err := r.Propose(ctx, &pb.Command{Merge: &pb.MergeTrigger{Left: left, Right: frozen, Merged: merged}}); err != nil {
		return nil, fmt.Errorf("merge trigger: %w", err)
	}
	d := r.Desc()
	s.cluster.SetLeader(d.RangeId, s.nodeID)
	s.updateMeta(ctx, d)
	s.log.Info("ranges merged", "left", left.RangeId, "right", frozen.RangeId, "end", fmt.Sprintf("%q", d.EndKey), "generation", d.Generation)
	return d, nil
}

// abortMerge makes the merge of frozen into leftID impossible (through leftID's log), then unfreezes
// frozen. done reports that the merge had already happened, in which case nothing is unfrozen.
func (s *Service) abortMerge(ctx context.Context, leftID uint64, frozen *pb.RangeDescriptor) (done bool, err error) {
	exists, err := s.rangeExists(ctx, leftID)
	if err != nil {
		return false, err
	}
	if exists {
		_, done, err = s.rangeCommand(ctx, leftID, &pb.Command{MergeAbort: &pb.MergeAbort{RightRangeId: frozen.RangeId, FreezeIndex: frozen.FreezeIndex, RightStartKey: frozen.StartKey}})
		if err != nil {
			return false, fmt.Errorf("abort on range %d: %w", leftID, err)
		}
		if done {
			return true, nil
		}
	}
	if !exists && !s.store.MergedAway(leftID) {
		// Meta may lag (an unrepaired split): only proof that the left range is gone (this node,
		// which holds the left range's replicas, retired it in a merge) allows skipping the abort.
		return false, errCode(pb.ErrorCode_UNAVAILABLE, fmt.Sprintf("range %d is not in the meta range yet not known to be merged away; retry", leftID))
	}
	// After the abort (or without a left range, merged away itself) no trigger for this freeze can
	// ever apply.
	if _, _, err := s.rangeCommand(ctx, frozen.RangeId, &pb.Command{Unfreeze: &pb.UnfreezeRange{LeftRangeId: leftID, FreezeIndex: frozen.FreezeIndex}}); err != nil {
		return false, fmt.Errorf("unfreeze range %d: %w", frozen.RangeId, err)
	}
	s.log.Info("merge aborted; range unfrozen", "left", leftID, "right", frozen.RangeId)
	return false, nil
}

// abortMergeRetrying retries abortMerge until it succeeds or ctx ends. An abort is idempotent (and
// safe against a merge that completed), and a single ambiguous attempt (the left range's leadership
// moved under a fault) used to leave the right range frozen until the stuck-merge queue acted,
// MergeAbortAfter plus a queue tick later (25-55 s in the chaos runs).
func (s *Service) abortMergeRetrying(ctx context.Context, leftID uint64, frozen *pb.RangeDescriptor) (bool, error) {
	backoff := 50 * time.Millisecond
	for {
		done, err := s.abortMerge(ctx, leftID, frozen)
		if err == nil {
			return done, nil
		}
		select {
		case <-ctx.Done():
			return false, err
		case <-s.loops.Stopping():
			return false, err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// rangeExists reports whether the meta range still has a descriptor for id.
func (s *Service) rangeExists(ctx context.Context, id uint64) (bool, error) {
	descs, err := s.AllRanges(ctx)
	if err != nil {
		return false, err
	}
	for _, d := range descs {
		if d.RangeId == id {
			return true, nil
		}
	}
	return false, nil
}

// rangeCommand proposes a merge-protocol command on rangeID's leader and returns the descriptor after it.
func (s *Service) rangeCommand(ctx context.Context, rangeID uint64, cmd *pb.Command) (*pb.RangeDescriptor, bool, error) {
	var desc *pb.RangeDescriptor
	var done bool
	err := s.OnLeader(ctx, rangeID, func(r *replica.Replica) error {
		res, err := r.Propose(ctx, proto.Clone(cmd).(*pb.Command))
		if err != nil {
			return err
		}
		desc, done = r.Desc(), res.Merged
		if cmd.Freeze != nil && desc != nil && desc.FreezeIndex != res.Index {
			return errCode(pb.ErrorCode_INTERNAL, fmt.Sprintf("range %d: freeze applied at %d, descriptor says %d", rangeID, res.Index, desc.FreezeIndex))
		}
		return nil
	}, func(ctx context.Context, c pb.ShoalClient) (*pb.Error, error) {
		if isForwarded(ctx) {
			return nil, errNoForward
		}
		out, err := c.RangeCommand(ctx, &pb.RangeCommandRequest{RangeId: rangeID, Command: cmd})
		if err != nil {
			return nil, err
		}
		desc, done = out.Desc, out.Done
		return out.Error, nil
	})
	return desc, done, err
}

// RangeCommand implements pb.ShoalServer (node-internal): only merge-protocol commands are accepted.
func (s *Service) RangeCommand(ctx context.Context, req *pb.RangeCommandRequest) (*pb.RangeCommandResponse, error) {
	if pe := s.notReady(); pe != nil {
		return &pb.RangeCommandResponse{Error: pe}, nil
	}
	c := req.Command
	if c == nil || len(c.Mutations) > 0 || c.Condition != nil || c.Split != nil || c.MetaUpdate != nil || len(c.IncrementKey) > 0 || c.Merge != nil {
		return &pb.RangeCommandResponse{Error: InvalidArgument("RangeCommand takes only a freeze, unfreeze or merge abort")}, nil
	}
	if n := btoi(c.Freeze != nil) + btoi(c.Unfreeze != nil) + btoi(c.MergeAbort != nil); n != 1 {
		return &pb.RangeCommandResponse{Error: InvalidArgument("RangeCommand takes exactly one of freeze, unfreeze, merge_abort")}, nil
	}
	ctx, cancel := WithTimeout(ctx)
	defer cancel()
	desc, done, err := s.rangeCommand(ctx, req.RangeId, c)
	resp := &pb.RangeCommandResponse{Desc: desc, Done: done}
	if desc != nil {
		resp.Index = desc.FreezeIndex
	}
	if err != nil {
		resp.Error = s.PBError(err)
	}
	return resp, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// waitApplied waits until node's replica of rangeID has applied index.
func (s *Service) waitApplied(ctx context.Context, node, rangeID, index uint64) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if node == s.nodeID {
		_, err := s.WaitAppliedLocal(ctx, rangeID, index)
		return err
	}
	addr, ok := s.cluster.Resolve(node)
	if !ok {
		return errCode(pb.ErrorCode_UNAVAILABLE, fmt.Sprintf("node %d has no known address", node))
	}
	c, err := s.cluster.Client(addr)
	if err != nil {
		return err
	}
	resp, err := c.WaitApplied(ctx, &pb.WaitAppliedRequest{RangeId: rangeID, Index: index})
	if err != nil {
		return err
	}
	if resp.Error != nil {
		return &pbError{resp.Error}
	}
	return nil
}

func (s *Service) WaitAppliedLocal(ctx context.Context, rangeID, index uint64) (uint64, error) {
	for {
		r := s.store.Replica(rangeID)
		if r == nil {
			return 0, errCode(pb.ErrorCode_RANGE_MOVED, fmt.Sprintf("no replica of range %d on node %d", rangeID, s.nodeID))
		}
		if a := r.Applied(); a >= index {
			return a, nil
		}
		select {
		case <-ctx.Done():
			return r.Applied(), errCode(pb.ErrorCode_TIMEOUT, fmt.Sprintf("range %d on node %d: applied %d, waiting for %d", rangeID, s.nodeID, r.Applied(), index))
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// WaitApplied implements pb.ShoalServer (node-internal).
func (s *Service) WaitApplied(ctx context.Context, req *pb.WaitAppliedRequest) (*pb.WaitAppliedResponse, error) {
	if pe := s.notReady(); pe != nil {
		return &pb.WaitAppliedResponse{Error: pe}, nil
	}
	ctx, cancel := WithTimeout(ctx)
	defer cancel()
	a, err := s.WaitAppliedLocal(ctx, req.RangeId, req.Index)
	resp := &pb.WaitAppliedResponse{Applied: a}
	if err != nil {
		resp.Error = s.PBError(err)
	}
	return resp, nil
}

func nodesOf(d *pb.RangeDescriptor) []uint64 {
	out := make([]uint64, 0, len(d.Replicas))
	for _, rd := range d.Replicas {
		out = append(out, rd.NodeId)
	}
	return out
}

// abortStuckMerges runs on each node's queue tick: a frozen range this node leads that has been
// frozen for Config.MergeAbortAfter (the coordinator died or lost contact) gets its merge aborted, or
// learns that it completed; aborting a merge that is in fact completing is safe.
func (s *Service) abortStuckMerges(ctx context.Context) {
	now := time.Now()
	seen := map[uint64]bool{}
	for _, r := range s.store.Replicas() {
		into, _ := r.Frozen()
		if into == 0 || !r.IsLeader() {
			continue
		}
		id := r.RangeID()
		seen[id] = true
		s.frozenMu.Lock()
		since, ok := s.frozenSince[id]
		if !ok {
			s.frozenSince[id] = now
		}
		s.frozenMu.Unlock()
		if !ok || now.Sub(since) < s.cfg.MergeAbortAfter {
			continue
		}
		d := r.Desc()
		if d == nil {
			continue
		}
		if _, err := s.abortMerge(metadata.NewIncomingContext(ctx, metadata.MD{}), into, d); err != nil {
			s.log.Warn("aborting a stuck merge failed; will retry", "left", into, "right", id, "err", err)
		}
	}
	s.frozenMu.Lock()
	for id := range s.frozenSince {
		if !seen[id] {
			delete(s.frozenSince, id)
		}
	}
	s.frozenMu.Unlock()
}
